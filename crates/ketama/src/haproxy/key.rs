//! What HAProxy hashes of a request: `balance uri` and its options,
//! `balance hdr(NAME)` (`src/backend.c`, `get_server_uh` and
//! `get_server_hh`; `src/http.c`, `http_parse_path`;
//! `src/http_htx.c`, `http_find_header`).

/// What `balance uri [path-only] [whole] [depth N] [len N]` hashes of a
/// request target (`backend.c`, `get_server_uh`): the target as sent (for
/// an absolute-form or HTTP/2 request, scheme and authority included; with
/// `path_only`, from the path on), cut at the first `?` unless `whole`,
/// after at most `len` bytes, and before the `depth + 1`-th `/`.
///
/// ```
/// use ketama::haproxy::UriKey;
/// let uri = b"http://cdn.example/a/b/c?x=1";
/// assert_eq!(UriKey::default().key(uri), b"http://cdn.example/a/b/c");
/// let path = UriKey { path_only: true, ..UriKey::default() };
/// assert_eq!(path.key(uri), b"/a/b/c");
/// let depth = UriKey { path_only: true, depth: Some(2), ..UriKey::default() };
/// assert_eq!(depth.key(uri), b"/a/b");
/// let whole = UriKey { path_only: true, whole: true, ..UriKey::default() };
/// assert_eq!(whole.key(uri), b"/a/b/c?x=1");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct UriKey {
    /// `path-only`: skip an absolute-form target's scheme and authority.
    pub path_only: bool,
    /// `whole`: keep the query.
    pub whole: bool,
    /// `depth N`: keep at most N directory levels (N >= 1).
    pub depth: Option<u32>,
    /// `len N`: keep at most N bytes (N >= 1).
    pub len: Option<u32>,
}

impl UriKey {
    /// The bytes HAProxy hashes of `uri`. Cost: one pass over them.
    pub fn key<'a>(&self, uri: &'a [u8]) -> &'a [u8] {
        let uri = if self.path_only { path_of(uri) } else { uri };
        let n = self.len.map_or(uri.len(), |l| uri.len().min(l as usize));
        // HAProxy stores depth + 1 and stops at that slash.
        let stop = self.depth.map_or(0, |d| d as u64 + 1);
        let mut slashes = 0u64;
        let mut end = 0;
        while end < n {
            match uri[end] {
                b'/' => {
                    slashes += 1;
                    if slashes == stop {
                        break;
                    }
                }
                b'?' if !self.whole => break,
                _ => {}
            }
            end += 1;
        }
        &uri[..end]
    }
}

/// What `balance hdr(NAME)` hashes of a header's value (`get_server_hh`
/// through `http_find_header`): its first comma-separated element (a comma
/// inside double quotes does not count), without the spaces and tabs
/// around it. `None` when that is empty: HAProxy then falls back to round
/// robin, which no ring can reproduce.
///
/// ```
/// use ketama::haproxy::header_key;
/// assert_eq!(header_key(b" a, b"), Some(&b"a"[..]));
/// assert_eq!(header_key(b"\"x,y\" ,z"), Some(&b"\"x,y\""[..]));
/// assert_eq!(header_key(b" ,b"), None);
/// ```
pub fn header_key(value: &[u8]) -> Option<&[u8]> {
    header_values(value).next().filter(|v| !v.is_empty())
}

/// The comma-separated values of a field as `http_find_header` steps
/// through them: each without the spaces and tabs around it, a comma
/// inside double quotes not counting; an empty field is one empty value,
/// and a trailing comma gives a last empty one.
pub(crate) fn header_values(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    let lws = |c: &u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    let mut rest = Some(value);
    std::iter::from_fn(move || {
        let v = rest?;
        let start = v.iter().position(|c| !lws(c)).unwrap_or(v.len());
        let v = &v[start..];
        let end = value_end(v, 0, b",");
        let (item, after) = v.split_at(end);
        let len = item.iter().rposition(|c| !lws(c)).map_or(0, |i| i + 1);
        // Past the value: another one only after a comma.
        rest = after.strip_prefix(b",");
        Some(&item[..len])
    })
}

/// The first of `stops` outside double quotes in `v` from `from` on
/// (`\\` escapes a byte inside them), or its end: `http_find_hdr_value_end`
/// with `,`, `http_find_cookie_value_end` with `,` and `;`.
pub(crate) fn value_end(v: &[u8], from: usize, stops: &[u8]) -> usize {
    let (mut quoted, mut pair) = (false, false);
    for (i, &c) in v.iter().enumerate().skip(from) {
        if pair {
            pair = false;
        } else if quoted {
            match c {
                b'\\' => pair = true,
                b'"' => quoted = false,
                _ => {}
            }
        } else if c == b'"' {
            quoted = true;
        } else if stops.contains(&c) {
            return i;
        }
    }
    v.len()
}

/// `http_parse_path`: an origin-form target as it is; an absolute-form
/// one from the first `/` after its authority (empty if none); nothing
/// for `*`, an empty target or an authority alone.
fn path_of(uri: &[u8]) -> &[u8] {
    match uri.first() {
        None | Some(b'*') => return &[],
        Some(b'/') => return uri,
        Some(c) if !c.is_ascii_alphabetic() => return &[],
        _ => {}
    }
    let mut i = 1;
    while i < uri.len() && (uri[i].is_ascii_alphanumeric() || matches!(uri[i], b'+' | b'-' | b'.'))
    {
        i += 1;
    }
    if !uri[i..].starts_with(b"://") {
        return &[];
    }
    let rest = &uri[i + 3..];
    match rest.iter().position(|&c| c == b'/') {
        Some(p) => &rest[p..],
        None => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_forms_cut_as_get_server_uh() {
        let k = |u: UriKey, s: &str| String::from_utf8(u.key(s.as_bytes()).to_vec()).unwrap();
        let d = UriKey::default();
        assert_eq!(k(d, "/a/b?q=1"), "/a/b");
        assert_eq!(k(UriKey { whole: true, ..d }, "/a/b?q=/1"), "/a/b?q=/1");
        assert_eq!(
            k(
                UriKey {
                    depth: Some(1),
                    ..d
                },
                "/a/b/c"
            ),
            "/a"
        );
        assert_eq!(
            k(
                UriKey {
                    depth: Some(3),
                    ..d
                },
                "/a/b"
            ),
            "/a/b"
        );
        assert_eq!(k(UriKey { len: Some(3), ..d }, "/abcdef"), "/ab");
        // depth counts the slashes of an absolute-form target's scheme.
        assert_eq!(
            k(
                UriKey {
                    depth: Some(2),
                    ..d
                },
                "http://h/a/b"
            ),
            "http://h"
        );
        let p = UriKey {
            path_only: true,
            ..d
        };
        assert_eq!(k(p, "http://h.example:8080/x/y?z"), "/x/y");
        assert_eq!(k(p, "http://h.example"), "");
        assert_eq!(k(p, "h.example:443"), "");
        assert_eq!(k(p, "*"), "");
        assert_eq!(k(p, "/x?y"), "/x");
    }
}
