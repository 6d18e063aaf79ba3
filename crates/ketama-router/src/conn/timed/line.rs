//! The wait for the next request on an HTTP/1 connection, and its request
//! line, read as nginx reads it before Pingora's parser sees it (see
//! [`crate::reqline`]).

use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use tokio::io::{AsyncWriteExt, ReadBuf};

use super::{refusal, Timed, BAD_LINE, BAD_VERSION, OPEN};
use crate::reqline::{self, LineError};

impl Timed {
    /// Waits for the next request's line under the connection's deadlines
    /// (the idle one between requests, then the head's), reading as any
    /// read would; what was read is served again to the session that
    /// reads the request. This lets an idle keep-alive connection wait
    /// here, in the connection's small future, instead of inside Pingora's
    /// request future (tens of kilobytes, allocated per request) with a
    /// header buffer of its own.
    ///
    /// The line is checked as nginx checks it: one nginx refuses is
    /// answered 400 or 505 here (414 once the head's limit passes inside
    /// it) and the connection closes. One Pingora would read differently
    /// is handed to it rewritten ([`reqline::rewrite`]), its target as
    /// sent kept in the clock for the proxy. `Ok(false)`: the client
    /// closed the connection, idled out, or was refused.
    pub(in crate::conn) async fn await_request(&mut self) -> io::Result<bool> {
        if self.unscanned {
            // Bytes read ahead of the head's scan (a pipelining client's
            // next request, read by Pingora past the last one; or a plain
            // connection's first bytes, read to tell HTTP/2 from HTTP/1):
            // scanned now, as a read would have.
            self.unscanned = false;
            let pending = self.replay[self.replayed..].to_vec();
            let phase = self.clock.phase.load(Relaxed);
            if let Err(why) = self.on_head_bytes(&pending, phase) {
                return self.refuse_now(why).await;
            }
            self.prescanned = true;
        }
        loop {
            if let Some(line) = reqline::find(&self.replay[self.replayed..]) {
                return self.check_line(line).await;
            }
            // Small: it lives in every idle connection's future. A longer
            // line takes several reads.
            let mut buf = [0u8; 512];
            let n = std::future::poll_fn(|cx| {
                let mut rb = ReadBuf::new(&mut buf);
                self.poll_scanned(cx, &mut rb, false)
                    .map_ok(|()| rb.filled().len())
            })
            .await?;
            if n == 0 {
                return Ok(false);
            }
            self.replay.extend_from_slice(&buf[..n]);
            self.prescanned = true;
        }
    }

    /// Pipelined bytes Pingora read past the request it served: the start
    /// of the next request, read again by it through this stream.
    pub(in crate::conn) fn queue_pipelined(&mut self, bytes: &[u8]) {
        let mut replay = bytes.to_vec();
        replay.extend_from_slice(&self.replay[self.replayed..]);
        self.replay = replay;
        self.replayed = 0;
        self.unscanned = true;
    }

    /// The line at `line` of the bytes waiting: refused, passed on as it
    /// is, or rewritten in place.
    async fn check_line(&mut self, line: Range<usize>) -> io::Result<bool> {
        let at = self.replayed;
        let parsed = match reqline::parse(&self.replay[at + line.start..at + line.end]) {
            Ok(l) => l,
            Err(LineError::Invalid) => return self.refuse_now(BAD_LINE).await,
            Err(LineError::Version) => return self.refuse_now(BAD_VERSION).await,
        };
        if parsed.plain && line.start == 0 {
            self.clock.set_sent(None);
            return Ok(true);
        }
        let (mut rewritten, sent) = reqline::rewrite(&parsed);
        // Past the line's end: its CR LF or LF.
        let lf = at + line.end + (self.replay[at + line.end] == b'\r') as usize;
        rewritten.extend_from_slice(&self.replay[lf + 1..]);
        self.replay = rewritten;
        self.replayed = 0;
        self.clock.set_sent(sent);
        Ok(true)
    }

    /// Refuses the request in the router's loop: the answer (best effort,
    /// for at most a second), then the connection closes.
    async fn refuse_now(&mut self, why: u8) -> io::Result<bool> {
        self.clock.set(OPEN, None);
        self.clock.refused.store(why, Relaxed);
        let (response, _) = refusal(why);
        let inner = Pin::new(&mut self.inner);
        let _ = tokio::time::timeout(Duration::from_secs(1), async move {
            let inner = inner.get_mut();
            inner.write_all(response).await?;
            inner.flush().await
        })
        .await;
        Ok(false)
    }
}
