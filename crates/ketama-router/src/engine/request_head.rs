//! The one reader of an HTTP/1 request head: read once, incrementally, as
//! its bytes arrive, into positions in the connection's buffer (no header
//! map, no copy, no allocation once the connection's list of header
//! positions has grown). Its rules are nginx 1.22's, so that a backend is
//! handed what nginx would hand it:
//!
//! - empty lines (any `CR` and `LF` bytes) before the request line are skipped and
//!   given back to the caller to drop ([`Reader::blank`]): a client
//!   sending nothing else costs no memory, and every limit counts from
//!   the request line;
//! - every line ends at `LF`, with optional `CR`s before it; a `CR`
//!   followed by anything else is refused (400) as soon as it is seen;
//! - the request line is read by [`crate::reqline`] (nginx's rules: 400,
//!   or 505 for a major version over 1);
//! - header lines by [`super::fields`] (nginx's `ngx_http_parse_header_line`):
//!   a line nginx ignores (a name byte outside `A-Z a-z 0-9 -`, `_`
//!   unless `underscores_in_headers`) is neither read nor forwarded, nor
//!   is a field `strip_request_headers` names; a second of a field nginx
//!   takes once ([`super::fields::UNIQUE`]) and a `Host` nginx refuses are
//!   400;
//! - after the last line, nginx's checks in nginx's order: HTTP/1.1
//!   without `Host` 400, a `Content-Length` that is not a number 400,
//!   `Transfer-Encoding` on HTTP/1.0 400, `chunked` with `Content-Length`
//!   400, any other coding 501, `CONNECT` and `TRACE` 405;
//! - a head longer than `max_header_bytes` (from its request line) is
//!   refused as soon as it passes the limit: 414 while still in its
//!   request line, else 431. Limits are in bytes only: any number of
//!   lines and tokens fits in them, as in nginx.
//!
//! Cost: each byte is looked at a bounded number of times (a search for
//! the line's end from where the last read stopped, then one pass over
//! the complete line), so a head trickled a byte at a time costs what one
//! sent whole costs.

use super::fields::{self, ConnectionType, Line, UNIQUE};
use crate::reqline::{self, LineError};

/// A piece of the connection's buffer: `start..end`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// The span `start..end`.
    pub fn new(start: usize, end: usize) -> Span {
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

/// One header line: its name and its value (without the spaces around
/// it).
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
    /// 400, 405, 414, 431, 501 or 505.
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
pub(crate) const DUPLICATE: Refusal = refusal(
    400,
    "duplicate_header",
    "a header that may appear once is repeated (Expect, Authorization, If-*, Content-Range)",
);
pub(crate) const DUPLICATE_FRAMING: Refusal = refusal(
    400,
    "bad_framing",
    "Host, Content-Length or Transfer-Encoding is repeated: send it once",
);
pub(crate) const BAD_HOST: Refusal = refusal(400, "bad_host", "an invalid Host header");
pub(crate) const LENGTH_INVALID: Refusal = refusal(
    400,
    "bad_framing",
    "Content-Length is not a number: send it once, as one number",
);
const CODING_10: Refusal = refusal(
    400,
    "bad_framing",
    "Transfer-Encoding in an HTTP/1.0 request",
);
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
pub(crate) const NO_HOST: Refusal = refusal(
    400,
    "bad_framing",
    "an HTTP/1.1 request needs a Host header",
);
pub(crate) const METHOD: Refusal = refusal(
    405,
    "method_not_allowed",
    "CONNECT and TRACE are not allowed",
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
    /// The header lines read (those nginx ignores, and those
    /// `strip_request_headers` names, left out), in order.
    pub headers: Vec<Header>,
    /// The whole head's length, its final empty line included.
    pub len: usize,
    /// `Content-Length`, when sent.
    pub content_length: Option<u64>,
    /// `Transfer-Encoding: chunked`.
    pub chunked: bool,
    /// The `Host` line (its index in `headers`).
    pub host: Option<usize>,
    /// What the `Connection` lines ask, as nginx reads them.
    pub connection: Option<ConnectionType>,
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

    /// Whether the connection may serve another request after this one,
    /// as nginx decides: `Connection` (see [`fields::connection_type`])
    /// when it says, else HTTP/1.1 keeps and HTTP/1.0 closes.
    pub fn wants_keep_alive(&self) -> bool {
        match self.connection {
            Some(ConnectionType::Close) => false,
            Some(ConnectionType::KeepAlive) => true,
            None => self.http11,
        }
    }

    /// Whether a body follows the head.
    pub fn has_body(&self) -> bool {
        self.chunked || self.content_length.is_some_and(|n| n > 0)
    }
}

/// How heads are read: the `[server]` settings that shape them (borrowed:
/// made per request at no cost).
#[derive(Clone, Copy, Debug)]
pub struct Rules<'a> {
    /// `max_header_bytes`.
    pub max_head: usize,
    /// `underscores_in_headers`: `_` is a name byte.
    pub underscores: bool,
    /// `strip_request_headers`: fields left out (any case).
    pub strip: &'a [String],
}

impl Rules<'_> {
    /// nginx's defaults, with heads of at most `max_head` bytes.
    pub fn new(max_head: usize) -> Rules<'static> {
        Rules {
            max_head,
            underscores: false,
            strip: &[],
        }
    }

    /// The rules a `[server]` section sets.
    pub fn of(server: &ketama_config::model::ServerSection) -> Rules<'_> {
        Rules {
            max_head: server.max_header_bytes,
            underscores: server.underscores_in_headers,
            strip: &server.strip_request_headers,
        }
    }

    /// Whether `strip_request_headers` names `name` (any case).
    pub fn strips(&self, name: &[u8]) -> bool {
        self.strip
            .iter()
            .any(|s| name.eq_ignore_ascii_case(s.as_bytes()))
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
    /// Fields of [`UNIQUE`] seen, by index.
    unique: u16,
    /// The `Content-Length` value was not a number.
    length_invalid: bool,
    /// The `Transfer-Encoding` value, when sent: exactly `chunked`.
    coding: Option<bool>,
}

/// Reads one head at a time from the start of a buffer, as its bytes
/// arrive; see the module docs.
#[derive(Debug)]
pub struct Reader {
    phase: Phase,
    /// Bytes of the buffer already looked at.
    scanned: usize,
    framing: Framing,
}

impl Default for Reader {
    fn default() -> Self {
        Reader::new()
    }
}

impl Reader {
    /// A reader at the start of a head.
    pub fn new() -> Reader {
        Reader {
            phase: Phase::Start,
            scanned: 0,
            framing: Framing::default(),
        }
    }

    /// Starts over for the next head (its bytes from the buffer's start).
    pub fn reset(&mut self) {
        *self = Reader::new();
    }

    /// Whether any byte of a head (beyond empty lines) has been seen.
    pub fn started(&self) -> bool {
        !matches!(self.phase, Phase::Start)
    }

    /// Bytes at the buffer's start that are empty lines before the request
    /// line, for the caller to drop (then [`Reader::dropped`]): nothing
    /// is kept of them.
    pub fn blank(&self) -> usize {
        match self.phase {
            Phase::Start => self.scanned,
            Phase::Line { start } => start,
            _ => 0,
        }
    }

    /// The caller dropped the [`Reader::blank`] bytes from the buffer's
    /// start.
    pub fn dropped(&mut self) {
        let n = self.blank();
        self.scanned -= n;
        if let Phase::Line { start } = &mut self.phase {
            *start -= n;
        }
    }

    /// Reads what `buf` holds past what was read before. `Ok(true)`: the
    /// head is complete (`head` holds it; `head.len` bytes of `buf`);
    /// `Ok(false)`: more bytes are needed.
    pub fn advance(
        &mut self,
        buf: &[u8],
        head: &mut Head,
        rules: &Rules<'_>,
    ) -> Result<bool, Refusal> {
        loop {
            match self.phase {
                Phase::Done => return Ok(true),
                Phase::Start => {
                    if self.scanned == 0 {
                        head.clear();
                    }
                    // Empty lines: nginx skips every CR and LF here.
                    loop {
                        match buf.get(self.scanned) {
                            None => return Ok(false),
                            Some(b'\r' | b'\n') => self.scanned += 1,
                            Some(_) => break,
                        }
                    }
                    self.phase = Phase::Line {
                        start: self.scanned,
                    };
                }
                Phase::Line { start } => {
                    let max = start + rules.max_head;
                    // nginx reads the line a byte at a time: a version it
                    // refuses before the stray CR is its answer.
                    let found = fields::find_lf(buf, &mut self.scanned, None).map_err(|cr| {
                        match reqline::parse(&buf[start..cr]) {
                            Err(LineError::Version) => BAD_VERSION,
                            _ => BAD_LINE,
                        }
                    });
                    let Some(lf) = found? else {
                        return if buf.len() > max {
                            Err(too_long(&buf[start..]))
                        } else {
                            Ok(false)
                        };
                    };
                    // One CR ends the line; any other is the line's (and
                    // refused by its reader).
                    let end = if lf > start && buf[lf - 1] == b'\r' {
                        lf - 1
                    } else {
                        lf
                    };
                    if lf + 1 > max {
                        return Err(too_long(&buf[start..end]));
                    }
                    self.request_line(buf, start, end, head)?;
                    self.scanned = lf + 1;
                    self.phase = Phase::Headers { line_start: lf + 1 };
                }
                Phase::Headers { line_start } => {
                    let max = head.line.start as usize + rules.max_head;
                    let found = fields::find_lf(buf, &mut self.scanned, Some(line_start));
                    let Some(lf) = found.map_err(|_| BAD_HEADER)? else {
                        return if buf.len() > max {
                            Err(TOO_LARGE)
                        } else {
                            Ok(false)
                        };
                    };
                    if lf + 1 > max {
                        return Err(TOO_LARGE);
                    }
                    self.scanned = lf + 1;
                    let line = &buf[line_start..lf];
                    match fields::read_line(line, rules.underscores, false) {
                        Err(_) => return Err(BAD_HEADER),
                        Ok(Line::End) => {
                            head.len = lf + 1;
                            self.phase = Phase::Done;
                            self.finish(buf, head)?;
                            return Ok(true);
                        }
                        Ok(Line::Field {
                            name_end,
                            value_start,
                            value_end,
                            ignored,
                        }) => {
                            let name = &line[..name_end];
                            if !ignored && !rules.strips(name) {
                                let at = |i| line_start + i;
                                let h = Header {
                                    name: Span::new(line_start, at(name_end)),
                                    value: Span::new(at(value_start), at(value_end)),
                                };
                                self.note(name, &line[value_start..value_end], head)?;
                                head.headers.push(h);
                            }
                        }
                    }
                    self.phase = Phase::Headers { line_start: lf + 1 };
                }
            }
        }
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

    /// Records what a field says of framing and the connection, refusing
    /// what nginx refuses at the line: a second of a [`UNIQUE`] field, an
    /// invalid `Host`.
    fn note(&mut self, name: &[u8], value: &[u8], head: &mut Head) -> Result<(), Refusal> {
        let f = &mut self.framing;
        if let Some(i) = UNIQUE.iter().position(|u| name.eq_ignore_ascii_case(u)) {
            if f.unique & (1 << i) != 0 {
                let framing = [&b"host"[..], b"content-length", b"transfer-encoding"];
                return Err(if framing.contains(&UNIQUE[i]) {
                    DUPLICATE_FRAMING
                } else {
                    DUPLICATE
                });
            }
            f.unique |= 1 << i;
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            match fields::parse_length(value) {
                Some(n) => head.content_length = Some(n),
                None => f.length_invalid = true,
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            f.coding = Some(value.eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case(b"host") {
            if !fields::valid_host(value) {
                return Err(BAD_HOST);
            }
            head.host = Some(head.headers.len());
        } else if name.eq_ignore_ascii_case(b"connection") {
            if let Some(t) = fields::connection_type(value) {
                head.connection = Some(t);
            }
        } else if name.eq_ignore_ascii_case(b"expect") {
            head.expect_continue = value.eq_ignore_ascii_case(b"100-continue");
        }
        Ok(())
    }

    /// nginx's checks after the last line, in its order
    /// (`ngx_http_process_request_header`).
    fn finish(&mut self, buf: &[u8], head: &mut Head) -> Result<(), Refusal> {
        let f = self.framing;
        if head.http11 && head.host.is_none() {
            return Err(NO_HOST);
        }
        if f.length_invalid {
            return Err(LENGTH_INVALID);
        }
        if let Some(chunked) = f.coding {
            if !head.http11 {
                return Err(CODING_10);
            }
            if !chunked {
                return Err(CODING);
            }
            if head.content_length.is_some() {
                return Err(BOTH);
            }
            head.chunked = true;
        }
        if matches!(head.method.of(buf), b"CONNECT" | b"TRACE") {
            return Err(METHOD);
        }
        Ok(())
    }
}

/// A request line over the limit: 414, unless nginx, reading it a byte
/// at a time, would have refused a byte of it first.
fn too_long(prefix: &[u8]) -> Refusal {
    match reqline::refused_prefix(prefix) {
        None => LINE_TOO_LONG,
        Some(LineError::Version) => BAD_VERSION,
        Some(LineError::Invalid) => BAD_LINE,
    }
}

#[cfg(test)]
mod tests;
