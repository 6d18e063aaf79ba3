//! A stock Pingora proxy using pingora-load-balancing's own `KetamaHashing`
//! (pingora-ketama V1), keyed by path and query: the baseline that
//! `scripts/loadbench.sh` compares ketama-router with. Nothing of ketama.
//!
//! `cargo run --release -p ketama-router --example stock_pingora -- \
//!     --listen 127.0.0.1:18082 --threads 1 127.0.0.1:19001 127.0.0.1:19002`

use std::sync::Arc;

use async_trait::async_trait;
use pingora::lb::selection::consistent::KetamaHashing;
use pingora::lb::LoadBalancer;
use pingora::prelude::*;
use pingora::proxy::{ProxyHttp, Session};
use pingora::server::configuration::ServerConf;

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

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut listen, mut threads, mut backends) =
        ("127.0.0.1:18082".to_string(), 1usize, Vec::new());
    let mut work_stealing = true; // Pingora's default
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
            _ => backends.push(a),
        }
    }
    assert!(!backends.is_empty(), "give backend addresses");
    let conf = ServerConf {
        threads,
        work_stealing,
        grace_period_seconds: Some(0),
        graceful_shutdown_timeout_seconds: Some(0),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let lb = LoadBalancer::try_from_iter(backends.iter().map(String::as_str))
        .expect("backend addresses");
    let mut proxy = pingora::proxy::http_proxy_service(&server.configuration, Stock(Arc::new(lb)));
    proxy.add_tcp(&listen);
    server.add_service(proxy);
    server.run_forever();
}
