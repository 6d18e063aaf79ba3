//! An HTTP/2 stream as the client's side of an exchange: its request
//! ([`H2Request`]: routing's view and forwarding's, cookies joined as RFC
//! 9113 section 8.2.3 asks before an HTTP/1 hop, `:authority` standing for
//! `Host`), its body as DATA frames come (flow control released as they
//! are passed on), its response (`h2`'s headers and DATA frames, written
//! as the peer's window allows, within `send_timeout_ms`), and the
//! router's own answers.

use std::net::IpAddr;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use http::HeaderName;
use ketama_config::model::ServerSection;

use super::body::{H2Sink, RecvSource};
use super::Open;
use crate::engine::attempt::{small_body, Client, ClientFailure, Respond, SMALL_BODY};
use crate::engine::body::Framing;
use crate::engine::copy::{Flow, Sink, Source};
use crate::engine::exchange::{self, Exchanged};
use crate::engine::fields::response_field_passes;
use crate::engine::head_write::Own;
use crate::engine::io::{Buffered, UpstreamIo};
use crate::engine::record::Record;
use crate::engine::request::Req;
use crate::engine::request_head::Rules;
use crate::engine::response_head::ResponseView;
use crate::engine::send::SendError;
use crate::engine::Engine;
use crate::policy::route::RequestView;

/// An HTTP/2 request's head: the `h2` crate's parts, with its cookies
/// joined.
pub struct H2Request<'a> {
    pub parts: &'a http::request::Parts,
    /// Its `cookie` fields joined with `; ` (one as it is), forwarded
    /// after every other field, as nginx forwards them
    /// (`ngx_http_v2_construct_cookie_header`).
    pub cookie: Option<&'a [u8]>,
    /// The connection's ends.
    pub peer: Option<crate::engine::request::Ends>,
    /// Whether the connection is TLS.
    pub tls: bool,
}

impl H2Request<'_> {
    fn path_and_query(&self) -> &[u8] {
        let uri = &self.parts.uri;
        uri.path_and_query()
            .map_or(uri.path(), |pq| pq.as_str())
            .as_bytes()
    }
}

impl Req for H2Request<'_> {
    fn method(&self) -> &[u8] {
        self.parts.method.as_str().as_bytes()
    }

    fn forward_target(&self) -> (bool, &[u8]) {
        (false, self.path_and_query())
    }

    fn authority(&self) -> Option<&[u8]> {
        self.parts.uri.authority().map(|a| a.as_str().as_bytes())
    }

    fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.parts
            .headers
            .iter()
            .filter(|(n, _)| *n != http::header::COOKIE)
            .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
            .chain(self.cookie.map(|c| (&b"cookie"[..], c)))
    }

    fn content_length(&self) -> Option<u64> {
        self.parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| crate::engine::fields::parse_length(v.as_bytes()))
    }

    fn websocket(&self) -> bool {
        false
    }

    fn protocol(&self) -> &'static str {
        "HTTP/2.0"
    }

    fn parts(&self) -> Option<&http::request::Parts> {
        Some(self.parts)
    }
}

impl ketama::request::Request for H2Request<'_> {
    fn request_uri(&self) -> &[u8] {
        self.path_and_query()
    }

    /// As nginx holds them: `:authority` as `host` when no `host` came
    /// (`ngx_http_v2_parse_authority`), the cookies joined.
    fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let authority = match self.parts.headers.contains_key(http::header::HOST) {
            true => None,
            false => self.parts.uri.authority(),
        };
        authority
            .map(|a| (&b"host"[..], a.as_str().as_bytes()))
            .into_iter()
            .chain(Req::fields(self))
    }

    fn remote_addr(&self) -> Option<IpAddr> {
        self.peer.map(|p| p.client.ip())
    }

    fn sockets(&self) -> Option<(std::net::SocketAddr, std::net::SocketAddr)> {
        self.peer.map(|p| (p.client, p.local))
    }

    fn tls(&self) -> bool {
        self.tls
    }

    fn scheme_authority(&self) -> Option<(&[u8], &[u8])> {
        let uri = &self.parts.uri;
        Some((
            uri.scheme_str()?.as_bytes(),
            uri.authority()?.as_str().as_bytes(),
        ))
    }

    fn uri_host(&self) -> Option<&[u8]> {
        self.parts.uri.host().map(str::as_bytes)
    }
}

impl RequestView for H2Request<'_> {
    fn header(&self, name: &HeaderName) -> Option<&[u8]> {
        if name == http::header::COOKIE {
            return self.cookie;
        }
        self.parts.headers.get(name).map(|v| v.as_bytes())
    }
}

/// The client's side of one HTTP/2 stream's exchange.
pub struct H2Client {
    parts: http::request::Parts,
    cookie: Option<Vec<u8>>,
    /// The request body (`None` once taken by an HTTP/2 upstream).
    recv: Option<RecvStream>,
    respond: SendResponse<Bytes>,
    /// The response's body stream once its head went out, and whether it
    /// ended: kept here (its sink borrows it) so that a call whose
    /// deadline passed mid-answer can still be ended with its status.
    out: Option<(SendStream<Bytes>, bool)>,
    peer: Option<crate::engine::request::Ends>,
    tls: bool,
    /// The body, when read whole, and the trailers that ended it.
    buffered: Option<Vec<u8>>,
    trailers: Option<http::HeaderMap>,
    /// The body was read to its end.
    read_whole: bool,
    send_timeout: Duration,
    /// `client_body_timeout_ms`: the longest wait between two DATA frames.
    body_timeout: Duration,
}

/// Serves one stream: the exchange, then its record.
pub(super) async fn stream(
    e: Arc<Engine>,
    req: http::Request<RecvStream>,
    respond: SendResponse<Bytes>,
    peer: Option<crate::engine::request::Ends>,
    tls: bool,
    open: Open,
) {
    let began = Instant::now();
    let state = e.routing.state();
    let server = &state.validated.config.server;
    let (mut parts, recv) = req.into_parts();
    let refused = super::rules::apply(&mut parts, &Rules::of(server), recv.is_end_stream()).err();
    let cookie = join_cookies(&parts.headers);
    let mut c = H2Client {
        parts,
        cookie,
        read_whole: recv.is_end_stream(),
        recv: Some(recv),
        respond,
        out: None,
        peer,
        tls,
        buffered: None,
        trailers: None,
        send_timeout: Duration::from_millis(server.send_timeout_ms),
        body_timeout: Duration::from_millis(server.client_body_timeout_ms),
    };
    let mut r = Record::default();
    let ended = match refused {
        None => exchange::exchange(&e, &mut c, &state, &mut r).await,
        Some(no) => exchange::refuse(&e, &mut c, &mut r, &no).await,
    };
    // Whether the client reset the stream (a stream left unfinished here
    // is reset by `h2` when its halves are dropped).
    let reset_by_client = std::future::poll_fn(|cx| {
        Poll::Ready(matches!(c.respond.poll_reset(cx), Poll::Ready(Ok(_))))
    })
    .await;
    open.ended(ended != Exchanged::Gone, reset_by_client);
    r.end(&e, &state, &c.request(), peer.map(|p| p.client.ip()), began);
}

/// The request's `cookie` fields joined with `; ` when there are two or
/// more (RFC 9113 section 8.2.3), for an HTTP/1 hop and routing.
fn join_cookies(h: &http::HeaderMap) -> Option<Vec<u8>> {
    let mut all = h.get_all(http::header::COOKIE).iter();
    let first = all.next()?;
    let mut rest = all.peekable();
    rest.peek()?;
    let mut v = first.as_bytes().to_vec();
    for c in rest {
        v.extend_from_slice(b"; ");
        v.extend_from_slice(c.as_bytes());
    }
    Some(v)
}

/// A response head for an HTTP/2 client from any backend's: the status,
/// the fields less those HTTP/2 forbids and those the router writes
/// itself (`Date`), then the router's `Date` and `x-ketama-*` fields.
pub fn response<'k>(
    head: &impl ResponseView,
    ketama: impl Iterator<Item = (&'k [u8], &'k [u8])>,
) -> http::Response<()> {
    let mut resp = http::Response::new(());
    *resp.status_mut() =
        http::StatusCode::from_u16(head.status()).unwrap_or(http::StatusCode::BAD_GATEWAY);
    let h = resp.headers_mut();
    match head.headers() {
        // An HTTP/2 backend's: the names and values as they are.
        Some(from) => {
            for (n, v) in from {
                if response_field_passes(n.as_str().as_bytes(), true) {
                    h.append(n.clone(), v.clone());
                }
            }
        }
        None => {
            for (name, value) in head.fields() {
                if !response_field_passes(name, true) {
                    continue;
                }
                if let (Ok(n), Ok(v)) = (
                    HeaderName::from_bytes(name),
                    http::HeaderValue::from_bytes(value),
                ) {
                    h.append(n, v);
                }
            }
        }
    }
    let date = crate::engine::date::now();
    if let Ok(d) = http::HeaderValue::from_bytes(&date) {
        h.insert(http::header::DATE, d);
    }
    for (name, value) in ketama {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name),
            http::HeaderValue::from_bytes(value),
        ) {
            h.append(n, v);
        }
    }
    resp
}

impl H2Client {
    /// Sends the router's own answer `own` ([`Own::fields`], the body as
    /// one DATA frame ending the stream).
    async fn answer_own(&mut self, own: Own<'_>, backend: Option<&[u8]>) {
        let mut resp = http::Response::builder()
            .status(own.status())
            .header("server", "ketama-router")
            .header("date", &crate::engine::date::now()[..]);
        own.fields(backend, |name, value| {
            resp = std::mem::take(&mut resp).header(name, value);
        });
        let mut body = Vec::new();
        own.body(&mut body);
        let Ok(resp) = resp.body(()) else { return };
        let Ok(mut send) = self.respond.send_response(resp, body.is_empty()) else {
            return;
        };
        if !body.is_empty() {
            let mut sink = H2Sink {
                send: &mut send,
                timeout: self.send_timeout,
            };
            let _ = sink.send_bytes(body.into(), true).await;
        }
    }
}

impl Client for H2Client {
    fn request(&self) -> impl Req + '_ {
        let one = || {
            let c = self.parts.headers.get(http::header::COOKIE)?;
            Some(c.as_bytes())
        };
        H2Request {
            parts: &self.parts,
            cookie: self.cookie.as_deref().or_else(one),
            peer: self.peer,
            tls: self.tls,
        }
    }

    fn peer(&self) -> Option<IpAddr> {
        self.peer.map(|p| p.client.ip())
    }

    fn tls(&self) -> bool {
        self.tls
    }

    async fn continue_if_asked(&mut self, _: Duration) -> Result<(), ClientFailure> {
        Ok(())
    }

    async fn buffer_small_body(&mut self) -> Result<(), ClientFailure> {
        let length = self.request().content_length();
        let Some(recv) = self.recv.as_mut() else {
            return Ok(());
        };
        if recv.is_end_stream() {
            self.buffered = Some(Vec::new());
            self.read_whole = true;
            return Ok(());
        }
        if small_body(length).is_none() {
            return Ok(());
        }
        let timeout = self.body_timeout;
        let mut body = Vec::new();
        loop {
            match tokio::time::timeout(timeout, recv.data()).await {
                Ok(Some(Ok(b))) => {
                    body.extend_from_slice(&b);
                    let _ = recv.flow_control().release_capacity(b.len());
                    if body.len() as u64 > SMALL_BODY {
                        return Err(ClientFailure::Disconnected);
                    }
                }
                Ok(None) => break,
                Ok(Some(Err(_))) => return Err(ClientFailure::Disconnected),
                Err(_) => return Err(ClientFailure::TimedOut),
            }
        }
        // The DATA frames ended: with the stream, or with trailers.
        match tokio::time::timeout(timeout, recv.trailers()).await {
            Ok(Ok(t)) => self.trailers = t,
            Ok(Err(_)) => return Err(ClientFailure::Disconnected),
            Err(_) => return Err(ClientFailure::TimedOut),
        }
        self.buffered = Some(body);
        self.read_whole = true;
        Ok(())
    }

    fn buffered(&self) -> Option<&[u8]> {
        self.buffered.as_deref()
    }

    fn trailers(&self) -> Option<&http::HeaderMap> {
        self.trailers.as_ref()
    }

    fn body(&mut self, _: &ServerSection) -> impl Source<Error = ClientFailure> + '_ {
        let timeout = self.body_timeout;
        let mut body = RecvSource::of(
            self.recv.as_mut(),
            timeout,
            ClientFailure::TimedOut,
            ClientFailure::Disconnected,
        );
        body.read_whole = Some(&mut self.read_whole);
        body
    }

    fn take_h2_body(&mut self) -> Option<RecvStream> {
        self.recv.take()
    }

    fn body_length(&self) -> Option<u64> {
        self.request().content_length()
    }

    fn read_whole(&self) -> bool {
        self.read_whole
    }

    async fn gone(&mut self) {
        let _ = std::future::poll_fn(|cx| self.respond.poll_reset(cx)).await;
    }

    async fn left(&mut self) -> bool {
        // Polled once, with this task's own context: `h2` keeps the waker
        // as the stream's send task, and a stand-in one would lose the
        // wake-ups the stream's sending needs. Ready with the reset's
        // reason, or with an error when the connection is gone: either
        // way nobody waits.
        std::future::poll_fn(|cx| Poll::Ready(self.respond.poll_reset(cx).is_ready())).await
    }

    async fn respond(
        &mut self,
        head: &impl ResponseView,
        r: Respond<'_>,
    ) -> Result<impl Sink<Error = SendError> + '_, SendError> {
        let resp = response(head, r.ketama.iter());
        let end = r.framing == Framing::Empty;
        let send = self
            .respond
            .send_response(resp, end)
            .map_err(|_| SendError::Closed)?;
        let (send, ended) = self.out.insert((send, end));
        Ok(H2ClientSink {
            send,
            timeout: self.send_timeout,
            ended,
        })
    }

    async fn answer(&mut self, status: u16, words: &str, backend: Option<&[u8]>) {
        let head_request = self.request().is_head();
        let own = Own::Plain {
            status,
            words,
            head_request,
        };
        self.answer_own(own, backend).await;
    }

    async fn answer_grpc(&mut self, code: u8, words: &str, backend: Option<&[u8]>) {
        self.answer_own(Own::Grpc { code, words }, backend).await;
    }

    async fn end_late(&mut self, code: u8, words: &str) -> bool {
        let Some((send, ended)) = self.out.as_mut().filter(|(_, ended)| !*ended) else {
            return false;
        };
        *ended = true;
        let mut t = http::HeaderMap::new();
        t.insert("grpc-status", http::HeaderValue::from(u16::from(code)));
        if let Ok(v) = http::HeaderValue::from_str(&crate::engine::grpc::encode_message(words)) {
            t.insert("grpc-message", v);
        }
        send.send_trailers(t).is_ok()
    }

    fn body_timeout(&self) -> Duration {
        self.body_timeout
    }

    async fn tunnel(&mut self, _: &mut Buffered<UpstreamIo>, _: Duration) -> u64 {
        // An HTTP/2 client asks for no upgrade (`Req::websocket`).
        0
    }
}

/// An HTTP/2 response's body on its way: the stream's sender.
pub struct H2ClientSink<'a> {
    send: &'a mut SendStream<Bytes>,
    timeout: Duration,
    /// The stream ended (with the head, for a response without a body).
    ended: &'a mut bool,
}

impl Sink for H2ClientSink<'_> {
    type Error = SendError;

    async fn push(&mut self, data: &[u8]) -> Result<Flow, SendError> {
        H2Sink {
            send: self.send,
            timeout: self.timeout,
        }
        .push(data)
        .await
    }

    async fn push_shared(&mut self, data: Bytes) -> Result<Flow, SendError> {
        H2Sink {
            send: self.send,
            timeout: self.timeout,
        }
        .push_shared(data)
        .await
    }

    async fn flush(&mut self) -> Result<Flow, SendError> {
        Ok(Flow::Go)
    }

    async fn finish(&mut self, trailers: Option<&http::HeaderMap>) -> Result<Flow, SendError> {
        if *self.ended {
            return Ok(Flow::Go);
        }
        *self.ended = true;
        H2Sink {
            send: self.send,
            timeout: self.timeout,
        }
        .finish(trailers)
        .await
    }

    async fn race<F: std::future::Future + Send>(
        &mut self,
        f: F,
    ) -> Result<Option<F::Output>, SendError> {
        // While the backend is read, the client may reset its stream (a
        // gRPC call cancelled): the backend's stream is then reset at
        // once, not when it next sends.
        tokio::pin!(f);
        let send = &mut self.send;
        std::future::poll_fn(|cx| {
            if let Poll::Ready(out) = f.as_mut().poll(cx) {
                return Poll::Ready(Ok(Some(out)));
            }
            match send.poll_reset(cx) {
                Poll::Ready(_) => Poll::Ready(Err(SendError::Closed)),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }

    async fn abort(&mut self) {
        // Nothing here: the stream is reset when its handles are dropped
        // unfinished, after the frames it queued (the head, the data so
        // far) went out. An explicit reset would drop those first, and the
        // client would see no answer at all.
        *self.ended = true;
    }
}
