//! The two ways a client's connection is served once the guard let it in:
//! Pingora's (HTTP/2, and HTTP/1 when the backends speak HTTP/2) behind a
//! [`Timed`] stream, and the router's own HTTP/1 engine.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use pingora::apps::{HttpServerApp, ServerApp};
use pingora::protocols::{Ssl, Stream, ALPN};
use pingora::server::ShutdownWatch;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::timed::{Limits, BAD_LINE, BAD_VERSION, LINE_TOO_LONG, TIMED_OUT, TOO_LARGE};
use super::{Clock, Guarded, Timed};
use crate::http1::io::ClientIo;

impl<A: HttpServerApp + Send + Sync + 'static> Guarded<A> {
    /// Pingora's path: the stream under the head and idle deadlines, the
    /// protocol chosen by ALPN (or, with `h2c`, the preface), then
    /// Pingora's HTTP/2, or HTTP/1 through `serve_http1`.
    pub(super) async fn serve_pingora(
        &self,
        stream: Stream,
        limits: Limits,
        h2c: bool,
        pipelining: bool,
        shutdown: &ShutdownWatch,
    ) {
        let clock = Arc::new(Clock::new(limits, self.counts.heads.clone()));
        let mut timed = Timed::new(stream, clock.clone());
        // `None`: the client left, or was too slow, before it said which.
        let h2 = if h2c {
            timed.sniff_preface().await.ok()
        } else {
            Some(matches!(timed.selected_alpn_proto(), Some(ALPN::H2)))
        };
        match h2 {
            Some(true) => {
                timed.speak_h2();
                // Pingora's own HTTP/2 path: it sees ALPN h2 (or, for h2c,
                // the preface this guard read, marked as h2) and serves
                // each stream as a task of its own.
                ServerApp::process_new(&self.inner, Box::new(timed), shutdown).await;
            }
            Some(false) => self.serve_http1(timed, &clock, shutdown, pipelining).await,
            None => {}
        }
        match clock.refused() {
            TIMED_OUT => self.metrics.client_error("header_timeout"),
            TOO_LARGE => self.metrics.client_error("head_too_large"),
            LINE_TOO_LONG => self.metrics.client_error("request_line_too_long"),
            BAD_LINE | BAD_VERSION => self.metrics.client_error("bad_request_line"),
            _ => {}
        }
    }
}

/// Where an accepted connection goes, once its TLS handshake (if any)
/// and protocol check are done.
pub(super) enum Chosen {
    /// The router's HTTP/1 engine, with the bytes the h2c check read.
    Engine(ClientIo, Vec<u8>),
    /// Pingora; `true` when it must read an h2c preface.
    Pingora(Stream, bool),
    /// Neither: the client left, was too slow, or failed its handshake
    /// (counted here).
    Closed,
}

impl<A> Guarded<A> {
    /// The connection's TLS handshake (with `tls`, on a TLS listener) and
    /// protocol: HTTP/2 by ALPN or, with `h2c`, by its preface goes to
    /// Pingora, HTTP/1 to the engine unless `engine` is false (`[upstream_tls] h2`).
    pub(super) async fn choose(
        &self,
        mut tcp: TcpStream,
        peer: SocketAddr,
        tls: Option<Arc<crate::tls::ServerTls>>,
        h2c: bool,
        engine: bool,
        header_timeout: Duration,
    ) -> Chosen {
        if self.tls {
            // A TLS listener whose config lost [tls] (refused by reloads:
            // tls.listen needs a restart), so never; close.
            let Some(tls) = tls else {
                return Chosen::Closed;
            };
            let socket = Arc::new(crate::listen::socket_digest(&tcp, peer));
            let s = match crate::tls::handshake::accept(&tls, tcp, socket).await {
                Ok(s) => s,
                Err(reason) => {
                    self.metrics.tls_handshake_failed(reason);
                    return Chosen::Closed;
                }
            };
            return match s.alpn() {
                Some(ALPN::H2) => Chosen::Pingora(Box::new(s), false),
                _ if engine => Chosen::Engine(ClientIo::Tls(Box::new(s.into_inner())), Vec::new()),
                _ => Chosen::Pingora(Box::new(s), false),
            };
        }
        if !engine {
            return Chosen::Pingora(crate::listen::stream(tcp, peer), h2c);
        }
        let mut early = Vec::new();
        if h2c {
            match sniff(&mut tcp, &mut early, header_timeout).await {
                // Pingora's HTTP/2, which reads the preface again.
                Some(true) => {
                    return Chosen::Pingora(
                        Box::new(crate::listen::stream_with(tcp, peer, &early)),
                        true,
                    )
                }
                Some(false) => {}
                None => {
                    self.metrics.client_error("header_timeout");
                    return Chosen::Closed;
                }
            }
        }
        Chosen::Engine(ClientIo::Plain(tcp), early)
    }
}

/// Reads a plain connection's first bytes, within the head's deadline,
/// just far enough to tell the HTTP/2 preface (`Some(true)`) from HTTP/1;
/// `None` when the client left or was too slow first.
pub(super) async fn sniff(
    tcp: &mut TcpStream,
    early: &mut Vec<u8>,
    timeout: Duration,
) -> Option<bool> {
    let preface = super::timed::H2_PREFACE;
    let deadline = tokio::time::Instant::now() + timeout;
    while early.len() < preface.len() {
        early.reserve(preface.len());
        let want = (preface.len() - early.len()) as u64;
        match tokio::time::timeout_at(deadline, (&mut *tcp).take(want).read_buf(early)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return None,
            Ok(Ok(_)) => {}
        }
        if !preface.starts_with(early) {
            return Some(false);
        }
    }
    Some(true)
}
