//! A backend's response head, read incrementally as its bytes arrive
//! (each byte looked at a bounded number of times, as the request head's
//! reader does), by nginx's rules for upstreams: the status line as
//! `ngx_http_parse_status_line` reads it, header lines by
//! [`super::fields`] (a response's names may hold any byte nginx does not
//! refuse). Its framing is read more strictly than nginx 1.22 reads an
//! upstream's, because a pooled connection read two ways would hand one
//! response's bytes to the next request: two `Content-Length` lines, one
//! that is not a number, `Content-Length` with `Transfer-Encoding`, or a
//! coding other than `chunked` make the response invalid (502, blamed on
//! the backend, as a bad head).

use super::body::Framing;
use super::fields::{self, Line};
use super::io::Buffered;
use super::request_head::{Header, Span};
use crate::policy::Failure;

/// A backend's response head as the client's writer reads it, whichever
/// protocol the backend spoke.
pub trait ResponseView: Sync {
    /// The status code.
    fn status(&self) -> u16;
    /// The reason phrase (HTTP/1: as sent; HTTP/2 has none: the
    /// status's own).
    fn reason(&self) -> &[u8];
    /// The fields, in order.
    fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])>;
    /// The values of the fields named `name` (lowercase), in order.
    fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> {
        self.fields()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    }
    /// The fields as the `http` crate holds them, when they came that way
    /// (an HTTP/2 backend's): an HTTP/2 client is then handed them
    /// without parsing them again.
    fn headers(&self) -> Option<&http::HeaderMap> {
        None
    }
}

/// An HTTP/1 response head over the buffer it was read into.
pub struct H1Response<'a> {
    /// The head's positions.
    pub head: &'a ResponseHead,
    /// The buffer.
    pub buf: &'a [u8],
}

impl ResponseView for H1Response<'_> {
    fn status(&self) -> u16 {
        self.head.status
    }

    fn reason(&self) -> &[u8] {
        self.head.reason.of(self.buf)
    }

    fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.head
            .headers
            .iter()
            .map(|h| (h.name.of(self.buf), h.value.of(self.buf)))
    }
}

/// Where the reader is within a head.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Phase {
    /// In the status line.
    #[default]
    Status,
    /// In the header lines; the current one began here.
    Headers { line_start: usize },
    /// The head is complete.
    Done,
}

/// A response head as read: positions in the buffer it was read into.
#[derive(Debug, Default)]
pub struct ResponseHead {
    /// The status code.
    pub status: u16,
    /// The reason phrase.
    pub reason: Span,
    /// The header lines, in order.
    pub headers: Vec<Header>,
    /// The head's length.
    pub len: usize,
    /// HTTP/1.1 or later (else 1.0: the backend's connection is not kept,
    /// as nginx keeps none).
    pub http11: bool,
    /// The backend's connection closes after it (`Connection: close`, or
    /// HTTP/1.0).
    pub close: bool,
    /// `Content-Length`.
    pub content_length: Option<u64>,
    /// `Transfer-Encoding: chunked`.
    pub chunked: bool,
    phase: Phase,
    /// Bytes of the buffer already looked at.
    scanned: usize,
    lengths: u32,
    codings: u32,
}

/// Why a response head is invalid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadResponse(pub &'static str);

const BAD_CR: BadResponse = BadResponse("a CR that does not end a line");

thread_local! {
    /// Header lists of finished responses, for the next ones on this
    /// thread: a response head allocates nothing once the thread is warm.
    static SPARE_LISTS: std::cell::RefCell<Vec<Vec<Header>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Spare lists kept per thread, and the longest list kept.
const SPARES: usize = 64;
const KEEP_UP_TO: usize = 256;

impl ResponseHead {
    /// An empty head whose header list is one of the thread's spares.
    pub fn new() -> ResponseHead {
        let headers = SPARE_LISTS
            .with(|s| s.borrow_mut().pop())
            .unwrap_or_default();
        ResponseHead {
            headers,
            ..ResponseHead::default()
        }
    }

    /// Starts over: the next head begins at the buffer's start.
    pub fn restart(&mut self) {
        let mut headers = std::mem::take(&mut self.headers);
        headers.clear();
        *self = ResponseHead {
            headers,
            ..ResponseHead::default()
        };
    }

    /// Reads the head at the start of `buf`, from where the last call
    /// stopped (`buf` holds what it held then, and more): `Ok(false)`
    /// while it is incomplete.
    pub fn parse(&mut self, buf: &[u8]) -> Result<bool, BadResponse> {
        loop {
            match self.phase {
                Phase::Done => return Ok(true),
                Phase::Status => {
                    let Some(lf) =
                        fields::find_lf(buf, &mut self.scanned, None).map_err(|_| BAD_CR)?
                    else {
                        return Ok(false);
                    };
                    let end = if lf > 0 && buf[lf - 1] == b'\r' {
                        lf - 1
                    } else {
                        lf
                    };
                    self.status_line(buf, end)?;
                    self.scanned = lf + 1;
                    self.phase = Phase::Headers { line_start: lf + 1 };
                }
                Phase::Headers { line_start } => {
                    let Some(lf) = fields::find_lf(buf, &mut self.scanned, Some(line_start))
                        .map_err(|_| BAD_CR)?
                    else {
                        return Ok(false);
                    };
                    self.scanned = lf + 1;
                    self.phase = Phase::Headers { line_start: lf + 1 };
                    let line = &buf[line_start..lf];
                    match fields::read_line(line, true, true) {
                        Err(_) => return Err(BadResponse("a malformed response header line")),
                        Ok(Line::End) => {
                            self.len = lf + 1;
                            self.phase = Phase::Done;
                            self.finish()?;
                            return Ok(true);
                        }
                        Ok(Line::Field { ignored: true, .. }) => {}
                        Ok(Line::Field {
                            name_end,
                            value_start,
                            value_end,
                            ignored: false,
                        }) => {
                            self.note(&line[..name_end], &line[value_start..value_end])?;
                            self.headers.push(Header {
                                name: Span::new(line_start, line_start + name_end),
                                value: Span::new(line_start + value_start, line_start + value_end),
                            });
                        }
                    }
                }
            }
        }
    }

    /// `HTTP/` major `.` minor, spaces, a three-digit status, then a
    /// space (or nginx's `.` for IIS) and any text, or nothing.
    fn status_line(&mut self, buf: &[u8], end: usize) -> Result<(), BadResponse> {
        const BAD: BadResponse = BadResponse("a malformed status line");
        let line = &buf[..end];
        if line.contains(&b'\r') {
            return Err(BAD_CR);
        }
        let rest = line.strip_prefix(b"HTTP/").ok_or(BAD)?;
        let dot = rest.iter().position(|&b| b == b'.').ok_or(BAD)?;
        let (major, rest) = (&rest[..dot], &rest[dot + 1..]);
        let minor_len = rest.iter().position(|&b| b == b' ').ok_or(BAD)?;
        let minor = &rest[..minor_len];
        let version = |d: &[u8], first_zero: bool| {
            !d.is_empty()
                && d.len() <= 3
                && d.iter().all(u8::is_ascii_digit)
                && (first_zero || d[0] != b'0')
        };
        if !version(major, false) || !version(minor, true) {
            return Err(BAD);
        }
        let mut i = 5 + dot + 1 + minor_len;
        while line.get(i) == Some(&b' ') {
            i += 1;
        }
        let code = line.get(i..i + 3).ok_or(BAD)?;
        if !code.iter().all(u8::is_ascii_digit) || code[0] == b'0' {
            return Err(BAD);
        }
        let after = line.get(i + 3);
        if !matches!(after, None | Some(b' ' | b'.')) {
            return Err(BAD);
        }
        self.status = code.iter().fold(0u16, |n, &d| n * 10 + u16::from(d - b'0'));
        let reason = if after == Some(&b' ') { i + 4 } else { i + 3 };
        self.reason = Span::new(reason.min(end), end);
        self.http11 = major != b"1" || minor.iter().any(|&d| d != b'0');
        self.close = !self.http11;
        Ok(())
    }

    /// Records what a field says of framing and the connection.
    fn note(&mut self, name: &[u8], value: &[u8]) -> Result<(), BadResponse> {
        if name.eq_ignore_ascii_case(b"content-length") {
            self.lengths += 1;
            self.content_length = Some(
                fields::parse_length(value)
                    .ok_or(BadResponse("an invalid Content-Length from the backend"))?,
            );
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            self.codings += 1;
            if !value.eq_ignore_ascii_case(b"chunked") {
                return Err(BadResponse("a Transfer-Encoding other than chunked"));
            }
            self.chunked = true;
        } else if name.eq_ignore_ascii_case(b"connection") {
            self.close |= fields::contains_ignore_case(value, b"close");
        }
        Ok(())
    }

    fn finish(&self) -> Result<(), BadResponse> {
        if self.lengths > 1 || self.codings > 1 {
            return Err(BadResponse(
                "a repeated Content-Length or Transfer-Encoding",
            ));
        }
        if self.lengths > 0 && self.codings > 0 {
            return Err(BadResponse("Content-Length and Transfer-Encoding together"));
        }
        Ok(())
    }

    /// How the body after this head is delimited, for a request of
    /// method `head_request` (HEAD).
    pub fn body(&self, head_request: bool) -> Framing {
        let (status, length) = (self.status, self.content_length);
        framing(
            head_request,
            status,
            self.chunked,
            length,
            Framing::UntilClose,
        )
    }
}

/// How a response's body is delimited, whichever protocol the backend
/// speaks: none for a `HEAD` request or a status that has none (1xx, 204,
/// 304); else chunked when the backend's was; else its length when it
/// said one (0: none); else `unsaid`, what the backend's protocol leaves
/// (HTTP/1: until the close; HTTP/2: as the stream's DATA frames come,
/// none when the stream already ended).
pub fn framing(
    head_request: bool,
    status: u16,
    chunked: bool,
    length: Option<u64>,
    unsaid: Framing,
) -> Framing {
    if head_request || no_body(status) {
        return Framing::Empty;
    }
    if chunked {
        return Framing::Chunked;
    }
    match length {
        Some(0) => Framing::Empty,
        Some(n) => Framing::Length(n),
        None => unsaid,
    }
}

/// Whether a response of this status has no body, whatever its fields
/// say (1xx, 204, 304).
pub fn no_body(status: u16) -> bool {
    (100..200).contains(&status) || status == 204 || status == 304
}

impl Drop for ResponseHead {
    fn drop(&mut self) {
        let mut list = std::mem::take(&mut self.headers);
        if list.capacity() == 0 || list.capacity() > KEEP_UP_TO {
            return;
        }
        list.clear();
        SPARE_LISTS.with(|s| {
            let mut s = s.borrow_mut();
            if s.len() < SPARES {
                s.push(list);
            }
        });
    }
}

/// A response head larger than this is refused.
pub const MAX_RESPONSE_HEAD: usize = 1 << 20;

/// Reads the final response head from what `up` holds into `head`, the
/// one reader of it for every HTTP/1 backend (while the request is sent
/// and after): interim `1xx` heads are dropped (consumed); `Ok(true)`
/// once a final head is whole, `Ok(false)` when more is needed (within
/// [`MAX_RESPONSE_HEAD`]), `Err` for a head nginx would not read.
pub fn read_final<S>(up: &mut Buffered<S>, head: &mut ResponseHead) -> Result<bool, Failure> {
    loop {
        match head.parse(up.pending()) {
            Ok(true) if interim(head.status) => {
                up.consume(head.len);
                up.compact();
                head.restart();
            }
            Ok(true) => return Ok(true),
            Ok(false) if up.pending().len() > MAX_RESPONSE_HEAD => {
                return Err(Failure::BadResponse)
            }
            Ok(false) => return Ok(false),
            Err(bad) => {
                tracing::debug!(why = bad.0, "a bad response head");
                return Err(Failure::BadResponse);
            }
        }
    }
}

/// Whether a response head is an interim one the router drops (a `1xx`
/// other than `101`).
pub fn interim(status: u16) -> bool {
    (100..200).contains(&status) && status != 101
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &[u8]) -> Result<ResponseHead, BadResponse> {
        let mut r = ResponseHead::default();
        assert!(r.parse(raw)?);
        // Fed a byte at a time, the same head.
        let mut t = ResponseHead::default();
        let mut done = false;
        for n in 1..=raw.len() {
            if t.parse(&raw[..n])? {
                done = true;
                break;
            }
        }
        assert!(done && t.len == r.len && t.headers == r.headers);
        Ok(r)
    }

    #[test]
    fn framing_as_nginx_reads_it() {
        let r = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc").unwrap();
        assert_eq!(
            (r.status, r.len, r.body(false)),
            (200, 38, Framing::Length(3))
        );
        assert_eq!(r.body(true), Framing::Empty);
        let r = parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n").unwrap();
        assert_eq!(r.body(false), Framing::Chunked);
        let r = parse(b"HTTP/1.0 200 OK\r\n\r\n").unwrap();
        assert_eq!((r.body(false), r.close), (Framing::UntilClose, true));
        let r = parse(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n").unwrap();
        assert_eq!(r.body(false), Framing::Empty);
        let r =
            parse(b"HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n").unwrap();
        assert!(r.close);
        for bad in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"HTTX/1.1 200 OK\r\n\r\n",
        ] {
            assert!(parse(bad).is_err(), "{}", bad.escape_ascii());
        }
        let mut r = ResponseHead::default();
        assert_eq!(r.parse(b"HTTP/1.1 200 OK\r\nContent-Len"), Ok(false));
    }

    #[test]
    fn status_lines_and_fields_as_nginx_reads_them() {
        let r =
            parse(b"HTTP/1.1 403.1 Forbidden\r\nHTTP/1.1 403\r\nX@Y: 1\r\nX_Z: 2\r\n\r\n").unwrap();
        assert_eq!(r.status, 403);
        let names: Vec<&[u8]> = r
            .headers
            .iter()
            .map(|h| {
                h.name
                    .of(b"HTTP/1.1 403.1 Forbidden\r\nHTTP/1.1 403\r\nX@Y: 1\r\nX_Z: 2\r\n\r\n")
            })
            .collect();
        assert_eq!(names, [&b"X@Y"[..], b"X_Z"]);
        let r = parse(b"HTTP/1.1  204\n\n").unwrap();
        assert_eq!((r.status, r.http11, r.close), (204, true, false));
        let r = parse(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n").unwrap();
        assert!(
            r.close,
            "HTTP/1.0 connections are not kept, as nginx keeps none"
        );
        for bad in [
            &b"HTTP/1.1 20 OK\r\n\r\n"[..],
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/01.1 200 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\rX\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n folded\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nX Y: 1\r\n\r\n",
        ] {
            assert!(parse(bad).is_err(), "{}", bad.escape_ascii());
        }
    }

    #[test]
    fn a_trickled_head_is_searched_once() {
        let mut raw = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..2000 {
            raw.extend_from_slice(format!("X-{i}: {}\r\n", "v".repeat(20)).as_bytes());
        }
        raw.extend_from_slice(b"\r\n");
        let mut r = ResponseHead::default();
        let mut last = 0;
        for n in 1..raw.len() {
            assert_eq!(r.parse(&raw[..n]), Ok(false));
            assert!(r.scanned >= last && r.scanned <= n);
            last = r.scanned;
        }
        assert_eq!(r.parse(&raw), Ok(true));
        assert_eq!(r.headers.len(), 2000);
    }
}
