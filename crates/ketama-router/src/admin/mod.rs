//! The admin API, on its own loopback listener, behind a bearer token.
//!
//! | request | answer |
//! |---|---|
//! | `GET /ui` | the admin page: one self-contained HTML page that shows the rest live; needs no token to load (it holds no data) |
//! | `GET /ui/data` | JSON the page refreshes from: `/status` without its backends, and the backends as columns (shares per ring, health, request counts, latency quantiles; see [`ui`]) |
//! | `GET /status` | JSON: backends (server, weight, labels, down, healthy), rings (compat, layout, point multiple, points, bytes), rollout, lookups, reloads and the last config changes, settings that need a restart, pid |
//! | `GET /metrics` | Prometheus text (0.0.4), or OpenMetrics when the scraper's `Accept` asks for it |
//! | `PUT /rollout` | body `{"global_bp": N, "scopes": {"NAME": N}}`: the migration's new rollout, at once, no reload |
//! | `POST /reload` | re-reads the config; 200 `{"reloaded": true, "restart_needed": [keys]}`, or 400 with the error while the running config keeps serving |
//!
//! Every request but `GET /ui` needs `Authorization: Bearer TOKEN` (401
//! otherwise) unless the config disabled auth.

use std::sync::Arc;

use ketama::Version;
use ketama_config::parse_rollout;
use serde_json::{json, Value};
use subtle::ConstantTimeEq;

use crate::cell::{Refused, RoutingCell, Trigger};
use crate::control::Control;
use crate::discovery::DiscoveryState;
use crate::metrics::{Metrics, Snapshot};
use crate::state::RoutingState;

pub mod serve;
pub mod ui;

/// The admin API's handler. The token it checks is the current config's,
/// so a reload that changes it applies to the next request.
pub struct Admin {
    /// The routing state's owner: read for `/status`, replaced by
    /// `/reload` and `/rollout`.
    pub cell: Arc<RoutingCell>,
    /// What discovery found, for `/status` and `/metrics`.
    pub discovery: Arc<DiscoveryState>,
    /// Steering through etcd, with `[control]`.
    pub control: Option<Arc<Control>>,
    /// The counters.
    pub metrics: Arc<Metrics>,
    /// The access log, for its counts.
    pub access_log: crate::access_log::AccessLog,
    /// The page's latency window.
    pub latency: ui::LatencyWindow,
}

fn response(code: u16, content_type: &str, body: String) -> http::Response<Vec<u8>> {
    http::Response::builder()
        .status(code)
        .header("content-type", content_type)
        .header("content-length", body.len())
        .body(body.into_bytes())
        .expect("valid response parts")
}

fn json_response(code: u16, v: Value) -> http::Response<Vec<u8>> {
    response(code, "application/json", format!("{v}\n"))
}

/// The `GET /status` document.
pub fn status(admin: &Admin) -> Value {
    status_of(admin, &admin.cell.state(), true)
}

/// The `GET /status` document of `state`, with or without its backends
/// (the admin page takes them as columns).
pub fn status_of(admin: &Admin, state: &RoutingState, with_backends: bool) -> Value {
    let published = admin.cell.published();
    let plan = &state.plan;
    let total_weight = state.serving_weight(None, Version::Only);
    let backends: Vec<Value> = state
        .backends
        .iter()
        .take(if with_backends { usize::MAX } else { 0 })
        .zip(&plan.backends)
        .enumerate()
        .map(|(i, (b, cfg))| {
            let mut v = json!({
                "server": b.server,
                "weight": cfg.weight,
                "labels": cfg.labels,
                "down": cfg.down,
                "healthy": b.health.is_healthy(),
            });
            if let Some(sni) = &b.tls {
                v["tls"] = json!({"sni": &**sni});
            }
            if b.h2c {
                v["h2c"] = json!(true);
            }
            if let Some(src) = cfg.source {
                v["address"] = json!(b.addr.to_string());
                v["discovered_by"] = json!(src);
            }
            if let Some(bal) = &state.balance {
                v["in_flight"] = json!(bal.loads.load(i));
                v["bound"] = json!(bal
                    .factor
                    .bound(bal.loads.total(), cfg.weight, total_weight));
                v["spills"] = json!(b.metrics.spills());
            }
            v
        })
        .collect();
    let ring = |r: &ketama::Ring| {
        json!({
            "compat": r.compat().name(),
            "layout": r.layout().name(),
            "point_multiple": r.point_multiple(),
            "points": r.point_count(),
            "bytes": r.points_heap_bytes(),
        })
    };
    let table = &plan.table;
    let m = &admin.metrics;
    let (rings, rollout) = match table.migration() {
        Some(mig) => {
            let r = mig.rollout();
            (
                json!({"old": ring(table.ring(Version::Old)), "new": ring(table.ring(Version::New))}),
                json!({
                    "global_bp": r.global_bp(),
                    "scopes": r.scopes(),
                    "scope": plan.scope,
                    "in_force_bp": r.bp_for(plan.scope.as_deref()),
                    "origin": published.rollout.origin.name(),
                    "lookups": {"old": m.lookups(Version::Old), "new": m.lookups(Version::New)},
                }),
            )
        }
        None => (
            json!({"only": ring(table.ring(Version::Only))}),
            Value::Null,
        ),
    };
    let (ok, rejected) = m.reloads();
    json!({
        "backends": backends,
        "rings": rings,
        "rollout": rollout,
        "lookups_only": m.lookups(Version::Only),
        "build_ms": plan.build_ms,
        "reloads": {"ok": ok, "rejected": rejected},
        "history": published.history.iter().map(|a| json!({
            "at": crate::clock::utc(a.at),
            "trigger": a.trigger,
            "ok": a.error.is_none(),
            "error": a.error,
            "restart_needed": a.restart_needed,
        })).collect::<Vec<_>>(),
        "access_log": state.validated.config.access_log.as_ref().map(|l| json!({
            "path": l.path,
            "written": admin.access_log.written(),
            "dropped": admin.access_log.dropped(),
        })),
        "restart_needed": published.restart_needed,
        "discovery": admin.discovery.status(&state.validated),
        "balance": state.balance.as_ref().map(|b| json!({
            "factor": b.factor.percent(),
            "in_flight": b.loads.total(),
            "serving_weight": total_weight,
        })),
        "control": admin.control.as_ref().map(|c| c.status()),
        "tls": state.tls.as_ref().map(|t| json!({
            "listen": state.validated.tls_listen.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "certificates": t.certificates.iter().map(|c| json!({
                "cert_file": c.cert_file,
                "names": c.facts.names,
                "not_after": crate::tls::rfc3339(c.facts.not_after),
                "expires_in_s": c.facts.expires_in(),
            })).collect::<Vec<_>>(),
        })),
        "cache_status": crate::metrics::cache::status_json(
            &m.cache,
            state.cache.header(),
            table.versions(),
        ),
        "grpc": grpc_json(&m.grpc_calls()),
        "pid": std::process::id(),
    })
}

/// gRPC calls by `grpc-status`, the codes seen only: `{"0": 12, "14":
/// 1}` (`"other"` for codes past 16).
fn grpc_json(calls: &[u64; 18]) -> Value {
    let mut out = serde_json::Map::new();
    for (i, &n) in calls.iter().enumerate().filter(|(_, &n)| n > 0) {
        let code = if i < 17 {
            i.to_string()
        } else {
            "other".into()
        };
        out.insert(code, json!(n));
    }
    Value::Object(out)
}

/// What a scrape reads of the running state, taken once.
fn snapshot<'a>(admin: &Admin, state: &'a crate::state::RoutingState) -> Snapshot<'a> {
    let table = &state.plan.table;
    Snapshot {
        rollout_bp: table
            .migration()
            .map_or(0, |m| m.rollout().bp_for(state.plan.scope.as_deref())),
        rings: table
            .versions()
            .iter()
            .map(|&v| {
                let r = table.ring(v);
                (
                    v.name(),
                    r.point_count() as u64,
                    r.points_heap_bytes() as u64,
                )
            })
            .collect(),
        build_ms: state.plan.build_ms,
        discovered: admin.discovery.backend_counts(&state.validated),
        moved_share: admin.discovery.moved_share(),
        control: admin.control.as_ref().map(|c| {
            let (config, rollout) = c.revisions();
            (c.is_connected(), config, rollout)
        }),
        backends: state
            .backends
            .iter()
            .map(|b| (&*b.metrics, b.health.is_healthy()))
            .collect(),
        connections: admin.metrics.open_connections(),
        access_log: (admin.access_log.written(), admin.access_log.dropped()),
        certificates: state.tls.as_ref().map_or_else(Vec::new, |t| {
            t.certificates
                .iter()
                .map(|c| (c.facts.names.join(","), c.facts.not_after))
                .collect()
        }),
    }
}

impl Admin {
    /// `PUT /rollout`'s change, off the runtime's threads: it waits for
    /// any change in progress (a reload's ring build), and the admin
    /// runtime's threads keep answering meanwhile.
    async fn set_rollout(&self, body: Vec<u8>) -> Result<crate::cell::Change, Refused> {
        let cell = self.cell.clone();
        tokio::task::spawn_blocking(move || {
            // Refused before the body is judged, as the rule says.
            cell.admits_admin_rollout()?;
            let r = parse_rollout(&body).map_err(|e| Refused::Config(e.into()))?;
            cell.replace(Trigger::AdminRollout(r))
        })
        .await
        .unwrap_or_else(|e| Err(Refused::Config(anyhow::anyhow!("rollout failed: {e}"))))
    }

    /// A reload, off the runtime's threads (the ring build is CPU work).
    async fn reload(&self) -> Result<Vec<&'static str>, Refused> {
        let cell = self.cell.clone();
        tokio::task::spawn_blocking(move || crate::reload::reload(&cell))
            .await
            .unwrap_or_else(|e| Err(Refused::Config(anyhow::anyhow!("reload failed: {e}"))))
    }
}

impl Admin {
    /// The answer to one admin request (its head and its body, read
    /// whole by [`serve`]).
    pub async fn respond(
        &self,
        req: &http::request::Parts,
        body: Vec<u8>,
    ) -> http::Response<Vec<u8>> {
        if req.uri.path() == "/ui" {
            return match req.method.as_str() {
                "GET" | "HEAD" => response(200, "text/html; charset=utf-8", ui::PAGE.to_string()),
                m => json_response(405, json!({"error": format!("{m} is not allowed on /ui")})),
            };
        }
        let token = self.cell.state().validated.token.clone();
        if let Some(token) = &token {
            // Constant time: how long the comparison takes says nothing
            // about how much of a guess was right.
            let ok = req
                .headers
                .get("authorization")
                .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
                .is_some_and(|t| bool::from(t.ct_eq(token.as_bytes())));
            if !ok {
                return json_response(
                    401,
                    json!({"error": "missing or wrong bearer token: send Authorization: Bearer TOKEN"}),
                );
            }
        }
        let method = req.method.as_str();
        let path = req.uri.path();
        match (method, path) {
            ("GET", "/status") => json_response(200, status(self)),
            ("GET", "/ui/data") => {
                let state = self.cell.state();
                if !state.keyspace_shares_ready() {
                    // A new state's shares are a pass over its points
                    // (half a second at 32 million): off the admin
                    // runtime, so /status and /metrics answer meanwhile.
                    let s = state.clone();
                    let _ = tokio::task::spawn_blocking(move || {
                        s.keyspace_shares();
                    })
                    .await;
                }
                response(200, "application/json", ui::data(self, &state))
            }
            ("GET", "/metrics") => {
                let wants_om = req
                    .headers
                    .get("accept")
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.contains("application/openmetrics-text"));
                let state = self.cell.state();
                let body = self.metrics.render(&snapshot(self, &state), wants_om);
                let kind = if wants_om {
                    "application/openmetrics-text; version=1.0.0; charset=utf-8"
                } else {
                    "text/plain; version=0.0.4; charset=utf-8"
                };
                response(200, kind, body)
            }
            ("PUT", "/rollout") => match self.set_rollout(body).await {
                Ok(_) => json_response(200, status(self)["rollout"].clone()),
                Err(Refused::RolloutFromEtcd) => {
                    let (key, rev) = self.control.as_ref().map_or((String::new(), 0), |c| {
                        (c.rollout_key(), c.rollout_revision())
                    });
                    json_response(
                        409,
                        json!({"error": format!(
                            "this router's rollout comes from etcd ({key} at revision {rev}): write it there with `ketama fleet rollout`"
                        )}),
                    )
                }
                Err(Refused::NoMigration) => json_response(
                    409,
                    json!({"error": "no migration is configured: add [migration] to the config"}),
                ),
                Err(e) => json_response(400, json!({ "error": format!("{e:#}") })),
            },
            ("POST", "/reload") => match self.reload().await {
                Ok(restart) => {
                    json_response(200, json!({"reloaded": true, "restart_needed": restart}))
                }
                Err(e) => json_response(400, json!({"reloaded": false, "error": format!("{e:#}")})),
            },
            (_, "/status" | "/metrics" | "/rollout" | "/reload" | "/ui/data") => json_response(
                405,
                json!({"error": format!("{method} is not allowed on {path}")}),
            ),
            _ => json_response(
                404,
                json!({"error": format!("no {path}: try /ui, /status, /metrics, /rollout or /reload")}),
            ),
        }
    }
}
