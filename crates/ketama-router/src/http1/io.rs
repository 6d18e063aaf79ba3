//! The engine's two kinds of byte streams, each plain TCP or rustls over
//! TCP: a client's connection and a backend's. Enums, not boxed trait
//! objects: one pointer-free value per connection, and a plain read or
//! write is a direct call.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A client's connection, after its TLS handshake if it has one.
#[derive(Debug)]
pub enum ClientIo {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS (boxed: rustls' state is kilobytes, and most connections are
    /// plain).
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

/// A backend's connection.
#[derive(Debug)]
pub enum UpstreamIo {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS.
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

macro_rules! delegate_io {
    ($t:ty) => {
        impl AsyncRead for $t {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
                    Self::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
                }
            }
        }

        impl AsyncWrite for $t {
            fn poll_write(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
                    Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
                }
            }

            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    Self::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
                    Self::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
                }
            }

            fn is_write_vectored(&self) -> bool {
                match self {
                    Self::Plain(s) => s.is_write_vectored(),
                    Self::Tls(s) => s.is_write_vectored(),
                }
            }

            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    Self::Plain(s) => Pin::new(s).poll_flush(cx),
                    Self::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
                }
            }

            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
                    Self::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
                }
            }
        }

        impl $t {
            /// The TCP socket under it.
            pub fn tcp(&self) -> &TcpStream {
                match self {
                    Self::Plain(s) => s,
                    Self::Tls(s) => s.get_ref().0,
                }
            }
        }
    };
}

delegate_io!(ClientIo);
delegate_io!(UpstreamIo);

impl ClientIo {
    /// Whether it is TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self, ClientIo::Tls(_))
    }

    /// Ready when a read would find bytes (or the end, or an error),
    /// without a buffer: an idle keep-alive connection holds none. It
    /// uses the socket's own read-readiness slot (the waker of the last
    /// poll is the one woken), so waiting costs no future of its own.
    /// Under TLS, records already decrypted are ready at once.
    pub fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            ClientIo::Plain(s) => s.poll_read_ready(cx).map(|_| ()),
            ClientIo::Tls(s) => {
                let (tcp, tls) = s.get_mut();
                match tls.process_new_packets() {
                    Ok(io) if io.plaintext_bytes_to_read() == 0 && !io.peer_has_closed() => {
                        tcp.poll_read_ready(cx).map(|_| ())
                    }
                    _ => Poll::Ready(()),
                }
            }
        }
    }
}

impl UpstreamIo {
    /// Whether an idle pooled connection is still good: nothing arrived
    /// on it since its last response (no bytes, no end). A connection the
    /// backend closed, or that holds bytes nobody asked for, is not.
    /// Cost: none while the reactor has seen nothing; one `read(2)` when it
    /// has, since what it saw may be stale (the event of a segment an
    /// earlier read already took, delivered after that read), and a good
    /// connection dropped for it costs a new one.
    pub fn idle_and_open(&self) -> bool {
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let tcp = self.tcp();
        if tcp.poll_read_ready(&mut cx).is_pending() {
            return true;
        }
        // A byte read here is one nobody asked for: the connection is
        // dropped then, so taking it (even from under TLS) loses nothing.
        let mut byte = [0u8; 1];
        matches!(tcp.try_read(&mut byte), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }
}

/// Writes every byte of `parts`, in order, with vectored writes: one
/// system call when the socket takes them all.
pub async fn write_parts<W: AsyncWrite + Unpin>(w: &mut W, parts: &[&[u8]]) -> io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let mut done = 0usize;
    while done < total {
        let mut slices = [io::IoSlice::new(&[]); 4];
        let (mut n, mut passed) = (0, 0);
        for p in parts {
            if passed + p.len() > done && n < slices.len() {
                slices[n] = io::IoSlice::new(&p[done.saturating_sub(passed)..]);
                n += 1;
            }
            passed += p.len();
        }
        match w.write_vectored(&slices[..n]).await? {
            0 => return Err(io::ErrorKind::WriteZero.into()),
            k => done += k,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A connected pair: the backend's end (as the pool holds it) and the
    /// backend itself.
    async fn pair() -> (UpstreamIo, std::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (theirs, _) = l.accept().unwrap();
        (UpstreamIo::Plain(ours), theirs)
    }

    /// Bytes waiting in our socket, read past tokio (so its readiness
    /// stays as the reactor left it).
    fn pending(io: &UpstreamIo) -> usize {
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 16];
        socket2::SockRef::from(io.tcp()).peek(&mut buf).unwrap_or(0)
    }

    async fn until(mut ok: impl FnMut() -> bool) {
        let end = Instant::now() + Duration::from_secs(5);
        while !ok() {
            assert!(Instant::now() < end, "timed out");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    #[tokio::test]
    async fn a_stale_readiness_does_not_make_an_idle_connection_look_bad() {
        use std::io::Write as _;
        let (io, mut theirs) = pair().await;
        assert!(io.idle_and_open());
        // The reactor sees a byte arrive; the byte is then taken without
        // tokio knowing, as an earlier read takes a segment whose event
        // comes after it.
        theirs.write_all(b"x").unwrap();
        io.tcp().readable().await.unwrap();
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        assert_eq!(socket2::SockRef::from(io.tcp()).recv(&mut buf).unwrap(), 1);
        assert!(
            io.idle_and_open(),
            "an empty socket judged by a stale event"
        );
        // Bytes nobody asked for, or the backend's end: not idle.
        theirs.write_all(b"y").unwrap();
        until(|| pending(&io) == 1).await;
        io.tcp().readable().await.unwrap();
        assert!(!io.idle_and_open());
        let (io, theirs) = pair().await;
        drop(theirs);
        io.tcp().readable().await.unwrap();
        assert!(!io.idle_and_open());
    }
}
