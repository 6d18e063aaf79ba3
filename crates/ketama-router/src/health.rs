//! Active HTTP health checks and SIGHUP reloads, as Pingora background
//! services. An unhealthy backend is skipped by lookups; the ring is not
//! rebuilt, so the keys of healthy backends never move.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::state::App;

/// Checks every backend of the current routing state each interval.
pub struct HealthChecker {
    /// Shared state.
    pub app: Arc<App>,
}

/// One check: `GET path` answered with a 2xx or 3xx status within the
/// timeout.
pub async fn check(addr: std::net::SocketAddr, path: &str, timeout: Duration) -> bool {
    let attempt = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: ketama-router-health\r\nConnection: close\r\n\r\n");
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
    };
    matches!(tokio::time::timeout(timeout, attempt).await, Ok(Some(true)))
}

#[async_trait]
impl BackgroundService for HealthChecker {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        loop {
            let state = self.app.state.load_full();
            let h = &state.validated.config.health;
            let interval = Duration::from_millis(h.interval_ms.max(10));
            if h.enabled {
                let timeout = Duration::from_millis(h.timeout_ms.max(1));
                let checks = state.backends.iter().map(|b| {
                    let (addr, path, health) = (b.addr, h.path.clone(), b.health.clone());
                    let (up, down) = (h.healthy_threshold.max(1), h.unhealthy_threshold.max(1));
                    let server = b.server.clone();
                    tokio::spawn(async move {
                        let ok = check(addr, &path, timeout).await;
                        if health.record(ok, up, down) {
                            tracing::warn!(
                                backend = server,
                                healthy = ok,
                                "backend health changed"
                            );
                        }
                    })
                });
                for c in checks.collect::<Vec<_>>() {
                    let _ = c.await;
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = shutdown.changed() => return,
            }
        }
    }
}

/// Reloads the config on SIGHUP.
pub struct SighupReloader {
    /// Shared state.
    pub app: Arc<App>,
}

#[async_trait]
impl BackgroundService for SighupReloader {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            tracing::error!("cannot listen for SIGHUP; reload through the admin API");
            return;
        };
        loop {
            tokio::select! {
                _ = hup.recv() => { let _ = self.app.reload(); }
                _ = shutdown.changed() => return,
            }
        }
    }
}
