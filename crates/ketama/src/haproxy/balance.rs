//! What HAProxy 2.6's `balance` algorithms and sample fetches read of a
//! request (`src/backend.c` `get_server_ph`, `get_server_hh`,
//! `get_server_rch`, `get_server_sh`, `get_server_expr`; `src/http.c`,
//! `src/http_fetch.c`, `src/payload.c`), each returning the bytes HAProxy
//! hashes, or `None` where HAProxy falls back to round robin.
//!
//! [`Balance::parse`] reads a `balance` line; [`Balance::key`] takes its
//! key from a [`Request`]. `balance uri` stays [`super::UriKey`], whose
//! target the router assembles.

use std::fmt;
use std::net::IpAddr;

use super::key::{header_values, value_end, UriKey};
use crate::request::{Request, Taken};

/// A sample expression of `balance hash <expr>` a router can evaluate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fetch {
    /// `req.cook(NAME)` (also `cook`, `req.cookie`): the last cookie so
    /// named ([`req_cook`]).
    Cookie(Box<[u8]>),
    /// `req.hdr(NAME)` (also `hdr`): the last comma-separated value of
    /// the fields so named ([`req_hdr`]).
    Header(Box<[u8]>),
    /// `url_param(NAME)` (also `urlp`): the first such query parameter
    /// ([`sample_url_param`]).
    UrlParam(Box<[u8]>),
}

/// A `balance` line ketama's router takes (besides `uri`, see
/// [`UriKey`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Balance {
    /// `uri [path-only] [whole] [depth N] [len N]`.
    Uri(UriKey),
    /// `hdr(NAME)`, with `use_domain_only` ([`domain_only`]).
    Hdr {
        /// The field's name (any case).
        name: Box<[u8]>,
        /// `use_domain_only`.
        domain_only: bool,
    },
    /// `url_param NAME` ([`url_param`]).
    UrlParam(Box<[u8]>),
    /// `source`: the client's address ([`source_hash`]).
    Source,
    /// `rdp-cookie(NAME)` ([`rdp_cookie`]; `NAME` defaults to
    /// `mstshash`).
    RdpCookie(Box<[u8]>),
    /// `hash <expr>`.
    Hash(Fetch),
}

impl Balance {
    /// Parses a `balance` line's arguments as HAProxy 2.6's
    /// `backend_parse_balance` does for these forms; the error says what
    /// to write instead.
    pub fn parse(line: &str) -> Result<Balance, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let arg = |w: &str, kw: &str| -> Option<String> {
            w.strip_prefix(kw)?
                .strip_prefix('(')?
                .strip_suffix(')')
                .map(str::to_owned)
        };
        match words.as_slice() {
            [] => Err("an empty balance: write e.g. \"uri\", \"hdr(Host)\" or \"url_param id\"".into()),
            ["uri", opts @ ..] => uri_options(opts).map(Balance::Uri),
            ["source"] => Ok(Balance::Source),
            ["source", ..] => Err("source takes no argument".into()),
            ["url_param", name, rest @ ..] => {
                match rest {
                    [] => {}
                    ["check_post", ..] => {
                        return Err(format!(
                            "url_param {name} check_post: reading the parameter from a POST body is not supported (the router routes before it reads a body); write \"url_param {name}\", which reads the query"
                        ))
                    }
                    [other, ..] => return Err(format!("url_param takes a name and nothing else here, not {other:?}")),
                }
                Ok(Balance::UrlParam(name.as_bytes().into()))
            }
            ["url_param"] => Err("url_param needs the parameter's name: \"url_param id\"".into()),
            [w, rest @ ..] if w.starts_with("hdr(") => {
                let name = arg(w, "hdr").filter(|n| !n.is_empty()).ok_or_else(|| format!("{w:?}: write hdr(NAME) with the header's name"))?;
                let domain_only = match rest {
                    [] => false,
                    ["use_domain_only"] => true,
                    _ => return Err(format!("hdr({name}) takes only use_domain_only after it")),
                };
                Ok(Balance::Hdr { name: name.as_bytes().into(), domain_only })
            }
            [w] if *w == "rdp-cookie" => Ok(Balance::RdpCookie(b"mstshash"[..].into())),
            [w] if w.starts_with("rdp-cookie(") => {
                let name = arg(w, "rdp-cookie").ok_or_else(|| format!("{w:?}: write rdp-cookie(NAME)"))?;
                Ok(Balance::RdpCookie(if name.is_empty() { b"mstshash"[..].into() } else { name.as_bytes().into() }))
            }
            ["hash", expr] => fetch(expr).map(Balance::Hash),
            ["hash", ..] => Err("hash takes one sample expression: \"hash req.cook(sid)\"".into()),
            [w, ..] => Err(format!(
                "{w:?}: ketama-router takes HAProxy's \"uri [path-only] [whole] [depth N] [len N]\", \"hdr(NAME) [use_domain_only]\", \"url_param NAME\", \"source\", \"rdp-cookie(NAME)\" or \"hash <req.cook(NAME)|req.hdr(NAME)|url_param(NAME)>\""
            )),
        }
    }

    /// What this form takes of `req`. `uri` reads `req`'s target as sent;
    /// a router that sees absolute-form or HTTP/2 targets passes
    /// [`UriKey::key`] the target HAProxy sees instead.
    pub fn key<'r>(&self, req: &'r impl Request) -> Taken<'r> {
        let bytes = |b: Option<&'r [u8]>| b.map_or(Taken::Nothing, Taken::Bytes);
        match self {
            Balance::Uri(u) => Taken::Bytes(u.key(req.request_uri())),
            Balance::Hdr { name, domain_only } => {
                let v = fields(req, name)
                    .next()
                    .and_then(|v| header_values(v).next())
                    .filter(|v| !v.is_empty());
                bytes(v.map(|v| {
                    if *domain_only {
                        self::domain_only(v)
                    } else {
                        v
                    }
                }))
            }
            Balance::UrlParam(name) => bytes(url_param(req.request_uri(), name)),
            Balance::Source => req.remote_addr().map_or(Taken::Nothing, Taken::Address),
            Balance::RdpCookie(name) => {
                let line = req
                    .headers()
                    .find(|(n, _)| n.eq_ignore_ascii_case(b"cookie"));
                bytes(line.and_then(|(_, v)| rdp_cookie(v, name)))
            }
            Balance::Hash(Fetch::Cookie(n)) => bytes(req_cook(req.cookie_lines(), n)),
            Balance::Hash(Fetch::Header(n)) => bytes(req_hdr(fields(req, n))),
            Balance::Hash(Fetch::UrlParam(n)) => bytes(sample_url_param(req.request_uri(), n)),
        }
    }
}

impl fmt::Display for Balance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        match self {
            Balance::Uri(_) => f.write_str("uri"),
            Balance::Hdr { name, domain_only } => {
                write!(f, "hdr({})", s(name))?;
                if *domain_only {
                    f.write_str(" use_domain_only")?;
                }
                Ok(())
            }
            Balance::UrlParam(n) => write!(f, "url_param {}", s(n)),
            Balance::Source => f.write_str("source"),
            Balance::RdpCookie(n) => write!(f, "rdp-cookie({})", s(n)),
            Balance::Hash(Fetch::Cookie(n)) => write!(f, "hash req.cook({})", s(n)),
            Balance::Hash(Fetch::Header(n)) => write!(f, "hash req.hdr({})", s(n)),
            Balance::Hash(Fetch::UrlParam(n)) => write!(f, "hash url_param({})", s(n)),
        }
    }
}

/// The values of the fields named `name` as HAProxy holds them: for an
/// absolute-form target, `Host` is its authority (HAProxy's HTTP/1 parser
/// rewrites it so).
fn fields<'a, 'r: 'a>(
    req: &'r impl Request,
    name: &'a [u8],
) -> impl Iterator<Item = &'r [u8]> + 'a {
    let authority = req
        .absolute_authority()
        .filter(|_| name.eq_ignore_ascii_case(b"host"));
    let named = req
        .headers()
        .filter(move |(n, _)| authority.is_none() && n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v);
    authority.into_iter().chain(named)
}

/// `uri`'s options, in any order.
fn uri_options(words: &[&str]) -> Result<UriKey, String> {
    let mut u = UriKey::default();
    let mut i = 0;
    while i < words.len() {
        match words[i] {
            "whole" => u.whole = true,
            "path-only" => u.path_only = true,
            w @ ("len" | "depth") => {
                let n: u32 = words
                    .get(i + 1)
                    .and_then(|v| v.parse().ok())
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("uri: '{w}' expects a positive integer"))?;
                if w == "len" {
                    u.len = Some(n);
                } else {
                    u.depth = Some(n);
                }
                i += 1;
            }
            other => {
                return Err(format!(
                    "uri only accepts parameters 'len', 'depth', 'path-only', and 'whole' (got '{other}')"
                ))
            }
        }
        i += 1;
    }
    Ok(u)
}

/// A sample expression of `hash`.
fn fetch(expr: &str) -> Result<Fetch, String> {
    let (kw, rest) = expr
        .split_once('(')
        .ok_or_else(|| format!("{expr:?}: write a fetch with its argument, e.g. req.cook(sid)"))?;
    let name = rest
        .strip_suffix(')')
        .filter(|n| !n.is_empty() && !n.contains([',', '(', ')']));
    let Some(name) = name else {
        return Err(format!(
            "{expr:?}: give the fetch one name and no converter (ketama-router evaluates req.cook(NAME), req.hdr(NAME) and url_param(NAME) alone)"
        ));
    };
    let name: Box<[u8]> = name.as_bytes().into();
    match kw {
        "req.cook" | "cook" | "req.cookie" | "cookie" => Ok(Fetch::Cookie(name)),
        "req.hdr" | "hdr" => Ok(Fetch::Header(name)),
        "url_param" | "urlp" => Ok(Fetch::UrlParam(name)),
        other => Err(format!(
            "{other}: ketama-router evaluates req.cook(NAME), req.hdr(NAME) and url_param(NAME) in hash"
        )),
    }
}

/// `balance url_param NAME` (`get_server_ph`): in the target's query
/// (after its first `?`, to the end), the first `&`-separated parameter
/// whose name is exactly `name` (case kept) followed by `=`; its value up
/// to the next `&` (an empty value is a key). `None` when absent.
///
/// ```
/// use ketama::haproxy::url_param;
/// assert_eq!(url_param(b"/a?x=1&id=7;q&id=8", b"id"), Some(&b"7;q"[..]));
/// assert_eq!(url_param(b"/a?ID=7", b"id"), None);
/// ```
pub fn url_param<'a>(uri: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let q = uri.iter().position(|&b| b == b'?')?;
    let mut params = &uri[q + 1..];
    let plen = name.len();
    while params.len() > plen {
        if params[plen] == b'=' && &params[..plen] == name {
            let v = &params[plen + 1..];
            return Some(&v[..v.iter().position(|&b| b == b'&').unwrap_or(v.len())]);
        }
        let amp = params.iter().position(|&b| b == b'&')?;
        params = &params[amp + 1..];
    }
    None
}

/// The `url_param(NAME)` sample fetch (`http_find_next_url_param`): the
/// query after the first `?`, parameters separated by `&`, `;` or `?`, the
/// first named exactly `name` followed by `=`; its value up to the next
/// separator.
///
/// ```
/// use ketama::haproxy::sample_url_param;
/// assert_eq!(sample_url_param(b"/a?x=1;id=7&id=8", b"id"), Some(&b"7"[..]));
/// ```
pub fn sample_url_param<'a>(uri: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let q = uri.iter().position(|&b| b == b'?')?;
    let qs = &uri[q + 1..];
    let delim = |b: u8| matches!(b, b'&' | b';' | b'?');
    let plen = name.len();
    let mut pos = 0;
    while pos < qs.len() {
        let equal = pos + plen;
        if equal >= qs.len() {
            return None;
        }
        if qs[equal] == b'=' {
            if &qs[pos..equal] == name {
                let v = &qs[equal + 1..];
                return Some(&v[..v.iter().position(|&b| delim(b)).unwrap_or(v.len())]);
            }
            pos = equal + 1;
        }
        while pos < qs.len() && !delim(qs[pos]) {
            pos += 1;
        }
        if pos >= qs.len() {
            return None;
        }
        pos += 1;
    }
    None
}

/// `hdr(NAME) use_domain_only` (`get_server_hh`): walking back from the
/// end of the value, the label before the last dot (`www.example.com`
/// gives `example`); the whole value without a dot.
///
/// ```
/// use ketama::haproxy::domain_only;
/// assert_eq!(domain_only(b"www.example.com"), b"example");
/// assert_eq!(domain_only(b"example.com:8080"), b"example");
/// assert_eq!(domain_only(b"localhost"), b"localhost");
/// ```
pub fn domain_only(value: &[u8]) -> &[u8] {
    // HAProxy starts one past the end (reading a byte that is not the
    // value's; taken here as not a dot).
    let (mut p, mut len, mut end) = (value.len(), value.len(), value.len());
    let mut dohash = false;
    while len > 0 {
        if dohash {
            if value[p - 1] == b'.' {
                break;
            }
        } else if p < value.len() && value[p] == b'.' {
            end = p;
            dohash = true;
        }
        p -= 1;
        len -= 1;
    }
    &value[p..end]
}

/// `rdp-cookie(NAME)` over HTTP: HAProxy hashes an RDP connection's
/// `Cookie: NAME=VALUE\r\n` line (`fetch_rdp_cookie_name`); the router
/// reads a request's first `Cookie` field as that line: it must start with
/// `name` (any case) and `=`, and the value is the rest of the field,
/// `;` and all. `None` when it does not, or the value is empty.
///
/// ```
/// use ketama::haproxy::rdp_cookie;
/// assert_eq!(rdp_cookie(b"MSTSHASH=user1; x=2", b"mstshash"), Some(&b"user1; x=2"[..]));
/// assert_eq!(rdp_cookie(b"x=2; mstshash=u", b"mstshash"), None);
/// ```
pub fn rdp_cookie<'a>(line: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let start = line.iter().position(|&b| b != b' ').unwrap_or(line.len());
    let line = &line[start..];
    if line.len() <= name.len()
        || line[name.len()] != b'='
        || !line[..name.len()].eq_ignore_ascii_case(name)
    {
        return None;
    }
    let v = &line[name.len() + 1..];
    let v = &v[..v.iter().position(|&b| b == b'\r').unwrap_or(v.len())];
    (!v.is_empty()).then_some(v)
}

/// `balance source` (`get_server_sh`): the address' 32-bit big-endian
/// words XORed (one for IPv4, four for IPv6). A HAProxy ring takes it as
/// its hash, after [`super::full_hash`] under `avalanche`.
///
/// ```
/// use ketama::haproxy::source_hash;
/// assert_eq!(source_hash("10.0.0.1".parse().unwrap()), 0x0a00_0001);
/// assert_eq!(source_hash("::1".parse().unwrap()), 1);
/// ```
pub fn source_hash(addr: IpAddr) -> u32 {
    match addr {
        IpAddr::V4(a) => u32::from(a),
        IpAddr::V6(a) => a
            .octets()
            .chunks_exact(4)
            .fold(0, |h, w| h ^ u32::from_be_bytes([w[0], w[1], w[2], w[3]])),
    }
}

/// `req.cook(NAME)` (`smp_fetch_cookie`, `http_extract_cookie_value`):
/// over every `Cookie` field and each comma-separated part of it, the
/// **last** cookie named exactly `name`, its value without the spaces
/// around it (quotes kept; a `;` or `,` inside quotes does not end it).
/// Each search starts where the last ended, and a cookie is looked for
/// only while its name and `=` leave a byte of the part after them
/// (counted before the spaces it skips): a part that is only `sid=` is not
/// seen, as in HAProxy.
///
/// ```
/// use ketama::haproxy::req_cook;
/// let lines = [&b"sid=1; a=2"[..], b"x=1, sid = \"q;r\" ;b"];
/// assert_eq!(req_cook(lines, b"sid"), Some(&b"\"q;r\""[..]));
/// ```
pub fn req_cook<'a>(lines: impl IntoIterator<Item = &'a [u8]>, name: &[u8]) -> Option<&'a [u8]> {
    let mut found = None;
    for line in lines {
        for part in header_values(line) {
            if part.len() < name.len() + 1 {
                continue;
            }
            let mut from = 0;
            while let Some((v, next)) = extract_cookie(&part[from..], name) {
                found = Some(v);
                from += next;
                if from > part.len() {
                    break;
                }
            }
        }
    }
    found
}

/// `http_extract_cookie_value` with `list` set, from the start of `hdr`:
/// the value of the first cookie named `name` and where to go on from.
fn extract_cookie<'a>(hdr: &'a [u8], name: &[u8]) -> Option<(&'a [u8], usize)> {
    let sp = |b: u8| b == b' ' || b == b'\t';
    let end = hdr.len();
    let mut att_beg = 0;
    while att_beg + name.len() + 1 < end {
        while att_beg < end && sp(hdr[att_beg]) {
            att_beg += 1;
        }
        let (mut equal, mut att_end) = (att_beg, att_beg);
        while equal < end {
            if matches!(hdr[equal], b'=' | b';' | b',') {
                break;
            }
            equal += 1;
            if !sp(hdr[equal - 1]) {
                att_end = equal;
            }
        }
        let (val_beg, val_end, next);
        if equal < end && hdr[equal] == b'=' {
            let mut vb = equal + 1;
            while vb < end && sp(hdr[vb]) {
                vb += 1;
            }
            let n = value_end(hdr, vb, b",;");
            let mut ve = n;
            while ve > vb && sp(hdr[ve - 1]) {
                ve -= 1;
            }
            (val_beg, val_end, next) = (vb, ve, n);
        } else {
            (val_beg, val_end, next) = (equal, equal, equal);
        }
        let skip = hdr.get(att_beg) == Some(&b'$') || equal == next;
        if !skip && &hdr[att_beg..att_end] == name {
            return Some((&hdr[val_beg..val_end], next + 1));
        }
        att_beg = next + 1;
    }
    None
}

/// `req.hdr(NAME)` without an occurrence (`smp_fetch_hdr`: the last):
/// the last comma-separated value over every field given (those named
/// `NAME`), spaces around it cut, possibly empty.
///
/// ```
/// use ketama::haproxy::req_hdr;
/// assert_eq!(req_hdr([&b"a, b"[..], b"c ,d "]), Some(&b"d"[..]));
/// ```
pub fn req_hdr<'a>(fields: impl IntoIterator<Item = &'a [u8]>) -> Option<&'a [u8]> {
    fields.into_iter().flat_map(header_values).last()
}

#[cfg(test)]
mod tests;
