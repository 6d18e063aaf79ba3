//! Bodies, either direction: how a message's body is delimited
//! ([`Framing`]), and reading one from an HTTP/1 byte stream
//! ([`BodyReader`]: a length, chunks, or until the close), a data piece at
//! a time, never copied; and chunked framing written anew.
//!
//! `Transfer-Encoding: chunked` is read as nginx 1.22 reads it
//! (`ngx_http_parse_chunked`, state for state): hexadecimal sizes (any
//! number of leading zeros, at most `i64`'s range), then after a `;`, a
//! space or a tab an extension of any bytes up to the line's end; each
//! chunk's data followed by `CRLF` (or `LF`); trailer lines of any bytes
//! until an empty one. An HTTP/1 body's trailers are dropped, as nginx
//! drops them; an HTTP/2 peer's go on in [`push_last_chunk`].

use std::ops::Range;

/// How a message's body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body.
    Empty,
    /// This many bytes.
    Length(u64),
    /// Chunked.
    Chunked,
    /// Until the sender closes the connection (a response only).
    UntilClose,
}

/// What went wrong in a chunked body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkError(pub &'static str);

/// Where the reader is (nginx's states, by the same names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Before a chunk's size.
    Start,
    /// In a chunk's size.
    Size { size: u64 },
    /// In a chunk's extension (after `;`, a space or a tab).
    Extension { size: u64 },
    /// `CR` after a chunk's size line; `LF` next.
    ExtensionAlmostDone { size: u64 },
    /// In a chunk's data.
    Data { left: u64 },
    /// After a chunk's data: `CR LF` or `LF`.
    AfterData,
    /// `CR` after the data; `LF` next.
    AfterDataAlmostDone,
    /// In the last chunk's extension.
    LastExtension,
    /// `CR` after the last chunk's line; `LF` next.
    LastExtensionAlmostDone,
    /// At the start of a trailer line (or the final empty one).
    Trailer,
    /// `CR` at the start of a trailer line; `LF` next ends the body.
    TrailerAlmostDone,
    /// In a trailer line.
    TrailerHeader,
    /// `CR` in a trailer line; `LF` next.
    TrailerHeaderAlmostDone,
    /// The body ended.
    Done,
}

/// A chunked body's reader; see the module docs.
#[derive(Clone, Debug)]
pub struct Chunked {
    state: State,
}

impl Default for Chunked {
    fn default() -> Self {
        Chunked {
            state: State::Start,
        }
    }
}

/// A size above this takes no more digits (nginx's bound:
/// `NGX_MAX_OFF_T_VALUE / 16`).
const MAX_SIZE: u64 = (i64::MAX as u64) / 16;

const BAD: ChunkError = ChunkError("invalid chunked framing");

impl Chunked {
    /// Whether the last chunk and the trailers have been read.
    pub fn done(&self) -> bool {
        self.state == State::Done
    }

    /// Reads `input`, handing each piece of chunk data to `data`; returns
    /// how many bytes of `input` belong to the body (less than its length
    /// only once the body ended: the rest is what follows it). The tests'
    /// reader; the engine reads through [`BodyReader::next`].
    #[cfg(test)]
    pub fn feed(&mut self, input: &[u8], mut data: impl FnMut(&[u8])) -> Result<usize, ChunkError> {
        let mut at = 0;
        loop {
            let step = self.next(&input[at..])?;
            at += step.skip;
            if step.data > 0 {
                data(&input[at..at + step.data]);
                at += step.data;
            } else {
                return Ok(at);
            }
        }
    }

    /// The framing bytes at the start of `input`, then how much chunk data
    /// follows them there (0: none yet, or the body ended: see
    /// [`Chunked::done`]).
    pub fn next(&mut self, input: &[u8]) -> Result<Step, ChunkError> {
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            self.state = match self.state {
                State::Done => break,
                State::Data { left } => {
                    // `left` may exceed usize on 32 bits; the min keeps it
                    // within the input.
                    let n = left.min((input.len() - i) as u64) as usize;
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        State::AfterData
                    } else {
                        State::Data { left }
                    };
                    return Ok(Step { skip: i, data: n });
                }
                State::Start => match hex(b) {
                    Some(d) => State::Size { size: u64::from(d) },
                    None => return Err(ChunkError("a chunk size expected")),
                },
                State::Size { size } => {
                    if size > MAX_SIZE {
                        return Err(ChunkError("a chunk size too large"));
                    }
                    match (hex(b), size, b) {
                        (Some(d), _, _) => State::Size {
                            size: size * 16 + u64::from(d),
                        },
                        (None, 0, b'\r') => State::LastExtensionAlmostDone,
                        (None, 0, b'\n') => State::Trailer,
                        (None, 0, b';' | b' ' | b'\t') => State::LastExtension,
                        (None, _, b'\r') => State::ExtensionAlmostDone { size },
                        (None, _, b'\n') => State::Data { left: size },
                        (None, _, b';' | b' ' | b'\t') => State::Extension { size },
                        _ => return Err(ChunkError("a bad chunk size")),
                    }
                }
                State::Extension { size } => match b {
                    b'\r' => State::ExtensionAlmostDone { size },
                    b'\n' => State::Data { left: size },
                    _ => State::Extension { size },
                },
                State::ExtensionAlmostDone { size } => match b {
                    b'\n' => State::Data { left: size },
                    _ => return Err(ChunkError("a CR without LF after a chunk size")),
                },
                State::AfterData => match b {
                    b'\r' => State::AfterDataAlmostDone,
                    b'\n' => State::Start,
                    _ => return Err(ChunkError("chunk data longer than its size")),
                },
                State::AfterDataAlmostDone => match b {
                    b'\n' => State::Start,
                    _ => return Err(BAD),
                },
                State::LastExtension => match b {
                    b'\r' => State::LastExtensionAlmostDone,
                    b'\n' => State::Trailer,
                    _ => State::LastExtension,
                },
                State::LastExtensionAlmostDone => match b {
                    b'\n' => State::Trailer,
                    _ => return Err(BAD),
                },
                State::Trailer => match b {
                    b'\r' => State::TrailerAlmostDone,
                    b'\n' => State::Done,
                    _ => State::TrailerHeader,
                },
                State::TrailerAlmostDone => match b {
                    b'\n' => State::Done,
                    _ => return Err(BAD),
                },
                State::TrailerHeader => match b {
                    b'\r' => State::TrailerHeaderAlmostDone,
                    b'\n' => State::Trailer,
                    _ => State::TrailerHeader,
                },
                State::TrailerHeaderAlmostDone => match b {
                    b'\n' => State::Trailer,
                    _ => return Err(ChunkError("a CR without LF in a trailer")),
                },
            };
            i += 1;
        }
        Ok(Step { skip: i, data: 0 })
    }
}

/// What [`Chunked::next`] found: framing bytes, then data bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// Framing bytes first.
    pub skip: usize,
    /// Then this many bytes of chunk data.
    pub data: usize,
}

/// Reads a body from an HTTP/1 byte stream in its framing, a data piece
/// at a time (see [`BodyReader::next`]).
#[derive(Clone, Debug)]
pub struct BodyReader {
    decode: Decode,
}

#[derive(Clone, Debug)]
enum Decode {
    Length { left: u64 },
    Chunked(Chunked),
    UntilClose,
    Done,
}

impl BodyReader {
    /// A reader of a body framed so.
    pub fn new(framing: Framing) -> Self {
        let decode = match framing {
            Framing::Empty | Framing::Length(0) => Decode::Done,
            Framing::Length(n) => Decode::Length { left: n },
            Framing::Chunked => Decode::Chunked(Chunked::default()),
            Framing::UntilClose => Decode::UntilClose,
        };
        BodyReader { decode }
    }

    /// Whether the whole body was read (a body until the close: never,
    /// the close ends it).
    pub fn done(&self) -> bool {
        match &self.decode {
            Decode::Done => true,
            Decode::Chunked(c) => c.done(),
            _ => false,
        }
    }

    /// Whether the body runs until the connection's close.
    pub fn until_close(&self) -> bool {
        matches!(self.decode, Decode::UntilClose)
    }

    /// Data bytes still to come, when known.
    pub fn left(&self) -> Option<u64> {
        match &self.decode {
            Decode::Length { left } => Some(*left),
            Decode::Done => Some(0),
            _ => None,
        }
    }

    /// The next data piece in `input` (the bytes read and not yet
    /// consumed): how many bytes of `input` it uses (framing included),
    /// and where the data lies in them (empty: none yet, or the body
    /// ended).
    pub fn next(&mut self, input: &[u8]) -> Result<(usize, Range<usize>), ChunkError> {
        match &mut self.decode {
            Decode::Done => Ok((0, 0..0)),
            Decode::UntilClose => Ok((input.len(), 0..input.len())),
            Decode::Length { left } => {
                let n = (*left).min(input.len() as u64) as usize;
                *left -= n as u64;
                if *left == 0 {
                    self.decode = Decode::Done;
                }
                Ok((n, 0..n))
            }
            Decode::Chunked(c) => {
                let step = c.next(input)?;
                Ok((step.skip + step.data, step.skip..step.skip + step.data))
            }
        }
    }
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Writes the chunk header for `n` bytes of data (`{n:x}\r\n`) into `out`.
pub fn chunk_head(n: usize, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut i = digits.len();
    let mut v = n;
    loop {
        i -= 1;
        digits[i] = HEX[v & 15];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
    out.extend_from_slice(b"\r\n");
}

/// Appends `data` as one chunk. An empty piece writes nothing: a chunk of
/// size zero is the last-chunk, and writing one mid-body would end the
/// body early and leave what follows to be read as the next message.
pub fn push_chunk(data: &[u8], out: &mut Vec<u8>) {
    if data.is_empty() {
        return;
    }
    chunk_head(data.len(), out);
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// `trailers`' fields that may pass on in a trailer section
/// ([`super::fields::trailer_allowed`]), in order. (Here, not in
/// `fields`, which the fuzz targets compile without the `http` crate.)
pub fn allowed_trailers(
    trailers: Option<&http::HeaderMap>,
) -> impl Iterator<Item = (&http::HeaderName, &http::HeaderValue)> {
    trailers
        .into_iter()
        .flatten()
        .filter(|(n, _)| super::fields::trailer_allowed(n.as_str().as_bytes()))
}

/// Appends the end of a chunked body: the last chunk, then `trailers`'
/// fields that may stand in a trailer section ([`allowed_trailers`]; an
/// `http::HeaderValue` holds no CR, LF or NUL), then the empty line.
pub fn push_last_chunk(trailers: Option<&http::HeaderMap>, out: &mut Vec<u8>) {
    out.extend_from_slice(b"0\r\n");
    for (name, value) in allowed_trailers(trailers) {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The data of `body` and how much of it was the body, read in pieces
    /// of `step` bytes.
    fn read(body: &[u8], step: usize) -> Result<(Vec<u8>, usize), ChunkError> {
        let mut c = Chunked::default();
        let mut out = Vec::new();
        let mut used = 0;
        for piece in body.chunks(step) {
            let n = c.feed(piece, |d| out.extend_from_slice(d))?;
            used += n;
            if c.done() {
                break;
            }
        }
        assert!(c.done(), "{}", body.escape_ascii());
        Ok((out, used))
    }

    #[test]
    fn chunks_extensions_trailers_and_what_follows() {
        let body =
            b"5;name=value\r\nhello\r\n6 \r\n world\r\na foo \x01\nabcdefghij\n0000\r\nX-T: 1\x01\r\n\r\nNEXT";
        for step in [1, 2, 3, 7, body.len()] {
            let (data, used) = read(body, step).unwrap();
            assert_eq!(data, b"hello worldabcdefghij", "step {step}");
            assert_eq!(used, body.len() - 4, "step {step}");
        }
    }

    #[test]
    fn what_nginx_refuses() {
        for bad in [
            &b"x\r\n"[..],
            b"\r\n",
            b"5\r\nhello!\r\n0\r\n\r\n",
            b"5\rxhello\r\n",
            b"fffffffffffffffff\r\n",
            b"0\r\nX: a\rb\r\n\r\n",
            b"0x5\r\nhello\r\n",
            b"-5\r\nhello\r\n",
            b"5\r\nhello\r\r\n",
        ] {
            let mut c = Chunked::default();
            assert!(c.feed(bad, |_| {}).is_err(), "{}", bad.escape_ascii());
        }
    }

    #[test]
    fn chunk_heads() {
        let mut v = Vec::new();
        chunk_head(0x1a2b, &mut v);
        chunk_head(0, &mut v);
        assert_eq!(v, b"1a2b\r\n0\r\n");
    }
}
