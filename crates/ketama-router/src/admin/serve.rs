//! The admin API's HTTP/1 server, on its own listener: each request's
//! head read by the engine's reader ([`crate::engine::request_head`], the
//! same rules as the proxy's), its body read whole (1 MiB at most), the
//! answer from [`Admin::respond`], connections kept alive for scrapers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use super::Admin;
use crate::engine::buffers;
use crate::engine::io::{Buffered, ClientIo};
use crate::engine::request::{H1Request, Req};
use crate::engine::request_head::{Head, Reader, Rules};
use crate::engine::send::send;

/// A request head larger than this is refused.
const MAX_HEAD: usize = 64 * 1024;
/// A request body larger than this is refused (413).
const MAX_BODY: u64 = 1 << 20;
/// How long a head, a body, an idle connection or a write may take.
const WAIT: Duration = Duration::from_secs(30);

/// The admin API on its listener.
pub struct AdminServer {
    /// The handler.
    pub admin: Admin,
}

impl AdminServer {
    /// Serves one connection until it closes.
    pub async fn serve(self: Arc<Self>, tcp: TcpStream) {
        let mut io = Buffered::new(ClientIo::Plain(tcp), buffers::take());
        let mut head = Head::default();
        loop {
            let mut reader = Reader::new();
            let deadline = Instant::now() + WAIT;
            let read = loop {
                match reader.advance(io.buf(), &mut head, &Rules::new(MAX_HEAD)) {
                    Ok(true) => break Ok(()),
                    Ok(false) => {}
                    Err(r) => break Err(r.status),
                }
                let blank = reader.blank();
                if blank > 0 {
                    io.drop_front(blank);
                    reader.dropped();
                }
                if io.read_more_until(1024, deadline).await.is_err() {
                    return;
                }
            };
            let (resp, keep) = match read {
                Err(status) => (
                    text(status, "a request head the admin API cannot read"),
                    false,
                ),
                Ok(()) => match self.answer(&mut io, &head).await {
                    Some(r) => r,
                    None => return,
                },
            };
            if write(&mut io, &resp, keep).await.is_err() || !keep {
                return;
            }
            io.compact();
        }
    }

    /// The answer to the request `head` describes (its body read from
    /// `io`), and whether the connection stays open; `None` when the
    /// client left.
    async fn answer(
        &self,
        io: &mut Buffered<ClientIo>,
        head: &Head,
    ) -> Option<(http::Response<Vec<u8>>, bool)> {
        io.consume(head.len);
        let len = head.content_length.unwrap_or(0);
        if head.chunked || len > MAX_BODY {
            return Some((
                text(413, "send a body of at most 1 MiB, with Content-Length"),
                false,
            ));
        }
        while (io.pending().len() as u64) < len {
            io.read_more(len as usize - io.pending().len(), usize::MAX, WAIT)
                .await
                .ok()?;
        }
        let body = io.pending()[..len as usize].to_vec();
        let req = H1Request {
            head,
            buf: io.buf(),
            peer: None,
            tls: false,
        };
        let mut b = http::Request::builder()
            .method(http::Method::from_bytes(req.method()).ok()?)
            .uri(String::from_utf8_lossy(ketama::request::Request::request_uri(&req)).as_ref());
        for (n, v) in req.fields() {
            b = b.header(n, v);
        }
        let keep = head.wants_keep_alive();
        io.consume(len as usize);
        let parts = match b.body(()) {
            Ok(r) => r.into_parts().0,
            Err(_) => return Some((text(400, "a request the admin API cannot read"), false)),
        };
        Some((self.admin.respond(&parts, body).await, keep))
    }
}

/// A plain-text answer.
fn text(status: u16, words: &str) -> http::Response<Vec<u8>> {
    let mut r = http::Response::new(format!("{words}\n").into_bytes());
    *r.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::BAD_REQUEST);
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    r
}

/// Writes `resp` as HTTP/1.1.
async fn write(
    io: &mut Buffered<ClientIo>,
    resp: &http::Response<Vec<u8>>,
    keep: bool,
) -> Result<(), crate::engine::send::SendError> {
    let mut out = buffers::take();
    let status = resp.status();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("Unknown").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (n, v) in resp.headers() {
        if n == http::header::CONTENT_LENGTH || n == http::header::CONNECTION {
            continue;
        }
        out.extend_from_slice(n.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Content-Length: ");
    out.extend_from_slice(itoa::Buffer::new().format(resp.body().len()).as_bytes());
    out.extend_from_slice(if keep {
        b"\r\nConnection: keep-alive\r\n\r\n"
    } else {
        b"\r\nConnection: close\r\n\r\n"
    });
    let r = send(io.io(), &[&out, resp.body()], WAIT).await;
    buffers::give(out);
    r
}
