//! The one copy loop: a body from a [`Source`] (a client's request body,
//! a backend's response body; HTTP/1 or HTTP/2) to a [`Sink`] (a
//! backend's connection, a client's), a data piece at a time, and the
//! HTTP/1 source ([`BodySource`]): a body read from a [`Buffered`] stream
//! in its framing, each piece a slice of the stream's buffer (no copy),
//! the buffer compacted between reads so that it never holds more than a
//! read's worth.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;

use super::body::{BodyReader, ChunkError, Framing};
use super::io::{Buffered, ReadError};

/// What a source has next.
pub enum Piece<'a> {
    /// Data at hand (taken: it stays valid until the next call).
    Data(&'a [u8]),
    /// Data the source holds as its own buffer (an HTTP/2 DATA frame's):
    /// handed over whole, so a sink that sends buffers (HTTP/2) sends it
    /// without a copy.
    Shared(Bytes),
    /// Nothing at hand: read on ([`Source::read_more`]).
    More,
    /// The body ended.
    End,
}

/// Where a body comes from.
pub trait Source: Send {
    /// Why it failed.
    type Error: Send;
    /// The next piece already read, if any.
    fn piece(&mut self) -> Result<Piece<'_>, Self::Error>;
    /// Reads on, after [`Piece::More`]. Resolves only once it read data,
    /// the body's end or a failure: a source never answers "nothing yet,
    /// not ended" without waiting (the copy loop would spin).
    fn read_more(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send;
    /// After [`Piece::End`]: the trailer fields that ended the body, if
    /// any (an HTTP/2 peer's trailing HEADERS).
    fn trailers(&mut self) -> Option<http::HeaderMap> {
        None
    }
    /// After [`Piece::End`]: the `grpc-status` the trailers carried (a
    /// gRPC answer's), if any.
    fn grpc_status(&self) -> Option<u8> {
        None
    }
}

/// Whether a sink takes more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Go on.
    Go,
    /// The receiver wants no more (a backend answered before the request
    /// body was all sent).
    Stop,
}

/// Where a body goes.
pub trait Sink: Send {
    /// Why it failed.
    type Error: Send;
    /// Takes a piece: written now, or gathered for [`Sink::flush`].
    fn push(&mut self, data: &[u8]) -> impl Future<Output = Result<Flow, Self::Error>> + Send;
    /// Takes a piece the source handed over as a buffer ([`Piece::Shared`]);
    /// a sink writing to a socket copies it as any piece.
    fn push_shared(
        &mut self,
        data: Bytes,
    ) -> impl Future<Output = Result<Flow, Self::Error>> + Send {
        async move { self.push(&data).await }
    }
    /// Writes what was gathered (before the source reads on).
    fn flush(&mut self) -> impl Future<Output = Result<Flow, Self::Error>> + Send;
    /// Ends the body (the last chunk, the stream's end), with the
    /// source's trailers where the sink's framing can carry them (chunked
    /// HTTP/1, HTTP/2), dropped where it cannot (a body of known length).
    fn finish(
        &mut self,
        trailers: Option<&http::HeaderMap>,
    ) -> impl Future<Output = Result<Flow, Self::Error>> + Send;
    /// The body will not be completed (its source failed): the receiver
    /// must see a broken body, never one that ended. HTTP/1: nothing to
    /// do here (the connection closes without a last chunk); HTTP/2: the
    /// stream is reset, after what it queued went out.
    fn abort(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }
    /// Runs `f` (the source reading on) unless the receiver wants no more
    /// first (`Ok(None)`).
    fn race<F: Future + Send>(
        &mut self,
        f: F,
    ) -> impl Future<Output = Result<Option<F::Output>, Self::Error>> + Send {
        async { Ok(Some(f.await)) }
    }
}

/// How a copy ended well.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Copied {
    /// The whole body: its data bytes.
    Whole(u64),
    /// The receiver stopped it (see [`Flow::Stop`]): the bytes moved.
    Stopped(u64),
}

/// How a copy failed, by side, with the data bytes moved before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyError<S, K> {
    /// The source failed.
    Source(S, u64),
    /// The sink failed.
    Sink(K, u64),
}

/// Copies the body from `src` to `sink`; see the module docs. An empty
/// piece (an HTTP/2 peer's empty DATA frame) is passed over: it carries
/// nothing, and a chunked sink must not write it as a chunk.
pub async fn copy<S: Source, K: Sink>(
    src: &mut S,
    sink: &mut K,
) -> Result<Copied, CopyError<S::Error, K::Error>> {
    let mut moved = 0u64;
    loop {
        let piece = match src.piece() {
            Ok(p) => p,
            Err(e) => {
                sink.abort().await;
                return Err(CopyError::Source(e, moved));
            }
        };
        let flow = match piece {
            Piece::Data([]) => Flow::Go,
            Piece::Data(d) => {
                let n = d.len() as u64;
                let flow = sink.push(d).await.map_err(|e| CopyError::Sink(e, moved))?;
                moved += n;
                flow
            }
            Piece::Shared(b) if b.is_empty() => Flow::Go,
            Piece::Shared(b) => {
                let n = b.len() as u64;
                let flow = sink
                    .push_shared(b)
                    .await
                    .map_err(|e| CopyError::Sink(e, moved))?;
                moved += n;
                flow
            }
            Piece::End => {
                let trailers = src.trailers();
                return match sink.finish(trailers.as_ref()).await {
                    Ok(Flow::Go) => Ok(Copied::Whole(moved)),
                    Ok(Flow::Stop) => Ok(Copied::Stopped(moved)),
                    Err(e) => Err(CopyError::Sink(e, moved)),
                };
            }
            Piece::More => {
                if sink.flush().await.map_err(|e| CopyError::Sink(e, moved))? == Flow::Stop {
                    return Ok(Copied::Stopped(moved));
                }
                match sink.race(src.read_more()).await {
                    Err(e) => return Err(CopyError::Sink(e, moved)),
                    Ok(None) => Flow::Stop,
                    Ok(Some(Ok(()))) => Flow::Go,
                    Ok(Some(Err(e))) => {
                        sink.abort().await;
                        return Err(CopyError::Source(e, moved));
                    }
                }
            }
        };
        if flow == Flow::Stop {
            return Ok(Copied::Stopped(moved));
        }
    }
}

/// Why an HTTP/1 body could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyError {
    /// The peer closed or failed before the body's end.
    Closed,
    /// Nothing came within the wait.
    TimedOut,
    /// Its chunked framing is invalid.
    Framing(ChunkError),
}

impl From<ReadError> for BodyError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Closed => BodyError::Closed,
            ReadError::TimedOut => BodyError::TimedOut,
        }
    }
}

/// An HTTP/1 body read from a [`Buffered`] stream (see the module docs):
/// each read asks for at most `piece` bytes (a body of known length: no
/// more than what is left, and one byte more with `overread`, so that a
/// backend sending more than its length is seen), within `timeout`.
pub struct BodySource<'a, S> {
    r: &'a mut Buffered<S>,
    body: BodyReader,
    /// A body until the close saw the close.
    closed: bool,
    piece: usize,
    overread: bool,
    timeout: Duration,
}

impl<'a, S> BodySource<'a, S> {
    /// The body framed `framing` at `r`'s pending bytes.
    pub fn new(
        r: &'a mut Buffered<S>,
        framing: Framing,
        piece: usize,
        overread: bool,
        timeout: Duration,
    ) -> Self {
        BodySource {
            r,
            body: BodyReader::new(framing),
            closed: false,
            piece: piece.max(1),
            overread,
            timeout,
        }
    }
}

impl<S: tokio::io::AsyncRead + Unpin + Send> Source for BodySource<'_, S> {
    type Error = BodyError;

    fn piece(&mut self) -> Result<Piece<'_>, BodyError> {
        loop {
            if self.body.done() {
                return Ok(Piece::End);
            }
            let at = self.r.consumed();
            let (used, data) = self
                .body
                .next(self.r.pending())
                .map_err(BodyError::Framing)?;
            self.r.consume(used);
            if !data.is_empty() {
                return Ok(Piece::Data(&self.r.buf()[at + data.start..at + data.end]));
            }
            // Framing consumed (a chunk's size line, its end, the last
            // chunk): round again, so that a body whose last chunk was the
            // last byte read ends here, not in a wait for more.
            if used == 0 {
                return Ok(if self.closed { Piece::End } else { Piece::More });
            }
        }
    }

    async fn read_more(&mut self) -> Result<(), BodyError> {
        self.r.compact();
        let limit = match self.body.left() {
            Some(left) => (left.min(self.piece as u64) as usize) + usize::from(self.overread),
            None => self.piece,
        };
        match self
            .r
            .read_more(limit.min(self.piece + 1), limit, self.timeout)
            .await
        {
            Ok(_) => Ok(()),
            // A body until the close ends there.
            Err(ReadError::Closed) if self.body.until_close() => {
                self.closed = true;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::engine::body::{push_chunk, push_last_chunk, BodyReader, Framing};

    /// A body as an HTTP/2 peer's DATA frames come: one piece a read, the
    /// end after the last (or on trailers); every other piece handed over
    /// as a buffer ([`Piece::Shared`]), as the HTTP/2 source hands them.
    struct Frames {
        left: std::vec::IntoIter<Vec<u8>>,
        held: Option<Vec<u8>>,
        out: Vec<u8>,
        ended: bool,
        trailers: Option<http::HeaderMap>,
        handed: usize,
    }

    impl Source for Frames {
        type Error = ();
        fn piece(&mut self) -> Result<Piece<'_>, ()> {
            if let Some(h) = self.held.take() {
                self.handed += 1;
                if self.handed % 2 == 0 {
                    return Ok(Piece::Shared(Bytes::from(h)));
                }
                self.out = h;
                return Ok(Piece::Data(&self.out));
            }
            Ok(if self.ended { Piece::End } else { Piece::More })
        }
        async fn read_more(&mut self) -> Result<(), ()> {
            match self.left.next() {
                Some(p) => self.held = Some(p),
                None => self.ended = true,
            }
            Ok(())
        }
        fn trailers(&mut self) -> Option<http::HeaderMap> {
            self.trailers.take()
        }
    }

    /// The chunked encoding both HTTP/1 sinks write, into a buffer.
    struct Chunks(Vec<u8>);

    impl Sink for Chunks {
        type Error = ();
        async fn push(&mut self, data: &[u8]) -> Result<Flow, ()> {
            push_chunk(data, &mut self.0);
            Ok(Flow::Go)
        }
        async fn flush(&mut self) -> Result<Flow, ()> {
            Ok(Flow::Go)
        }
        async fn finish(&mut self, trailers: Option<&http::HeaderMap>) -> Result<Flow, ()> {
            push_last_chunk(trailers, &mut self.0);
            Ok(Flow::Go)
        }
    }

    /// A chunked body whose last chunk is the last thing read, the peer's
    /// connection left open (a kept-alive client, a backend keeping its
    /// connection): the body ends at its last chunk, with every split of
    /// its bytes into two reads, and nothing waits for bytes that are not
    /// coming.
    #[test]
    fn a_chunked_body_ends_at_its_last_chunk_on_an_open_connection() {
        use tokio::io::AsyncWriteExt;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let bodies: [&[u8]; 3] = [
            b"5\r\nhello\r\n0\r\n\r\n",
            b"5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\nx-t: 1\r\n\r\n",
            b"0\r\n\r\n",
        ];
        for whole in bodies {
            for split in 0..whole.len() {
                rt.block_on(async {
                    let (mut peer, io) = tokio::io::duplex(4096);
                    let mut r = Buffered::new(io, Vec::with_capacity(64));
                    let timeout = Duration::from_secs(5);
                    let mut src = BodySource::new(&mut r, Framing::Chunked, 1024, false, timeout);
                    let mut sink = Chunks(Vec::new());
                    let send = async {
                        peer.write_all(&whole[..split]).await.unwrap();
                        tokio::task::yield_now().await;
                        peer.write_all(&whole[split..]).await.unwrap();
                    };
                    let (copied, ()) = tokio::join!(
                        tokio::time::timeout(Duration::from_secs(2), copy(&mut src, &mut sink)),
                        send
                    );
                    let text = String::from_utf8_lossy(whole);
                    assert!(
                        matches!(copied, Ok(Ok(Copied::Whole(_)))),
                        "{text:?} split at {split}: {copied:?}"
                    );
                    drop(peer);
                });
            }
        }
    }

    proptest! {
        /// Any sequence of DATA frames, empty ones anywhere (an empty last
        /// frame with END_STREAM is what curl's `-T -` sends), with or
        /// without trailers: the bytes written are nginx's chunked
        /// encoding of the data (a chunk per non-empty piece, lower-case
        /// hex, one last-chunk), and read back they are exactly the data,
        /// ending at the last byte (nothing left to be read as a message).
        #[test]
        fn pieces_are_chunked_as_nginx_chunks_them(
            pieces in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..12),
            with_trailers in any::<bool>(),
        ) {
            let mut trailers = http::HeaderMap::new();
            trailers.insert("x-sum", http::HeaderValue::from_static("1"));
            trailers.insert("content-length", http::HeaderValue::from_static("9"));
            let mut src = Frames {
                left: pieces.clone().into_iter(),
                held: None,
                out: Vec::new(),
                ended: false,
                trailers: with_trailers.then_some(trailers),
                handed: 0,
            };
            let mut sink = Chunks(Vec::new());
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let copied = rt.block_on(copy(&mut src, &mut sink));
            let data: Vec<u8> = pieces.concat();
            prop_assert_eq!(copied, Ok(Copied::Whole(data.len() as u64)));
            let mut nginx = Vec::new();
            for p in pieces.iter().filter(|p| !p.is_empty()) {
                nginx.extend(format!("{:x}\r\n", p.len()).into_bytes());
                nginx.extend_from_slice(p);
                nginx.extend_from_slice(b"\r\n");
            }
            nginx.extend_from_slice(b"0\r\n");
            if with_trailers {
                nginx.extend_from_slice(b"x-sum: 1\r\n");
            }
            nginx.extend_from_slice(b"\r\n");
            prop_assert_eq!(&sink.0, &nginx);
            let mut reader = BodyReader::new(Framing::Chunked);
            let (mut at, mut read) = (0, Vec::new());
            while !reader.done() {
                let (used, range) = reader.next(&sink.0[at..]).unwrap();
                read.extend_from_slice(&sink.0[at + range.start..at + range.end]);
                prop_assert!(used > 0 || reader.done());
                at += used;
            }
            prop_assert_eq!(at, sink.0.len());
            prop_assert_eq!(read, data);
        }
    }
}
