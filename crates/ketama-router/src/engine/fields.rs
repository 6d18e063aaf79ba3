//! Header fields as nginx 1.22 reads and forwards them: the one set of
//! rules for a header line (`ngx_http_parse_header_line`), the fields
//! that may appear once, `Host`'s validation, `Connection`'s meaning,
//! `Content-Length`'s number, and the fields a proxy never forwards.
//! Request heads and response heads both read their lines here.
//!
//! A header line (its bytes before the `LF`):
//!
//! | line | nginx, and the router |
//! |---|---|
//! | empty, or one `CR` | the end of the head |
//! | a `CR` followed by anything but `CR` or the line's end; a second `CR` at the line's start | 400 (a response: 502) |
//! | first byte a control byte, a space, `DEL` or `:` | 400 |
//! | a control byte, a space or `DEL` in the name | 400 |
//! | `NUL` in the value | 400 |
//! | a name with a byte other than `A-Z a-z 0-9 -` (and `_` with `underscores_in_headers`) | ignored: neither read nor forwarded (`ignore_invalid_headers on`) |
//! | no colon (a name alone) | a field with an empty value |
//! | a value | without the spaces (not tabs) around it; any other byte kept |
//!
//! A request head may then carry each of [`UNIQUE`] once (400 for a
//! second), and its `Host` must pass [`valid_host`].

/// A header line, read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    /// The empty line that ends a head.
    End,
    /// A field: positions within the line.
    Field {
        /// The name's end (it starts at 0).
        name_end: usize,
        /// The value's start.
        value_start: usize,
        /// The value's end.
        value_end: usize,
        /// nginx ignores the line (a byte outside its name characters).
        ignored: bool,
    },
}

/// A header line nginx refuses (400 for a request, 502 for a response).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadLine;

/// Whether a `CR` at `i` in a line being read (`line` holds the bytes
/// before the line's `LF`, or all read so far) is refused: nginx takes a
/// `CR` only as the start of the line's end, which is any number of
/// `CR`s, then `LF`; at the start of a header line only one.
pub fn bad_cr(line: &[u8], i: usize) -> bool {
    match line.get(i + 1) {
        None | Some(b'\n') => false,
        Some(b'\r') => i == 0,
        Some(_) => true,
    }
}

/// The next `LF` in `buf` at or after `*scanned`, found a word at a time.
/// A complete line's `CR`s are its reader's to judge ([`read_line`], the
/// request and status lines' readers); in a line not yet ended, a `CR`
/// nginx would already have refused is refused now (`Err` holds its
/// position): in a request or status line (`line_start` `None`) any not
/// followed by `LF`, in a header line starting at `line_start` as
/// [`bad_cr`] says. Without an `LF`, `*scanned` moves to the end of `buf`
/// (before a `CR` last, which its `LF` may yet follow), so that no byte is
/// searched twice.
pub fn find_lf(
    buf: &[u8],
    scanned: &mut usize,
    line_start: Option<usize>,
) -> Result<Option<usize>, usize> {
    let from = *scanned;
    if let Some(p) = memchr::memchr(b'\n', &buf[from..]) {
        return Ok(Some(from + p));
    }
    for i in memchr::memchr_iter(b'\r', &buf[from..]).map(|p| from + p) {
        let bad = match line_start {
            None => i + 1 < buf.len(),
            Some(s) => bad_cr(&buf[s..], i - s),
        };
        if bad {
            return Err(i);
        }
    }
    *scanned = if buf.last() == Some(&b'\r') {
        buf.len() - 1
    } else {
        buf.len()
    };
    Ok(None)
}

/// What a byte is in a header name, by nginx's table.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// `A-Z a-z 0-9 -`.
    Name,
    /// `_`.
    Underscore,
    /// `:`.
    Colon,
    /// `CR`.
    Cr,
    /// A control byte, a space or `DEL`: refused.
    Bad,
    /// Anything else: the line is ignored (a request's).
    Other,
}

const fn class(b: u8) -> Class {
    match b {
        b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' => Class::Name,
        b'_' => Class::Underscore,
        b':' => Class::Colon,
        b'\r' => Class::Cr,
        0..=0x20 | 0x7f => Class::Bad,
        _ => Class::Other,
    }
}

static CLASSES: [Class; 256] = {
    let mut t = [Class::Other; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = class(b as u8);
        b += 1;
    }
    t
};

/// Reads one header line (its bytes before the `LF`) by nginx's rules
/// (see the module docs). `underscores`: `_` is a name byte; `upstream`:
/// a response's line, where a repeated `HTTP/...` status line is ignored
/// (IIS sends them).
pub fn read_line(line: &[u8], underscores: bool, upstream: bool) -> Result<Line, BadLine> {
    let Some(&first) = line.first() else {
        return Ok(Line::End);
    };
    if first == b'\r' {
        return if line.len() == 1 {
            Ok(Line::End)
        } else {
            Err(BadLine)
        };
    }
    if first <= 0x20 || first == 0x7f || first == b':' {
        return Err(BadLine);
    }
    let mut ignored = false;
    let mut i = 0;
    // The name: up to the colon, or the whole line (an empty value).
    let name_end = loop {
        while line
            .get(i)
            .is_some_and(|&b| CLASSES[b as usize] == Class::Name)
        {
            i += 1;
        }
        let Some(&b) = line.get(i) else { break i };
        match CLASSES[b as usize] {
            Class::Colon => break i,
            Class::Cr => return rest_is_crs(line, i).map(|()| field(i, i, i, ignored)),
            Class::Underscore => ignored |= !underscores,
            Class::Bad => return Err(BadLine),
            _ if b == b'/' && upstream && i == 4 && line.starts_with(b"HTTP") => {
                return Ok(field(0, 0, 0, true));
            }
            // nginx ignores such a request field; a response's it keeps.
            _ => ignored |= !upstream,
        }
        i += 1;
    };
    if i == line.len() {
        return Ok(field(name_end, i, i, ignored));
    }
    // Spaces (not tabs) before the value.
    i += 1;
    while line.get(i) == Some(&b' ') {
        i += 1;
    }
    let value_start = i;
    // The value runs to a CR (after which only CRs may follow) or the
    // line's end; a NUL anywhere is refused; trailing spaces are not
    // the value's.
    // (A byte loop: values are short, shorter than a word-at-a-time
    // search's set-up.)
    let rest = &line[value_start..];
    let mut end = match rest.iter().position(|&b| b == b'\r' || b == 0) {
        None => line.len(),
        Some(p) if rest[p] == 0 => return Err(BadLine),
        Some(p) => {
            rest_is_crs(line, value_start + p)?;
            value_start + p
        }
    };
    while end > value_start && line[end - 1] == b' ' {
        end -= 1;
    }
    Ok(field(name_end, value_start, end, ignored))
}

fn field(name_end: usize, value_start: usize, value_end: usize, ignored: bool) -> Line {
    Line::Field {
        name_end,
        value_start,
        value_end,
        ignored,
    }
}

/// nginx's line end: from a `CR` on, only `CR`s until the `LF`.
fn rest_is_crs(line: &[u8], from: usize) -> Result<(), BadLine> {
    if line[from..].iter().all(|&b| b == b'\r') {
        Ok(())
    } else {
        Err(BadLine)
    }
}

/// Whether nginx ignores a request field by its name alone
/// (`ignore_invalid_headers`): a byte other than `A-Z a-z 0-9 -`, or `_`
/// unless `underscores`. The rule of [`read_line`] for a name that
/// arrived whole (an HTTP/2 field's, which the `h2` crate has already
/// refused if it held a control byte, a space or an upper-case letter).
pub fn name_ignored(name: &[u8], underscores: bool) -> bool {
    name.iter().any(|&b| match CLASSES[b as usize] {
        Class::Name => false,
        Class::Underscore => !underscores,
        _ => true,
    })
}

/// Request fields nginx accepts once (`ngx_http_process_unique_header_line`
/// and `Host`'s own check): a second is refused with 400.
pub const UNIQUE: [&[u8]; 11] = [
    b"host",
    b"if-modified-since",
    b"if-unmodified-since",
    b"if-match",
    b"if-none-match",
    b"content-length",
    b"content-range",
    b"if-range",
    b"transfer-encoding",
    b"expect",
    b"authorization",
];

/// Whether a `Host` value is one nginx accepts (`ngx_http_validate_host`):
/// no `/`, no control byte, space or `DEL`, no `..`, and a name left once
/// a port and a final dot are taken off.
pub fn valid_host(h: &[u8]) -> bool {
    ketama::nginx::host(h).is_some()
}

/// What a `Connection` value asks of the connection, as nginx reads it:
/// `close` anywhere in it (any case, even inside a longer token) closes,
/// else `keep-alive` anywhere keeps; a later line that says either
/// overrides an earlier one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionType {
    /// `close`.
    Close,
    /// `keep-alive`.
    KeepAlive,
}

/// The [`ConnectionType`] one `Connection` value says, if any.
pub fn connection_type(v: &[u8]) -> Option<ConnectionType> {
    if contains_ignore_case(v, b"close") {
        Some(ConnectionType::Close)
    } else if contains_ignore_case(v, b"keep-alive") {
        Some(ConnectionType::KeepAlive)
    } else {
        None
    }
}

/// Whether `needle` (lower case) is in `hay`, any case.
pub fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

/// A `Content-Length` value as nginx reads it (`ngx_atoof`): decimal
/// digits only, at least one (leading zeros allowed, however many),
/// within `i64` (nginx's `off_t`).
pub fn parse_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    let mut n: u64 = 0;
    for &d in v {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        if n > i64::MAX as u64 {
            return None;
        }
    }
    Some(n)
}

/// Request fields a proxy never forwards as the client sent them: nginx's
/// own set (`ngx_http_proxy_headers`), which it writes itself or drops
/// (`Host`, `Content-Length` and `Transfer-Encoding` written anew, the
/// others dropped). A field the client's `Connection` names is forwarded
/// all the same, as nginx forwards it: dropping a framing field there
/// would let one request's body pass for the next request.
pub const NOT_FORWARDED: [&[u8]; 8] = [
    b"host",
    b"connection",
    b"content-length",
    b"transfer-encoding",
    b"te",
    b"keep-alive",
    b"expect",
    b"upgrade",
];

/// Fields HTTP/2 forbids (RFC 9113 section 8.2.2): dropped from a
/// backend's response on its way to an HTTP/2 client, and never sent to
/// an HTTP/2 backend.
pub const CONNECTION_SPECIFIC: [&[u8]; 6] = [
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"transfer-encoding",
    b"upgrade",
    b"te",
];

/// Whether a field may pass on in a trailer section (RFC 9110 section
/// 6.5.1): not one of the framing (`Content-Length`, `Transfer-Encoding`,
/// `Trailer`), routing (`Host`) or connection-specific ones, which a
/// trailer must not carry and a recipient must not act on.
pub fn trailer_allowed(name: &[u8]) -> bool {
    const NEVER: [&[u8]; 4] = [b"content-length", b"host", b"trailer", b"expect"];
    !connection_specific(name) && !NEVER.iter().any(|n| name.eq_ignore_ascii_case(n))
}

/// Whether a backend's response field `name` (any case) is handed on to
/// the client, whichever protocol either speaks: not `Date` (the router
/// writes its own), nor one of the backend connection's (its framing and
/// connection fields); toward an HTTP/1 client (`to_h2` false) not
/// `Trailer` either (the router frames the body itself: the trailers it
/// announces may not come), and toward an HTTP/2 one none that HTTP/2
/// forbids ([`CONNECTION_SPECIFIC`]).
pub fn response_field_passes(name: &[u8], to_h2: bool) -> bool {
    let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
    if is(b"date") {
        return false;
    }
    if to_h2 {
        return !connection_specific(name);
    }
    ![
        &b"connection"[..],
        b"keep-alive",
        b"proxy-connection",
        b"transfer-encoding",
        b"trailer",
    ]
    .iter()
    .any(|n| is(n))
}

/// Whether `name` is one of [`CONNECTION_SPECIFIC`] (any case).
pub fn connection_specific(name: &[u8]) -> bool {
    CONNECTION_SPECIFIC
        .iter()
        .any(|c| name.eq_ignore_ascii_case(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule_hands_a_backends_response_fields_on_to_either_protocol() {
        for (name, to_h1, to_h2) in [
            (&b"Date"[..], false, false),
            (b"Connection", false, false),
            (b"keep-alive", false, false),
            (b"Transfer-Encoding", false, false),
            (b"Trailer", false, true),
            (b"Upgrade", true, false),
            (b"TE", true, false),
            (b"Content-Length", true, true),
            (b"cache-control", true, true),
            (b"X-Cache", true, true),
        ] {
            let n = name.escape_ascii();
            assert_eq!(response_field_passes(name, false), to_h1, "{n} to HTTP/1");
            assert_eq!(response_field_passes(name, true), to_h2, "{n} to HTTP/2");
        }
    }

    fn read(line: &[u8]) -> Result<(String, String, bool), BadLine> {
        match read_line(line, false, false)? {
            Line::End => Ok(("END".into(), String::new(), false)),
            Line::Field {
                name_end,
                value_start,
                value_end,
                ignored,
            } => Ok((
                line[..name_end].escape_ascii().to_string(),
                line[value_start..value_end].escape_ascii().to_string(),
                ignored,
            )),
        }
    }

    #[test]
    fn header_lines_as_nginx_reads_them() {
        let ok = |l: &[u8], n: &str, v: &str, ign: bool| {
            assert_eq!(
                read(l),
                Ok((n.into(), v.into(), ign)),
                "{}",
                l.escape_ascii()
            );
        };
        ok(b"Host: a", "Host", "a", false);
        ok(b"Host:a  ", "Host", "a", false);
        ok(b"X:\ta\t", "X", "\\ta\\t", false);
        ok(b"X:  a b  \r", "X", "a b", false);
        ok(b"X: a\r\r\r", "X", "a", false);
        ok(b"NoColon", "NoColon", "", false);
        ok(b"NoColon\r", "NoColon", "", false);
        ok(b"X_Y: 1", "X_Y", "1", true);
        ok(b"X@Y: 1", "X@Y", "1", true);
        ok(b"X.Y: 1", "X.Y", "1", true);
        ok(b"X\x80: 1", "X\\x80", "1", true);
        ok(b"X: a\x01\x7fb", "X", "a\\x01\\x7fb", false);
        ok(b"X:", "X", "", false);
        ok(b"", "END", "", false);
        ok(b"\r", "END", "", false);
        for bad in [
            &b"\r\r"[..],
            b" folded",
            b"\tfolded",
            b": v",
            b"\x7fX: v",
            b"X Y: v",
            b"X\x7f: v",
            b"X\x01: v",
            b"X : v",
            b"X: a\x00",
            b"X: a\rb",
            b"X\rb",
            b"\x00X: v",
        ] {
            assert_eq!(read(bad), Err(BadLine), "{}", bad.escape_ascii());
        }
        assert_eq!(read_line(b"X_Y: 1", true, false), Ok(field(3, 5, 6, false)));
        assert_eq!(
            read_line(b"HTTP/1.1 200 OK", false, true),
            Ok(field(0, 0, 0, true))
        );
    }

    #[test]
    fn hosts_as_nginx_validates_them() {
        for good in [
            &b"a"[..],
            b"a.b",
            b"a:80",
            b"[::1]",
            b"[::1]:80",
            b"a.",
            b"a:",
            b"a:b:c",
            b"a_b",
            b"A.B",
            b"a\\b",
            b"a.:80",
        ] {
            assert!(valid_host(good), "{}", good.escape_ascii());
        }
        for bad in [
            &b""[..],
            b"a/b",
            b"a b",
            b"a..b",
            b":80",
            b".",
            b"h\x01",
            b"x\x7fy",
        ] {
            assert!(!valid_host(bad), "{}", bad.escape_ascii());
        }
    }

    #[test]
    fn connection_and_lengths() {
        assert_eq!(
            connection_type(b"Keep-Alive"),
            Some(ConnectionType::KeepAlive)
        );
        assert_eq!(
            connection_type(b"keep-alive, CLOSE"),
            Some(ConnectionType::Close)
        );
        assert_eq!(connection_type(b"foo-closed"), Some(ConnectionType::Close));
        assert_eq!(connection_type(b"Upgrade"), None);
        assert_eq!(parse_length(b"00000000000000000005"), Some(5));
        assert_eq!(parse_length(b"9223372036854775807"), Some(i64::MAX as u64));
        for bad in [
            &b""[..],
            b"+1",
            b"-1",
            b"1 2",
            b"0x10",
            b"9223372036854775808",
            b"99999999999999999999",
        ] {
            assert_eq!(parse_length(bad), None, "{}", bad.escape_ascii());
        }
    }
}
