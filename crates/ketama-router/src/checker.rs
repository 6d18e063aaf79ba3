//! Active health checks: a background service that sends `GET path` to
//! every backend of the current routing state each interval and records
//! the result in the backend's [`Health`](crate::health::Health).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::engine::io::UpstreamIo;
use crate::engine::upstream::{dial_with, TlsTo};
use crate::service::{Background, ShutdownWatch};
use crate::state::StateReader;

/// One check: `GET path` answered with a 2xx or 3xx status within the
/// timeout. A TLS backend (`tls`: the settings requests use, so SNI,
/// verification, CA and client certificate are the same, and a backend
/// whose certificate does not verify fails its checks) is asked in
/// HTTP/2 when its ALPN picks `h2`; `host` is the `Host` (or
/// `:authority`) sent.
pub async fn check(
    addr: SocketAddr,
    tls: Option<TlsTo>,
    host: &str,
    path: &str,
    timeout: Duration,
) -> bool {
    let attempt = async {
        let io = dial_with(addr, tls).await.ok()?;
        if io.is_h2() {
            return ask_h2(io, host, path).await;
        }
        ask(io, host, path).await
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

/// The check's request in HTTP/2; whether the status passes.
async fn ask_h2(io: UpstreamIo, host: &str, path: &str) -> Option<bool> {
    let (mut send, conn) = h2::client::handshake(io).await.ok()?;
    let driver = tokio::spawn(conn);
    let req = http::Request::get(format!("https://{host}{path}"))
        .header("user-agent", "ketama-router-health")
        .body(())
        .ok()?;
    let answer = async {
        let (resp, _) = send.send_request(req, true).ok()?;
        let resp = resp.await.ok()?;
        Some((200..400).contains(&resp.status().as_u16()))
    }
    .await;
    driver.abort();
    answer
}

/// Checks every backend of the current routing state each interval.
pub struct HealthChecker {
    /// The current routing state's backends and `[health]` settings.
    pub routing: StateReader,
}

#[async_trait]
impl Background for HealthChecker {
    async fn start(&self, mut shutdown: ShutdownWatch) {
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
                            let tls = b
                                .tls
                                .as_ref()
                                .map(|sni| state.upstream_tls.for_engine(sni, addr.ip()));
                            let host = match b.tls.as_deref() {
                                Some(sni) if !sni.is_empty() => sni.to_string(),
                                _ => addr.to_string(),
                            };
                            async move {
                                let began = std::time::Instant::now();
                                let ok = check(addr, tls, &host, &path, timeout).await;
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
