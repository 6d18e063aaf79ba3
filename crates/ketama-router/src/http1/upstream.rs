//! Reaching a backend: a pooled connection, or a new one within
//! `connect_timeout_ms` (TCP, then TLS for a backend with `tls = true`).

use std::time::Duration;

use tokio::net::TcpStream;

use super::io::UpstreamIo;
use super::pool;
use crate::policy::Failure;
use crate::state::{Backend, RoutingState};

/// A connection to a backend, and whether it came from the pool.
pub struct Upstream {
    /// The connection.
    pub io: UpstreamIo,
    /// Taken from the pool (a kept-alive connection the backend may have
    /// closed meanwhile: see [`crate::policy::retry`]).
    pub reused: bool,
    /// Its key in the pool.
    pub key: pool::Key,
}

/// The pool key of `backend` under `state`'s TLS settings.
pub fn key(state: &RoutingState, backend: &Backend) -> pool::Key {
    pool::Key {
        addr: backend.addr,
        tls: backend
            .tls
            .as_ref()
            .map(|sni| (sni.clone(), state.upstream_tls.group_key())),
    }
}

/// A connection to `backend`: an idle one of this thread's, or a new one.
pub async fn connect(state: &RoutingState, backend: &Backend) -> Result<Upstream, Failure> {
    let key = key(state, backend);
    if let Some(io) = pool::take(&key) {
        return Ok(Upstream {
            io,
            reused: true,
            key,
        });
    }
    let timeout = backend.limits.connect_timeout;
    let io = tokio::time::timeout(timeout, dial(state, backend))
        .await
        .map_err(|_| Failure::ConnectTimeout)??;
    Ok(Upstream {
        io,
        reused: false,
        key,
    })
}

async fn dial(state: &RoutingState, backend: &Backend) -> Result<UpstreamIo, Failure> {
    let tcp = TcpStream::connect(backend.addr)
        .await
        .map_err(|_| Failure::Connect)?;
    // Requests are written whole: no reason to wait for an ACK.
    let _ = tcp.set_nodelay(true);
    let Some(sni) = &backend.tls else {
        return Ok(UpstreamIo::Plain(tcp));
    };
    let (config, name) = state.upstream_tls.for_engine(sni, backend.addr.ip());
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| {
            tracing::debug!(
                backend = backend.server.as_str(),
                "TLS to the backend failed: {e}"
            );
            Failure::Connect
        })?;
    Ok(UpstreamIo::Tls(Box::new(tls)))
}

/// Runs `f` within `d`; past it, [`Failure::Timeout`].
pub async fn within<T>(
    d: Duration,
    f: impl std::future::Future<Output = std::io::Result<T>>,
) -> Result<T, Failure> {
    match tokio::time::timeout(d, f).await {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(_)) => Err(Failure::Broken),
        Err(_) => Err(Failure::Timeout),
    }
}
