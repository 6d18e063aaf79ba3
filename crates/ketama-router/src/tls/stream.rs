//! A client's TLS connection as the router accepted it (tokio-rustls over
//! the accepted TCP socket), wearing Pingora's stream traits so that
//! Pingora's HTTP/1 and HTTP/2 sessions take it as they take a plain one:
//! its ALPN choice, a TLS digest (cipher and version), the socket's
//! digest (its address, for `X-Forwarded-For` and the access log).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use std::os::fd::AsRawFd;

use pingora::protocols::tls::SslDigest;
use pingora::protocols::SocketDigest;
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, Ssl, UniqueID, UniqueIDType,
    ALPN,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The server side of a finished TLS handshake.
pub struct ServerTlsStream {
    inner: tokio_rustls::server::TlsStream<TcpStream>,
    digest: Arc<SslDigest>,
    socket: Arc<SocketDigest>,
    alpn: Option<ALPN>,
}

impl std::fmt::Debug for ServerTlsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTlsStream")
            .field("tcp", self.inner.get_ref().0)
            .field("alpn", &self.alpn)
            .finish_non_exhaustive()
    }
}

impl ServerTlsStream {
    /// Wraps a finished handshake: its ALPN choice and digest are read
    /// once here.
    pub fn new(
        inner: tokio_rustls::server::TlsStream<TcpStream>,
        socket: Arc<SocketDigest>,
    ) -> Self {
        let session = inner.get_ref().1;
        let alpn = match session.alpn_protocol() {
            Some(b"h2") => Some(ALPN::H2),
            Some(b"http/1.1") => Some(ALPN::H1),
            _ => None,
        };
        let cipher = session
            .negotiated_cipher_suite()
            .and_then(|s| s.suite().as_str())
            .unwrap_or("");
        let version = session
            .protocol_version()
            .and_then(|v| v.as_str())
            .unwrap_or("");
        let digest = Arc::new(SslDigest::new(cipher, version, None, None, Vec::new()));
        ServerTlsStream {
            inner,
            digest,
            socket,
            alpn,
        }
    }

    /// The ALPN protocol the handshake chose.
    pub fn alpn(&self) -> Option<&ALPN> {
        self.alpn.as_ref()
    }

    /// The TLS stream itself (for the router's HTTP/1 engine).
    pub fn into_inner(self) -> tokio_rustls::server::TlsStream<TcpStream> {
        self.inner
    }
}

impl AsyncRead for ServerTlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for ServerTlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[async_trait]
impl Shutdown for ServerTlsStream {
    async fn shutdown(&mut self) {
        // close_notify, then the TCP stream's end; a peer already gone is
        // no error worth a line.
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut self.inner).await;
    }
}

impl UniqueID for ServerTlsStream {
    fn id(&self) -> UniqueIDType {
        self.inner.get_ref().0.as_raw_fd()
    }
}

impl Ssl for ServerTlsStream {
    fn get_ssl_digest(&self) -> Option<Arc<SslDigest>> {
        Some(self.digest.clone())
    }

    fn selected_alpn_proto(&self) -> Option<ALPN> {
        self.alpn.clone()
    }
}

impl GetTimingDigest for ServerTlsStream {
    fn get_timing_digest(&self) -> Vec<Option<pingora::protocols::TimingDigest>> {
        Vec::new()
    }

    fn get_read_pending_time(&self) -> Duration {
        Duration::ZERO
    }

    fn get_write_pending_time(&self) -> Duration {
        Duration::ZERO
    }
}

impl GetProxyDigest for ServerTlsStream {
    fn get_proxy_digest(&self) -> Option<Arc<pingora::protocols::raw_connect::ProxyDigest>> {
        None
    }
}

impl GetSocketDigest for ServerTlsStream {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        Some(self.socket.clone())
    }
}

/// Peeking under TLS is not offered (Pingora's own TLS stream neither).
impl Peek for ServerTlsStream {}
