//! The router's engine: every client connection, HTTP/1 and HTTP/2, once
//! the connection guard ([`crate::conn`]: limit, TLS, protocol choice) let
//! it in. One path for every protocol:
//!
//! ```text
//! accept -> head -> route -> upstream -> body -> keep-alive
//! ```
//!
//! - **head**: an HTTP/1 request head is read once, incrementally, into
//!   positions in the connection's buffer ([`request_head`], with
//!   nginx 1.22's header rules in [`fields`]); an HTTP/2 stream's by the
//!   `h2` crate ([`h2`]). Either is a [`request::Req`] from then on.
//! - **route**: [`exchange`], one request for either protocol (the
//!   client's side a [`attempt::Client`]: `h1::H1Client`,
//!   `h2::client::H2Client`): one library call for the route, then
//!   attempts in failover order under [`crate::policy`]; its
//!   [`record::Record`] is what it leaves behind; the router's own
//!   answers, either protocol, are built from [`head_write::Own`].
//! - **upstream**: a backend's connection ([`upstream`], kept in
//!   [`pool`] per worker thread, or one shared HTTP/2 connection per
//!   backend, [`h2::upstream`]); what both protocols' request heads carry
//!   besides the client's is [`attempt::upstream`]; an HTTP/1 backend
//!   gets its head written by [`head_write`] and its body through
//!   [`upload`] (which watches for an early answer), and its final
//!   response head is read by [`response_head::read_final`]
//!   ([`upstream_h1`]); a response body's delimiting, either protocol, is
//!   [`response_head::framing`]; either backend's response goes to the
//!   client through [`relay`], which writes what the attempt did to the
//!   record.
//! - **body**: every body, either direction and protocol, through the one
//!   copy loop ([`copy`]; an HTTP/2 peer's DATA frames handed on as the
//!   buffers they came in), an HTTP/1 body written by [`framed`] (chunked
//!   as nginx chunks; framing rules in [`body`]), read through the one
//!   reader of each byte stream ([`io::Buffered`]), written to clients
//!   under `send_timeout_ms` ([`send`]).
//! - **keep-alive**: an HTTP/1 connection's fate is what its answer said
//!   when its head was written (`H1Client::writing_head`, the request's
//!   `Writing`); between requests it holds no buffer
//!   ([`buffers`]), and an idle one no task ([`h1::park`]); a graceful
//!   stop is one wait ([`crate::drain::Drain::stopped`]).
//!
//! Following one request, in order:
//!
//! - **HTTP/1**: `h1::conn::serve` -> `run` (the connection's loop:
//!   `read_head` by [`request_head::Reader`], or `refuse`) -> `request`
//!   (an `h1::H1Client`: the request's head, its `Reading` and `Writing`)
//!   -> [`exchange::exchange`] (the route) -> `attempts` (the body read
//!   whole when small; a backend's connection, [`upstream::connect`]) ->
//!   [`upstream_h1::attempt`] (the head, [`head_write::request_head`];
//!   the body through [`upload`]; the response head, [`response_head`])
//!   -> [`relay::answered`], `H1Client::respond` (the connection's fate),
//!   [`relay::sent`], [`relay::body`] (the one [`copy`] loop) -> back in
//!   `request`: [`record::Record::end`] (the access log, the counters),
//!   then the next request, a lingering close, or `idle` and
//!   [`h1::park`].
//! - **HTTP/2**: [`h2`]'s `serve` (the connection: its guard, the
//!   stream limits, the stop) -> `h2::client::stream` (nginx's rules for
//!   a stream's head, then an `H2Client`, or [`exchange::refuse`]) ->
//!   [`exchange::exchange`] -> `attempts` -> [`h2::upstream`]'s `attempt`
//!   (the backend's stream; the body whole, streamed from an HTTP/1
//!   client, or pumped from an HTTP/2 client beside the response) ->
//!   `receive` (the head within `read_timeout`) -> [`relay::answered`],
//!   `H2Client::respond`, [`relay::sent`], [`relay::body`] (DATA frames
//!   handed on as they came, trailers) -> [`record::Record::end`].

use std::sync::Arc;

use crate::access_log::AccessLog;
use crate::metrics::Metrics;
use crate::state::StateReader;

pub(crate) mod attempt;
pub(crate) mod body;
pub(crate) mod buffers;
pub(crate) mod copy;
pub(crate) mod date;
pub(crate) mod exchange;
pub(crate) mod fields;
pub(crate) mod framed;
pub(crate) mod grpc;
pub(crate) mod h1;
pub(crate) mod h2;
pub(crate) mod head_write;
pub(crate) mod io;
pub(crate) mod pool;
pub(crate) mod record;
pub(crate) mod relay;
pub(crate) mod request;
pub(crate) mod request_head;
pub(crate) mod response_head;
pub(crate) mod send;
pub(crate) mod upload;
pub(crate) mod upstream;
pub(crate) mod upstream_h1;

/// What the allocation tests (tests/alloc.rs, tests/engine_alloc.rs)
/// drive the engine's parts by, from outside the crate: not an API. The
/// engine's modules are the crate's own, so the compiler finds what
/// nothing uses.
#[doc(hidden)]
pub mod testing {
    pub use super::h1::conn::serve;
    pub use super::h1::park::Idle;
    pub use super::head_write::{request_head, response_head, Downstream, Upstream};
    pub use super::io::ClientIo;
    pub use super::record::Record;
    pub use super::request::{Ends, H1Request};
    pub use super::request_head::{Head, Reader, Rules};
    pub use super::response_head::{H1Response, ResponseHead};
}

/// What the engine serves with: the routing state, the counters and the
/// access log.
pub struct Engine {
    /// The current routing state.
    pub routing: StateReader,
    /// The counters.
    pub metrics: Arc<Metrics>,
    /// The access log.
    pub access_log: AccessLog,
}
