//! HTTP/2 clients (ALPN `h2`, or h2c with prior knowledge), served with
//! the `h2` crate: each stream an exchange through the same code as an
//! HTTP/1 request ([`super::exchange`], with an [`client::H2Client`]), on a task
//! of its own on the connection's worker thread.
//!
//! What a connection may cost, each a `[server]` setting where nginx has
//! one:
//!
//! | limit | HTTP/2 |
//! |---|---|
//! | `h2_max_concurrent_streams` | `SETTINGS_MAX_CONCURRENT_STREAMS`; a stream past it is refused (`REFUSED_STREAM`) |
//! | `max_header_bytes` | `SETTINGS_MAX_HEADER_LIST_SIZE`: a decoded header list over it is refused |
//! | `client_header_timeout_ms` | the preface, then each header block, from its first byte ([`guard`]) |
//! | `keepalive_timeout_ms` | a connection with no open stream this long is closed |
//! | `client_body_timeout_ms` | per stream, between two DATA frames: 408 on that stream |
//! | `send_timeout_ms` | per stream, no flow-control window granted for it: the stream is reset |
//! | resets | streams the client resets before the router accepts them: 20 (`h2`'s pending-accept budget); streams the router must reset for a client's error: 1,024; streams the client resets after they were accepted: [`RESET_BUDGET`], earned back by streams answered whole; past any of them the connection ends (`GOAWAY`) |
//! | floods | bytes that carry no payload past an eighth of all bytes less 1 MiB: `GOAWAY NO_ERROR`; PRIORITY frames past `max(streams, 100)` plus `streams` per HEADERS: `GOAWAY ENHANCE_YOUR_CALM` (nginx's budgets, [`scan`]) |
//! | `keepalive_requests` | streams one connection may open; the last one allowed is answered, then `GOAWAY` (graceful) |
//! | `keepalive_time_ms` | a connection's whole life: then `GOAWAY` (graceful), its open streams finished |
//!
//! RFC 9113's rules are the `h2` crate's: connection-specific fields
//! (`Connection`, `Keep-Alive`, `Proxy-Connection`, `Transfer-Encoding`,
//! `Upgrade`), `TE` other than `trailers`, pseudo-headers out of place or
//! repeated make a stream malformed (reset); a `content-length` that the
//! DATA frames do not match resets the stream. Then the rules an HTTP/1
//! head is read by, as nginx applies them to HTTP/2 ([`rules`]).

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::Notify;

use super::io::ClientIo;
use super::Engine;
use crate::drain::Drain;
use crate::metrics::OpenConnection;

pub mod body;
pub mod client;
pub mod conns;
pub mod guard;
pub mod rules;
mod scan;
pub mod upstream;

/// The HTTP/2 connection preface (RFC 9113 section 3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Streams a client may reset after the router accepted them, before its
/// connection ends; each stream answered whole earns one back (up to
/// this many).
pub const RESET_BUDGET: i64 = 256;

/// The connection's open streams and reset budget, shared with their
/// tasks.
#[derive(Default)]
struct Streams {
    open: AtomicUsize,
    budget: AtomicI64,
    /// Woken when the last open stream ends, or the budget runs out.
    changed: Notify,
}

/// One open stream's place in [`Streams`].
struct Open(Arc<Streams>);

impl Open {
    fn new(s: &Arc<Streams>) -> Open {
        s.open.fetch_add(1, Relaxed);
        Open(s.clone())
    }

    /// How the stream ended: answered whole, or reset by the client.
    fn ended(&self, whole: bool, reset_by_client: bool) {
        let b = &self.0.budget;
        if whole {
            if b.load(Relaxed) < RESET_BUDGET {
                b.fetch_add(1, Relaxed);
            }
        } else if reset_by_client && b.fetch_sub(1, Relaxed) <= 1 {
            self.0.changed.notify_one();
        }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if self.0.open.fetch_sub(1, Relaxed) == 1 {
            self.0.changed.notify_one();
        }
    }
}

/// Streams a client may open and reset before the router accepts them
/// (rapid reset, CVE-2023-44487): past these the connection ends with
/// `GOAWAY`. `h2`'s defaults, written out because they are the router's
/// limits as much as `h2`'s.
const PENDING_RESETS: usize = 20;
/// Streams the router may reset for a client's errors on one connection
/// (the "made you reset" attack) before it ends the connection.
const ERROR_RESETS: usize = 1024;
/// Reset streams whose late frames are still recognised (and dropped)
/// rather than taken as a protocol error.
const REMEMBERED_RESETS: usize = 10;
/// The most a stream queues toward its client beyond the flow-control
/// window (`body_buffer_bytes`, up to this): a slow client holds back its
/// backend, not the router's memory.
const MAX_SEND_BUFFER: usize = 1 << 20;

/// Serves an HTTP/2 connection until it closes: `sniffed` its first bytes,
/// already read (an h2c preface).
pub async fn serve(
    io: ClientIo,
    sniffed: Vec<u8>,
    peer: Option<crate::engine::request::Ends>,
    engine: Arc<Engine>,
    drain: Arc<Drain>,
    _open: OpenConnection,
) {
    let tls = io.is_tls();
    let state = engine.routing.state();
    let server = &state.validated.config.server;
    let header_timeout = Duration::from_millis(server.client_header_timeout_ms);
    let keepalive = Duration::from_millis(server.keepalive_timeout_ms);
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(server.h2_max_concurrent_streams)
        .max_header_list_size(server.max_header_bytes as u32)
        .max_pending_accept_reset_streams(PENDING_RESETS)
        .max_local_error_reset_streams(Some(ERROR_RESETS))
        .max_concurrent_reset_streams(REMEMBERED_RESETS)
        .max_send_buffer_size(server.body_buffer_bytes.min(MAX_SEND_BUFFER));
    let max_streams = server.keepalive_requests;
    let ends_at = tokio::time::Instant::now() + Duration::from_millis(server.keepalive_time_ms);
    let concurrent = server.h2_max_concurrent_streams;
    drop(state);
    let guarded = guard::Guarded::new(io, sniffed, header_timeout, concurrent);
    let watch = guarded.watch();
    let mut conn = match builder.handshake::<_, Bytes>(guarded).await {
        Ok(c) => c,
        Err(_) => {
            if watch.expired() {
                engine.metrics.client_error("header_timeout");
            }
            return;
        }
    };
    let mut accepted_streams = 0u64;
    let lifetime = tokio::time::sleep_until(ends_at);
    tokio::pin!(lifetime);
    let streams = Arc::new(Streams {
        budget: AtomicI64::new(RESET_BUDGET),
        ..Streams::default()
    });
    let closing = drain.stopped();
    tokio::pin!(closing);
    let mut idle_since = Instant::now();
    let mut stopping = false;
    loop {
        let idle = streams.open.load(Relaxed) == 0;
        let idle_until = tokio::time::Instant::from_std(idle_since + keepalive);
        tokio::select! {
            accepted = conn.accept() => match accepted {
                Some(Ok((req, respond))) => {
                    let open = Open::new(&streams);
                    tokio::spawn(client::stream(engine.clone(), req, respond, peer, tls, open));
                    accepted_streams += 1;
                    if accepted_streams >= max_streams && !stopping {
                        // nginx's keepalive_requests: this stream is
                        // served, the client opens the next elsewhere.
                        conn.graceful_shutdown();
                        stopping = true;
                    }
                }
                Some(Err(e)) => {
                    if watch.expired() {
                        engine.metrics.client_error("header_timeout");
                    }
                    tracing::debug!("HTTP/2 connection ended: {e}");
                    return;
                }
                None => return,
            },
            () = streams.changed.notified() => {
                if streams.budget.load(Relaxed) <= 0 {
                    engine.metrics.client_error("h2_reset_flood");
                    conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                    stopping = true;
                }
                if streams.open.load(Relaxed) == 0 {
                    idle_since = Instant::now();
                }
            }
            () = tokio::time::sleep_until(idle_until), if idle && !stopping => {
                // Idle with nothing in flight: closed at once.
                return;
            }
            () = &mut closing, if !stopping => {
                conn.graceful_shutdown();
                stopping = true;
            }
            () = &mut lifetime, if !stopping => {
                // nginx's keepalive_time.
                conn.graceful_shutdown();
                stopping = true;
            }
            () = watch.flooded.notified() => {
                let (reason, why) = match watch.flood() {
                    Some(scan::Flood::Priority) => (h2::Reason::ENHANCE_YOUR_CALM, "h2_priority_flood"),
                    _ => (h2::Reason::NO_ERROR, "h2_flood"),
                };
                engine.metrics.client_error(why);
                conn.abrupt_shutdown(reason);
                stopping = true;
            }
        }
    }
}
