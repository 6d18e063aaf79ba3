//! A backend's response head: parsed once (httparse), with the framing
//! rules nginx applies to upstreams (`ngx_http_upstream` and
//! `ngx_http_proxy_module`): two `Content-Length` lines, one that is not a
//! number, `Content-Length` with `Transfer-Encoding`, or a coding other
//! than `chunked` make the response invalid (502, blamed on the backend,
//! as a bad head).

use super::head::{parse_length, Header, Span, MAX_HEADERS};

/// How the response's body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    /// No body (HEAD, 1xx, 204, 304, or `Content-Length: 0`).
    Empty,
    /// This many bytes.
    Length(u64),
    /// Chunked.
    Chunked,
    /// Until the backend closes the connection.
    UntilClose,
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
    /// HTTP/1.1 (else 1.0: the connection closes after it unless
    /// `Connection: keep-alive`).
    pub http11: bool,
    /// `Connection: close` (or HTTP/1.0 without `keep-alive`).
    pub close: bool,
    /// `Content-Length`.
    pub content_length: Option<u64>,
    /// `Transfer-Encoding: chunked`.
    pub chunked: bool,
}

/// Why a response head is invalid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadResponse(pub &'static str);

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

    /// Parses the head at the start of `buf`: `Ok(false)` while it is
    /// incomplete.
    pub fn parse(&mut self, buf: &[u8]) -> Result<bool, BadResponse> {
        let mut raw = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut r = httparse::Response::new(&mut raw);
        let len = match r.parse(buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(false),
            Err(_) => return Err(BadResponse("a malformed response head")),
        };
        let base = buf.as_ptr() as usize;
        let span = |s: &[u8]| {
            let start = s.as_ptr() as usize - base;
            Span {
                start: start as u32,
                end: (start + s.len()) as u32,
            }
        };
        self.status = r.code.unwrap_or(0);
        self.reason = r.reason.map_or(Span::default(), |s| span(s.as_bytes()));
        self.http11 = r.version == Some(1);
        self.len = len;
        self.headers.clear();
        self.content_length = None;
        self.chunked = false;
        let (mut lengths, mut codings, mut keep_alive) = (0, 0, false);
        self.close = false;
        for h in r.headers.iter() {
            let (name, value) = (h.name.as_bytes(), h.value);
            if name.eq_ignore_ascii_case(b"content-length") {
                lengths += 1;
                self.content_length = Some(
                    parse_length(value.trim_ascii())
                        .ok_or(BadResponse("an invalid Content-Length from the backend"))?,
                );
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                codings += 1;
                if !value.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                    return Err(BadResponse("a Transfer-Encoding other than chunked"));
                }
                self.chunked = true;
            } else if name.eq_ignore_ascii_case(b"connection") {
                for t in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                    self.close |= t.eq_ignore_ascii_case(b"close");
                    keep_alive |= t.eq_ignore_ascii_case(b"keep-alive");
                }
            }
            self.headers.push(Header {
                name: span(name),
                value: span(value),
            });
        }
        if lengths > 1 || codings > 1 {
            return Err(BadResponse(
                "a repeated Content-Length or Transfer-Encoding",
            ));
        }
        if lengths > 0 && codings > 0 {
            return Err(BadResponse("Content-Length and Transfer-Encoding together"));
        }
        if !self.http11 && !keep_alive {
            self.close = true;
        }
        Ok(true)
    }

    /// How the body after this head is delimited, for a request of
    /// method `head_request` (HEAD).
    pub fn body(&self, head_request: bool) -> BodyKind {
        if head_request
            || (100..200).contains(&self.status)
            || self.status == 204
            || self.status == 304
        {
            BodyKind::Empty
        } else if self.chunked {
            BodyKind::Chunked
        } else {
            match self.content_length {
                Some(0) => BodyKind::Empty,
                Some(n) => BodyKind::Length(n),
                None => BodyKind::UntilClose,
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &[u8]) -> Result<ResponseHead, BadResponse> {
        let mut r = ResponseHead::default();
        assert!(r.parse(raw)?);
        Ok(r)
    }

    #[test]
    fn framing_as_nginx_reads_it() {
        let r = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc").unwrap();
        assert_eq!(
            (r.status, r.len, r.body(false)),
            (200, 38, BodyKind::Length(3))
        );
        assert_eq!(r.body(true), BodyKind::Empty);
        let r = parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n").unwrap();
        assert_eq!(r.body(false), BodyKind::Chunked);
        let r = parse(b"HTTP/1.0 200 OK\r\n\r\n").unwrap();
        assert_eq!((r.body(false), r.close), (BodyKind::UntilClose, true));
        let r = parse(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n").unwrap();
        assert_eq!(r.body(false), BodyKind::Empty);
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
}
