//! What a graceful stop needs of the client connections, shared by every
//! listener's guard and by every protocol: which connections are
//! reading a request head (let them finish), and a flag and a wake-up that
//! close the idle ones.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

/// The connections of a service that are reading a request head, and a
/// wake-up when none is (a graceful stop waits for those heads).
#[derive(Debug, Default)]
pub struct Heads {
    count: AtomicUsize,
    none: tokio::sync::Notify,
}

impl Heads {
    /// A connection starts reading a head.
    pub fn enter(&self) {
        self.count.fetch_add(1, Relaxed);
    }

    /// It stopped (the head arrived, or the connection ended).
    pub fn leave(&self) {
        if self.count.fetch_sub(1, Relaxed) == 1 {
            self.none.notify_waiters();
        }
    }

    /// Waits until no connection is reading a head, or `deadline`.
    pub async fn until_none(&self, deadline: tokio::time::Instant) {
        loop {
            let none = self.none.notified();
            tokio::pin!(none);
            none.as_mut().enable();
            if self.count.load(Relaxed) == 0 {
                return;
            }
            tokio::select! {
                () = none => {}
                () = tokio::time::sleep_until(deadline) => return,
            }
        }
    }
}

/// A graceful stop's view of the client connections.
#[derive(Debug, Default)]
pub struct Drain {
    /// Connections reading a request head now.
    pub heads: std::sync::Arc<Heads>,
    /// Set at a stop: idle connections close, answers close theirs.
    pub closing: AtomicBool,
    /// Wakes the idle connections when `closing` is set.
    pub close_idle: tokio::sync::Notify,
}

impl Drain {
    /// Whether the router is stopping.
    pub fn is_closing(&self) -> bool {
        self.closing.load(Relaxed)
    }

    /// Starts the stop's second half: idle connections close now.
    pub fn close_idle(&self) {
        self.closing.store(true, Relaxed);
        self.close_idle.notify_waiters();
    }
}
