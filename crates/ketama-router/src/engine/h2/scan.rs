//! Following an HTTP/2 connection's frames as the client sends them, just
//! enough to know when a header block is on its way: after the preface,
//! each frame is a 9-byte header (24-bit length, type, flags, stream id)
//! and its payload. A HEADERS frame opens a block; the block closes at the
//! end of the frame (HEADERS or CONTINUATION) that carries END_HEADERS.
//! `O(1)` state; reads nothing but lengths, types and flags, so framing
//! errors are left to the HTTP/2 layer.

const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_HEADERS: u8 = 0x4;

/// Where the client's byte stream is, frame-wise.
#[derive(Debug)]
pub struct H2Scan {
    /// Preface bytes still to come (24 at first).
    preface_left: usize,
    /// The frame header being read, and how much of it.
    head: [u8; 9],
    head_len: usize,
    /// Payload bytes of the current frame still to come.
    payload_left: usize,
    /// Whether the current frame ends its header block.
    ends_block: bool,
    /// Whether a header block is open (begun, END_HEADERS not yet through).
    block_open: bool,
}

impl Default for H2Scan {
    fn default() -> Self {
        H2Scan {
            preface_left: super::PREFACE.len(),
            head: [0; 9],
            head_len: 0,
            payload_left: 0,
            ends_block: false,
            block_open: false,
        }
    }
}

impl H2Scan {
    /// Whether the client is in the middle of a header block (or has not
    /// finished its preface): the head deadline runs.
    pub fn in_header(&self) -> bool {
        self.preface_left > 0 || self.block_open
    }

    /// Takes the next bytes the client sent.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        if self.preface_left > 0 {
            let n = self.preface_left.min(bytes.len());
            self.preface_left -= n;
            bytes = &bytes[n..];
        }
        while !bytes.is_empty() {
            if self.payload_left > 0 {
                let n = self.payload_left.min(bytes.len());
                self.payload_left -= n;
                bytes = &bytes[n..];
                if self.payload_left == 0 {
                    self.frame_done();
                }
                continue;
            }
            let n = (9 - self.head_len).min(bytes.len());
            self.head[self.head_len..self.head_len + n].copy_from_slice(&bytes[..n]);
            self.head_len += n;
            bytes = &bytes[n..];
            if self.head_len == 9 {
                self.head_len = 0;
                let h = self.head;
                let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
                let (kind, flags) = (h[3], h[4]);
                if kind == HEADERS {
                    self.block_open = true;
                }
                self.ends_block =
                    (kind == HEADERS || kind == CONTINUATION) && flags & END_HEADERS != 0;
                self.payload_left = len;
                if len == 0 {
                    self.frame_done();
                }
            }
        }
    }

    fn frame_done(&mut self) {
        if self.ends_block {
            self.block_open = false;
            self.ends_block = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut f = len.to_be_bytes()[1..].to_vec();
        f.extend([kind, flags, 0, 0, 0, 1]);
        f.extend(payload);
        f
    }

    #[test]
    fn a_block_opens_with_headers_and_closes_with_end_headers() {
        let mut s = H2Scan::default();
        assert!(s.in_header(), "the preface counts as a head");
        s.feed(super::super::PREFACE);
        assert!(!s.in_header());
        s.feed(&frame(0x4, 0, &[0; 6])); // SETTINGS
        assert!(!s.in_header());
        let headers = frame(HEADERS, 0, &[1, 2, 3]);
        s.feed(&headers[..5]);
        assert!(!s.in_header(), "half a frame header says nothing yet");
        s.feed(&headers[5..]);
        assert!(
            s.in_header(),
            "HEADERS without END_HEADERS: a block is open"
        );
        let cont = frame(CONTINUATION, END_HEADERS, &[4, 5]);
        s.feed(&cont[..cont.len() - 1]);
        assert!(s.in_header(), "its last CONTINUATION is not through");
        s.feed(&cont[cont.len() - 1..]);
        assert!(!s.in_header());
        // One byte at a time, with a DATA frame between.
        let mut all = frame(HEADERS, END_HEADERS, &[9; 10]);
        all.extend(frame(0x0, 1, &[0; 100]));
        let mut opened = false;
        for b in &all {
            s.feed(std::slice::from_ref(b));
            opened |= s.in_header();
        }
        assert!(opened && !s.in_header());
    }
}
