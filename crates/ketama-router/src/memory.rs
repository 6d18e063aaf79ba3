//! Giving memory back to the system after the big, short-lived allocations
//! of a ring build (its sort scratch is 16 bytes a point at the peak, about
//! 140 MB for 8.8M points): with jemalloc (the default allocator), its
//! arenas are purged at once instead of after the 10 s decay of its
//! background thread, so the process's RSS after a start or a reload is
//! what it keeps, not what it briefly used.

/// Purges every jemalloc arena's unused dirty pages (a no-op with other
/// allocators). Cost: proportional to the dirty pages, about a millisecond
/// per 100 MB.
pub fn return_free_memory() {
    #[cfg(feature = "jemalloc")]
    {
        // MALLCTL_ARENAS_ALL (4096): every arena.
        let name = c"arena.4096.purge";
        // SAFETY: a void mallctl (no old or new value) with a NUL-terminated
        // name, as jemalloc's manual documents for `arena.<i>.purge`.
        unsafe {
            tikv_jemalloc_sys::mallctl(
                name.as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            );
        }
    }
}
