//! Client connections: how many may be open, how long a TLS handshake,
//! a request head or an idle connection may take, and which protocol each
//! speaks.
//!
//! [`Guarded`] sits between a listener and Pingora's HTTP proxy. For each
//! accepted connection it:
//!
//! 1. closes it at once past `server.max_connections` (TLS connections
//!    count too, before any TLS work);
//! 2. on a TLS listener, runs the handshake with the certificates of the
//!    routing state in force at the accept (so a reload's certificates
//!    serve the next handshake), within `tls.handshake_timeout_ms`,
//!    counting failures by reason;
//! 3. picks the protocol: HTTP/2 when ALPN chose `h2`, or, on a plain
//!    listener with `server.h2c`, when the client's first bytes are the
//!    HTTP/2 preface (read under the head deadline, then replayed);
//!    HTTP/1.x otherwise;
//! 4. hands HTTP/1.x to the router's own engine ([`crate::http1`]), and
//!    HTTP/2 to Pingora's HTTP/2 path (its per-stream tasks, stream
//!    limits and reset budget) under `h2_max_concurrent_streams`, the
//!    decoded header list capped at `max_header_bytes`, and
//!    `keepalive_timeout_ms` as the idle time of a connection with no
//!    open stream. With `[upstream_tls] h2`, HTTP/1.x goes to Pingora's
//!    HTTP/1 proxy instead (its HTTP/2 client), wrapped in a [`Timed`]
//!    stream with the deadlines nginx applies (see [`timed`]), requests one
//!    by one through this loop.
//!
//! On Pingora's paths the time between two reads of a request body
//! (`client_body_timeout`) is Pingora's per-read timeout, set by the
//! proxy on each request; on HTTP/2 per stream, through the pingora-core
//! patch in `vendor/`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use std::net::SocketAddr;

use pingora::apps::HttpServerApp;
use pingora::protocols::http::ServerSession;
use pingora::server::ShutdownWatch;
use tokio::net::TcpStream;

use crate::metrics::Metrics;
use crate::state::StateReader;

mod h2scan;
mod paths;
use paths::Chosen;
pub mod timed;

use timed::Limits;
pub use timed::{Clock, Timed};

/// Pingora's HTTP proxy behind a connection limit, TLS, protocol choice
/// and head/idle deadlines. The limits and certificates are the current
/// routing state's, read at each accept, so a reload changes them for new
/// connections.
pub struct Guarded<A> {
    inner: Arc<A>,
    /// The limit when the config sets none (derived from the file limit).
    default_max_connections: usize,
    counts: Arc<crate::drain::Drain>,
    /// Whether this guard's listeners speak TLS.
    tls: bool,
    /// The current limits and certificates.
    routing: StateReader,
    /// Refusals are counted here.
    metrics: Arc<Metrics>,
    /// The router's own HTTP/1 engine, which serves HTTP/1 unless the
    /// backends speak HTTP/2 (`[upstream_tls] h2`).
    engine: Arc<crate::http1::Engine>,
}

impl<A> Guarded<A> {
    /// Wraps an HTTP app, for plain listeners; HTTP/1 goes to `engine`.
    pub fn new(
        inner: A,
        default_max_connections: usize,
        routing: StateReader,
        metrics: Arc<Metrics>,
        engine: Arc<crate::http1::Engine>,
    ) -> Self {
        Guarded {
            engine,
            inner: Arc::new(inner),
            default_max_connections,
            counts: Arc::default(),
            tls: false,
            routing,
            metrics,
        }
    }

    /// The same app, limit and counts, for TLS listeners.
    pub fn tls_twin(&self) -> Self {
        Guarded {
            inner: self.inner.clone(),
            default_max_connections: self.default_max_connections,
            counts: self.counts.clone(),
            tls: true,
            routing: self.routing.clone(),
            metrics: self.metrics.clone(),
            engine: self.engine.clone(),
        }
    }
}

tokio::task_local! {
    /// The clock of the HTTP/1 connection whose request this task serves.
    static HEAD_CLOCK: Arc<Clock>;
}

/// The target of the HTTP/1 request this task serves as its client sent
/// it, when Pingora's header holds another (see [`crate::reqline`]).
pub fn take_sent() -> Option<crate::reqline::Sent> {
    HEAD_CLOCK.try_with(|c| c.take_sent()).ok().flatten()
}

/// Whether a downstream failure was the client taking no response byte
/// for `send_timeout_ms` on HTTP/1 (the stream's own write error).
pub fn is_send_timeout(e: &pingora::Error) -> bool {
    let root = e.root_cause();
    root.downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref())
        .is_some_and(|inner| inner.is::<timed::SendTimedOut>())
        || root.is::<timed::SendTimedOut>()
}

/// When the request being served began (its head's first byte; the
/// accept for a connection's first request), on HTTP/1. `None` on
/// HTTP/2, whose streams Pingora serves as tasks of their own.
pub fn head_started() -> Option<Instant> {
    HEAD_CLOCK.try_with(|c| c.head_started()).ok()
}

impl<A: HttpServerApp + Send + Sync + 'static> Guarded<A> {
    /// HTTP/1.x: requests one by one on the connection, the keep-alive
    /// deadline between them.
    ///
    /// Each request's session and Pingora's request future are made only
    /// once its first bytes have arrived ([`Timed::await_request`]), so an
    /// idle connection holds its stream and this loop, not them.
    ///
    /// With `pipelining`, requests a client sends before the answers to
    /// the earlier ones are served in order, one at a time, as nginx
    /// serves them: Pingora hands back what it read past a request, and it
    /// goes through this stream again as the next request's first bytes,
    /// under the same limits as any request's.
    async fn serve_http1(
        &self,
        timed: Timed,
        clock: &Arc<Clock>,
        shutdown: &ShutdownWatch,
        pipelining: bool,
    ) {
        let mut timed = Box::new(timed);
        // A connection's first request is awaited even when the router is
        // closing, as nginx serves a new connection's first request at a
        // graceful stop: the client sent it to a listener that accepted it
        // (one accepted, or still in its TLS handshake, just before the
        // accept loop ended would otherwise be closed unanswered).
        if !matches!(timed.await_request().await, Ok(true)) {
            return;
        }
        let mut session = ServerSession::new_http1(timed);
        // The deadlines are the Timed stream's; Pingora's own idle timer
        // stays out of the way ("0": no timeout of its own).
        session.set_keepalive(if *shutdown.borrow() { None } else { Some(0) });
        session.set_pipelining_enabled(pipelining);
        let serve = |s| HEAD_CLOCK.scope(clock.clone(), self.inner.process_new_http(s, shutdown));
        let mut result = serve(session).await;
        while let Some((stream, mut settings)) = result.map(|r| r.consume()) {
            // The stream is the Timed one this loop gave the session.
            let Ok(mut timed) = stream.into_any().downcast::<Timed>() else {
                return;
            };
            if let Some(next) = settings.as_mut().and_then(|s| s.take_pipelined_prefix()) {
                timed.queue_pipelined(&next);
            }
            clock.idle();
            if !self.next_request(&mut timed).await {
                return;
            }
            let mut session = ServerSession::new_http1(timed);
            if let Some(settings) = settings {
                settings.apply_to_session(&mut session);
            }
            result = serve(session).await;
        }
    }
}

impl<A> Guarded<A> {
    /// Waits for the next request's first bytes; `false` when the
    /// connection should close instead (the client left or idled out, or
    /// the router is shutting down).
    async fn next_request(&self, timed: &mut Timed) -> bool {
        let closing = self.counts.close_idle.notified();
        tokio::pin!(closing);
        closing.as_mut().enable();
        if self.counts.is_closing() {
            return false;
        }
        tokio::select! {
            biased;
            r = timed.await_request() => matches!(r, Ok(true)),
            () = closing => false,
        }
    }
}

impl<A: HttpServerApp + Send + Sync + 'static> Guarded<A> {
    /// One accepted connection: the limit, TLS, the protocol, then its path.
    async fn serve_connection(
        self: Arc<Self>,
        tcp: TcpStream,
        peer: SocketAddr,
        shutdown: ShutdownWatch,
    ) {
        let (slot, open) = self.metrics.connection_opened();
        let state = self.routing.state();
        let server = &state.validated.config.server;
        let limits = Limits {
            header_timeout: Duration::from_millis(server.client_header_timeout_ms),
            keepalive_timeout: Duration::from_millis(server.keepalive_timeout_ms),
            max_head: server.max_header_bytes,
            send_timeout: Duration::from_millis(server.send_timeout_ms),
        };
        let pipelining = server.pipelining;
        let max = server
            .max_connections
            .unwrap_or(self.default_max_connections);
        let h2c = server.h2c && !self.tls;
        let tls = if self.tls { state.tls.clone() } else { None };
        // With `[upstream_tls] h2`, HTTP/1 requests go through Pingora's
        // proxy (its HTTP/2 client).
        let engine = !state.upstream_tls.h2();
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
        let chosen = {
            let choose = Box::pin(self.choose(tcp, peer, tls, h2c, engine, limits.header_timeout));
            choose.await
        };
        match chosen {
            Chosen::Engine(io, early) => {
                let client = crate::http1::park::Idle {
                    io,
                    peer: Some(peer.ip()),
                    since: std::time::Instant::now(),
                    engine: self.engine.clone(),
                    drain: self.counts.clone(),
                    open: slot,
                };
                crate::http1::conn::serve(client, early).await;
            }
            Chosen::Pingora(stream, h2c) => {
                let path = Box::pin(self.serve_pingora(stream, limits, h2c, pipelining, &shutdown));
                path.await;
            }
            Chosen::Closed => {}
        }
    }
}

impl<A: HttpServerApp + Send + Sync + 'static> crate::listen::Serve for Guarded<A> {
    fn serve(
        self: Arc<Self>,
        tcp: TcpStream,
        peer: SocketAddr,
        shutdown: ShutdownWatch,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.serve_connection(tcp, peer, shutdown)
    }

    /// At shutdown (after the listeners stopped accepting), Pingora aborts
    /// every connection still waiting for a request head. A connection
    /// accepted just before, whose request is on its way, would lose it:
    /// first let the heads being read arrive (at most 2 s, within the grace
    /// period), then close the idle keep-alive connections (a connection's
    /// first request is awaited regardless). This is what makes a graceful
    /// upgrade drop nothing.
    async fn cleanup(&self) {
        // Within the grace period, and at most 2 s of it: Pingora gives
        // what is running the grace period and as long again before it
        // stops the runtimes, and the heads waited for must be served too.
        let grace = self
            .routing
            .state()
            .validated
            .config
            .server
            .grace_period_seconds;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(grace.min(2));
        self.counts.heads.until_none(deadline).await;
        // Idle keep-alive connections wait in this guard or the engine's
        // keeper, not in Pingora: they close here, as Pingora closes its own.
        self.counts.close_idle();
        self.inner.http_cleanup().await;
    }
}
