//! After a `101 Switching Protocols`: the client's connection and the
//! backend's joined, bytes copied both ways (each direction on its own,
//! so neither side's stall stops the other; a side's end is passed on as
//! a write shutdown) until both ends closed, or until nothing moved
//! either way for the backend's `read_timeout_ms` (nginx closes an
//! upgraded connection after `proxy_read_timeout` without data): an idle
//! tunnel, or one whose reader stopped taking bytes, does not hold its
//! two connections for ever.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

use super::ClientConn;
use crate::engine::io::{Buffered, UpstreamIo};

/// Joins `c` and `up` (see the module docs). First what each side sent
/// past its head: the client's pipelined bytes, and what the backend's
/// read brought past its `101` head (a WebSocket server's first frame
/// often comes with it). Returns the bytes sent to the client.
pub async fn tunnel(c: &mut ClientConn, up: &mut Buffered<UpstreamIo>, idle: Duration) -> u64 {
    let pending = c.io.pending().to_vec();
    let n = pending.len();
    c.io.consume(n);
    let from_backend = up.pending().to_vec();
    let k = from_backend.len();
    up.consume(k);
    let io = up.io();
    let first = async {
        io.write_all(&pending).await?;
        c.io.io().write_all(&from_backend).await
    };
    if !matches!(tokio::time::timeout(idle, first).await, Ok(Ok(()))) {
        return 0;
    }
    let start = Instant::now();
    let last_ms = AtomicU64::new(0);
    let mut client = Watched {
        inner: c.io.io(),
        start,
        last_ms: &last_ms,
    };
    let mut backend = Watched {
        inner: io,
        start,
        last_ms: &last_ms,
    };
    let copy = tokio::io::copy_bidirectional(&mut client, &mut backend);
    tokio::pin!(copy);
    loop {
        // Past the last byte moved plus `idle`, with nothing since: done.
        let last = start + Duration::from_millis(last_ms.load(Relaxed));
        let deadline = tokio::time::Instant::from_std(last + idle);
        tokio::select! {
            r = &mut copy => {
                return k as u64 + r.map_or(0, |(_, to_client)| to_client);
            }
            () = tokio::time::sleep_until(deadline) => {
                if start + Duration::from_millis(last_ms.load(Relaxed)) + idle <= Instant::now() {
                    return k as u64;
                }
            }
        }
    }
}

/// A stream whose reads and writes that move bytes mark the time in
/// `last_ms` (ms since `start`, shared by both sides of the tunnel).
struct Watched<'a, S> {
    inner: &'a mut S,
    start: Instant,
    last_ms: &'a AtomicU64,
}

impl<S> Watched<'_, S> {
    fn mark(&self) {
        self.last_ms
            .store(self.start.elapsed().as_millis() as u64, Relaxed);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<'_, S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut *this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.mark();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<'_, S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut *this.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.mark();
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.get_mut().inner).poll_shutdown(cx)
    }
}
