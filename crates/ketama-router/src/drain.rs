//! What a graceful stop needs of the client connections, shared by every
//! listener's guard and by every protocol: which accept loops still run
//! (a connection they take is the process's to serve), which connections
//! are reading a request head (let them finish), and a flag and a
//! wake-up that close the idle ones.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

/// How many of something are going on (accept loops, connections reading
/// a request head), and a wake-up when none is: a graceful stop waits for
/// them.
#[derive(Debug, Default)]
pub struct Count {
    count: AtomicUsize,
    none: tokio::sync::Notify,
}

impl Count {
    /// One more is going on.
    pub fn enter(&self) {
        self.count.fetch_add(1, Relaxed);
    }

    /// One ended (a head arrived, a connection or an accept loop ended).
    pub fn leave(&self) {
        if self.count.fetch_sub(1, Relaxed) == 1 {
            self.none.notify_waiters();
        }
    }

    /// One more until the guard is dropped.
    pub fn hold(self: &std::sync::Arc<Self>) -> Held {
        self.enter();
        Held(self.clone())
    }

    /// Waits until none is going on, or `deadline`.
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

/// One of a [`Count`], until dropped.
#[derive(Debug)]
pub struct Held(std::sync::Arc<Count>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.leave();
    }
}

/// A graceful stop's view of the client connections.
#[derive(Debug, Default)]
pub struct Drain {
    /// Accept loops still running: each holds one from before its thread
    /// starts until it returns, and counts a connection it took as open
    /// before it lets go, so that once none runs every connection the
    /// process took is counted (and served) before it exits.
    pub accepting: std::sync::Arc<Count>,
    /// Connections reading a request head now.
    pub heads: std::sync::Arc<Count>,
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

    /// The stop, as a future a connection polls beside its own work (the
    /// one wait for it, HTTP/1 and HTTP/2, serving or parked): ready once
    /// idle connections are to close, at once when they already are. Its
    /// wake-up is registered before the flag is read, so a stop between
    /// the two is not missed. Poll it until it is ready, not after.
    pub async fn stopped(&self) {
        let woken = self.close_idle.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if self.is_closing() {
            return;
        }
        woken.await
    }

    /// Starts the stop's second half: idle connections close now.
    pub fn close_idle(&self) {
        self.closing.store(true, Relaxed);
        self.close_idle.notify_waiters();
    }
}
