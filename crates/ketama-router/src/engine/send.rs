//! Writing to a client under `send_timeout_ms`, nginx's way: the clock
//! runs while the client takes no byte, and restarts with every write that
//! makes progress and every byte the client's TCP acknowledges meanwhile
//! (the socket wakes a writer only once a third of its send buffer, often
//! megabytes, has drained, so a slow but steady reader could otherwise go
//! longer than the timeout between two writes).

use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::io::ClientIo;

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
    let mut skip = 0usize;
    let total: usize = parts.iter().map(|p| p.len()).sum();
    while skip < total {
        let mut slices = [IoSlice::new(&[]); 4];
        let mut n = 0;
        let mut passed = 0;
        for p in parts {
            if passed + p.len() <= skip {
                passed += p.len();
                continue;
            }
            let from = skip.saturating_sub(passed);
            if n < slices.len() {
                slices[n] = IoSlice::new(&p[from..]);
                n += 1;
            }
            passed += p.len();
        }
        skip += write_some(io, &slices[..n], timeout).await?;
    }
    if io.is_tls() {
        flush(io, timeout).await?;
    }
    Ok(())
}

/// One vectored write that makes progress, under the timeout. A write the
/// socket takes at once costs nothing more; only one that has to wait
/// reads how much the client acknowledged (one `getsockopt` then, one per
/// timeout period after).
async fn write_some(
    io: &mut ClientIo,
    slices: &[IoSlice<'_>],
    timeout: Duration,
) -> Result<usize, SendError> {
    let first = std::future::poll_fn(|cx| {
        match std::pin::Pin::new(&mut *io).poll_write_vectored(cx, slices) {
            std::task::Poll::Ready(r) => std::task::Poll::Ready(Some(r)),
            std::task::Poll::Pending => std::task::Poll::Ready(None),
        }
    })
    .await;
    if let Some(r) = first {
        return done(r);
    }
    let mut since = acked(io);
    loop {
        match tokio::time::timeout(timeout, io.write_vectored(slices)).await {
            Ok(r) => return done(r),
            Err(_) => {
                // No write went through for a whole timeout: did the
                // client take anything meanwhile?
                let now = acked(io);
                if now.is_none() || now <= since {
                    return Err(SendError::TimedOut);
                }
                since = now;
            }
        }
    }
}

fn done(r: io::Result<usize>) -> Result<usize, SendError> {
    match r {
        Ok(0) | Err(_) => Err(SendError::Closed),
        Ok(n) => Ok(n),
    }
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
