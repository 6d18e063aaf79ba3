//! The one reader of an HTTP/1 request head: read once, incrementally, as
//! its bytes arrive, into positions in the connection's buffer (no header
//! map, no copy, no allocation once the connection's list of header
//! positions has grown).
//!
//! Its rules are nginx's where a peer could read a head otherwise, and
//! httparse's (what the router's HTTP/2 and older paths parse with) for a
//! header line's syntax:
//!
//! - empty lines (`CRLF` or `LF`) before the request line are skipped;
//! - every line ends at `LF`, with an optional `CR` before it; a `CR`
//!   anywhere else is refused (400); the head ends at the first empty
//!   line, so `...\n\r\n` and `...\n\n` end it as `...\r\n\r\n` does;
//! - the request line is read by [`crate::reqline`] (nginx 1.22's rules:
//!   400, or 505 for a major version over 1);
//! - a header line is a name of token characters, a colon right after it,
//!   optional whitespace, then a value of visible characters, spaces,
//!   tabs and bytes over 0x7f; a line starting with whitespace (an
//!   obsolete fold) is refused; at most [`MAX_HEADERS`] lines;
//! - framing, after the last line ([`crate::framing`]'s table): a
//!   repeated or listed `Content-Length` 400, a `Content-Length` that is
//!   not a number 400, with `Transfer-Encoding` 400, a coding other than
//!   one lone `chunked` 501, two `Host` lines 400, HTTP/1.1 without `Host`
//!   400;
//! - a head longer than `max_header_bytes` is refused as soon as it
//!   passes the limit: 414 while still in its request line, else 431.
//!
//! Cost: each byte is looked at a bounded number of times (a search for
//! the line's end from where the last read stopped, then one pass over
//! the complete line), so a head trickled a byte at a time costs what one
//! sent whole costs.

use crate::reqline::{self, LineError};

/// At most this many header lines (httparse's array in Pingora's reader).
pub const MAX_HEADERS: usize = 256;

/// A piece of the connection's buffer: `start..end`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    /// The bytes of `buf` it covers.
    #[inline]
    pub fn of<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        &buf[self.start as usize..self.end as usize]
    }
}

/// One header line: its name and its value (without the whitespace
/// around it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The name, as sent.
    pub name: Span,
    /// The value, trimmed.
    pub value: Span,
}

/// Why a head is refused: the status nginx answers with, and the reason
/// `ketama_client_errors_total` counts it under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// 400, 414, 431, 501 or 505.
    pub status: u16,
    /// The counter's reason (`bad_request_line`, `head_too_large`, ...).
    pub reason: &'static str,
    /// What was wrong, for the response body.
    pub why: &'static str,
}

const fn refusal(status: u16, reason: &'static str, why: &'static str) -> Refusal {
    Refusal {
        status,
        reason,
        why,
    }
}

const BAD_LINE: Refusal = refusal(400, "bad_request_line", "a request line nginx refuses");
const BAD_VERSION: Refusal = refusal(505, "bad_request_line", "an HTTP version other than 1.x");
const LINE_TOO_LONG: Refusal = refusal(
    414,
    "request_line_too_long",
    "the request line is over server.max_header_bytes",
);
const TOO_LARGE: Refusal = refusal(
    431,
    "head_too_large",
    "the request head is over server.max_header_bytes",
);
const BAD_HEADER: Refusal = refusal(400, "bad_framing", "a malformed header line");
const BAD_CR: Refusal = refusal(400, "bad_framing", "a CR that does not end a line");
const TOO_MANY: Refusal = refusal(400, "bad_framing", "more than 256 header lines");
const LENGTH_REPEATED: Refusal = refusal(
    400,
    "bad_framing",
    "Content-Length is repeated or a list: send it once, as one number",
);
const LENGTH_INVALID: Refusal = refusal(400, "bad_framing", "Content-Length is not a number");
const BOTH: Refusal = refusal(
    400,
    "bad_framing",
    "Transfer-Encoding and Content-Length together: send one of them",
);
const CODING: Refusal = refusal(
    501,
    "bad_framing",
    "only Transfer-Encoding: chunked is implemented, alone",
);
const HOSTS: Refusal = refusal(400, "bad_framing", "Host is repeated: send it once");
const NO_HOST: Refusal = refusal(
    400,
    "bad_framing",
    "an HTTP/1.1 request needs a Host header",
);

/// A request head as read: positions in the connection's buffer, and the
/// facts the engine acts on. Reused from request to request.
#[derive(Debug, Default)]
pub struct Head {
    /// The request line (without its line end).
    pub line: Span,
    /// The method.
    pub method: Span,
    /// The target as sent.
    pub target: Span,
    /// nginx's `$request_uri` (see [`reqline::RequestLine`]).
    pub request_uri: Span,
    /// An absolute-form target's authority.
    pub authority: Option<Span>,
    /// `http://host?q`: forwarded as `/` and the query.
    pub empty_path: bool,
    /// HTTP/1.1 (or a later 1.x); HTTP/1.0 otherwise.
    pub http11: bool,
    /// The header lines, in order.
    pub headers: Vec<Header>,
    /// The whole head's length, its final empty line included.
    pub len: usize,
    /// `Content-Length`, when sent.
    pub content_length: Option<u64>,
    /// `Transfer-Encoding: chunked`.
    pub chunked: bool,
    /// The `Host` line (its index in `headers`).
    pub host: Option<usize>,
    /// `Connection: close` (any case, among other tokens).
    pub close: bool,
    /// `Connection: keep-alive`.
    pub keep_alive: bool,
    /// `Connection: upgrade`, with an `Upgrade` line.
    pub upgrade: bool,
    /// `Expect: 100-continue`.
    pub expect_continue: bool,
}

impl Head {
    fn clear(&mut self) {
        self.headers.clear();
        let headers = std::mem::take(&mut self.headers);
        *self = Head {
            headers,
            ..Head::default()
        };
    }

    /// The first value of header `name` (any case), if sent.
    pub fn header<'a>(&self, buf: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
        self.headers
            .iter()
            .find(|h| h.name.of(buf).eq_ignore_ascii_case(name))
            .map(|h| h.value.of(buf))
    }

    /// Whether the connection may serve another request after this one
    /// (HTTP/1.1 unless `Connection: close`; HTTP/1.0 only with
    /// `Connection: keep-alive`).
    pub fn wants_keep_alive(&self) -> bool {
        if self.http11 {
            !self.close
        } else {
            self.keep_alive && !self.close
        }
    }

    /// Whether a body follows the head.
    pub fn has_body(&self) -> bool {
        self.chunked || self.content_length.is_some_and(|n| n > 0)
    }
}

/// Where the reader is within a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Skipping empty lines before the request line.
    Start,
    /// In the request line, which began here.
    Line { start: usize },
    /// In the header lines; the current one began here.
    Headers { line_start: usize },
    /// The head is complete.
    Done,
}

/// What the reader has seen of the framing lines so far.
#[derive(Clone, Copy, Debug, Default)]
struct Framing {
    lengths: u32,
    length_list: bool,
    length_invalid: bool,
    codings: u32,
    lone_chunked: bool,
    hosts: u32,
    upgrade_line: bool,
}

/// Reads one head at a time from the start of a buffer, as its bytes
/// arrive; see the module docs.
#[derive(Debug)]
pub struct Reader {
    phase: Phase,
    /// Bytes of the buffer already looked at.
    scanned: usize,
    framing: Framing,
    max_head: usize,
}

impl Reader {
    /// A reader of heads of at most `max_head` bytes.
    pub fn new(max_head: usize) -> Reader {
        Reader {
            phase: Phase::Start,
            scanned: 0,
            framing: Framing::default(),
            max_head,
        }
    }

    /// Starts over for the next head (its bytes from the buffer's start).
    pub fn reset(&mut self, max_head: usize) {
        *self = Reader::new(max_head);
    }

    /// Whether any byte of a head (beyond empty lines) has been seen.
    pub fn started(&self) -> bool {
        !matches!(self.phase, Phase::Start)
    }

    /// Reads what `buf` holds past what was read before. `Ok(true)`: the
    /// head is complete (`head` holds it; `head.len` bytes of `buf`);
    /// `Ok(false)`: more bytes are needed.
    pub fn advance(&mut self, buf: &[u8], head: &mut Head) -> Result<bool, Refusal> {
        loop {
            match self.phase {
                Phase::Done => return Ok(true),
                Phase::Start => {
                    if self.scanned == 0 {
                        head.clear();
                    }
                    // Empty lines: CR LF or LF.
                    loop {
                        match buf.get(self.scanned) {
                            None => return Ok(false),
                            Some(b'\n') => self.scanned += 1,
                            Some(b'\r') => match buf.get(self.scanned + 1) {
                                None => return Ok(false),
                                Some(b'\n') => self.scanned += 2,
                                Some(_) => return Err(BAD_LINE),
                            },
                            Some(_) => break,
                        }
                    }
                    self.phase = Phase::Line {
                        start: self.scanned,
                    };
                }
                Phase::Line { start } => {
                    let found = self.find_lf(buf).map_err(|_| BAD_LINE)?;
                    let Some(lf) = found else {
                        return if buf.len() > self.max_head {
                            Err(LINE_TOO_LONG)
                        } else {
                            Ok(false)
                        };
                    };
                    if lf + 1 > self.max_head {
                        return Err(LINE_TOO_LONG);
                    }
                    let end = line_end(buf, start, lf);
                    self.request_line(buf, start, end, head)?;
                    self.scanned = lf + 1;
                    self.phase = Phase::Headers { line_start: lf + 1 };
                }
                Phase::Headers { line_start } => {
                    let Some(lf) = self.find_lf(buf)? else {
                        return if buf.len() > self.max_head {
                            Err(TOO_LARGE)
                        } else {
                            Ok(false)
                        };
                    };
                    if lf + 1 > self.max_head {
                        return Err(TOO_LARGE);
                    }
                    let end = line_end(buf, line_start, lf);
                    self.scanned = lf + 1;
                    if end == line_start {
                        head.len = lf + 1;
                        self.phase = Phase::Done;
                        self.finish(buf, head)?;
                        return Ok(true);
                    }
                    self.header_line(buf, line_start, end, head)?;
                    self.phase = Phase::Headers { line_start: lf + 1 };
                }
            }
        }
    }

    /// The next LF at or after the scan's position; the scan moves to the
    /// end of `buf` when there is none, so no byte is searched twice. A CR
    /// followed by anything but LF is refused at once, as nginx and
    /// httparse refuse it.
    fn find_lf(&mut self, buf: &[u8]) -> Result<Option<usize>, Refusal> {
        let from = self.scanned;
        for (i, &b) in buf[from..].iter().enumerate() {
            match b {
                b'\n' => return Ok(Some(from + i)),
                b'\r' if buf.get(from + i + 1).is_some_and(|&n| n != b'\n') => return Err(BAD_CR),
                _ => {}
            }
        }
        // A CR last may yet be followed by its LF: looked at again.
        self.scanned = if buf.last() == Some(&b'\r') {
            buf.len() - 1
        } else {
            buf.len()
        };
        Ok(None)
    }

    fn request_line(
        &mut self,
        buf: &[u8],
        start: usize,
        end: usize,
        head: &mut Head,
    ) -> Result<(), Refusal> {
        let line = &buf[start..end];
        let l = reqline::parse(line).map_err(|e| match e {
            LineError::Invalid => BAD_LINE,
            LineError::Version => BAD_VERSION,
        })?;
        let at = |piece: &[u8]| {
            let off = piece.as_ptr() as usize - line.as_ptr() as usize + start;
            Span::new(off, off + piece.len())
        };
        head.line = Span::new(start, end);
        head.method = at(l.method);
        head.target = at(l.target);
        head.request_uri = at(l.request_uri);
        head.authority = l.authority.map(at);
        head.empty_path = l.empty_path;
        head.http11 = l.http11;
        Ok(())
    }

    fn header_line(
        &mut self,
        buf: &[u8],
        start: usize,
        end: usize,
        head: &mut Head,
    ) -> Result<(), Refusal> {
        let line = &buf[start..end];
        let name_len = line
            .iter()
            .position(|&b| !is_tchar(b))
            .unwrap_or(line.len());
        if name_len == 0 || line.get(name_len) != Some(&b':') {
            return Err(BAD_HEADER);
        }
        let mut v = name_len + 1;
        while matches!(line.get(v), Some(b' ' | b'\t')) {
            v += 1;
        }
        let mut e = line.len();
        if !line[v..]
            .iter()
            .all(|&b| b == b'\t' || b >= 0x20 && b != 0x7f)
        {
            return Err(BAD_HEADER);
        }
        while e > v && matches!(line[e - 1], b' ' | b'\t') {
            e -= 1;
        }
        if head.headers.len() == MAX_HEADERS {
            return Err(TOO_MANY);
        }
        let (name, value) = (&line[..name_len], &line[v..e]);
        self.note(name, value, head);
        head.headers.push(Header {
            name: Span::new(start, start + name_len),
            value: Span::new(start + v, start + e),
        });
        Ok(())
    }

    /// Records what a header line says of framing and the connection.
    fn note(&mut self, name: &[u8], value: &[u8], head: &mut Head) {
        let f = &mut self.framing;
        if name.eq_ignore_ascii_case(b"content-length") {
            f.lengths += 1;
            f.length_list |= value.contains(&b',');
            match parse_length(value) {
                Some(n) => head.content_length = Some(n),
                None => f.length_invalid = true,
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            f.codings += 1;
            f.lone_chunked = value.eq_ignore_ascii_case(b"chunked");
        } else if name.eq_ignore_ascii_case(b"host") {
            f.hosts += 1;
            head.host = Some(head.headers.len());
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                head.close |= token.eq_ignore_ascii_case(b"close");
                head.keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                head.upgrade |= token.eq_ignore_ascii_case(b"upgrade");
            }
        } else if name.eq_ignore_ascii_case(b"upgrade") {
            f.upgrade_line = true;
        } else if name.eq_ignore_ascii_case(b"expect") {
            head.expect_continue = value.eq_ignore_ascii_case(b"100-continue");
        }
    }

    /// The framing rules, in [`crate::framing`]'s order.
    fn finish(&mut self, _buf: &[u8], head: &mut Head) -> Result<(), Refusal> {
        let f = self.framing;
        if f.lengths > 1 || f.length_list {
            return Err(LENGTH_REPEATED);
        }
        if f.codings > 0 && f.lengths > 0 {
            return Err(BOTH);
        }
        if f.codings > 1 || (f.codings == 1 && !f.lone_chunked) {
            return Err(CODING);
        }
        if f.hosts > 1 {
            return Err(HOSTS);
        }
        if head.http11 && f.hosts == 0 {
            return Err(NO_HOST);
        }
        if f.length_invalid {
            return Err(LENGTH_INVALID);
        }
        head.chunked = f.codings == 1;
        head.upgrade &= f.upgrade_line;
        Ok(())
    }
}

/// The end of a line whose LF is at `lf`: before the CR when one is
/// there.
fn line_end(buf: &[u8], start: usize, lf: usize) -> usize {
    if lf > start && buf[lf - 1] == b'\r' {
        lf - 1
    } else {
        lf
    }
}

/// RFC 9110's token characters (a header name's).
pub fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A `Content-Length` value: decimal digits only, as nginx reads it (no
/// sign, no space inside), within `i64` (nginx's `off_t`).
pub fn parse_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = v.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
    (n <= i64::MAX as u64).then_some(n)
}

#[cfg(test)]
mod tests;
