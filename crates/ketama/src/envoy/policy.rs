//! Envoy's `hash_policy` (`source/common/http/hash_policy.cc`), and gRPC's
//! reading of it (gRFC A42, A76): the policies of a route, each hashing one
//! value of the request with XXH64, combined into the one 64-bit hash a
//! `ring_hash` or `maglev` table takes ([`crate::route::PeerHash::Envoy`]).
//!
//! | policy | Envoy hashes | absent |
//! |---|---|---|
//! | `header` | every value of the field, each through `regex_rewrite`, sorted, chained (`XXH64(v2, XXH64(v1, 0))`) | no hash |
//! | `cookie` | the first cookie so named over every `Cookie` field (split at `;`, the name exact, a value in double quotes unquoted) | with a `ttl`: a generated cookie, hashed, and a `Set-Cookie` for it; else no hash |
//! | `query_parameter` | the first value of the parameter (split at `&` after the first `?`, not decoded; a name without `=` has the empty value) | no hash |
//! | `source_ip` | the client's address as text, without port | no hash |
//!
//! Policies combine in order: `hash = rotl(hash, 1) ^ next` for each that
//! gave one, stopping after a `terminal` one that did. No hash at all: Envoy
//! picks a random host (the router: round robin).
//!
//! gRPC ([`Peer::Grpc`]) takes `header` policies only, joins a field's
//! values with `,` in the order sent before its `regex_rewrite`, and hashes
//! the joined value once.
//!
//! The generated cookie is Envoy's: the hex of `XXH64` of the client's
//! `address:port` followed by the listener's, so one connection gets one
//! cookie; `Set-Cookie: NAME="VALUE"; Max-Age=TTL; Path=PATH;
//! ATTRIBUTES...; HttpOnly` (`Max-Age` left out for a ttl of 0, a session
//! cookie; `Path` when given).
//!
//! Cost: one pass over each value hashed; a field with several values, a
//! `regex_rewrite` and a generated cookie allocate.

use std::fmt::Write as _;
use std::net::SocketAddr;

use super::xxh64;
use crate::request::Request;

/// Whose reading of the policies applies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Peer {
    /// Envoy's.
    #[default]
    Envoy,
    /// gRPC's (`header` only, values joined with `,`).
    Grpc,
}

/// A `regex_rewrite`: every match of `pattern` replaced with
/// `substitution` (RE2's `\1` for a group).
#[derive(Clone, Debug)]
pub struct Rewrite {
    regex: regex::Regex,
    /// The substitution in the regex crate's syntax (`${1}`).
    with: String,
}

impl Rewrite {
    /// Compiles a rewrite; `Err` says what is wrong with the pattern.
    pub fn new(pattern: &str, substitution: &str) -> Result<Rewrite, String> {
        let regex = regex::Regex::new(pattern)
            .map_err(|e| format!("regex_rewrite.pattern {pattern:?}: {e}"))?;
        // RE2 writes groups as \1 ... \9 and a backslash as \\; the regex
        // crate writes ${1} and a dollar as $$.
        let mut with = String::new();
        let mut chars = substitution.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '$' => with.push_str("$$"),
                '\\' => match chars.next() {
                    Some(d @ '0'..='9') => {
                        let _ = write!(with, "${{{d}}}");
                    }
                    Some('\\') => with.push('\\'),
                    other => {
                        return Err(format!(
                            "regex_rewrite.substitution {substitution:?}: a backslash must come before a digit (a group) or another backslash, not {other:?}"
                        ))
                    }
                },
                c => with.push(c),
            }
        }
        Ok(Rewrite { regex, with })
    }

    fn apply(&self, value: &[u8]) -> String {
        let v = String::from_utf8_lossy(value);
        self.regex.replace_all(&v, self.with.as_str()).into_owned()
    }
}

impl PartialEq for Rewrite {
    fn eq(&self, other: &Self) -> bool {
        self.regex.as_str() == other.regex.as_str() && self.with == other.with
    }
}

impl Eq for Rewrite {}

/// The cookie a `cookie` policy with a `ttl` generates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CookieSpec {
    /// Seconds; 0 makes a session cookie (no `Max-Age`).
    pub ttl: u64,
    /// `Path`, when not empty.
    pub path: String,
    /// Attributes after `Path`: `name` alone when `value` is empty.
    pub attributes: Vec<(String, String)>,
}

/// One policy's method.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Method {
    /// `header`: the field's name (lowercase) and its rewrite.
    Header {
        /// The field's name.
        name: Box<[u8]>,
        /// `regex_rewrite`.
        rewrite: Option<Rewrite>,
    },
    /// `cookie`: its name and, with a `ttl`, the cookie to generate.
    Cookie {
        /// The cookie's name (exact).
        name: Box<[u8]>,
        /// `ttl` and what goes with it.
        generate: Option<CookieSpec>,
    },
    /// `query_parameter`: its name (exact).
    QueryParameter(Box<[u8]>),
    /// `connection_properties.source_ip`.
    SourceIp,
}

/// A route's `hash_policy` list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HashPolicy {
    /// The policies in order, each with its `terminal`.
    pub policies: Vec<(Method, bool)>,
    /// Whose reading applies.
    pub peer: Peer,
}

/// What the policies made of a request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hashed {
    /// The combined hash; `None` when no policy gave one.
    pub hash: Option<u64>,
    /// A `Set-Cookie` value for a cookie the policies generated.
    pub set_cookie: Option<String>,
}

impl HashPolicy {
    /// The policies' hash of `req` (see the module docs).
    pub fn hash(&self, req: &impl Request) -> Hashed {
        let mut out = Hashed::default();
        for (method, terminal) in &self.policies {
            if let Some(h) = self.one(method, req, &mut out.set_cookie) {
                out.hash = Some(out.hash.map_or(0, |old| old.rotate_left(1)) ^ h);
            }
            if *terminal && out.hash.is_some() {
                break;
            }
        }
        out
    }

    fn one(
        &self,
        method: &Method,
        req: &impl Request,
        set_cookie: &mut Option<String>,
    ) -> Option<u64> {
        match method {
            Method::Header { name, rewrite } => self.header(req, name, rewrite.as_ref()),
            Method::Cookie { name, generate } => match cookie(req.cookie_lines(), name) {
                Some(v) if !v.is_empty() => Some(xxh64(v, 0)),
                _ => {
                    let spec = generate.as_ref()?;
                    let (remote, local) = req.sockets()?;
                    let value = generated_cookie(remote, local);
                    *set_cookie = Some(set_cookie_value(name, &value, spec));
                    Some(xxh64(value.as_bytes(), 0))
                }
            },
            Method::QueryParameter(name) => {
                query_parameter(req.request_uri(), name).map(|v| xxh64(v, 0))
            }
            Method::SourceIp => req.remote_addr().map(|a| {
                // The text of an address fits 45 bytes; written on the stack.
                let mut buf = [0u8; 64];
                let mut rest = &mut buf[..];
                let _ = std::io::Write::write_fmt(&mut rest, format_args!("{a}"));
                let n = 64 - rest.len();
                xxh64(&buf[..n], 0)
            }),
        }
    }

    fn header(&self, req: &impl Request, name: &[u8], rewrite: Option<&Rewrite>) -> Option<u64> {
        let mut values = req
            .headers()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v);
        let first = values.next()?;
        match self.peer {
            Peer::Grpc => {
                let rest: Vec<&[u8]> = values.collect();
                if rest.is_empty() && rewrite.is_none() {
                    return Some(xxh64(first, 0));
                }
                let mut joined = first.to_vec();
                for v in rest {
                    joined.push(b',');
                    joined.extend_from_slice(v);
                }
                Some(match rewrite {
                    Some(r) => xxh64(r.apply(&joined).as_bytes(), 0),
                    None => xxh64(&joined, 0),
                })
            }
            Peer::Envoy => {
                let rest: Vec<&[u8]> = values.collect();
                if rest.is_empty() && rewrite.is_none() {
                    return Some(xxh64(first, 0));
                }
                let mut all: Vec<Vec<u8>> = std::iter::once(first)
                    .chain(rest)
                    .map(|v| rewrite.map_or_else(|| v.to_vec(), |r| r.apply(v).into_bytes()))
                    .collect();
                all.sort();
                Some(all.iter().fold(0, |seed, v| xxh64(v, seed)))
            }
        }
    }
}

/// Envoy's `Utility::parseCookieValue`: over every `Cookie` field in
/// order, split at `;` (empty pieces skipped), the first piece whose name
/// (from its first non-space to its `=`, spaces before the `=` kept) is
/// exactly `name`; its value after the `=`, unquoted when it is in double
/// quotes. Pieces without `=` are skipped.
///
/// ```
/// use ketama::envoy::policy::cookie;
/// let lines = [&b"a=1;  sid=\"v 1\";sid=2"[..]];
/// assert_eq!(cookie(lines, b"sid"), Some(&b"v 1"[..]));
/// assert_eq!(cookie([&b"sid =1"[..]], b"sid"), None);
/// ```
pub fn cookie<'a>(lines: impl IntoIterator<Item = &'a [u8]>, name: &[u8]) -> Option<&'a [u8]> {
    for line in lines {
        for piece in line.split(|&b| b == b';').filter(|p| !p.is_empty()) {
            let Some(eq) = piece.iter().position(|&b| b == b'=') else {
                continue;
            };
            let start = piece.iter().position(|&b| b != b' ').unwrap_or(piece.len());
            if start > eq || &piece[start..eq] != name {
                continue;
            }
            let v = &piece[eq + 1..];
            return Some(match v {
                [b'"', inner @ .., b'"'] => inner,
                v => v,
            });
        }
    }
    None
}

/// Envoy's `QueryParamsMulti::parseQueryString(..).getFirstValue(name)`:
/// after the target's first `?`, `&`-separated parameters, the first
/// named exactly `name` (before its first `=`; a parameter without `=` is
/// its name with the empty value); the value as sent.
///
/// ```
/// use ketama::envoy::policy::query_parameter;
/// assert_eq!(query_parameter(b"/a?x=1&u=a%20b&u=2", b"u"), Some(&b"a%20b"[..]));
/// assert_eq!(query_parameter(b"/a?u", b"u"), Some(&b""[..]));
/// ```
pub fn query_parameter<'a>(target: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let q = target.iter().position(|&b| b == b'?')?;
    target[q + 1..].split(|&b| b == b'&').find_map(|p| {
        let (n, v) = match p.iter().position(|&b| b == b'=') {
            Some(e) => (&p[..e], &p[e + 1..]),
            None => (p, &p[p.len()..]),
        };
        (n == name).then_some(v)
    })
}

/// Envoy's generated cookie value for a connection: the 16 hex digits of
/// `XXH64(remote.to_string() + local.to_string(), 0)` (addresses with
/// their ports, IPv6 in brackets).
pub fn generated_cookie(remote: SocketAddr, local: SocketAddr) -> String {
    let h = xxh64(format!("{remote}{local}").as_bytes(), 0);
    format!("{h:016x}")
}

/// Envoy's `Utility::makeSetCookieValue` (`httponly` on).
pub fn set_cookie_value(name: &[u8], value: &str, spec: &CookieSpec) -> String {
    let mut s = format!("{}=\"{value}\"", String::from_utf8_lossy(name));
    if spec.ttl != 0 {
        let _ = write!(s, "; Max-Age={}", spec.ttl);
    }
    if !spec.path.is_empty() {
        let _ = write!(s, "; Path={}", spec.path);
    }
    for (n, v) in &spec.attributes {
        if v.is_empty() {
            let _ = write!(s, "; {n}");
        } else {
            let _ = write!(s, "; {n}={v}");
        }
    }
    s.push_str("; HttpOnly");
    s
}

#[cfg(test)]
mod tests;
