//! Buffers kept per worker thread for the engine's connections, so that a
//! request takes one from the thread's spares and gives it back when it is
//! done, instead of allocating: an idle keep-alive connection holds none,
//! and a busy thread allocates none once it is warm.

use std::cell::RefCell;

/// Spare buffers kept per thread.
const SPARES: usize = 64;

/// A spare whose capacity grew past this is freed rather than kept (one
/// large body must not pin its buffer for good).
pub const KEEP_UP_TO: usize = 64 * 1024;

/// What a new buffer starts with: room for a typical head.
pub const START: usize = 4096;

thread_local! {
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer with at least [`START`] bytes of room: a spare, or a
/// new one.
pub fn take() -> Vec<u8> {
    SPARE
        .with(|s| s.borrow_mut().pop())
        .unwrap_or_else(|| Vec::with_capacity(START))
}

/// Gives `buf` back for the next request on this thread (emptied), or
/// frees it when this thread keeps enough, or it grew large.
pub fn give(mut buf: Vec<u8>) {
    if buf.capacity() < START || buf.capacity() > KEEP_UP_TO {
        return;
    }
    buf.clear();
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < SPARES {
            s.push(buf);
        }
    });
}
