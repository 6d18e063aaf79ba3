//! The router's own answers on the engine: refusals of a head, and 5xx
//! when no backend served a request; written through the same writer as
//! every response ([`super::send`]), with nginx's statuses.

use std::time::Duration;

use super::conn::Conn;
use super::send::send;

/// The reason phrase of the statuses the router answers with itself.
pub fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        408 => "Request Timeout",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

/// Writes the router's answer `status`: `ketama-router: WORDS` as its
/// body, `x-ketama-backend` naming the backend tried when given, and the
/// connection kept or closed as `keep` says. A client that does not take
/// it is left alone (it is closing anyway).
pub async fn error(
    c: &mut Conn,
    status: u16,
    words: &str,
    backend: Option<&[u8]>,
    keep: bool,
    send_timeout: Duration,
) {
    let mut out = super::buffers::take();
    let body_len = "ketama-router: ".len() + words.len() + 1;
    let mut n = itoa::Buffer::new();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(n.format(status).as_bytes());
    out.push(b' ');
    out.extend_from_slice(reason(status).as_bytes());
    out.extend_from_slice(b"\r\nServer: ketama-router\r\nDate: ");
    out.extend_from_slice(&super::date::now());
    out.extend_from_slice(b"\r\nContent-Length: ");
    out.extend_from_slice(n.format(body_len).as_bytes());
    out.extend_from_slice(b"\r\nCache-Control: private, no-store\r\n");
    if let Some(b) = backend {
        out.extend_from_slice(b"x-ketama-backend: ");
        out.extend_from_slice(b);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(if keep {
        b"Connection: keep-alive\r\n\r\n"
    } else {
        b"Connection: close\r\n\r\n"
    });
    out.extend_from_slice(b"ketama-router: ");
    out.extend_from_slice(words.as_bytes());
    out.push(b'\n');
    let _ = send(&mut c.io, &[&out], send_timeout).await;
    super::buffers::give(out);
}

/// How long a connection closed after a refusal or an unread body keeps
/// reading (and dropping) what its client still sends, so that the client
/// reads the answer before the close resets it: nginx's `lingering_time`
/// and `lingering_timeout`, in one bound.
const LINGER: Duration = Duration::from_secs(5);
/// At most this much is read and dropped while lingering.
const LINGER_BYTES: usize = 1 << 20;

/// Closes the connection the way nginx's lingering close does: the answer
/// is flushed and the write side shut (the client sees the end), then
/// what the client still sends is read and dropped until it stops (its
/// end), [`LINGER`] passes or [`LINGER_BYTES`] were dropped. Closing with
/// unread bytes would make the kernel reset the connection, and a client
/// still sending would lose the answer.
pub async fn linger(c: &mut Conn) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    if c.io.shutdown().await.is_err() {
        return;
    }
    let mut scratch = super::buffers::take();
    let _ = tokio::time::timeout(LINGER, async {
        let mut dropped = 0;
        while dropped < LINGER_BYTES {
            scratch.clear();
            match c.io.read_buf(&mut scratch).await {
                Ok(0) | Err(_) => break,
                Ok(n) => dropped += n,
            }
        }
    })
    .await;
    super::buffers::give(scratch);
}
