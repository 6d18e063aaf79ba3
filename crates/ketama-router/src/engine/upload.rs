//! Sending a request to an HTTP/1 backend: its head, then its body
//! (written from the client's buffer when read whole, else copied as it
//! comes, chunked again when it has no length), while watching the
//! backend ([`UpstreamSink`]).
//!
//! **A backend may answer before the body is all sent** (RFC 9110 section
//! 15: a server can refuse an upload, say 413, as soon as it sees the
//! head). Whatever the backend sends while a write to it waits, or while
//! the router waits for the client's next body bytes, is read; once a
//! final response head is there, the rest of the body is not sent and
//! the response is relayed (the client's connection then closes: its body
//! was not read to its end). An interim `1xx` is dropped and the upload
//! goes on. A write the backend refuses (it closed or reset the
//! connection after answering) is followed by a read of what it answered.
//! This is the one place the router goes beyond nginx on purpose: nginx
//! reads the whole body before it connects, and answers 502 when a
//! backend closes while the body is sent.
//!
//! What counts against the backend ([`crate::policy`]): a failure while
//! the router writes to it; not its close while the router was waiting
//! for the client's body ([`Stage::Upload`]: a slow client's upload that
//! the backend gave up on is not the backend failing).

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::AsyncWrite;

use super::copy::Flow;
use super::framed::Out;
use super::io::{poll_write_parts, Buffered, Parts, UpstreamIo};
use super::response_head::{read_final, ResponseHead};
use crate::policy::{Failure, Stage};

/// What sending the request came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// All of it: the response is awaited.
    Whole,
    /// The backend answered before the body was all sent: a final
    /// response head is in the connection's buffer, the rest of the body
    /// was not sent, and neither connection serves another request.
    Answered,
}

/// A backend's failure while the request was sent: where, and what.
pub type UpFailure = (Stage, Failure);

/// Where a request body goes on its way to an HTTP/1 backend (its
/// [`Out`]; [`super::framed::Framed`] chunks it again when it has no
/// length): the connection, watched for an early answer (see the module
/// docs), with the request head written before the first body bytes.
pub struct UpstreamSink<'a> {
    /// The connection; what the backend sends goes to its buffer.
    pub up: &'a mut Buffered<UpstreamIo>,
    /// The response head read from it.
    pub head: &'a mut ResponseHead,
    /// The request head, until written.
    pub request_head: Option<&'a [u8]>,
    /// Each write's timeout (`write_timeout_ms`).
    pub timeout: Duration,
}

impl UpstreamSink<'_> {
    /// What the backend sent: `Ready(Ok)` once a final response head is
    /// whole in the buffer (interim `1xx` heads dropped), `Ready(Err)`
    /// when the backend closed or failed before that, else `Pending` (the
    /// task is woken when the backend sends). Free while it sends nothing:
    /// the reactor's readiness is looked at, no system call made. (Under
    /// TLS, plaintext rustls already holds is read with the response head
    /// instead, once the body is sent.)
    pub fn poll_answer(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Failure>> {
        loop {
            if self.up.get_ref().tcp().poll_read_ready(cx).is_pending() {
                return Poll::Pending;
            }
            match self.up.poll_fill(cx, 4096) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(0) | Err(_)) => return Poll::Ready(Err(Failure::Broken)),
                Poll::Ready(Ok(_)) => {}
            }
            match read_final(self.up, self.head) {
                Ok(true) => return Poll::Ready(Ok(())),
                Ok(false) => {}
                Err(f) => return Poll::Ready(Err(f)),
            }
        }
    }

    /// After a write the backend refused: what it answered before, read
    /// until it closed (within the timeout).
    async fn after_refused_write(&mut self, failure: Failure) -> Result<Flow, UpFailure> {
        let timeout = self.timeout;
        let answered = tokio::time::timeout(timeout, poll_fn(|cx| self.poll_answer(cx))).await;
        match answered {
            Ok(Ok(())) => Ok(Flow::Stop),
            _ => Err((Stage::AwaitingHead, failure)),
        }
    }

    /// Writes every byte of `parts` (vectored: one system call when the
    /// socket takes them all, then a flush for TLS), within the timeout,
    /// watching the backend while a write waits.
    pub async fn write_parts(&mut self, parts: &[&[u8]]) -> Result<Flow, UpFailure> {
        let mut parts = Parts::new(parts);
        let mut refused = false;
        let timeout = self.timeout;
        let written = poll_fn(|cx| {
            let io = &mut *self.up.io();
            match poll_write_parts(io, cx, &mut parts) {
                Poll::Ready(Ok(())) => match Pin::new(io).poll_flush(cx) {
                    Poll::Ready(Ok(())) => Poll::Ready(Ok(Flow::Go)),
                    Poll::Ready(Err(_)) => {
                        refused = true;
                        Poll::Ready(Err(Failure::Broken))
                    }
                    Poll::Pending => self.poll_answer(cx).map(|r| r.map(|()| Flow::Stop)),
                },
                Poll::Ready(Err(_)) => {
                    refused = true;
                    Poll::Ready(Err(Failure::Broken))
                }
                Poll::Pending => self.poll_answer(cx).map(|r| r.map(|()| Flow::Stop)),
            }
        });
        match tokio::time::timeout(timeout, written).await {
            Ok(Ok(flow)) => Ok(flow),
            Ok(Err(f)) if refused => self.after_refused_write(f).await,
            Ok(Err(f)) => Err((Stage::AwaitingHead, f)),
            Err(_) => Err((Stage::AwaitingHead, Failure::Timeout)),
        }
    }

    /// Writes `data`, after the request head if it is still to go.
    async fn write_with_head(&mut self, data: &[u8]) -> Result<Flow, UpFailure> {
        match self.request_head.take() {
            Some(h) => self.write_parts(&[h, data]).await,
            None => self.write_parts(&[data]).await,
        }
    }
}

impl Out for UpstreamSink<'_> {
    type Error = UpFailure;

    fn head_pending(&self) -> bool {
        self.request_head.is_some()
    }

    async fn write(&mut self, data: &[u8]) -> Result<Flow, UpFailure> {
        self.write_with_head(data).await
    }

    async fn race<F: Future + Send>(&mut self, f: F) -> Result<Option<F::Output>, UpFailure> {
        let mut f = std::pin::pin!(f);
        poll_fn(|cx| {
            if let Poll::Ready(v) = f.as_mut().poll(cx) {
                return Poll::Ready(Ok(Some(v)));
            }
            match self.poll_answer(cx) {
                Poll::Ready(Ok(())) => Poll::Ready(Ok(None)),
                // It closed while the router waited for the client.
                Poll::Ready(Err(failure)) => Poll::Ready(Err((Stage::Upload, failure))),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }
}
