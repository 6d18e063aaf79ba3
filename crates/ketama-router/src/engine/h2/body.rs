//! HTTP/2 bodies, either direction: a stream's DATA frames as a copy
//! loop's [`Source`] ([`RecvSource`]: a client's request body, a
//! backend's response body; the body ends at END_STREAM, on a DATA frame
//! or on trailers), and a stream as its [`Sink`] ([`H2Sink`]: DATA frames
//! as the peer's window allows, then END_STREAM or trailing HEADERS).

use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use h2::{RecvStream, SendStream};

use crate::engine::copy::{Flow, Piece, Sink, Source};
use crate::engine::send::SendError;

/// A body as its DATA frames come (a client's request body, a backend's
/// response body), each frame's window given back as the frame is passed
/// on; a wait longer than `timeout` fails with `timed_out`, a reset or
/// error with `closed`. The body ends with END_STREAM, on a DATA frame
/// (empty or not) or on trailing HEADERS, which are kept for the sink
/// ([`Source::trailers`]); a gRPC answer's `grpc-status` there is kept
/// for the record.
pub struct RecvSource<'a, E> {
    /// `None`: a body already taken elsewhere (ends at once).
    pub(crate) recv: Option<&'a mut RecvStream>,
    /// A frame read and not yet handed out.
    held: Option<Bytes>,
    /// The stream ended with trailers, read here.
    ended: bool,
    trailers: Option<http::HeaderMap>,
    pub(crate) timeout: Duration,
    pub(crate) timed_out: E,
    pub(crate) closed: E,
    /// Set at the body's end.
    pub(crate) read_whole: Option<&'a mut bool>,
    /// The trailers' `grpc-status`, when they carried one.
    pub(crate) grpc_status: Option<u8>,
}

impl<'a, E> RecvSource<'a, E> {
    /// `recv`'s body.
    pub fn new(recv: &'a mut RecvStream, timeout: Duration, timed_out: E, closed: E) -> Self {
        Self::of(Some(recv), timeout, timed_out, closed)
    }

    /// `recv`'s body, or an empty one for `None`.
    pub fn of(
        recv: Option<&'a mut RecvStream>,
        timeout: Duration,
        timed_out: E,
        closed: E,
    ) -> Self {
        RecvSource {
            recv,
            held: None,
            ended: false,
            trailers: None,
            timeout,
            timed_out,
            closed,
            read_whole: None,
            grpc_status: None,
        }
    }
}

impl<E: Copy + Send> Source for RecvSource<'_, E> {
    type Error = E;

    fn grpc_status(&self) -> Option<u8> {
        self.grpc_status
    }

    fn piece(&mut self) -> Result<Piece<'_>, E> {
        let Some(recv) = self.recv.as_deref_mut() else {
            return Ok(Piece::End);
        };
        if let Some(b) = self.held.take() {
            let _ = recv.flow_control().release_capacity(b.len());
            return Ok(Piece::Shared(b));
        }
        if self.ended || recv.is_end_stream() {
            if let Some(w) = self.read_whole.as_deref_mut() {
                *w = true;
            }
            return Ok(Piece::End);
        }
        Ok(Piece::More)
    }

    async fn read_more(&mut self) -> Result<(), E> {
        let Some(recv) = self.recv.as_deref_mut() else {
            return Ok(());
        };
        match tokio::time::timeout(self.timeout, recv.data()).await {
            Ok(Some(Ok(b))) => {
                self.held = Some(b);
                Ok(())
            }
            // No more DATA: the stream ended, or trailers are next (then
            // `is_end_stream` stays false until they are read).
            Ok(None) => {
                let t = tokio::time::timeout(self.timeout, recv.trailers()).await;
                match t {
                    Ok(Ok(t)) => {
                        self.grpc_status = t
                            .as_ref()
                            .and_then(|t| t.get("grpc-status"))
                            .and_then(|v| crate::engine::grpc::status_code(v.as_bytes()));
                        self.trailers = t;
                        self.ended = true;
                        Ok(())
                    }
                    Ok(Err(_)) => Err(self.closed),
                    Err(_) => Err(self.timed_out),
                }
            }
            Ok(Some(Err(_))) => Err(self.closed),
            Err(_) => Err(self.timed_out),
        }
    }

    fn trailers(&mut self) -> Option<http::HeaderMap> {
        self.trailers.take()
    }
}

/// `trailers` less the fields no trailer section may carry
/// ([`crate::engine::body::allowed_trailers`]); `None` when nothing is
/// left.
fn allowed_trailers(trailers: Option<&http::HeaderMap>) -> Option<http::HeaderMap> {
    let mut out = http::HeaderMap::new();
    for (name, value) in crate::engine::body::allowed_trailers(trailers) {
        out.append(name.clone(), value.clone());
    }
    (!out.is_empty()).then_some(out)
}

/// Where a body goes on an HTTP/2 stream: DATA frames as the peer's
/// window allows, within `timeout` for each grant (its progress rule, as
/// HTTP/1's `send_timeout_ms`).
pub struct H2Sink<'a> {
    pub(crate) send: &'a mut SendStream<Bytes>,
    pub(crate) timeout: Duration,
}

impl H2Sink<'_> {
    /// Sends `data` (and the stream's end with `end`, on its last frame).
    pub async fn send_data(&mut self, data: &[u8], end: bool) -> Result<(), SendError> {
        self.send_bytes(Bytes::copy_from_slice(data), end).await
    }

    /// Sends `data` as DATA frames of what the peer's window grants, each
    /// a slice of `data` (no copy), and the stream's end with `end`.
    pub async fn send_bytes(&mut self, mut data: Bytes, end: bool) -> Result<(), SendError> {
        if data.is_empty() && end {
            return self.end(None);
        }
        while !data.is_empty() {
            self.send.reserve_capacity(data.len());
            let granted = std::future::poll_fn(|cx| match self.send.poll_capacity(cx) {
                Poll::Ready(Some(Ok(n))) if n > 0 => Poll::Ready(Ok(n)),
                Poll::Ready(Some(Ok(_))) => Poll::Pending,
                Poll::Ready(Some(Err(_)) | None) => Poll::Ready(Err(SendError::Closed)),
                Poll::Pending => Poll::Pending,
            });
            let n = match tokio::time::timeout(self.timeout, granted).await {
                Ok(r) => r?,
                Err(_) => {
                    self.send.send_reset(h2::Reason::CANCEL);
                    return Err(SendError::TimedOut);
                }
            };
            let n = n.min(data.len());
            let last = end && n == data.len();
            self.send
                .send_data(data.split_to(n), last)
                .map_err(|_| SendError::Closed)?;
        }
        Ok(())
    }

    /// Ends the stream: with `trailers`' allowed fields as trailing
    /// HEADERS when any are left, else with an empty END_STREAM DATA
    /// frame.
    pub fn end(&mut self, trailers: Option<&http::HeaderMap>) -> Result<(), SendError> {
        match allowed_trailers(trailers) {
            Some(t) => self.send.send_trailers(t),
            None => self.send.send_data(Bytes::new(), true),
        }
        .map_err(|_| SendError::Closed)
    }
}

impl Sink for H2Sink<'_> {
    type Error = SendError;

    async fn push(&mut self, data: &[u8]) -> Result<Flow, SendError> {
        self.send_data(data, false).await.map(|()| Flow::Go)
    }

    async fn push_shared(&mut self, data: Bytes) -> Result<Flow, SendError> {
        self.send_bytes(data, false).await.map(|()| Flow::Go)
    }

    async fn flush(&mut self) -> Result<Flow, SendError> {
        Ok(Flow::Go)
    }

    async fn finish(&mut self, trailers: Option<&http::HeaderMap>) -> Result<Flow, SendError> {
        self.end(trailers).map(|()| Flow::Go)
    }

    async fn abort(&mut self) {
        self.send.send_reset(h2::Reason::CANCEL);
    }
}
