//! Active health checks: a Pingora background service that sends
//! `GET path` to every backend of the current routing state each
//! interval and records the result in the backend's [`Health`](crate::health::Health).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::connectors::TransportConnector;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use pingora::upstreams::peer::HttpPeer;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::state::StateReader;

/// One check: `GET path` answered with a 2xx or 3xx status within the
/// timeout.
pub async fn check(addr: std::net::SocketAddr, path: &str, timeout: Duration) -> bool {
    let attempt = async {
        let s = TcpStream::connect(addr).await.ok()?;
        ask(s, &addr.to_string(), path).await
    };
    matches!(tokio::time::timeout(timeout, attempt).await, Ok(Some(true)))
}

/// A check of a TLS backend, through Pingora's connector with the same
/// settings requests use (SNI, verification, CA, client certificate): a
/// backend whose certificate does not verify fails its checks.
pub async fn check_tls(
    connector: &TransportConnector,
    peer: &HttpPeer,
    host: &str,
    path: &str,
    timeout: Duration,
) -> bool {
    let attempt = async {
        let s = connector.new_stream(peer).await.ok()?;
        ask(s, host, path).await
    };
    matches!(tokio::time::timeout(timeout, attempt).await, Ok(Some(true)))
}

/// Sends the check's request on `s`; whether the status passes.
async fn ask<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, host: &str, path: &str) -> Option<bool> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: ketama-router-health\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut buf = [0u8; 16];
    let mut got = 0;
    while got < 12 {
        let n = s.read(&mut buf[got..]).await.ok()?;
        if n == 0 {
            break;
        }
        got += n;
    }
    let line = std::str::from_utf8(&buf[..got]).ok()?;
    let code: u16 = line.get(9..12)?.parse().ok()?;
    Some((200..400).contains(&code))
}

/// Checks every backend of the current routing state each interval.
pub struct HealthChecker {
    /// The current routing state's backends and `[health]` settings.
    pub routing: StateReader,
}

#[async_trait]
impl BackgroundService for HealthChecker {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        // TLS checks' connector: no pool (each check is a new connection).
        let connector = Arc::new(TransportConnector::new(None));
        loop {
            // Only what the checks need is taken out of the state, and the
            // state itself let go before the checks and the sleep: a swap
            // meanwhile frees the old one at once.
            let (interval, round) = {
                let state = self.routing.state();
                let h = &state.validated.config.health;
                let interval = Duration::from_millis(h.interval_ms.max(10));
                let round = h.enabled.then(|| {
                    let timeout = Duration::from_millis(h.timeout_ms.max(1));
                    let (up, down) = (h.healthy_threshold.max(1), h.unhealthy_threshold.max(1));
                    let path: Arc<str> = h.path.as_str().into();
                    state
                        .backends
                        .iter()
                        .map(|b| {
                            let (addr, path, health) = (b.addr, path.clone(), b.health.clone());
                            let server = b.server.clone();
                            let tls = b.tls.as_ref().map(|sni| {
                                let mut peer = HttpPeer::new(addr, true, sni.to_string());
                                state.upstream_tls.apply(&mut peer);
                                peer.options.connection_timeout = Some(timeout);
                                let host = if sni.is_empty() {
                                    addr.to_string()
                                } else {
                                    sni.to_string()
                                };
                                (peer, host)
                            });
                            let connector = connector.clone();
                            async move {
                                let began = std::time::Instant::now();
                                let ok = match tls {
                                    None => check(addr, &path, timeout).await,
                                    Some((peer, host)) => {
                                        check_tls(&connector, &peer, &host, &path, timeout).await
                                    }
                                };
                                if health.record_check(ok, began.elapsed(), up, down) {
                                    tracing::warn!(
                                        backend = server,
                                        healthy = ok,
                                        "backend health changed"
                                    );
                                }
                            }
                        })
                        .collect::<Vec<_>>()
                });
                (interval, round)
            };
            if let Some(round) = round {
                let tasks: Vec<_> = round.into_iter().map(tokio::spawn).collect();
                for t in tasks {
                    let _ = t.await;
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = shutdown.changed() => return,
            }
        }
    }
}
