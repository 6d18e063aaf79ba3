//! This worker thread's HTTP/2 connections to backends (an `h2c`
//! backend's, or a TLS backend's whose ALPN picked `h2`): per backend, as
//! many connections as its streams need, each shared by every request
//! that finds a free stream on it (the backend's
//! `SETTINGS_MAX_CONCURRENT_STREAMS`, counted here: `h2` would queue a
//! stream past the limit instead of saying it is full), each driven by a
//! task of its own. A connection that failed, closed or was told GOAWAY
//! is dropped when it is next looked at, its open streams finishing on
//! it; the next request opens another. One without a stream for
//! [`pool::IDLE_MAX`] is closed by the thread's sweep (every
//! [`SWEEP_EVERY`]), so that a backend that left the configuration does
//! not keep its connections.
//!
//! Memory: a stream holds at most its flow-control window of a backend's
//! response ([`STREAM_WINDOW`]) and a connection at most
//! [`CONNECTION_WINDOW`]: the router grants more only as it passes bytes
//! on to the client, so a slow client holds its backend stream back, not
//! the router's memory.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

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

/// How often a thread's HTTP/2 connections to backends are looked over.
pub const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// One shared connection: its sender, its streams in flight, and when it
/// last handed one out.
struct Shared {
    send: SendRequest<Bytes>,
    streams: Arc<AtomicUsize>,
    used: Instant,
}

impl Shared {
    /// Failed, closed or told GOAWAY: no new stream goes on it.
    fn done(&mut self) -> bool {
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        matches!(self.send.poll_ready(&mut cx), Poll::Ready(Err(_)))
    }
}

thread_local! {
    /// This thread's HTTP/2 connections to backends.
    static SHARED: RefCell<HashMap<pool::Key, Vec<Shared>>> = RefCell::new(HashMap::new());
    static SWEEPING: Cell<bool> = const { Cell::new(false) };
}

/// A stream on one of this thread's HTTP/2 connections to `key` that has
/// one free; `None` when there is none (none open, or all at their
/// limit): then the caller opens another.
pub fn shared(key: &pool::Key) -> Option<Sender> {
    SHARED.with(|s| {
        let mut s = s.borrow_mut();
        let list = s.get_mut(key)?;
        // Not usable any more: dropped here, its streams finishing.
        list.retain_mut(|c| !c.done());
        let free = list
            .iter_mut()
            .find(|c| c.streams.load(Relaxed) < c.send.current_max_send_streams())?;
        free.used = Instant::now();
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
            used: Instant::now(),
        })
    });
    start_sweep();
    Ok(Sender {
        send,
        reused: false,
        _stream: stream,
    })
}

/// Starts this thread's sweep, once.
fn start_sweep() {
    if SWEEPING.with(|s| s.replace(true)) {
        return;
    }
    tokio::spawn(async {
        loop {
            tokio::time::sleep(SWEEP_EVERY).await;
            sweep();
        }
    });
}

/// Drops this thread's connections that are done, or idle (no stream)
/// for [`pool::IDLE_MAX`]: `h2` closes a connection once its last
/// handle is gone.
fn sweep() {
    SHARED.with(|s| {
        s.borrow_mut().retain(|_, list| {
            list.retain_mut(|c| {
                let idle = c.streams.load(Relaxed) == 0 && c.used.elapsed() >= pool::IDLE_MAX;
                !idle && !c.done()
            });
            !list.is_empty()
        })
    });
}
