//! Backend health: active HTTP checks as a Pingora background service, each
//! backend's state kept by server string across reloads. An unhealthy
//! backend is skipped by lookups; the ring is not rebuilt, so the keys of
//! healthy backends never move.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::app::App;

/// A backend's health.
#[derive(Debug)]
pub struct Health {
    healthy: AtomicBool,
    successes: AtomicU32,
    failures: AtomicU32,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            healthy: AtomicBool::new(true),
            successes: AtomicU32::new(0),
            failures: AtomicU32::new(0),
        }
    }
}

impl Health {
    /// Whether the backend takes traffic.
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Relaxed)
    }

    /// Records a check; flips after `up` successes or `down` failures in a
    /// row. Returns whether the state changed.
    pub fn record(&self, ok: bool, up: u32, down: u32) -> bool {
        if ok {
            self.failures.store(0, Relaxed);
            let n = self.successes.fetch_add(1, Relaxed) + 1;
            n >= up && !self.healthy.swap(true, Relaxed)
        } else {
            self.successes.store(0, Relaxed);
            let n = self.failures.fetch_add(1, Relaxed) + 1;
            n >= down && self.healthy.swap(false, Relaxed)
        }
    }
}

/// Health by server string, so that a reload does not forget which
/// backends are failing.
#[derive(Debug, Default)]
pub struct HealthRegistry(Mutex<HashMap<String, Arc<Health>>>);

impl HealthRegistry {
    /// The health of `server` (new ones start healthy).
    pub fn get(&self, server: &str) -> Arc<Health> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(server.to_string())
            .or_default()
            .clone()
    }
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

/// Checks every backend of the current routing state each interval.
pub struct HealthChecker {
    /// Shared state.
    pub app: Arc<App>,
}

#[async_trait]
impl BackgroundService for HealthChecker {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        loop {
            let state = self.app.state();
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
