//! A stock Pingora proxy using pingora-load-balancing's own `KetamaHashing`
//! (pingora-ketama V1), keyed by path and query: the baseline that
//! `scripts/loadbench.sh` compares ketama-router with. Nothing of ketama.
//!
//! ```text
//! cargo run --release -p ketama-router --example stock_pingora -- \
//!     --listen 127.0.0.1:18082 --threads 1 [--no-steal] [--keepalive N] \
//!     [--headers] [--backends-file FILE] [--tls CERT KEY] [ADDR ...]
//! ```
//!
//! `--headers` adds the headers ketama-router adds by default
//! (`X-Forwarded-For`, `X-Forwarded-Proto` to the backend;
//! `x-ketama-backend`, `x-ketama-ring` to the client), so a comparison
//! can be like for like.
//!
//! `--tls CERT KEY` makes the listener a TLS one with Pingora's own
//! `rustls` listener (TLS 1.2 and 1.3, ALPN h2 and http/1.1), for the TLS
//! benchmarks; its session resumption is rustls' default (a session cache
//! and TLS 1.3 tickets), which Pingora 0.9.1's listener cannot turn off.
//!
//! Built with the package's default features it uses ketama-router's
//! global allocator (jemalloc); built with `--no-default-features`, the
//! system allocator. `--backends-file` reads `ADDR [WEIGHT]` lines.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::lb::discovery::Static;
use pingora::lb::selection::consistent::KetamaHashing;
use pingora::lb::{Backend, Backends, LoadBalancer};
use pingora::prelude::*;
use pingora::proxy::{ProxyHttp, Session};
use pingora::server::configuration::ServerConf;

#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

struct Stock {
    lb: Arc<LoadBalancer<KetamaHashing>>,
    /// `--headers`: add the headers ketama-router adds by default.
    headers: bool,
}

#[async_trait]
impl ProxyHttp for Stock {
    /// The chosen backend's address, for `x-ketama-backend`.
    type CTX = Option<String>;
    fn new_ctx(&self) -> Option<String> {
        None
    }

    async fn upstream_peer(
        &self,
        session: &mut Session,
        ctx: &mut Option<String>,
    ) -> Result<Box<HttpPeer>> {
        let key = session
            .req_header()
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .as_bytes()
            .to_vec();
        let backend = self
            .lb
            .select(&key, 256)
            .ok_or_else(|| Error::explain(ErrorType::HTTPStatus(502), "no backend"))?;
        if self.headers {
            *ctx = Some(backend.addr.to_string());
        }
        Ok(Box::new(HttpPeer::new(backend, false, String::new())))
    }

    // With `--headers`, what ketama-router adds by default, written the
    // way Pingora's examples write it: X-Forwarded-For (the client's
    // address after any the request brought) and X-Forwarded-Proto to the
    // backend, x-ketama-backend and x-ketama-ring to the client.
    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        upstream: &mut RequestHeader,
        _ctx: &mut Option<String>,
    ) -> Result<()> {
        if !self.headers {
            return Ok(());
        }
        if let Some(ip) = session
            .client_addr()
            .and_then(|a| a.as_inet())
            .map(|a| a.ip())
        {
            let xff = match upstream
                .headers
                .get("x-forwarded-for")
                .and_then(|v| v.to_str().ok())
            {
                Some(v) => format!("{v}, {ip}"),
                None => ip.to_string(),
            };
            upstream.insert_header("x-forwarded-for", xff)?;
        }
        upstream.insert_header("x-forwarded-proto", "http")?;
        Ok(())
    }

    async fn response_filter(
        &self,
        _session: &mut Session,
        resp: &mut ResponseHeader,
        ctx: &mut Option<String>,
    ) -> Result<()> {
        if let Some(b) = ctx.take() {
            resp.insert_header("x-ketama-backend", b)?;
            resp.insert_header("x-ketama-ring", "v1")?;
        }
        Ok(())
    }
}

/// `ADDR [WEIGHT]` lines.
fn read_backends(path: &str) -> BTreeSet<Backend> {
    std::fs::read_to_string(path)
        .expect("readable backends file")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut parts = l.split_whitespace();
            let addr = parts.next().expect("an address");
            let weight = parts.next().map_or(1, |w| w.parse().expect("a weight"));
            Backend::new_with_weight(addr, weight).expect("a socket address")
        })
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut listen, mut threads, mut addrs) = ("127.0.0.1:18082".to_string(), 1usize, Vec::new());
    let mut work_stealing = true; // Pingora's default
    let mut keepalive = None;
    let mut file = None;
    let mut tls = None;
    let mut headers = false;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--listen" => listen = args.next().expect("--listen ADDR"),
            "--threads" => {
                threads = args
                    .next()
                    .and_then(|t| t.parse().ok())
                    .expect("--threads N")
            }
            "--no-steal" => work_stealing = false,
            "--headers" => headers = true,
            "--keepalive" => keepalive = args.next().and_then(|n| n.parse().ok()),
            "--backends-file" => file = args.next(),
            "--tls" => {
                let cert = args.next().expect("--tls CERT KEY");
                let key = args.next().expect("--tls CERT KEY");
                tls = Some((cert, key));
            }
            _ => addrs.push(a),
        }
    }
    let mut set: BTreeSet<Backend> = addrs
        .iter()
        .map(|a| Backend::new(a).expect("a socket address"))
        .collect();
    if let Some(f) = &file {
        set.extend(read_backends(f));
    }
    assert!(!set.is_empty(), "give backend addresses");
    let mut conf = ServerConf {
        threads,
        work_stealing,
        grace_period_seconds: Some(0),
        graceful_shutdown_timeout_seconds: Some(0),
        ..ServerConf::default()
    };
    if let Some(k) = keepalive {
        conf.upstream_keepalive_pool_size = k;
    }
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let lb = LoadBalancer::from_backends(Backends::new(Static::new(set)));
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
        .block_on(lb.update())
        .expect("static discovery does not fail");
    let mut proxy = pingora::proxy::http_proxy_service(
        &server.configuration,
        Stock {
            lb: Arc::new(lb),
            headers,
        },
    );
    match &tls {
        None => proxy.add_tcp(&listen),
        Some((cert, key)) => {
            let mut settings = pingora::listeners::tls::TlsSettings::intermediate(cert, key)
                .expect("readable certificate and key");
            settings.enable_h2();
            proxy.add_tls_with_settings(&listen, None, settings);
        }
    }
    server.add_service(proxy);
    server.run_forever();
}
