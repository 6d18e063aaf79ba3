//! Client connections, as each is accepted: how many may be open, the TLS
//! handshake and which protocol each speaks, before the engine serves it
//! ([`crate::engine`]).
//!
//! [`Admission`] sits between a listener and the engine. For each accepted
//! connection it:
//!
//! 1. closes it at once past `server.max_connections` (TLS connections
//!    count too, before any TLS work);
//! 2. on a TLS listener, runs the handshake with the certificates of the
//!    routing state in force at the accept (so a reload's certificates
//!    serve the next handshake), within `tls.handshake_timeout_ms`,
//!    counting failures by reason;
//! 3. picks the protocol: HTTP/2 when ALPN chose `h2`, or, on a plain
//!    listener with `server.h2c`, when the client's first bytes are the
//!    HTTP/2 preface (read under the head deadline, then read again by
//!    the HTTP/2 layer); HTTP/1.x otherwise;
//! 4. hands the connection to the engine's HTTP/1 loop
//!    ([`crate::engine::h1::conn`]) or its HTTP/2 server
//!    ([`crate::engine::h2`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::drain::Drain;
use crate::engine::h2::PREFACE;
use crate::engine::io::ClientIo;
use crate::engine::Engine;
use crate::metrics::Metrics;
use crate::state::StateReader;

/// The connection guard of a listener (see the module docs). The limits
/// and certificates are the current routing state's, read at each accept,
/// so a reload changes them for new connections.
pub struct Admission {
    /// The limit when the config sets none (derived from the file limit).
    default_max_connections: usize,
    /// The client connections' graceful stop, shared by every listener.
    pub drain: Arc<Drain>,
    /// Whether this guard's listeners speak TLS.
    tls: bool,
    /// The current limits and certificates.
    routing: StateReader,
    /// Refusals are counted here.
    metrics: Arc<Metrics>,
    /// The engine.
    engine: Arc<Engine>,
}

impl Admission {
    /// The guard of plain listeners.
    pub fn new(
        default_max_connections: usize,
        routing: StateReader,
        metrics: Arc<Metrics>,
        engine: Arc<Engine>,
        drain: Arc<Drain>,
    ) -> Self {
        Admission {
            engine,
            default_max_connections,
            drain,
            tls: false,
            routing,
            metrics,
        }
    }

    /// The same engine, limit and drain, for TLS listeners.
    pub fn tls_twin(&self) -> Self {
        Admission {
            default_max_connections: self.default_max_connections,
            drain: self.drain.clone(),
            tls: true,
            routing: self.routing.clone(),
            metrics: self.metrics.clone(),
            engine: self.engine.clone(),
        }
    }

    /// One accepted connection, counted open now (by the accept loop, so
    /// that a graceful stop that saw the loop end also sees it); the
    /// future serves it: the limit, TLS, the protocol, then the engine.
    pub fn serve_connection(
        self: Arc<Self>,
        tcp: TcpStream,
        peer: SocketAddr,
    ) -> impl std::future::Future<Output = ()> + Send {
        let (slot, open) = self.metrics.connection_opened();
        self.serve(tcp, peer, slot, open)
    }

    async fn serve(
        self: Arc<Self>,
        tcp: TcpStream,
        peer: SocketAddr,
        slot: crate::metrics::OpenConnection,
        open: usize,
    ) {
        let state = self.routing.state();
        let server = &state.validated.config.server;
        let header_timeout = Duration::from_millis(server.client_header_timeout_ms);
        let max = server
            .max_connections
            .unwrap_or(self.default_max_connections);
        let h2c = server.h2c && !self.tls;
        let tls = if self.tls { state.tls.clone() } else { None };
        drop(state);
        if open > max {
            // Closed at once: the client sees the end of the connection
            // instead of a connection that hangs.
            self.metrics.client_error("connection_limit");
            return;
        }
        // In a future of its own, boxed: the handshake's state and the
        // h2c check's are freed when they end instead of taking room in
        // this future for as long as the connection lives.
        let tcp_local = tcp.local_addr().ok();
        let chosen = {
            let choose = Box::pin(self.choose(tcp, tls, h2c, header_timeout));
            choose.await
        };
        let (io, sniffed, h2) = match chosen {
            Some(c) => c,
            None => return,
        };
        let ends = tcp_local.map(|local| crate::engine::request::Ends {
            client: peer,
            local,
        });
        if h2 {
            let serve = crate::engine::h2::serve(
                io,
                sniffed,
                ends,
                self.engine.clone(),
                self.drain.clone(),
                slot,
            );
            // Boxed: an HTTP/2 connection's driver is large and rare
            // beside HTTP/1's.
            Box::pin(serve).await;
            return;
        }
        let client = crate::engine::h1::park::Idle {
            io,
            peer: ends,
            since: Instant::now(),
            engine: self.engine.clone(),
            drain: self.drain.clone(),
            open: slot,
        };
        crate::engine::h1::conn::serve(client, sniffed).await;
    }

    /// The connection's TLS handshake (with `tls`, on a TLS listener) and
    /// protocol: the stream, the bytes read to choose, and whether it is
    /// HTTP/2. `None`: the client left, was too slow, or failed its
    /// handshake (counted here).
    async fn choose(
        &self,
        mut tcp: TcpStream,
        tls: Option<Arc<crate::tls::ServerTls>>,
        h2c: bool,
        header_timeout: Duration,
    ) -> Option<(ClientIo, Vec<u8>, bool)> {
        if self.tls {
            // A TLS listener whose config lost [tls] (refused by reloads:
            // tls.listen needs a restart), so never; close.
            let tls = tls?;
            let s = match crate::tls::handshake::accept(&tls, tcp).await {
                Ok(s) => s,
                Err(reason) => {
                    self.metrics.tls_handshake_failed(reason);
                    return None;
                }
            };
            let h2 = s.get_ref().1.alpn_protocol() == Some(b"h2");
            return Some((ClientIo::Tls(Box::new(s)), Vec::new(), h2));
        }
        let mut sniffed = Vec::new();
        if h2c {
            match sniff(&mut tcp, &mut sniffed, header_timeout).await {
                Some(h2) => return Some((ClientIo::Plain(tcp), sniffed, h2)),
                None => {
                    self.metrics.client_error("header_timeout");
                    return None;
                }
            }
        }
        Some((ClientIo::Plain(tcp), sniffed, false))
    }
}

/// Reads a plain connection's first bytes, within the head's deadline,
/// just far enough to tell the HTTP/2 preface (`Some(true)`) from HTTP/1;
/// `None` when the client left or was too slow first.
async fn sniff(tcp: &mut TcpStream, sniffed: &mut Vec<u8>, timeout: Duration) -> Option<bool> {
    let deadline = tokio::time::Instant::now() + timeout;
    while sniffed.len() < PREFACE.len() {
        sniffed.reserve(PREFACE.len());
        let want = (PREFACE.len() - sniffed.len()) as u64;
        match tokio::time::timeout_at(deadline, (&mut *tcp).take(want).read_buf(sniffed)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return None,
            Ok(Ok(_)) => {}
        }
        if !PREFACE.starts_with(sniffed) {
            return Some(false);
        }
    }
    Some(true)
}
