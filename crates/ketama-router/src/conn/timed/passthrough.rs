//! The rest of what a stream is, passed through to the stream under the
//! [`Timed`] wrapper: writes, shutdown, ids, TLS, digests, peeks.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use std::time::Instant;

use async_trait::async_trait;
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, Ssl, UniqueID, UniqueIDType,
    ALPN,
};
use tokio::io::AsyncWrite;

use super::Timed;

/// The error a write gets when the client took no byte for
/// `send_timeout_ms` (see [`is_send_timeout`](crate::conn::is_send_timeout)).
#[derive(Debug)]
pub struct SendTimedOut;

impl std::fmt::Display for SendTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("send_timeout: the client took no response byte in time")
    }
}

impl std::error::Error for SendTimedOut {}

impl Timed {
    /// `send_timeout`: timed from the moment a write finds the client not
    /// taking bytes, and restarted by every write that makes progress and
    /// by every byte the client acknowledges meanwhile (TCP's
    /// `bytes_acked`, read when the wait starts and when its timer fires):
    /// the socket wakes a writer only once a third of its send buffer
    /// (megabytes, autotuned) has drained, so a slow but steady reader
    /// could otherwise go longer than the timeout between two writes.
    fn on_write<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.send_waiting = false;
            return polled;
        }
        let timeout = self.clock.limits.send_timeout;
        let now = Instant::now();
        if !self.send_waiting {
            self.send_waiting = true;
            let acked = self.acked();
            let wait = self.send.get_or_insert_with(|| SendWait {
                acked,
                sleep: Box::pin(tokio::time::sleep(timeout)),
            });
            wait.acked = acked;
            wait.sleep
                .as_mut()
                .reset(tokio::time::Instant::from_std(now + timeout));
        }
        loop {
            let wait = self.send.as_mut().expect("made above");
            if wait.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let acked = self.acked();
            let wait = self.send.as_mut().expect("made above");
            if acked.is_none() || acked <= wait.acked {
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, SendTimedOut)));
            }
            // The client took bytes: a new period.
            wait.acked = acked;
            wait.sleep
                .as_mut()
                .reset(tokio::time::Instant::from_std(Instant::now() + timeout));
        }
    }

    /// Bytes of this connection the client's TCP acknowledged so far
    /// (`None` where the kernel does not say, as on a Unix socket).
    fn acked(&self) -> Option<u64> {
        let digest = self.inner.get_socket_digest()?;
        digest.tcp_info().map(|i| i.tcpi_bytes_acked)
    }
}

/// A write waiting for the client (see [`Timed::on_write`]).
pub(super) struct SendWait {
    acked: Option<u64>,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl AsyncWrite for Timed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.on_write(cx, polled)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.on_write(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.on_write(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.on_write(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[async_trait]
impl Shutdown for Timed {
    async fn shutdown(&mut self) {
        self.inner.shutdown().await
    }
}

impl UniqueID for Timed {
    fn id(&self) -> UniqueIDType {
        self.inner.id()
    }
}

/// The TLS under it, if any; on a plain connection, the protocol its
/// preface chose.
impl Ssl for Timed {
    fn get_ssl(&self) -> Option<&pingora::protocols::tls::TlsRef> {
        self.inner.get_ssl()
    }

    fn get_ssl_digest(&self) -> Option<Arc<pingora::protocols::tls::SslDigest>> {
        self.inner.get_ssl_digest()
    }

    fn selected_alpn_proto(&self) -> Option<ALPN> {
        self.alpn
            .clone()
            .or_else(|| self.inner.selected_alpn_proto())
    }
}

impl GetTimingDigest for Timed {
    fn get_timing_digest(&self) -> Vec<Option<pingora::protocols::TimingDigest>> {
        self.inner.get_timing_digest()
    }

    fn get_read_pending_time(&self) -> Duration {
        self.inner.get_read_pending_time()
    }

    fn get_write_pending_time(&self) -> Duration {
        self.inner.get_write_pending_time()
    }
}

impl GetProxyDigest for Timed {
    fn get_proxy_digest(&self) -> Option<Arc<pingora::protocols::raw_connect::ProxyDigest>> {
        self.inner.get_proxy_digest()
    }

    fn set_proxy_digest(&mut self, digest: pingora::protocols::raw_connect::ProxyDigest) {
        self.inner.set_proxy_digest(digest)
    }
}

impl GetSocketDigest for Timed {
    fn get_socket_digest(&self) -> Option<Arc<pingora::protocols::SocketDigest>> {
        self.inner.get_socket_digest()
    }

    fn set_socket_digest(&mut self, digest: pingora::protocols::SocketDigest) {
        self.inner.set_socket_digest(digest)
    }
}

#[async_trait]
impl Peek for Timed {
    async fn try_peek(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        let rest = &self.replay[self.replayed..];
        if !rest.is_empty() {
            // What was read ahead is what a peek would see.
            let n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            return Ok(n == buf.len());
        }
        self.inner.try_peek(buf).await
    }
}
