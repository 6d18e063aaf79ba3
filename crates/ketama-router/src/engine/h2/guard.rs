//! `client_header_timeout_ms` on an HTTP/2 connection, as nginx applies
//! it: the connection preface, and then each header block (a HEADERS
//! frame and its CONTINUATIONs), must arrive within it from its first
//! byte; a late one ends the connection. The client's bytes are followed
//! frame by frame as they pass ([`H2Scan`]: lengths, types and flags,
//! nothing else), and bytes read ahead (an h2c preface read to tell
//! HTTP/2 from HTTP/1) are read again first. The same pass finds floods
//! ([`Flood`]): then nothing more is read, and the connection's task is
//! told ([`Watch`]) to end it with a GOAWAY.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use super::scan::{Flood, H2Scan};
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
    /// What the connection's task is told.
    watch: Arc<Watch>,
}

/// What a [`Guarded`] stream found, for the connection's task.
#[derive(Default)]
pub struct Watch {
    /// The header deadline ended the connection.
    expired: AtomicBool,
    /// A flood (0: none; 1 + its [`Flood`] index).
    flood: AtomicU8,
    /// Woken at a flood.
    pub flooded: tokio::sync::Notify,
}

impl Watch {
    /// Whether the header deadline ended the connection.
    pub fn expired(&self) -> bool {
        self.expired.load(Relaxed)
    }

    /// The flood found, if any.
    pub fn flood(&self) -> Option<Flood> {
        match self.flood.load(Relaxed) {
            1 => Some(Flood::Frames),
            2 => Some(Flood::Priority),
            _ => None,
        }
    }
}

impl Guarded {
    /// `io`, whose first bytes are `sniffed`, under `limit` per header phase
    /// (the preface's from now), on a connection of at most `streams`
    /// concurrent streams (the PRIORITY allowance).
    pub fn new(io: ClientIo, sniffed: Vec<u8>, limit: Duration, streams: u32) -> Self {
        let mut g = Guarded {
            io,
            replay: Vec::new(),
            at: 0,
            scan: H2Scan::new(streams),
            limit,
            sleep: Box::pin(tokio::time::sleep_until(Instant::now() + limit)),
            armed: true,
            watch: Arc::default(),
        };
        g.scan.feed(&sniffed);
        g.replay = sniffed;
        g
    }

    /// What it finds, for the connection's task.
    pub fn watch(&self) -> Arc<Watch> {
        self.watch.clone()
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
        if this.watch.flood.load(Relaxed) != 0 {
            // A flood: read no more; the connection's task ends it.
            return Poll::Pending;
        }
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
                if let Some(f) = this.scan.flood() {
                    this.watch.flood.store(1 + f as u8, Relaxed);
                    this.watch.flooded.notify_one();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending if this.armed => match this.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.watch.expired.store(true, Relaxed);
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
