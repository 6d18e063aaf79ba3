//! A stock Pingora proxy using pingora-load-balancing's own `KetamaHashing`
//! (pingora-ketama V1), keyed by path and query: the baseline that
//! `scripts/loadbench.sh` compares ketama-router with. Nothing of ketama.
//!
//! ```text
//! cargo run --release -p ketama-router --example stock_pingora -- \
//!     --listen 127.0.0.1:18082 --threads 1 [--no-steal] [--keepalive N] \
//!     [--backends-file FILE] [--tls CERT KEY] [ADDR ...]
//! ```
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
use pingora::lb::discovery::Static;
use pingora::lb::selection::consistent::KetamaHashing;
use pingora::lb::{Backend, Backends, LoadBalancer};
use pingora::prelude::*;
use pingora::proxy::{ProxyHttp, Session};
use pingora::server::configuration::ServerConf;

#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

struct Stock(Arc<LoadBalancer<KetamaHashing>>);

#[async_trait]
impl ProxyHttp for Stock {
    type CTX = ();
    fn new_ctx(&self) {}

    async fn upstream_peer(&self, session: &mut Session, _ctx: &mut ()) -> Result<Box<HttpPeer>> {
        let key = session
            .req_header()
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .as_bytes()
            .to_vec();
        let backend = self
            .0
            .select(&key, 256)
            .ok_or_else(|| Error::explain(ErrorType::HTTPStatus(502), "no backend"))?;
        Ok(Box::new(HttpPeer::new(backend, false, String::new())))
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
    let mut proxy = pingora::proxy::http_proxy_service(&server.configuration, Stock(Arc::new(lb)));
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
