//! Following an HTTP/2 connection's frames as the client sends them, just
//! enough to know when a header block is on its way: after the preface,
//! each frame is a 9-byte header (24-bit length, type, flags, stream id)
//! and its payload. A HEADERS frame opens a block; the block closes at the
//! end of the frame (HEADERS or CONTINUATION) that carries END_HEADERS.
//! `O(1)` state; reads nothing but lengths, types and flags, so framing
//! errors are left to the HTTP/2 layer.
//!
//! The same pass keeps nginx's flood budgets (`ngx_http_v2_read_handler`,
//! `ngx_http_v2_state_priority`):
//! - **bytes**: once an eighth of every byte the client sent is more than
//!   its payload (DATA and header-block bytes) plus [`FLOOD_ALLOWANCE`],
//!   the connection is a flood of frames that carry nothing (SETTINGS,
//!   PING, WINDOW_UPDATE, RST_STREAM, empty DATA, PRIORITY...): it ends
//!   with `GOAWAY NO_ERROR`, as nginx ends it. A client that sends
//!   requests and bodies never comes near it; one that sends 8 MiB of
//!   control frames and nothing else is cut there.
//! - **PRIORITY**: the connection may send `max(streams, 100)` PRIORITY
//!   frames, and `streams` more for each HEADERS frame (`streams`: the
//!   concurrent-stream limit); past it, `GOAWAY ENHANCE_YOUR_CALM`.

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const PRIORITY: u8 = 0x2;
const CONTINUATION: u8 = 0x9;
const END_HEADERS: u8 = 0x4;

/// Bytes a client may send beyond eight times its payload before its
/// connection counts as a flood (nginx's 1 MiB).
pub const FLOOD_ALLOWANCE: u64 = 1 << 20;

/// A flood the client's frames amount to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flood {
    /// Bytes that carry no payload, past the budget.
    Frames,
    /// PRIORITY frames past their allowance.
    Priority,
}

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
    /// Every byte sent, and the payload bytes among them.
    total: u64,
    payload: u64,
    /// PRIORITY frames still allowed, and how many each HEADERS adds.
    priority_left: u64,
    streams: u64,
    flood: Option<Flood>,
}

impl H2Scan {
    /// A connection whose concurrent-stream limit is `streams`.
    pub fn new(streams: u32) -> Self {
        let streams = u64::from(streams);
        H2Scan {
            preface_left: super::PREFACE.len(),
            head: [0; 9],
            head_len: 0,
            payload_left: 0,
            ends_block: false,
            block_open: false,
            total: 0,
            payload: 0,
            priority_left: streams.max(100),
            streams,
            flood: None,
        }
    }

    /// The flood the client's frames came to, once they did.
    pub fn flood(&self) -> Option<Flood> {
        self.flood
    }

    /// Whether the client is in the middle of a header block (or has not
    /// finished its preface): the head deadline runs.
    pub fn in_header(&self) -> bool {
        self.preface_left > 0 || self.block_open
    }

    /// Takes the next bytes the client sent.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
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
                match kind {
                    HEADERS => {
                        self.block_open = true;
                        self.priority_left += self.streams;
                    }
                    PRIORITY => match self.priority_left.checked_sub(1) {
                        Some(0) | None => self.flood = Some(Flood::Priority),
                        Some(left) => self.priority_left = left,
                    },
                    _ => {}
                }
                if matches!(kind, DATA | HEADERS | CONTINUATION) {
                    self.payload += len as u64;
                }
                self.ends_block =
                    (kind == HEADERS || kind == CONTINUATION) && flags & END_HEADERS != 0;
                self.payload_left = len;
                if len == 0 {
                    self.frame_done();
                }
            }
        }
        if self.flood.is_none() && self.total / 8 > self.payload + FLOOD_ALLOWANCE {
            self.flood = Some(Flood::Frames);
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
        let mut s = H2Scan::new(128);
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

    #[test]
    fn frames_that_carry_nothing_end_the_connection_past_nginxs_budget() {
        let mut s = H2Scan::new(128);
        s.feed(super::super::PREFACE);
        // A request with a 1 MiB body: payload, no flood.
        s.feed(&frame(HEADERS, END_HEADERS, &[0; 100]));
        for _ in 0..64 {
            s.feed(&frame(DATA, 0, &[0; 16384]));
        }
        let ping = frame(0x6, 0, &[0; 8]);
        let mut sent = 0u64;
        while s.flood().is_none() {
            s.feed(&ping);
            sent += ping.len() as u64;
        }
        assert_eq!(s.flood(), Some(Flood::Frames));
        // Cut where nginx cuts: an eighth of everything over the payload
        // plus 1 MiB (here about 8 MiB of pings past 8 MiB of data).
        let expect = 8 * (FLOOD_ALLOWANCE + (1 << 20) + 100) - (1 << 20) - 100;
        assert!(sent.abs_diff(expect) < 1024, "{sent} vs {expect}");
    }

    #[test]
    fn priority_frames_past_their_allowance_are_a_flood() {
        let mut s = H2Scan::new(128);
        s.feed(super::super::PREFACE);
        let prio = frame(PRIORITY, 0, &[0, 0, 0, 3, 16]);
        for _ in 0..127 {
            s.feed(&prio);
        }
        assert_eq!(s.flood(), None, "127 pass before any stream");
        s.feed(&frame(HEADERS, END_HEADERS, &[0; 10]));
        for _ in 0..128 {
            s.feed(&prio);
        }
        assert_eq!(s.flood(), None, "each HEADERS allows 128 more");
        s.feed(&prio);
        assert_eq!(s.flood(), Some(Flood::Priority));
    }
}
