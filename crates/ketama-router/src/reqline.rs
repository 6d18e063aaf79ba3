//! The HTTP/1 request line, read the way nginx 1.22 reads it
//! (`ngx_http_parse_request_line`, then `ngx_http_parse_complex_uri` and
//! `ngx_http_validate_host` on what it found), so that the router refuses
//! what nginx refuses, with nginx's status, and routes what nginx accepts
//! by nginx's `$request_uri`.
//!
//! | request line | nginx, and the router |
//! |---|---|
//! | a method of other than `A-Z`, `_`, `-` | 400 |
//! | a target not starting with `/` or a scheme (`*`, `h:443`) | 400 |
//! | a control byte, a space or DEL inside the target | 400 |
//! | a bad `%` escape, or `%00`, in the path (not the query) | 400 |
//! | a path whose `..` climbs above the root (after decoding) | 400 |
//! | absolute-form with userinfo, `_`, `%` or `#` in the host, or no host | 400 |
//! | a version other than `HTTP/1.x` with `x` at most 999 | 400 |
//! | `HTTP/` with a major version over 1 (`HTTP/2.0`) | 505 |
//! | HTTP/0.9 (no version) | nginx answers without a status line; the router 400 |
//!
//! Leading empty lines are skipped; spaces may repeat between the parts
//! and trail the version. A `#` and what follows stay in the target: they
//! are part of `$request_uri` and forwarded as nginx forwards them. An
//! absolute-form target (`GET http://host/path`) routes by its path and
//! query, which is what nginx's `$request_uri` holds for it, and its
//! authority stands for `Host`.
//!
//! Cost: one pass over the line, no allocation; the path check a second
//! pass over the path, only when it holds `%` or `.`.

/// Why a request line is refused: nginx's status for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineError {
    /// 400 Bad Request.
    Invalid,
    /// 505 HTTP Version Not Supported: `HTTP/` with a major version over 1.
    Version,
}

impl LineError {
    /// The status nginx answers with.
    pub fn status(self) -> u16 {
        match self {
            LineError::Invalid => 400,
            LineError::Version => 505,
        }
    }
}

/// A request line nginx accepts, as pieces of the line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestLine<'a> {
    /// The method, as sent.
    pub method: &'a [u8],
    /// nginx's `$request_uri`: the target as sent for origin-form; from
    /// the path (or the `?` when there is none) on for absolute-form; `/`
    /// for `http://host` alone.
    pub request_uri: &'a [u8],
    /// Whether the absolute-form target had no path before its query
    /// (`http://host?q`): nginx then forwards `/` and the query.
    pub empty_path: bool,
    /// The authority of an absolute-form target.
    pub authority: Option<&'a [u8]>,
    /// The whole target as sent (HAProxy's `balance uri` hashes it).
    pub target: &'a [u8],
    /// Whether it is HTTP/1.1 (or a later 1.x, which nginx serves as
    /// 1.1); HTTP/1.0 otherwise.
    pub http11: bool,
}

fn upper_or_mark(b: u8) -> bool {
    b.is_ascii_uppercase() || b == b'_' || b == b'-'
}

/// Parses a request line (no leading empty lines, no line end; a CR left
/// inside is refused as nginx refuses it).
pub fn parse(line: &[u8]) -> Result<RequestLine<'_>, LineError> {
    use LineError::Invalid;
    let mut i = 0;
    let n = line.len();
    let at = |i: usize| line.get(i).copied();
    while at(i).is_some_and(upper_or_mark) {
        i += 1;
    }
    if i == 0 || at(i) != Some(b' ') {
        return Err(Invalid);
    }
    let method = &line[..i];
    while at(i) == Some(b' ') {
        i += 1;
    }
    let target_start = i;
    let (mut authority, mut empty_path) = (None, false);
    let uri_start;
    match at(i) {
        Some(b'/') => uri_start = i,
        Some(c) if c.is_ascii_alphabetic() => {
            // Absolute-form: scheme "://" host [":" port], then the path.
            while at(i).is_some_and(|c| c.is_ascii_alphanumeric() || b"+-.".contains(&c)) {
                i += 1;
            }
            if line.get(i..i + 3) != Some(b"://") {
                return Err(Invalid);
            }
            i += 3;
            let host = i;
            if at(i) == Some(b'[') {
                i += 1;
                loop {
                    match at(i) {
                        Some(b']') => break,
                        Some(c)
                            if c.is_ascii_alphanumeric() || b":-._~!$&'()*+,;=".contains(&c) =>
                        {
                            i += 1
                        }
                        _ => return Err(Invalid),
                    }
                }
                i += 1;
            } else {
                while at(i).is_some_and(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-') {
                    i += 1;
                }
            }
            let host_end = i;
            if at(i) == Some(b':') {
                i += 1;
                while at(i).is_some_and(|c| c.is_ascii_digit()) {
                    i += 1;
                }
            }
            if !valid_host(&line[host..host_end]) {
                return Err(Invalid);
            }
            authority = Some(&line[host..i]);
            match at(i) {
                Some(b'/') => uri_start = i,
                Some(b'?') => {
                    uri_start = i;
                    empty_path = true;
                }
                // `http://host HTTP/1.1`: nginx's $request_uri is the "/"
                // of the "//" after the scheme.
                Some(b' ') => {
                    let slash = host - 2;
                    let version = version(line, i)?;
                    return Ok(RequestLine {
                        method,
                        request_uri: &line[slash..slash + 1],
                        empty_path: false,
                        authority,
                        target: &line[target_start..i],
                        http11: version,
                    });
                }
                _ => return Err(Invalid),
            }
        }
        _ => return Err(Invalid),
    }
    // The target runs to the next space; nginx refuses controls and DEL.
    i = uri_start;
    while let Some(c) = at(i) {
        if c == b' ' {
            break;
        }
        if c < 0x20 || c == 0x7f {
            return Err(Invalid);
        }
        i += 1;
    }
    if i == n {
        // HTTP/0.9: nginx serves it without a status line; the router
        // refuses it (docs/router.md, differences from nginx).
        return Err(Invalid);
    }
    let request_uri = &line[uri_start..i];
    // The version first: nginx refuses it while it reads the line, the
    // path once the line is read.
    let http11 = version(line, i)?;
    let path_end = request_uri
        .iter()
        .position(|&b| b == b'?' || b == b'#')
        .unwrap_or(request_uri.len());
    if !valid_path(&request_uri[..path_end]) {
        return Err(Invalid);
    }
    Ok(RequestLine {
        method,
        request_uri,
        empty_path,
        authority,
        target: &line[target_start..i],
        http11,
    })
}

/// The version after the target's end at `i` (a space): spaces, then
/// `HTTP/1.x`, then optional spaces. `true` for 1.1 and later 1.x.
fn version(line: &[u8], mut i: usize) -> Result<bool, LineError> {
    use LineError::{Invalid, Version};
    let at = |i: usize| line.get(i).copied();
    while at(i) == Some(b' ') {
        i += 1;
    }
    if line.get(i..i + 5) != Some(b"HTTP/") {
        return Err(Invalid);
    }
    i += 5;
    // nginx: a first major digit of 1-9, refused with 505 as soon as the
    // major version passes 1.
    let major_start = i;
    let mut major = 0u32;
    loop {
        match at(i) {
            Some(b'.') if i > major_start => break,
            Some(b'0') if i == major_start => return Err(Invalid),
            Some(c @ b'0'..=b'9') => {
                major = major * 10 + (c - b'0') as u32;
                if major > 1 {
                    return Err(Version);
                }
                i += 1;
            }
            _ => return Err(Invalid),
        }
    }
    i += 1;
    let digits = i;
    let mut minor: u32 = 0;
    while let Some(c @ b'0'..=b'9') = at(i) {
        // nginx refuses a digit after three.
        if minor > 99 {
            return Err(Invalid);
        }
        minor = minor * 10 + (c - b'0') as u32;
        i += 1;
    }
    if i == digits {
        return Err(Invalid);
    }
    while at(i) == Some(b' ') {
        i += 1;
    }
    if i != line.len() {
        return Err(Invalid);
    }
    Ok(minor >= 1)
}

/// What nginx answers a request line that has not ended within the head
/// limit, having read `prefix` of it: nginx reads a line a byte at a
/// time, so a byte it refuses there (in the method, a control byte or DEL
/// in the target, the version) is its answer, not 414. `None`: the line
/// is only too long.
pub fn refused_prefix(prefix: &[u8]) -> Option<LineError> {
    use LineError::{Invalid, Version};
    let mut i = 0;
    while prefix.get(i).copied().is_some_and(upper_or_mark) {
        i += 1;
    }
    match prefix.get(i) {
        None => return None,
        Some(b' ') if i > 0 => {}
        Some(_) => return Some(Invalid),
    }
    while prefix.get(i) == Some(&b' ') {
        i += 1;
    }
    match prefix.get(i) {
        None => return None,
        Some(&c) if c == b'/' || c.is_ascii_alphabetic() => {}
        Some(_) => return Some(Invalid),
    }
    while let Some(&c) = prefix.get(i) {
        if c == b' ' {
            break;
        }
        if c < 0x20 || c == 0x7f {
            return Some(Invalid);
        }
        i += 1;
    }
    while prefix.get(i) == Some(&b' ') {
        i += 1;
    }
    let rest = &prefix[i..];
    let k = rest.len().min(5);
    if rest[..k] != b"HTTP/"[..k] {
        return Some(Invalid);
    }
    let (mut major, mut dot) = (0u32, false);
    for (j, &c) in rest.iter().enumerate().skip(5) {
        match c {
            b'0'..=b'9' if !dot => {
                if j == 5 && c == b'0' {
                    return Some(Invalid);
                }
                major = major * 10 + u32::from(c - b'0');
                if major > 1 {
                    return Some(Version);
                }
            }
            b'.' if !dot && j > 5 => dot = true,
            b'0'..=b'9' | b' ' if dot => {}
            _ => return Some(Invalid),
        }
    }
    None
}

/// `ngx_http_validate_host` on the host of an absolute-form target: not
/// empty (a trailing dot aside), no `..`.
fn valid_host(host: &[u8]) -> bool {
    let host = host.strip_suffix(b".").unwrap_or(host);
    !host.is_empty() && !host.windows(2).any(|w| w == b"..")
}

/// `ngx_http_parse_complex_uri` on a path: every `%` starts two hex
/// digits, none decodes to NUL, and, with `%2F` a slash and `%2E` a dot
/// as nginx decodes them (repeated slashes merged), no `..` climbs above
/// the root.
pub fn valid_path(path: &[u8]) -> bool {
    if !path.iter().any(|&b| b == b'%' || b == b'.') {
        return true;
    }
    let (mut depth, mut seg) = (0usize, [0u8; 3]);
    let mut seg_len = 0usize;
    let mut i = 0;
    while i < path.len() {
        let mut c = path[i];
        let mut literal = false;
        if c == b'%' {
            let hex = |b: Option<&u8>| b.and_then(|&b| (b as char).to_digit(16));
            match (hex(path.get(i + 1)), hex(path.get(i + 2))) {
                (Some(h), Some(l)) => c = (h * 16 + l) as u8,
                _ => return false,
            }
            if c == 0 {
                return false;
            }
            // A decoded `%` or `#` is a plain byte to nginx.
            literal = c == b'%' || c == b'#';
            i += 2;
        }
        if c == b'/' && !literal {
            if !close_segment(&seg[..seg_len.min(3)], seg_len, &mut depth) {
                return false;
            }
            seg_len = 0;
        } else {
            if seg_len < 3 {
                seg[seg_len] = c;
            }
            seg_len += 1;
        }
        i += 1;
    }
    close_segment(&seg[..seg_len.min(3)], seg_len, &mut depth)
}

/// Ends a path segment (its first bytes, and its length): `.` stays,
/// `..` climbs (`false` above the root), anything else descends.
fn close_segment(seg: &[u8], len: usize, depth: &mut usize) -> bool {
    match (len, seg) {
        (2, b"..") => match depth.checked_sub(1) {
            Some(d) => {
                *depth = d;
                true
            }
            None => false,
        },
        (0, _) | (1, b".") => true,
        _ => {
            *depth += 1;
            true
        }
    }
}

#[cfg(test)]
mod tests;
