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
//!   client's side a [`attempt::Client`]: [`h1::H1Client`],
//!   [`h2::H2Client`]): one library call for the route, then attempts in
//!   failover order under [`crate::policy`]; its [`record::Record`] is
//!   what it leaves behind.
//! - **upstream**: a backend's connection ([`upstream`], kept in
//!   [`pool`] per worker thread, or one shared HTTP/2 connection per
//!   backend, [`h2::upstream`]); an HTTP/1 backend gets its head written
//!   by [`head_write`] and its body through [`upload`] (which watches for
//!   an early answer), and its response head is read by
//!   [`response_head`] ([`upstream_h1`]).
//! - **body**: every body, either direction and protocol, through the one
//!   copy loop ([`copy`]; HTTP/1 framing in [`body`]), read through the
//!   one reader of each byte stream ([`io::Buffered`]), written to
//!   clients under `send_timeout_ms` ([`send`]).
//! - **keep-alive**: an HTTP/1 connection's fate is decided in one place
//!   ([`h1::H1Client::keep_alive`]); between requests it holds no buffer
//!   ([`buffers`]), and an idle one no task ([`h1::park`]).

use std::sync::Arc;

use crate::access_log::AccessLog;
use crate::metrics::Metrics;
use crate::state::StateReader;

pub mod attempt;
pub mod body;
pub mod buffers;
pub mod copy;
pub mod date;
pub mod exchange;
pub mod fields;
pub mod grpc;
pub mod h1;
pub mod h2;
pub mod head_write;
pub mod io;
pub mod pool;
pub mod record;
pub mod request;
pub mod request_head;
pub mod response_head;
pub mod send;
pub mod upload;
pub mod upstream;
pub mod upstream_h1;

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
