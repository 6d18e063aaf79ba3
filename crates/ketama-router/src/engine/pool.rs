//! Idle connections to backends, kept for the next request: per worker
//! thread, per backend, last in first out (the warmest connection first;
//! the coldest age out). No task and no lock per idle connection: a
//! connection waits in its thread's list, and one the backend closed (or
//! that holds bytes nobody asked for) is found when it is taken, by its
//! readiness as the reactor last saw it, at no system call; a periodic
//! sweep drops those and the ones idle longer than [`IDLE_MAX`].
//!
//! `[server] upstream_keepalive_pool_size` bounds the idle HTTP/1
//! connections of the whole process, every thread's list together; a
//! connection coming back to a full pool is closed. (HTTP/2 backends'
//! connections are shared by streams instead: [`super::h2::conns`].)

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::io::UpstreamIo;

/// How long an idle connection is kept (nginx's upstream
/// `keepalive_timeout` default).
pub const IDLE_MAX: Duration = Duration::from_secs(60);

/// How often a thread's idle connections are looked over.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// What makes two connections interchangeable: the backend's address and,
/// for TLS, what identifies its session (the SNI and the settings'
/// generation, [`crate::tls::UpstreamTls::group_key`]).
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Key {
    /// The backend's address.
    pub addr: SocketAddr,
    /// `None`: plain; else the SNI and the TLS settings' hash.
    pub tls: Option<(std::sync::Arc<str>, u64)>,
    /// Spoken to in HTTP/2 with prior knowledge (`h2c`).
    pub h2c: bool,
}

struct Pooled {
    io: UpstreamIo,
    since: Instant,
}

thread_local! {
    static IDLE: RefCell<HashMap<Key, Vec<Pooled>>> = RefCell::new(HashMap::new());
    static SWEEPING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Pooled connections of the whole process (every thread's lists).
static HELD: AtomicUsize = AtomicUsize::new(0);

/// A good idle connection to `key`, if this thread has one.
pub fn take(key: &Key) -> Option<UpstreamIo> {
    IDLE.with(|idle| {
        let mut idle = idle.borrow_mut();
        let list = idle.get_mut(key)?;
        while let Some(c) = list.pop() {
            HELD.fetch_sub(1, Relaxed);
            if c.since.elapsed() < IDLE_MAX && c.io.idle_and_open() {
                return Some(c.io);
            }
        }
        None
    })
}

/// Keeps `io` for the next request to `key`, unless `max` connections are
/// idle already (then it is closed).
pub fn put(key: &Key, io: UpstreamIo, max: usize) {
    if HELD.fetch_add(1, Relaxed) >= max {
        HELD.fetch_sub(1, Relaxed);
        return;
    }
    IDLE.with(|idle| {
        let mut idle = idle.borrow_mut();
        let entry = match idle.get_mut(key) {
            Some(e) => e,
            None => idle.entry(key.clone()).or_default(),
        };
        entry.push(Pooled {
            io,
            since: Instant::now(),
        });
    });
    start_sweep();
}

/// Starts this thread's sweep, once (on a runtime; a thread without one
/// keeps its connections until they are taken).
fn start_sweep() {
    if SWEEPING.with(|s| s.replace(true)) {
        return;
    }
    if tokio::runtime::Handle::try_current().is_err() {
        SWEEPING.with(|s| s.set(false));
        return;
    }
    tokio::spawn(async {
        loop {
            tokio::time::sleep(SWEEP_EVERY).await;
            sweep();
        }
    });
}

/// Drops this thread's idle connections that went bad or stayed too long.
fn sweep() {
    IDLE.with(|idle| {
        let mut idle = idle.borrow_mut();
        idle.retain(|_, list| {
            let before = list.len();
            list.retain(|c| c.since.elapsed() < IDLE_MAX && c.io.idle_and_open());
            HELD.fetch_sub(before - list.len(), Relaxed);
            !list.is_empty()
        });
    });
}
