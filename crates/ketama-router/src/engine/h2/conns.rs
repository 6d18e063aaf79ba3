//! This worker thread's HTTP/2 connections to backends (an `h2c`
//! backend's, or a TLS backend's whose ALPN picked `h2`): per backend, as
//! many connections as its streams need, each shared by every request
//! that finds a free stream on it (the backend's
//! `SETTINGS_MAX_CONCURRENT_STREAMS`, counted here: `h2` would queue a
//! stream past the limit instead of saying it is full), each driven by a
//! task of its own. A connection that failed, closed or was told GOAWAY
//! is dropped when it is next looked at, its open streams finishing on
//! it; the next request opens another.
//!
//! Memory: a stream holds at most its flow-control window of a backend's
//! response ([`STREAM_WINDOW`]) and a connection at most
//! [`CONNECTION_WINDOW`]: the router grants more only as it passes bytes
//! on to the client, so a slow client holds its backend stream back, not
//! the router's memory.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use h2::client::SendRequest;

use crate::engine::io::UpstreamIo;
use crate::engine::pool;
use crate::policy::Failure;

/// A backend stream's flow-control window: what one stream may hold of a
/// response the client has not taken yet (`h2`'s default, RFC 9113's
/// initial 65,535 bytes).
pub const STREAM_WINDOW: u32 = 65_535;

/// A backend connection's window: what all of its streams may hold.
pub const CONNECTION_WINDOW: u32 = 1 << 20;

/// A stream's way to a backend: its connection's request sender, and its
/// place among the connection's streams (given back when dropped).
pub struct Sender {
    /// The connection's sender (a clone per request).
    pub send: SendRequest<Bytes>,
    /// The connection served earlier requests.
    pub reused: bool,
    _stream: InFlight,
}

/// One stream counted against its connection's limit while it lives.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn new(count: &Arc<AtomicUsize>) -> InFlight {
        count.fetch_add(1, Relaxed);
        InFlight(count.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// One shared connection: its sender and its streams in flight.
struct Shared {
    send: SendRequest<Bytes>,
    streams: Arc<AtomicUsize>,
}

thread_local! {
    /// This thread's HTTP/2 connections to backends.
    static SHARED: RefCell<HashMap<pool::Key, Vec<Shared>>> = RefCell::new(HashMap::new());
}

/// A stream on one of this thread's HTTP/2 connections to `key` that has
/// one free; `None` when there is none (none open, or all at their
/// limit): then the caller opens another.
pub fn shared(key: &pool::Key) -> Option<Sender> {
    SHARED.with(|s| {
        let mut s = s.borrow_mut();
        let list = s.get_mut(key)?;
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        // Failed, closed or told GOAWAY: not usable (its streams finish).
        list.retain_mut(|c| !matches!(c.send.poll_ready(&mut cx), Poll::Ready(Err(_))));
        let free = list
            .iter()
            .find(|c| c.streams.load(Relaxed) < c.send.current_max_send_streams())?;
        Some(Sender {
            send: free.send.clone(),
            reused: true,
            _stream: InFlight::new(&free.streams),
        })
    })
}

/// Speaks HTTP/2 over `io` (prior knowledge for an `h2c` backend, or the
/// TLS connection whose ALPN picked it) and shares the connection for
/// `key`.
pub async fn handshake(io: UpstreamIo, key: pool::Key) -> Result<Sender, Failure> {
    let (send, conn) = h2::client::Builder::new()
        // Until the backend's SETTINGS say otherwise, RFC 9113's
        // recommended least limit (`h2` would take any number and queue
        // past the real one, behind streams that may last for hours).
        .initial_max_send_streams(100)
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .handshake::<_, Bytes>(io)
        .await
        .map_err(|_| Failure::Connect)?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!("an HTTP/2 connection to a backend ended: {e}");
        }
    });
    let streams = Arc::new(AtomicUsize::new(0));
    let stream = InFlight::new(&streams);
    SHARED.with(|s| {
        s.borrow_mut().entry(key).or_default().push(Shared {
            send: send.clone(),
            streams,
        })
    });
    Ok(Sender {
        send,
        reused: false,
        _stream: stream,
    })
}
