//! nginx 1.22's variables, byte for byte (`src/http/ngx_http_parse.c`,
//! `ngx_http_variables.c`, `ngx_http_request.c`): each function reads the
//! bytes the request sent and returns, or writes, the variable's value.

use std::io::Write as _;
use std::net::IpAddr;

/// A path nginx refuses with 400 (a `%` not followed by two hex digits,
/// `%00`, or a `..` that climbs above the root): `$uri` has no value for
/// it, and nginx never routes such a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the path is one nginx refuses (a bad % escape, %00, or a .. above the root), so $uri has no value: fix the request, or key on $request_uri")]
pub struct InvalidUri;

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Usual,
    Slash,
    Dot,
    DotDot,
}

/// nginx's `$uri` of `request_uri` (`ngx_http_parse_complex_uri` with
/// `merge_slashes on`): the path before the first `?` or `#`, `%XX`
/// decoded (a decoded `/` or `.` counts as one, a decoded `%`, `#` or `?`
/// is a plain byte), `.` and `..` segments resolved, repeated slashes
/// merged; `/` for an absolute-form target without a path. Written to
/// `out` (cleared first). Cost: one pass, no allocation once `out` grew.
///
/// ```
/// let mut out = Vec::new();
/// ketama::nginx::uri(b"/a//b/./c/../%64?x=%2F", &mut out).unwrap();
/// assert_eq!(out, b"/a/b/d");
/// assert!(ketama::nginx::uri(b"/../x", &mut out).is_err());
/// ```
pub fn uri(request_uri: &[u8], out: &mut Vec<u8>) -> Result<(), InvalidUri> {
    out.clear();
    append_uri(request_uri, out)
}

/// [`uri`], appended to `out` (what was there stays; on `Err`, `out` is
/// left as it was).
pub fn append_uri(request_uri: &[u8], out: &mut Vec<u8>) -> Result<(), InvalidUri> {
    let base = out.len();
    let r = parse_uri(request_uri, out, base);
    if r.is_err() {
        out.truncate(base);
    }
    r
}

/// `ngx_http_parse_complex_uri` writing after `out[..base]`.
fn parse_uri(request_uri: &[u8], out: &mut Vec<u8>, base: usize) -> Result<(), InvalidUri> {
    let mut state = State::Usual;
    // An absolute-form target without a path: nginx writes the `/`
    // (`empty_path_in_uri`). Any other target not starting with one
    // (nginx never routes such) reads as if it did.
    if request_uri.first() != Some(&b'/') {
        out.push(b'/');
        state = State::Slash;
    }
    let mut i = 0;
    while i < request_uri.len() {
        let mut ch = request_uri[i];
        i += 1;
        if ch == b'%' {
            let hex = |b: Option<&u8>| b.and_then(|&b| (b as char).to_digit(16));
            let (Some(h), Some(l)) = (hex(request_uri.get(i)), hex(request_uri.get(i + 1))) else {
                return Err(InvalidUri);
            };
            i += 2;
            ch = (h * 16 + l) as u8;
            match ch {
                0 => return Err(InvalidUri),
                b'%' | b'#' | b'?' => {
                    out.push(ch);
                    state = State::Usual;
                    continue;
                }
                _ => {}
            }
        } else if ch == b'?' || ch == b'#' {
            break;
        }
        state = step(state, ch, out, base)?;
    }
    match state {
        State::Dot => {
            out.pop();
        }
        State::DotDot => climb(out, base)?,
        State::Usual | State::Slash => {}
    }
    Ok(())
}

/// One byte of the path (decoded) in `state`.
fn step(state: State, ch: u8, out: &mut Vec<u8>, base: usize) -> Result<State, InvalidUri> {
    Ok(match (state, ch) {
        (State::Slash, b'/') => State::Slash,
        (_, b'/') if state != State::Usual => {
            match state {
                State::Dot => {
                    out.pop();
                }
                _ => climb(out, base)?,
            }
            State::Slash
        }
        (State::Usual, b'/') => {
            out.push(ch);
            State::Slash
        }
        (State::Slash, b'.') => {
            out.push(ch);
            State::Dot
        }
        (State::Dot, b'.') => {
            out.push(ch);
            State::DotDot
        }
        _ => {
            out.push(ch);
            State::Usual
        }
    })
}

/// A `..` segment ended: drop it and the segment before it (nginx's
/// `u -= 4` and its walk back to a `/`); above the root, refused.
fn climb(out: &mut Vec<u8>, base: usize) -> Result<(), InvalidUri> {
    // `out` ends with "/.."; the segment before starts after the slash
    // before that one.
    let before = out
        .len()
        .checked_sub(4)
        .filter(|&b| b >= base)
        .ok_or(InvalidUri)?;
    let slash = out[base..=before]
        .iter()
        .rposition(|&b| b == b'/')
        .ok_or(InvalidUri)?;
    out.truncate(base + slash + 1);
    Ok(())
}

/// nginx's `$args` of `request_uri`: the bytes after its first `?` up to
/// a `#`; empty when a `#` comes first or there is no `?`.
pub fn args(request_uri: &[u8]) -> &[u8] {
    match request_uri.iter().position(|&b| b == b'?' || b == b'#') {
        Some(q) if request_uri[q] == b'?' => {
            let rest = &request_uri[q + 1..];
            &rest[..rest.iter().position(|&b| b == b'#').unwrap_or(rest.len())]
        }
        _ => b"",
    }
}

/// nginx's `$arg_NAME` (`ngx_http_arg`): the value of the first argument
/// of `args` named `name` (ASCII case ignored) that has an `=`, as sent,
/// up to the next `&`.
///
/// ```
/// assert_eq!(ketama::nginx::arg(b"a=1&ID=7&id=8", b"id"), Some(&b"7"[..]));
/// assert_eq!(ketama::nginx::arg(b"xid=1&id", b"id"), None);
/// ```
pub fn arg<'a>(args: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    args.split(|&b| b == b'&').find_map(|chunk| {
        let value = chunk.get(name.len()..)?.strip_prefix(b"=")?;
        chunk[..name.len()]
            .eq_ignore_ascii_case(name)
            .then_some(value)
    })
}

/// nginx's `$cookie_NAME` (`ngx_http_parse_multi_header_lines`): over
/// every `Cookie` line in order, the first cookie named `name` (ASCII case
/// ignored; spaces around the `=` skipped), its value as sent up to a
/// `;` (quotes kept). A cookie starts a line or follows a `;` or `,` and
/// the spaces after it.
///
/// ```
/// let lines = [&b"a=1, SID = x\"y\"; b=2"[..]];
/// assert_eq!(ketama::nginx::cookie(lines, b"sid"), Some(&b"x\"y\""[..]));
/// ```
pub fn cookie<'a>(lines: impl IntoIterator<Item = &'a [u8]>, name: &[u8]) -> Option<&'a [u8]> {
    for line in lines {
        if name.len() > line.len() {
            continue;
        }
        let mut s = 0;
        while s < line.len() {
            if line[s..].len() >= name.len() && line[s..s + name.len()].eq_ignore_ascii_case(name) {
                let mut p = s + name.len();
                while line.get(p) == Some(&b' ') {
                    p += 1;
                }
                if line.get(p) == Some(&b'=') {
                    p += 1;
                    while line.get(p) == Some(&b' ') {
                        p += 1;
                    }
                    let end = line[p..]
                        .iter()
                        .position(|&b| b == b';')
                        .map_or(line.len(), |e| p + e);
                    return Some(&line[p..end]);
                }
                // nginx reads the byte that was not `=` before it skips:
                // `N;N=1` finds no `N`.
                s = (p + 1).min(line.len());
            }
            // The next cookie: past a `;` or `,`, then spaces.
            while s < line.len() {
                s += 1;
                if matches!(line[s - 1], b';' | b',') {
                    break;
                }
            }
            while line.get(s) == Some(&b' ') {
                s += 1;
            }
        }
    }
    None
}

/// Whether field `name` is what nginx's `$http_VAR` names (`var` as in
/// the template, any case): the field's name lowercased, each `-` read as
/// `_`.
pub fn http_var_matches(name: &[u8], var: &[u8]) -> bool {
    name.len() == var.len()
        && name.iter().zip(var).all(|(&n, &v)| {
            let n = if n == b'-' {
                b'_'
            } else {
                n.to_ascii_lowercase()
            };
            n == v.to_ascii_lowercase()
        })
}

/// nginx's `$host` before lowercasing (`ngx_http_validate_host`): the
/// host of `raw` (an absolute-form authority, or a `Host` field) without
/// its port and one trailing dot; `None` where nginx answers 400 (empty,
/// `..`, a `/`, a control byte, a space). Lowercase the result for the
/// variable's value (see [`write_host`]).
///
/// ```
/// assert_eq!(ketama::nginx::host(b"CDN.Example.:8080"), Some(&b"CDN.Example"[..]));
/// assert_eq!(ketama::nginx::host(b"[::1]:80"), Some(&b"[::1]"[..]));
/// assert_eq!(ketama::nginx::host(b"a..b"), None);
/// ```
pub fn host(raw: &[u8]) -> Option<&[u8]> {
    #[derive(PartialEq)]
    enum S {
        Usual,
        Literal,
        Rest,
    }
    let (mut dot, mut len, mut state) = (None::<usize>, raw.len(), S::Usual);
    for (i, &ch) in raw.iter().enumerate() {
        match ch {
            b'.' => {
                if i > 0 && dot == Some(i - 1) {
                    return None;
                }
                dot = Some(i);
            }
            b':' if state == S::Usual => {
                len = i;
                state = S::Rest;
            }
            b'[' if i == 0 => state = S::Literal,
            b']' if state == S::Literal => {
                len = i + 1;
                state = S::Rest;
            }
            b'/' => return None,
            c if c <= 0x20 || c == 0x7f => return None,
            _ => {}
        }
    }
    if len > 0 && dot == Some(len - 1) {
        len -= 1;
    }
    (len > 0).then(|| &raw[..len])
}

/// Appends nginx's `$host` of `raw` to `out` (lowercased; nothing when
/// nginx would refuse it).
pub fn write_host(raw: &[u8], out: &mut Vec<u8>) {
    if let Some(h) = host(raw) {
        out.extend(h.iter().map(u8::to_ascii_lowercase));
    }
}

/// Appends nginx's `$remote_addr` of `addr` to `out`: the address
/// without a port (`::ffff:127.0.0.1` for a mapped IPv4 address, as nginx
/// listening on IPv6 writes it).
pub fn write_addr(addr: IpAddr, out: &mut Vec<u8>) {
    // Writing to a Vec cannot fail.
    let _ = write!(out, "{addr}");
}

/// Appends every field named as `$http_VAR` names it, joined by `sep`
/// and a space, to `out` (nginx's `$http_cookie` with `;`,
/// `$http_x_forwarded_for` with `,`).
pub fn write_joined<'a>(
    fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    var: &[u8],
    sep: u8,
    out: &mut Vec<u8>,
) {
    let mut first = true;
    for (_, v) in fields.filter(|(n, _)| http_var_matches(n, var)) {
        if !first {
            out.extend_from_slice(&[sep, b' ']);
        }
        first = false;
        out.extend_from_slice(v);
    }
}

#[cfg(test)]
mod tests;
