//! A counting global allocator: live and peak heap bytes, so `ketama bench`
//! measures memory instead of computing it from a formula.
//!
//! It counts only once [`enable`] has been called (by `ketama bench`, before
//! it builds anything): every other command pays one relaxed load of a
//! flag per allocation, and no atomic read-modify-write.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

/// Forwards to the system allocator and counts bytes while enabled.
pub struct Counting;

static ENABLED: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// Starts counting. Memory allocated before is not counted, and neither is
/// its release (frees are counted as they come, so [`live`] is "allocated
/// since counting began, minus freed since", a difference callers take
/// between two readings).
pub fn enable() {
    ENABLED.store(true, Relaxed);
}

#[inline(always)]
fn grew(by: usize) {
    if ENABLED.load(Relaxed) {
        let live = LIVE.fetch_add(by, Relaxed).wrapping_add(by);
        PEAK.fetch_max(live, Relaxed);
    }
}

#[inline(always)]
fn shrank(by: usize) {
    if ENABLED.load(Relaxed) {
        LIVE.fetch_sub(by, Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds the
// `GlobalAlloc` contract; the counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        grew(l.size());
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(l) }
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        grew(l.size());
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc_zeroed(l) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        shrank(l.size());
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(p, l) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new >= l.size() {
            grew(new - l.size());
        } else {
            shrank(l.size() - new);
        }
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(p, l, new) }
    }
}

/// Heap bytes allocated and not yet freed since counting began (wrapping:
/// only differences between two readings mean something).
pub fn live() -> usize {
    LIVE.load(Relaxed)
}

/// Starts a new peak measurement from the current live bytes.
pub fn reset_peak() {
    PEAK.store(LIVE.load(Relaxed), Relaxed);
}

/// The most live bytes since the last [`reset_peak`].
pub fn peak() -> usize {
    PEAK.load(Relaxed)
}
