//! Active health checks: a background service that asks every backend of
//! the current routing state each interval ([`crate::probe`]) and records
//! the result in the backend's [`Health`](crate::health::Health).

use std::time::Duration;

use async_trait::async_trait;

use crate::probe::{check, Ask, Target};
use crate::service::{Background, ShutdownWatch};
use crate::state::StateReader;

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
                    let ask = if h.grpc {
                        Ask::Grpc(h.grpc_service.as_str().into())
                    } else {
                        Ask::Get(h.path.as_str().into())
                    };
                    state
                        .backends
                        .iter()
                        .map(|b| {
                            let (addr, ask, health) = (b.addr, ask.clone(), b.health.clone());
                            let server = b.server.clone();
                            let tls = b
                                .tls
                                .as_ref()
                                .map(|sni| state.upstream_tls.for_engine(sni, addr.ip()));
                            let host = match b.tls.as_deref() {
                                Some(sni) if !sni.is_empty() => sni.to_string(),
                                _ => addr.to_string(),
                            };
                            let h2c = b.h2c;
                            async move {
                                let began = std::time::Instant::now();
                                let to = Target {
                                    addr,
                                    tls,
                                    h2c,
                                    host,
                                };
                                let ok = check(to, &ask, timeout).await;
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
