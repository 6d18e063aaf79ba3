//! The one writer of an HTTP/1 body, to a client or to a backend
//! ([`Framed`]): a head still to go leaves with the first body bytes; a
//! body of known length goes as it comes; a chunked one is gathered into
//! chunks (written once per read of the source, or per 64 KiB) and ends
//! with the last chunk and the trailers it may carry. What differs by
//! direction, the connection and how a write is watched, is an [`Out`].

use std::future::Future;

use super::body::{push_chunk, push_last_chunk};
use super::buffers;
use super::copy::{Flow, Sink};

/// Chunked pieces gathered past this are written before the source reads
/// on.
const BATCH: usize = 64 * 1024;

/// Where an HTTP/1 body's bytes are written.
pub trait Out: Send {
    /// Why a write failed.
    type Error: Send;
    /// Whether a head is still to go (with the next bytes written).
    fn head_pending(&self) -> bool;
    /// Writes `data`, after the head if it is still to go.
    fn write(&mut self, data: &[u8]) -> impl Future<Output = Result<Flow, Self::Error>> + Send;
    /// Runs `f` (the source reading on) unless the receiver wants no more
    /// first ([`Sink::race`]).
    fn race<F: Future + Send>(
        &mut self,
        f: F,
    ) -> impl Future<Output = Result<Option<F::Output>, Self::Error>> + Send {
        async { Ok(Some(f.await)) }
    }
}

/// An HTTP/1 body on its way to `out`, chunked when `chunked`.
pub struct Framed<O: Out> {
    /// Where the bytes go.
    pub out: O,
    chunked: bool,
    /// Chunked pieces gathered for the next write (a pooled buffer, taken
    /// at the first piece).
    batch: Vec<u8>,
}

impl<O: Out> Framed<O> {
    /// A body to `out`, chunked when `chunked`.
    pub fn new(out: O, chunked: bool) -> Self {
        Framed {
            out,
            chunked,
            batch: Vec::new(),
        }
    }

    fn batch(&mut self) -> &mut Vec<u8> {
        if self.batch.capacity() == 0 {
            self.batch = buffers::take();
        }
        &mut self.batch
    }
}

impl<O: Out> Drop for Framed<O> {
    fn drop(&mut self) {
        if self.batch.capacity() > 0 {
            buffers::give(std::mem::take(&mut self.batch));
        }
    }
}

impl<O: Out> Sink for Framed<O> {
    type Error = O::Error;

    async fn push(&mut self, data: &[u8]) -> Result<Flow, O::Error> {
        if !self.chunked {
            return self.out.write(data).await;
        }
        push_chunk(data, self.batch());
        if self.batch.len() >= BATCH {
            return self.flush().await;
        }
        Ok(Flow::Go)
    }

    async fn flush(&mut self) -> Result<Flow, O::Error> {
        if self.batch.is_empty() && !self.out.head_pending() {
            return Ok(Flow::Go);
        }
        let batch = std::mem::take(&mut self.batch);
        let flow = self.out.write(&batch).await;
        self.batch = batch;
        self.batch.clear();
        flow
    }

    async fn finish(&mut self, trailers: Option<&http::HeaderMap>) -> Result<Flow, O::Error> {
        if self.chunked {
            push_last_chunk(trailers, self.batch());
        }
        self.flush().await
    }

    async fn race<F: Future + Send>(&mut self, f: F) -> Result<Option<F::Output>, O::Error> {
        self.out.race(f).await
    }
}
