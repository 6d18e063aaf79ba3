//! Reading one backend's servers out of a HAProxy configuration, so that
//! an operator moving to ketama never copies a server list by hand.
//!
//! Understood: the sections (`global`, `defaults`, `backend`, `listen`,
//! ...), `server NAME ADDRESS [params]` and `default-server [params]` (in
//! `defaults` and in the backend, applying to the servers after it), and the
//! backend's (or its `defaults`') `balance` and `hash-type`. Of a server's
//! parameters, `weight`, `id`, `disabled` and `enabled` matter to routing;
//! the health-check, TLS, connection and resolver ones are read and left
//! out; `backup` and `server-template` are refused (a ring does not model a
//! backup tree, and a template's servers are not written out). Anything
//! else is an error naming the line.

use std::path::Path;

use crate::error::{Error, Result};
use crate::haproxy::{HaproxyFunction, HaproxyHash, MAX_ID, MAX_WEIGHT};
use crate::{Node, Scheme};

/// One backend of a HAProxy configuration, as [`parse_backend`] read it.
#[derive(Clone, Debug, PartialEq)]
pub struct Backend {
    /// The backend's (or `listen` section's) name.
    pub name: String,
    /// Its servers in configuration order: the address as the server
    /// string (`[IPv6]:PORT` bracketed), the weight, the id where the
    /// configuration gives one (the others take HAProxy's counter rule
    /// when a ring is built, which gives the same ids), `down` for a
    /// `disabled` server.
    pub nodes: Vec<Node>,
    /// The scheme its `hash-type` means (`None`: not `consistent`, or no
    /// `hash-type` at all, HAProxy's default being `map-based`).
    pub scheme: Option<Scheme>,
    /// Its `hash-type` line's arguments as written, if any.
    pub hash_type: Option<String>,
    /// Its `balance` line's arguments as written, if any.
    pub balance: Option<String>,
}

/// Section keywords: a line starting with one opens a new section.
const SECTIONS: &[&str] = &[
    "global",
    "defaults",
    "frontend",
    "backend",
    "listen",
    "peers",
    "resolvers",
    "userlist",
    "mailers",
    "program",
    "http-errors",
    "ring",
    "cache",
    "fcgi-app",
    "crt-store",
    "traces",
];

/// Server parameters that take no argument and change nothing for a ring.
const FLAGS: &[&str] = &[
    "check",
    "no-check",
    "check-ssl",
    "no-check-ssl",
    "check-send-proxy",
    "check-via-socks4",
    "ssl",
    "no-ssl",
    "no-verifyhost",
    "send-proxy",
    "send-proxy-v2",
    "send-proxy-v2-ssl",
    "send-proxy-v2-ssl-cn",
    "no-send-proxy",
    "no-send-proxy-v2",
    "agent-check",
    "no-agent-check",
    "non-stick",
    "stick",
    "tfo",
    "no-tfo",
    "allow-0rtt",
    "no-tls-tickets",
    "tls-tickets",
    "force-sslv3",
    "force-tlsv10",
    "force-tlsv11",
    "force-tlsv12",
    "force-tlsv13",
    "no-sslv3",
    "no-tlsv10",
    "no-tlsv11",
    "no-tlsv12",
    "no-tlsv13",
    "ssl-reuse",
    "no-ssl-reuse",
    "no-backup",
];

/// Server parameters that take one argument and change nothing for a ring.
const WITH_ARG: &[&str] = &[
    "inter",
    "fastinter",
    "downinter",
    "rise",
    "fall",
    "maxconn",
    "maxqueue",
    "minconn",
    "slowstart",
    "port",
    "addr",
    "cookie",
    "verify",
    "verifyhost",
    "sni",
    "alpn",
    "npn",
    "ca-file",
    "crt",
    "crl-file",
    "ciphers",
    "ciphersuites",
    "curves",
    "sigalgs",
    "client-sigalgs",
    "proto",
    "resolvers",
    "resolve-prefer",
    "resolve-net",
    "resolve-opts",
    "init-addr",
    "observe",
    "on-error",
    "on-marked-down",
    "on-marked-up",
    "error-limit",
    "agent-port",
    "agent-inter",
    "agent-addr",
    "agent-send",
    "pool-max-conn",
    "pool-low-conn",
    "pool-purge-delay",
    "max-reuse",
    "source",
    "namespace",
    "check-sni",
    "check-alpn",
    "check-proto",
    "redir",
    "track",
    "socks4",
    "ssl-min-ver",
    "ssl-max-ver",
    "ws",
    "log-proto",
    "tcp-ut",
    "set-proxy-v2-tlv-fmt",
    "shard",
    "hash-key",
    "guid",
    "check-reuse-pool",
    "sni-auto",
];

/// What a `server` or `default-server` line sets that a ring needs.
#[derive(Clone, Copy, Debug, Default)]
struct Params {
    weight: Option<u32>,
    id: Option<u32>,
    disabled: Option<bool>,
}

/// Reads backend `backend` (a `backend` or `listen` section) of a HAProxy
/// configuration's text (`file` names it in errors). Without a name, the
/// configuration must hold exactly one section with servers. `O(lines)`.
///
/// ```
/// use ketama::haproxy::parse_backend;
/// let cfg = "backend cache\n  balance uri\n  hash-type consistent\n  server a 10.0.0.1:80 weight 2\n  server b 10.0.0.2:80 id 7 disabled check\n";
/// let b = parse_backend(cfg, "haproxy.cfg".as_ref(), Some("cache"))?;
/// assert_eq!(b.nodes[0].weight(), 2);
/// assert_eq!((b.nodes[1].id(), b.nodes[1].is_down()), (Some(7), true));
/// assert_eq!(b.scheme.map(|s| s.to_string()).as_deref(), Some("haproxy"));
/// # Ok::<(), ketama::Error>(())
/// ```
///
/// # Errors
/// [`Error::Syntax`] for a line it does not understand (naming it),
/// [`Error::Backend`] when the backend is missing or ambiguous.
pub fn parse_backend(text: &str, file: &Path, backend: Option<&str>) -> Result<Backend> {
    let file = file.display().to_string();
    // Every backend or listen section, whole, in order; the one wanted is
    // chosen at the end (a section without servers, such as a stats
    // backend, does not count as a candidate).
    let mut sections: Vec<Backend> = Vec::new();
    let (mut in_defaults, mut in_backend) = (false, false);
    let (mut def_params, mut def_hash, mut def_balance) = (Params::default(), None, None);
    let mut params = Params::default();
    let mut seen: Vec<(String, usize)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let syntax = |reason: String| Error::Syntax {
            file: file.clone(),
            line,
            reason,
        };
        let words = split(raw).map_err(&syntax)?;
        let Some(first) = words.first() else { continue };
        if SECTIONS.contains(&first.as_str()) {
            in_defaults = first == "defaults";
            if matches!(first.as_str(), "backend" | "listen") {
                params = def_params;
                seen.clear();
                sections.push(Backend {
                    name: words.get(1).cloned().unwrap_or_default(),
                    nodes: Vec::new(),
                    scheme: None,
                    hash_type: def_hash.clone(),
                    balance: def_balance.clone(),
                });
            }
            // Lines of other sections belong to no backend.
            in_backend = matches!(first.as_str(), "backend" | "listen");
            continue;
        }
        let args = || words[1..].join(" ");
        if in_defaults {
            match first.as_str() {
                "default-server" => {
                    def_params = read_params(&words[1..], def_params).map_err(&syntax)?
                }
                "hash-type" => def_hash = Some(args()),
                "balance" => def_balance = Some(args()),
                _ => {}
            }
            continue;
        }
        let Some(cur) = sections.last_mut().filter(|_| in_backend) else {
            continue;
        };
        // Another backend's lines are skipped unread: its errors are not
        // this import's.
        let ours = backend.is_none_or(|b| b == cur.name);
        match first.as_str() {
            "default-server" if ours => {
                params = read_params(&words[1..], params).map_err(&syntax)?
            }
            "hash-type" => cur.hash_type = Some(args()),
            "balance" => cur.balance = Some(args()),
            "server-template" if ours => return Err(syntax(
                "server-template makes servers ketama cannot list: write them out as server lines"
                    .into(),
            )),
            // Counted, for naming the sections with servers in errors.
            "server" if !ours => cur.nodes.push(Node::new("", 0)),
            "server" => {
                if words.len() < 3 {
                    return Err(syntax("expected `server NAME ADDRESS [params]`".into()));
                }
                let p = read_params(&words[3..], params).map_err(&syntax)?;
                let server = address(&words[2]);
                if let Some((_, first_line)) = seen.iter().find(|(s, _)| *s == server) {
                    return Err(syntax(format!(
                        "address {server} is already server line {first_line}'s: ketama names a server by its address, so give each its own"
                    )));
                }
                seen.push((server.clone(), line));
                let mut node =
                    Node::new(server, p.weight.unwrap_or(1)).with_down(p.disabled.unwrap_or(false));
                if let Some(id) = p.id {
                    node = node.with_id(id);
                }
                cur.nodes.push(node);
            }
            _ => {}
        }
    }
    let found: Vec<String> = sections
        .iter()
        .filter(|b| !b.nodes.is_empty())
        .map(|b| b.name.clone())
        .collect();
    let mut b = match backend {
        Some(name) => match sections.into_iter().find(|b| b.name == name) {
            Some(b) if b.nodes.is_empty() => {
                return Err(Error::Backend {
                    file,
                    reason: format!("backend {name:?} has no server line"),
                })
            }
            Some(b) => b,
            None => {
                return Err(Error::Backend {
                    file,
                    reason: format!(
                        "no backend or listen section named {name:?}; the ones with servers: {}",
                        list(&found)
                    ),
                })
            }
        },
        None if found.len() > 1 => {
            return Err(Error::Backend {
                file,
                reason: format!(
                    "{} sections have servers ({}): name one with --backend",
                    found.len(),
                    list(&found)
                ),
            })
        }
        None => match sections.into_iter().find(|b| !b.nodes.is_empty()) {
            Some(b) => b,
            None => {
                return Err(Error::Backend {
                    file,
                    reason: "no backend or listen section with servers".into(),
                })
            }
        },
    };
    b.scheme = b.hash_type.as_deref().and_then(scheme_of);
    Ok(b)
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// The scheme of a `hash-type` line's arguments (`cfgparse-listen.c`): a
/// bare `consistent` is sdbm with avalanche.
fn scheme_of(hash_type: &str) -> Option<Scheme> {
    let w: Vec<&str> = hash_type.split_whitespace().collect();
    if w.first() != Some(&"consistent") {
        return None;
    }
    let Some(f) = w.get(1) else {
        return Some(Scheme::Haproxy(HaproxyHash::default()));
    };
    let function = HaproxyFunction::ALL.into_iter().find(|x| x.name() == *f)?;
    Some(Scheme::Haproxy(HaproxyHash {
        function,
        avalanche: w.get(2) == Some(&"avalanche"),
    }))
}

/// A server address as a ketama server string: IPv6 in brackets.
fn address(a: &str) -> String {
    let a = a.strip_prefix("ipv4@").unwrap_or(a);
    if let Some(v6) = a.strip_prefix("ipv6@") {
        return match v6.rsplit_once(':') {
            Some((ip, port)) if port.bytes().all(|c| c.is_ascii_digit()) && ip.contains(':') => {
                format!("[{ip}]:{port}")
            }
            _ => format!("[{v6}]"),
        };
    }
    if !a.starts_with('[') && a.matches(':').count() > 1 {
        if let Some((ip, port)) = a.rsplit_once(':') {
            return format!("[{ip}]:{port}");
        }
    }
    a.to_string()
}

/// Reads a server's parameters over `base` (a `default-server`'s).
fn read_params(words: &[String], base: Params) -> std::result::Result<Params, String> {
    let mut p = base;
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_str();
        let arg = || {
            words
                .get(i + 1)
                .map(String::as_str)
                .ok_or_else(|| format!("{w} expects a value"))
        };
        match w {
            "weight" => {
                let v = arg()?;
                p.weight = Some(v.parse().ok().filter(|&n| n <= MAX_WEIGHT).ok_or_else(|| {
                    format!("weight {v:?}: HAProxy takes 0 to {MAX_WEIGHT}")
                })?);
                i += 2;
            }
            "id" => {
                let v = arg()?;
                p.id = Some(v.parse().ok().filter(|n| (1..=MAX_ID).contains(n)).ok_or_else(|| {
                    format!("id {v:?}: ketama takes 1 to {MAX_ID} (larger ids wrap HAProxy's point numbers onto others')")
                })?);
                i += 2;
            }
            "disabled" => {
                p.disabled = Some(true);
                i += 1;
            }
            "enabled" => {
                p.disabled = Some(false);
                i += 1;
            }
            "backup" => {
                return Err("`backup` servers take traffic only when every active one is down, which a ketama ring does not model: drop the line or the keyword".into())
            }
            w if FLAGS.contains(&w) => i += 1,
            w if WITH_ARG.contains(&w) => {
                arg()?;
                i += 2;
            }
            w => {
                return Err(format!(
                    "unknown server parameter {w:?}: ketama import reads weight, id, disabled and enabled, and skips the health-check, TLS and connection ones it knows"
                ))
            }
        }
    }
    Ok(p)
}

/// Splits a line into words as HAProxy does: blanks separate, `#` starts
/// a comment, double and single quotes group, a backslash escapes.
fn split(line: &str) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut has = false;
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '#') => break,
            (None, ' ' | '\t') => {
                if has {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            (None, '"' | '\'') => {
                quote = Some(c);
                has = true;
            }
            (Some(q), c) if c == q => quote = None,
            (Some('\''), c) => cur.push(c),
            (_, '\\') => {
                let Some(n) = chars.next() else {
                    return Err("a backslash ends the line".into());
                };
                cur.push(n);
                has = true;
            }
            (_, c) => {
                cur.push(c);
                has = true;
            }
        }
    }
    if quote.is_some() {
        return Err("a quote is not closed".into());
    }
    if has {
        out.push(cur);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, name: Option<&str>) -> Result<Backend> {
        parse_backend(text, "h.cfg".as_ref(), name)
    }

    #[test]
    fn reads_servers_defaults_and_the_scheme() {
        let cfg = "global\n  maxconn 10\ndefaults\n  mode http\n  default-server weight 5\n  hash-type consistent djb2 avalanche\n\
                   frontend fe\n  bind :80\nbackend other\n  server x 10.9.9.9:80\n\
                   backend cache # the one\n  balance uri whole\n  server a 10.0.0.1:80 check inter 2s\n  default-server weight 2\n  server \"b\" ipv6@2001:db8::1:8080 id 4 disabled\n  server c 2001:db8::2:80 weight 0\n";
        let b = parse(cfg, Some("cache")).unwrap();
        let got: Vec<(String, u32, Option<u32>, bool)> = b
            .nodes
            .iter()
            .map(|n| (n.server().to_string(), n.weight(), n.id(), n.is_down()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("10.0.0.1:80".into(), 5, None, false),
                ("[2001:db8::1]:8080".into(), 2, Some(4), true),
                ("[2001:db8::2]:80".into(), 0, None, false),
            ]
        );
        assert_eq!(b.balance.as_deref(), Some("uri whole"));
        assert_eq!(b.scheme.unwrap().to_string(), "haproxy:djb2+avalanche");
    }

    #[test]
    fn refuses_what_it_does_not_understand_naming_the_line() {
        let e = |cfg: &str, name: Option<&str>| parse(cfg, name).unwrap_err().to_string();
        assert!(e(
            "backend b\n server a 1.1.1.1:80\n server c 1.1.1.2:80 frobnicate 3\n",
            None
        )
        .starts_with("h.cfg:3: unknown server parameter \"frobnicate\""));
        assert!(e("backend b\n server a 1.1.1.1:80 backup\n", None).contains("h.cfg:2: `backup`"));
        assert!(
            e("backend b\n server-template s 3 x:80\n", None).contains("h.cfg:2: server-template")
        );
        assert!(e("backend b\n server a 1.1.1.1:80 weight 300\n", None)
            .contains("HAProxy takes 0 to 256"));
        assert!(e(
            "backend b\n server a 1.1.1.1:80\n server b 1.1.1.1:80\n",
            None
        )
        .contains("h.cfg:3: address 1.1.1.1:80 is already server line 2's"));
        assert!(e(
            "backend b\n server a 1.1.1.1:80\nbackend c\n server a 1.1.1.1:80\n",
            None
        )
        .contains("name one with --backend"));
        assert!(e("backend b\n server a 1.1.1.1:80\n", Some("z"))
            .contains("no backend or listen section named \"z\"; the ones with servers: b"));
        assert!(e("backend b\n server a \"1.1.1.1:80\n", None)
            .contains("h.cfg:2: a quote is not closed"));
    }

    #[test]
    fn a_backend_without_servers_is_no_candidate() {
        let cfg = "backend stats\n  stats enable\nlisten cache\n  hash-type consistent\n  server a 10.0.0.1:80\n";
        let b = parse(cfg, None).unwrap();
        assert_eq!((b.name.as_str(), b.nodes.len()), ("cache", 1));
        assert_eq!(b.scheme.unwrap().to_string(), "haproxy");
    }

    #[test]
    fn hash_types_name_their_schemes() {
        assert_eq!(scheme_of("consistent").unwrap().to_string(), "haproxy");
        assert_eq!(
            scheme_of("consistent sdbm").unwrap().to_string(),
            "haproxy:sdbm"
        );
        assert_eq!(
            scheme_of("consistent crc32 avalanche").unwrap().to_string(),
            "haproxy:crc32+avalanche"
        );
        assert_eq!(scheme_of("map-based"), None);
    }
}
