//! `client_header_timeout_ms` on an HTTP/2 connection, as nginx applies
//! it: the connection preface, and then each header block (a HEADERS
//! frame and its CONTINUATIONs), must arrive within it from its first
//! byte; a late one ends the connection. The client's bytes are followed
//! frame by frame as they pass ([`H2Scan`]: lengths, types and flags,
//! nothing else), and bytes read ahead (an h2c preface read to tell
//! HTTP/2 from HTTP/1) are read again first.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use super::scan::H2Scan;
use crate::engine::io::ClientIo;

/// A client's HTTP/2 byte stream under the header deadline.
pub struct Guarded {
    io: ClientIo,
    /// Bytes read ahead, read again first.
    replay: Vec<u8>,
    at: usize,
    scan: H2Scan,
    limit: Duration,
    /// The deadline of the header phase in progress, armed.
    sleep: Pin<Box<Sleep>>,
    armed: bool,
    /// Set when the deadline ended the connection.
    expired: Arc<AtomicBool>,
}

impl Guarded {
    /// `io`, whose first bytes are `early`, under `limit` per header phase
    /// (the preface's from now).
    pub fn new(io: ClientIo, early: Vec<u8>, limit: Duration) -> Self {
        let mut g = Guarded {
            io,
            replay: Vec::new(),
            at: 0,
            scan: H2Scan::default(),
            limit,
            sleep: Box::pin(tokio::time::sleep_until(Instant::now() + limit)),
            armed: true,
            expired: Arc::default(),
        };
        g.scan.feed(&early);
        g.replay = early;
        g
    }

    /// Set once the deadline ended the connection.
    pub fn expired(&self) -> Arc<AtomicBool> {
        self.expired.clone()
    }

    /// The stream under it.
    pub fn get_ref(&self) -> &ClientIo {
        &self.io
    }

    /// Moves the deadline as header phases begin and end.
    fn track(&mut self, new: &[u8]) {
        let was = self.scan.in_header();
        self.scan.feed(new);
        match (was, self.scan.in_header()) {
            (false, true) => {
                self.sleep.as_mut().reset(Instant::now() + self.limit);
                self.armed = true;
            }
            (_, false) => self.armed = false,
            _ => {}
        }
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.at < this.replay.len() {
            let n = (this.replay.len() - this.at).min(buf.remaining());
            buf.put_slice(&this.replay[this.at..this.at + n]);
            this.at += n;
            if this.at == this.replay.len() {
                this.replay = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                this.track(&buf.filled()[before..]);
                Poll::Ready(Ok(()))
            }
            Poll::Pending if this.armed => match this.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.expired.store(true, Relaxed);
                    Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "client_header_timeout: a header block did not arrive in time",
                    )))
                }
                Poll::Pending => Poll::Pending,
            },
            other => other,
        }
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
