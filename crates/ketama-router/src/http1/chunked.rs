//! `Transfer-Encoding: chunked`, read incrementally as nginx reads it
//! (`ngx_http_parse_chunked`): hexadecimal sizes (extensions after `;`
//! skipped, spaces or tabs before the line end allowed), each chunk's data
//! followed by `CRLF` (or `LF`), then trailer lines until an empty one.
//! Trailers are dropped, as Pingora drops them; the data is handed out in
//! pieces of the input, never copied.

/// What went wrong in a chunked body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkError(pub &'static str);

/// Where the reader is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// In a chunk's size (`digits` read so far).
    Size { size: u64, digits: u8 },
    /// After the size: spaces, an extension, then the line end.
    SizeRest { size: u64, ext: bool },
    /// `CR` after the size line; `LF` next.
    SizeLf { size: u64 },
    /// In a chunk's data.
    Data { left: u64 },
    /// After a chunk's data: `CR LF` or `LF`.
    DataEnd { cr: bool },
    /// In a trailer line (`empty`: nothing on it yet).
    Trailer { empty: bool, cr: bool },
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
            state: State::Size { size: 0, digits: 0 },
        }
    }
}

/// Sizes above this are refused (nginx's bound: `off_t` less a digit).
const MAX_SIZE: u64 = (i64::MAX as u64) / 16;

impl Chunked {
    /// Whether the last chunk and the trailers have been read.
    pub fn done(&self) -> bool {
        self.state == State::Done
    }

    /// Reads `input`, handing each piece of chunk data to `data`; returns
    /// how many bytes of `input` belong to the body (less than its length
    /// only once the body ended: the rest is what follows it).
    pub fn feed(&mut self, input: &[u8], mut data: impl FnMut(&[u8])) -> Result<usize, ChunkError> {
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            self.state = match self.state {
                State::Done => return Ok(i),
                State::Data { left } => {
                    let n = (left as usize).min(input.len() - i);
                    // `left` may exceed usize on 32 bits; the min keeps it
                    // within the input.
                    data(&input[i..i + n]);
                    i += n;
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        State::DataEnd { cr: false }
                    } else {
                        State::Data { left }
                    };
                    continue;
                }
                State::Size { size, digits } => match hex(b) {
                    Some(d) => {
                        let size = size * 16 + u64::from(d);
                        if size > MAX_SIZE {
                            return Err(ChunkError("a chunk size too large"));
                        }
                        State::Size {
                            size,
                            digits: digits.saturating_add(1),
                        }
                    }
                    None if digits == 0 => return Err(ChunkError("a chunk size expected")),
                    None => match b {
                        b'\r' => State::SizeLf { size },
                        b'\n' => self.after_size(size),
                        b';' => State::SizeRest { size, ext: true },
                        b' ' | b'\t' => State::SizeRest { size, ext: false },
                        _ => return Err(ChunkError("a bad chunk size")),
                    },
                },
                State::SizeRest { size, ext } => match b {
                    b'\r' => State::SizeLf { size },
                    b'\n' => self.after_size(size),
                    b';' => State::SizeRest { size, ext: true },
                    b' ' | b'\t' => State::SizeRest { size, ext },
                    _ if ext && (b >= 0x20 || b == b'\t') && b != 0x7f => {
                        State::SizeRest { size, ext }
                    }
                    _ => return Err(ChunkError("a bad chunk size line")),
                },
                State::SizeLf { size } => match b {
                    b'\n' => self.after_size(size),
                    _ => return Err(ChunkError("a CR without LF after a chunk size")),
                },
                State::DataEnd { cr } => match b {
                    b'\r' if !cr => State::DataEnd { cr: true },
                    b'\n' => State::Size { size: 0, digits: 0 },
                    _ => return Err(ChunkError("chunk data longer than its size")),
                },
                State::Trailer { empty, cr } => match b {
                    b'\n' if empty => State::Done,
                    b'\n' => State::Trailer {
                        empty: true,
                        cr: false,
                    },
                    b'\r' if !cr => State::Trailer { empty, cr: true },
                    _ if cr => return Err(ChunkError("a CR without LF in a trailer")),
                    _ if b < 0x20 && b != b'\t' || b == 0x7f => {
                        return Err(ChunkError("a control byte in a trailer"))
                    }
                    _ => State::Trailer {
                        empty: false,
                        cr: false,
                    },
                },
            };
            i += 1;
        }
        Ok(if self.state == State::Done {
            input.len()
        } else {
            i
        })
    }

    fn after_size(&self, size: u64) -> State {
        if size == 0 {
            State::Trailer {
                empty: true,
                cr: false,
            }
        } else {
            State::Data { left: size }
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

/// The end of a chunked body: the last chunk, no trailers.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

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
            b"5;name=value\r\nhello\r\n6 \r\n world\r\na\nabcdefghij\n0\r\nX-T: 1\r\n\r\nNEXT";
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
