//! A request's body on the client's side: what it is, `100 Continue`,
//! and a small body read whole before any backend is tried (so that a
//! failover can send it again); [`super::upload`] sends it.

use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::conn::Conn;
use super::head::Head;

/// Bodies up to this size are read whole before a backend is tried.
pub const SMALL_BODY: u64 = 64 * 1024;

/// A request's body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// None.
    Empty,
    /// All of it in the connection's buffer after the head.
    Buffered {
        /// Its length.
        len: usize,
    },
    /// Streamed from the client as it comes.
    Streamed {
        /// Its length.
        len: u64,
    },
    /// Chunked, streamed.
    Chunked,
}

impl Body {
    /// The body a head announces.
    pub fn of(head: &Head) -> Body {
        if head.chunked {
            return Body::Chunked;
        }
        match head.content_length {
            None | Some(0) => Body::Empty,
            Some(n) => Body::Streamed { len: n },
        }
    }

    /// Whether all of it is at hand to send again.
    pub fn replayable(&self) -> bool {
        matches!(self, Body::Empty | Body::Buffered { .. })
    }

    /// Whether the client's request was read to its end.
    pub fn read_whole(&self) -> bool {
        self.replayable()
    }

    /// Bytes of the connection's buffer the request used, its head's
    /// `head_len` included, when the body was not streamed.
    pub fn consumed(&self, head_len: usize) -> usize {
        match self {
            Body::Buffered { len } => head_len + len,
            _ => head_len,
        }
    }
}

/// A failure on the client's side of a body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientFailure {
    /// It closed or failed mid-body.
    Disconnected,
    /// `client_body_timeout_ms` passed between two reads.
    TimedOut,
    /// Its chunked framing is invalid.
    BadChunks,
}

impl ClientFailure {
    /// The reason `ketama_client_errors_total` counts it under.
    pub fn reason(self) -> &'static str {
        match self {
            ClientFailure::Disconnected => "client_disconnect",
            ClientFailure::TimedOut => "body_timeout",
            ClientFailure::BadChunks => "bad_framing",
        }
    }

    /// The answer, when there is still someone to answer.
    pub fn answer(self) -> Option<(u16, &'static str)> {
        match self {
            ClientFailure::Disconnected => None,
            ClientFailure::TimedOut => Some((408, "no request body in time")),
            ClientFailure::BadChunks => Some((400, "invalid chunked framing in the request body")),
        }
    }
}

/// Reads more of the client's bytes into its buffer, within `timeout`.
async fn read_client(c: &mut Conn, timeout: Duration, want: usize) -> Result<usize, ClientFailure> {
    c.buf.reserve(want.max(1));
    match tokio::time::timeout(timeout, c.io.read_buf(&mut c.buf)).await {
        Ok(Ok(0)) | Ok(Err(_)) => Err(ClientFailure::Disconnected),
        Ok(Ok(n)) => Ok(n),
        Err(_) => Err(ClientFailure::TimedOut),
    }
}

/// `100 Continue`, sent before the body is read when an HTTP/1.1 client
/// asked for it, as nginx sends it: for every request it forwards, with a
/// body or without, whatever of the body already came.
pub async fn continue_if_asked(c: &mut Conn, timeout: Duration) -> Result<(), ClientFailure> {
    if c.head.expect_continue && c.head.http11 && !c.continued {
        c.continued = true;
        super::send::send(&mut c.io, &[b"HTTP/1.1 100 Continue\r\n\r\n"], timeout)
            .await
            .map_err(|_| ClientFailure::Disconnected)?;
    }
    Ok(())
}

/// Reads a small body of known length whole into the connection's buffer
/// (see [`SMALL_BODY`]), turning `body` into [`Body::Buffered`].
pub async fn buffer_small_body(
    c: &mut Conn,
    body: &mut Body,
    server: &ketama_config::model::ServerSection,
) -> Result<(), ClientFailure> {
    let Body::Streamed { len } = *body else {
        return Ok(());
    };
    if len > SMALL_BODY {
        return Ok(());
    }
    let timeout = Duration::from_millis(server.client_body_timeout_ms);
    let len = len as usize;
    let want = c.head.len + len;
    while c.buf.len() < want {
        read_client(c, timeout, want - c.buf.len()).await?;
    }
    *body = Body::Buffered { len };
    c.used = want;
    Ok(())
}
