//! Writing to a client under `send_timeout_ms`, nginx's way: the clock
//! runs while the client takes no byte, and restarts with every write that
//! makes progress and every byte the client's TCP acknowledges meanwhile
//! (the socket wakes a writer only once a third of its send buffer, often
//! megabytes, has drained, so a slow but steady reader could otherwise go
//! longer than the timeout between two writes).

use std::future::poll_fn;
use std::os::fd::AsRawFd;
use std::task::Poll;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use super::io::{poll_write_parts, ClientIo, Parts};

/// Why a write to the client did not finish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// The client took no byte for `send_timeout_ms`.
    TimedOut,
    /// The connection failed or closed.
    Closed,
}

impl SendError {
    /// The reason `ketama_client_errors_total` counts it under.
    pub fn reason(self) -> &'static str {
        match self {
            SendError::TimedOut => "send_timeout",
            SendError::Closed => "client_disconnect",
        }
    }
}

/// Bytes of this connection the client's TCP acknowledged so far
/// (`TCP_INFO`'s `tcpi_bytes_acked`).
fn acked(io: &ClientIo) -> Option<u64> {
    let mut info = std::mem::MaybeUninit::<libc::tcp_info>::zeroed();
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `info`, which is
    // that large and zeroed (every field of `tcp_info` is an integer, so
    // any bytes, the kernel's or the zeroes of fields an older kernel does
    // not fill, make a valid value), and the descriptor is the client's
    // open socket, borrowed for the call. There is no safe wrapper of
    // TCP_INFO in the crates the router uses; the send timeout's
    // progress rule needs it (see the module docs).
    let r = unsafe {
        libc::getsockopt(
            io.tcp().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    // SAFETY: zero-initialised above, and any bytes are a valid tcp_info.
    (r == 0).then(|| unsafe { info.assume_init() }.tcpi_bytes_acked)
}

/// Writes every byte of `parts`, in order, in as few system calls as the
/// socket takes them (one `writev` when it takes them all). Under TLS the
/// last bytes are flushed too: rustls takes bytes it cannot pass to the
/// socket yet, and nothing else would write them.
pub async fn send(io: &mut ClientIo, parts: &[&[u8]], timeout: Duration) -> Result<(), SendError> {
    let mut parts = Parts::new(parts);
    // A write the socket takes at once costs nothing more; only one that
    // has to wait reads how much the client acknowledged (one
    // `getsockopt` then, one per timeout period after).
    let first = poll_fn(|cx| Poll::Ready(poll_write_parts(&mut *io, cx, &mut parts))).await;
    match first {
        Poll::Ready(Ok(())) => {}
        Poll::Ready(Err(_)) => return Err(SendError::Closed),
        Poll::Pending => {
            let mut since = acked(io);
            loop {
                let rest = poll_fn(|cx| poll_write_parts(&mut *io, cx, &mut parts));
                match tokio::time::timeout(timeout, rest).await {
                    Ok(Ok(())) => break,
                    Ok(Err(_)) => return Err(SendError::Closed),
                    Err(_) => {
                        // No write went through for a whole timeout: did
                        // the client take anything meanwhile? (A write that
                        // went through is progress too: `since` moves.)
                        let now = acked(io);
                        if now.is_none() || now <= since {
                            return Err(SendError::TimedOut);
                        }
                        since = now;
                    }
                }
            }
        }
    }
    if io.is_tls() {
        flush(io, timeout).await?;
    }
    Ok(())
}

/// Flushes what TLS buffered, under the send timeout as writes are (the
/// clock restarts with every byte the client acknowledges).
async fn flush(io: &mut ClientIo, timeout: Duration) -> Result<(), SendError> {
    let mut since = acked(io);
    loop {
        match tokio::time::timeout(timeout, io.flush()).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(_)) => return Err(SendError::Closed),
            Err(_) => {
                let now = acked(io);
                if now.is_none() || now <= since {
                    return Err(SendError::TimedOut);
                }
                since = now;
            }
        }
    }
}

/// Ends a connection the router closes: under TLS a `close_notify`
/// first (within the send timeout), so that the client can tell the end
/// of the response from a cut connection.
pub async fn close(io: &mut ClientIo, timeout: Duration) {
    if io.is_tls() {
        let _ = tokio::time::timeout(timeout, io.shutdown()).await;
    }
}
