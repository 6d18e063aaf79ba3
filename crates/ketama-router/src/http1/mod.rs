//! The router's own HTTP/1 engine: what an HTTP/1.x client's connection
//! meets after the connection guard ([`crate::conn`]: limit, TLS, protocol
//! choice), instead of Pingora's HTTP/1 proxy. Pingora keeps the process
//! (its server, signals, background services, graceful upgrade) and
//! HTTP/2.
//!
//! - [`head`]: the one reader of a request head (nginx's request-line,
//!   header and framing rules), incremental, into positions in the
//!   connection's buffer;
//! - [`conn`]: a connection's loop (deadlines, keep-alive, pipelining,
//!   graceful stop); [`exchange`]: one request (route, failover under
//!   [`crate::policy`], accounting); [`relay`] and [`respond`]: the
//!   bodies; [`forward`]: the heads written to each side; [`reply`]: the
//!   router's own answers; [`send`]: writes to the client under
//!   `send_timeout_ms`;
//! - [`upstream`] and [`pool`]: backends' connections, plain or TLS
//!   (rustls, `[upstream_tls]`'s settings), kept per thread without a task
//!   per idle connection;
//! - [`response`] and [`chunked`]: a backend's response head and chunked
//!   bodies, read as nginx reads them.
//!
//! It serves every HTTP/1.x connection, except with `[upstream_tls] h2 =
//! true`: then HTTP/1 requests keep going through Pingora's proxy, whose
//! HTTP/2 client the backends need (decided per connection, at its
//! accept, by the routing state in force).

use std::sync::Arc;

use crate::access_log::AccessLog;
use crate::metrics::Metrics;
use crate::state::StateReader;

mod buffers;
pub mod chunked;
pub mod conn;
pub mod date;
pub mod exchange;
pub mod fields;
pub mod forward;
pub mod head;
pub mod io;
pub mod park;
pub mod pool;
pub mod relay;
pub mod reply;
pub mod request;
pub mod respond;
pub mod response;
pub mod send;
pub mod tunnel;
pub mod upload;
pub mod upstream;

/// What the engine serves with: the routing state, the counters and the
/// access log (the same handles as Pingora's path).
pub struct Engine {
    /// The current routing state.
    pub routing: StateReader,
    /// The counters.
    pub metrics: Arc<Metrics>,
    /// The access log.
    pub access_log: AccessLog,
}
