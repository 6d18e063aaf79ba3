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
    /// Whether its TLS handshake's ALPN picked HTTP/2.
    pub fn is_h2(&self) -> bool {
        match self {
            UpstreamIo::Plain(_) => false,
            UpstreamIo::Tls(s) => s.get_ref().1.alpn_protocol() == Some(b"h2"),
        }
    }

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

/// Why no more bytes could be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// The peer ended the stream, or it failed.
    Closed,
    /// Nothing came within the wait.
    TimedOut,
}

/// The one reader of a byte stream: what was read and not yet consumed
/// stays in its buffer, and every read of the stream goes through
/// [`Buffered::read_more`]. Positions within a message (a head's fields)
/// are offsets into [`Buffered::buf`], which moves only between messages
/// ([`Buffered::compact`]). Writes go to [`Buffered::io`] directly.
#[derive(Debug)]
pub struct Buffered<S> {
    io: S,
    buf: Vec<u8>,
    /// Bytes of `buf` consumed.
    pos: usize,
    /// The first bytes of `buf` compaction keeps (a request's head, while
    /// its body is read: the record needs it at the end).
    keep: usize,
}

impl<S> Buffered<S> {
    /// `io`, with `buf` as its buffer (what it holds is pending).
    pub fn new(io: S, buf: Vec<u8>) -> Self {
        Buffered {
            io,
            buf,
            pos: 0,
            keep: 0,
        }
    }

    /// The stream, to write to (and to ask of its state).
    pub fn io(&mut self) -> &mut S {
        &mut self.io
    }

    /// The stream, read-only.
    pub fn get_ref(&self) -> &S {
        &self.io
    }

    /// The whole buffer, consumed bytes included (a head's positions
    /// point into it).
    pub fn buf(&self) -> &[u8] {
        &self.buf
    }

    /// What was read and not yet consumed.
    pub fn pending(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// Marks `n` more bytes consumed.
    pub fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.buf.len());
    }

    /// Bytes consumed since the last [`Buffered::compact`].
    pub fn consumed(&self) -> usize {
        self.pos
    }

    /// Drops the consumed bytes past the kept ones ([`Buffered::keep`]),
    /// moving what is pending after those: no position into the dropped
    /// bytes may be held.
    pub fn compact(&mut self) {
        if self.pos <= self.keep {
            return;
        }
        if self.pos == self.buf.len() {
            self.buf.truncate(self.keep);
        } else {
            self.buf.drain(self.keep..self.pos);
        }
        self.pos = self.keep;
    }

    /// Keeps the buffer's first `n` bytes through compactions (0: none).
    pub fn keep(&mut self, n: usize) {
        self.keep = n.min(self.buf.len());
    }

    /// Drops the first `n` bytes of the buffer (not yet consumed): what a
    /// reader found it need not keep.
    pub fn drop_front(&mut self, n: usize) {
        self.buf.drain(..n.min(self.buf.len()));
        self.pos = self.pos.saturating_sub(n);
        self.keep = self.keep.saturating_sub(n);
    }

    /// Takes the buffer (an idle connection holds none); the stream keeps
    /// an empty one.
    pub fn take_buf(&mut self) -> Vec<u8> {
        self.pos = 0;
        self.keep = 0;
        std::mem::take(&mut self.buf)
    }

    /// Drops everything read: what is pending and what was kept.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.pos = 0;
        self.keep = 0;
    }

    /// Gives the stream a buffer again (empty, or with bytes pending).
    pub fn set_buf(&mut self, buf: Vec<u8>) {
        self.buf = buf;
        self.pos = 0;
        self.keep = 0;
    }

    /// Whether the buffer has room allocated.
    pub fn has_buf(&self) -> bool {
        self.buf.capacity() > 0
    }

    /// The stream and its buffer, apart.
    pub fn into_parts(self) -> (S, Vec<u8>) {
        (self.io, self.buf)
    }
}

impl<S: AsyncRead + Unpin> Buffered<S> {
    /// Reads more of the stream into the buffer (at least `want` bytes of
    /// room, at most `limit` read), within `timeout`: the bytes read.
    pub async fn read_more(
        &mut self,
        want: usize,
        limit: usize,
        timeout: std::time::Duration,
    ) -> Result<usize, ReadError> {
        match tokio::time::timeout(timeout, self.read_more_untimed(want, limit)).await {
            Ok(r) => r,
            Err(_) => Err(ReadError::TimedOut),
        }
    }

    /// [`Buffered::read_more`] without a deadline, for a wait that ends
    /// otherwise (the client watched while a backend answers): no timer is
    /// armed, which costs about a thousand instructions a request.
    pub async fn read_more_untimed(
        &mut self,
        want: usize,
        limit: usize,
    ) -> Result<usize, ReadError> {
        use tokio::io::AsyncReadExt;
        if self.buf.capacity() - self.buf.len() < want.max(1) {
            self.buf.reserve(want.max(1024));
        }
        let mut limited = (&mut self.io).take(limit as u64);
        match limited.read_buf(&mut self.buf).await {
            Ok(0) | Err(_) => Err(ReadError::Closed),
            Ok(n) => Ok(n),
        }
    }

    /// Reads what the stream has now into the buffer (at least `room`
    /// bytes of room), without waiting: `Ready(Ok(0))` when the stream
    /// ended, `Pending` when nothing is there (the task is woken when
    /// something comes).
    pub fn poll_fill(&mut self, cx: &mut Context<'_>, room: usize) -> Poll<io::Result<usize>> {
        use std::future::Future;
        use tokio::io::AsyncReadExt;
        if self.buf.capacity() - self.buf.len() < room {
            self.buf.reserve(room);
        }
        let read = self.io.read_buf(&mut self.buf);
        std::pin::pin!(read).poll(cx)
    }

    /// [`Buffered::read_more`] by a deadline rather than a wait.
    pub async fn read_more_until(
        &mut self,
        want: usize,
        deadline: std::time::Instant,
    ) -> Result<usize, ReadError> {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        self.read_more(want, usize::MAX, left).await
    }
}

/// Byte pieces written in order (a head and a body piece, a chunk's
/// size line, data and end): how far the write got. The engine's one
/// vectored writer ([`poll_write_parts`]) advances it.
pub struct Parts<'a> {
    parts: &'a [&'a [u8]],
    done: usize,
    total: usize,
}

impl<'a> Parts<'a> {
    /// Nothing of `parts` written yet.
    pub fn new(parts: &'a [&'a [u8]]) -> Self {
        Parts {
            parts,
            done: 0,
            total: parts.iter().map(|p| p.len()).sum(),
        }
    }

    /// Whether every byte was written.
    pub fn is_done(&self) -> bool {
        self.done == self.total
    }

    /// What is left, as at most four slices in `out`; their count.
    fn left<'s>(&'s self, out: &mut [io::IoSlice<'s>; 4]) -> usize {
        let (mut n, mut passed) = (0, 0);
        for p in self.parts {
            if passed + p.len() > self.done && n < out.len() {
                out[n] = io::IoSlice::new(&p[self.done.saturating_sub(passed)..]);
                n += 1;
            }
            passed += p.len();
        }
        n
    }
}

/// Writes what is left of `parts` to `w` with vectored writes (one system
/// call when the socket takes it all) until all of it is written
/// (`Ready(Ok)`), the socket is full (`Pending`: call again when woken),
/// or it fails (`Ready(Err)`; a write of nothing is `WriteZero`). The one
/// place the engine writes pieces: to clients ([`super::send`]) and to
/// backends ([`super::upload`]).
pub fn poll_write_parts<W: AsyncWrite + Unpin>(
    w: &mut W,
    cx: &mut Context<'_>,
    parts: &mut Parts<'_>,
) -> Poll<io::Result<()>> {
    while !parts.is_done() {
        let mut slices = [io::IoSlice::new(&[]); 4];
        let n = parts.left(&mut slices);
        match Pin::new(&mut *w).poll_write_vectored(cx, &slices[..n]) {
            Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
            Poll::Ready(Ok(k)) => parts.done += k,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
    }
    Poll::Ready(Ok(()))
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
