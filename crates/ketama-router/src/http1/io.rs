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
    /// on it since its last response (no bytes, no end) as far as the
    /// reactor has seen, which costs no system call. A connection the
    /// backend closed, or that holds bytes nobody asked for, is not.
    pub fn idle_and_open(&self) -> bool {
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        self.tcp().poll_read_ready(&mut cx).is_pending()
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
