//! Reaching a backend: a pooled connection, or a new one within
//! `connect_timeout_ms` (TCP, then TLS for a backend with `tls = true`).
//! HTTP/1 connections are pooled whole, one request at a time
//! ([`super::pool`]); with `[upstream_tls] h2 = true` a TLS backend whose
//! ALPN picks `h2`, and an `h2c` backend, are spoken to in HTTP/2 on
//! connections shared by requests ([`super::h2::conns`]); a TLS backend
//! whose ALPN picks `http/1.1` is spoken to in HTTP/1.1.

use std::net::SocketAddr;

use tokio::net::TcpStream;

use super::io::{Buffered, UpstreamIo};
use super::{buffers, pool};
use crate::policy::Failure;
use crate::state::{Backend, RoutingState};

/// An HTTP/1 connection to a backend, its reader's buffer, and whether
/// it came from the pool.
pub struct H1Conn {
    /// The connection and what was read of it.
    pub io: Buffered<UpstreamIo>,
    /// Taken from the pool (a kept-alive connection the backend may have
    /// closed meanwhile: see [`crate::policy::retry`]).
    pub reused: bool,
    pub key: pool::Key,
}

impl H1Conn {
    /// Gives the connection back to the pool (`reuse`) or closes it; the
    /// buffer goes back to the thread's spares either way.
    pub fn done(self, reuse: bool, pool_size: usize) {
        let (io, buf) = self.io.into_parts();
        buffers::give(buf);
        if reuse {
            pool::put(&self.key, io, pool_size);
        }
    }
}

/// A connection to a backend for one attempt.
pub enum UpstreamConn {
    /// HTTP/1: one request at a time.
    H1(H1Conn),
    /// HTTP/2: a stream of a shared connection.
    H2(super::h2::conns::Sender),
}

impl UpstreamConn {
    /// Whether it was made before this request (a closed keep-alive
    /// connection is not the backend failing).
    pub fn reused(&self) -> bool {
        match self {
            UpstreamConn::H1(c) => c.reused,
            UpstreamConn::H2(s) => s.reused,
        }
    }
}

/// The pool key of `backend` under `state`'s TLS settings.
pub fn key(state: &RoutingState, backend: &Backend) -> pool::Key {
    pool::Key {
        addr: backend.addr,
        tls: backend
            .tls
            .as_ref()
            .map(|sni| (sni.clone(), state.upstream_tls.group_key())),
        h2c: backend.h2c,
    }
}

/// A connection to `backend`: a free stream on one of this thread's
/// HTTP/2 connections to it or an idle HTTP/1 one, or a new one.
pub async fn connect(state: &RoutingState, backend: &Backend) -> Result<UpstreamConn, Failure> {
    let key = key(state, backend);
    if let Some(send) = super::h2::conns::shared(&key) {
        return Ok(UpstreamConn::H2(send));
    }
    if let Some(io) = pool::take(&key) {
        return Ok(UpstreamConn::H1(H1Conn {
            io: Buffered::new(io, buffers::take()),
            reused: true,
            key,
        }));
    }
    let timeout = backend.limits.connect_timeout;
    let io = tokio::time::timeout(timeout, dial(state, backend))
        .await
        .map_err(|_| Failure::ConnectTimeout)??;
    if backend.h2c || io.is_h2() {
        let send = tokio::time::timeout(timeout, super::h2::conns::handshake(io, key))
            .await
            .map_err(|_| Failure::ConnectTimeout)??;
        return Ok(UpstreamConn::H2(send));
    }
    Ok(UpstreamConn::H1(H1Conn {
        io: Buffered::new(io, buffers::take()),
        reused: false,
        key,
    }))
}

/// A new connection to `backend`: TCP, then TLS when it has `tls`.
pub async fn dial(state: &RoutingState, backend: &Backend) -> Result<UpstreamIo, Failure> {
    let tls = backend
        .tls
        .as_ref()
        .map(|sni| state.upstream_tls.for_engine(sni, backend.addr.ip()));
    dial_with(backend.addr, tls).await.map_err(|e| {
        tracing::debug!(
            backend = backend.server.as_str(),
            "cannot reach the backend: {e}"
        );
        Failure::Connect
    })
}

/// The rustls settings and server name a TLS backend is reached with.
pub type TlsTo = (
    std::sync::Arc<rustls::ClientConfig>,
    rustls_pki_types::ServerName<'static>,
);

/// A new connection to `addr`: TCP, then TLS with `tls`'s settings.
pub async fn dial_with(addr: SocketAddr, tls: Option<TlsTo>) -> std::io::Result<UpstreamIo> {
    let tcp = TcpStream::connect(addr).await?;
    // Requests are written whole: no reason to wait for an ACK.
    let _ = tcp.set_nodelay(true);
    let Some((config, name)) = tls else {
        return Ok(UpstreamIo::Plain(tcp));
    };
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await?;
    Ok(UpstreamIo::Tls(Box::new(tls)))
}
