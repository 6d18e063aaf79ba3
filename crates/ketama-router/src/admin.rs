//! The admin API, on its own loopback listener, behind a bearer token.
//!
//! | request | answer |
//! |---|---|
//! | `GET /status` | JSON: backends (server, weight, labels, down, healthy), rings (compat, layout, point multiple, points, bytes), rollout, lookups, reloads |
//! | `GET /metrics` | Prometheus text |
//! | `PUT /rollout` | body `{"global_bp": N, "scopes": {"NAME": N}}`: the migration's new rollout, at once, no reload |
//! | `POST /reload` | re-reads the config; 200, or 400 with the error while the running config keeps serving |
//!
//! Every request needs `Authorization: Bearer TOKEN` (401 otherwise)
//! unless the config disabled auth.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use async_trait::async_trait;
use ketama::Rollout;
use pingora::apps::http_app::ServeHttp;
use pingora::protocols::http::ServerSession;
use serde_json::{json, Value};

use crate::state::App;

/// The admin API's handler.
pub struct Admin {
    /// Shared state.
    pub app: Arc<App>,
    /// The token; `None` disables auth.
    pub token: Option<String>,
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
pub fn status(app: &App) -> Value {
    let state = app.state.load_full();
    let c = &state.validated.config;
    let backends: Vec<Value> = state
        .backends
        .iter()
        .zip(&c.backends)
        .map(|(b, cfg)| {
            json!({
                "server": b.server,
                "weight": cfg.weight,
                "labels": cfg.labels,
                "down": cfg.down,
                "healthy": b.health.is_healthy(),
            })
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
    let (rings, rollout) = match &state.migration {
        Some(m) => {
            let r = m.rollout();
            let (old, new) = m.served();
            (
                json!({"old": ring(m.old()), "new": ring(m.new_ring())}),
                json!({
                    "global_bp": r.global_bp(),
                    "scopes": r.scopes(),
                    "scope": state.scope,
                    "in_force_bp": r.bp_for(state.scope.as_deref()),
                    "lookups": {"old": old, "new": new},
                }),
            )
        }
        None => (json!({"only": ring(&state.ring)}), Value::Null),
    };
    json!({
        "backends": backends,
        "rings": rings,
        "rollout": rollout,
        "lookups_only": app.only_lookups.load(Relaxed),
        "build_ms": state.build_ms,
        "reloads": {"ok": app.reloads.0.load(Relaxed), "rejected": app.reloads.1.load(Relaxed)},
    })
}

/// Parses a `PUT /rollout` body.
pub fn parse_rollout(body: &[u8]) -> Result<Rollout, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("body is not JSON: {e}"))?;
    let global = v
        .get("global_bp")
        .and_then(Value::as_u64)
        .ok_or("give \"global_bp\": a whole number of basis points from 0 to 10000")?;
    let mut r = Rollout::new(global.min(u32::MAX as u64) as u32).map_err(|e| e.to_string())?;
    if let Some(scopes) = v.get("scopes") {
        let scopes = scopes
            .as_object()
            .ok_or("\"scopes\" must be an object of NAME: basis points")?;
        for (name, bp) in scopes {
            let bp = bp
                .as_u64()
                .ok_or_else(|| format!("scopes.{name} must be a whole number of basis points"))?;
            r = r
                .with_scope(name.clone(), bp.min(u32::MAX as u64) as u32)
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(r)
}

#[async_trait]
impl ServeHttp for Admin {
    async fn response(&self, session: &mut ServerSession) -> http::Response<Vec<u8>> {
        if let Some(token) = &self.token {
            let ok = session
                .get_header("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .is_some_and(|t| t == token);
            if !ok {
                return json_response(
                    401,
                    json!({"error": "missing or wrong bearer token: send Authorization: Bearer TOKEN"}),
                );
            }
        }
        let method = session.req_header().method.as_str().to_string();
        let path = session.req_header().uri.path().to_string();
        match (method.as_str(), path.as_str()) {
            ("GET", "/status") => json_response(200, status(&self.app)),
            ("GET", "/metrics") => response(
                200,
                "text/plain; version=0.0.4",
                crate::metrics::render(&self.app),
            ),
            ("PUT", "/rollout") => {
                let mut body = Vec::new();
                loop {
                    match session.read_request_body().await {
                        Ok(Some(chunk)) => {
                            body.extend_from_slice(&chunk);
                            if body.len() > 1 << 20 {
                                return json_response(413, json!({"error": "body over 1 MiB"}));
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            return json_response(
                                400,
                                json!({"error": format!("cannot read body: {e}")}),
                            )
                        }
                    }
                }
                let state = self.app.state.load_full();
                let Some(m) = &state.migration else {
                    return json_response(
                        409,
                        json!({"error": "no migration is configured: add [migration] to the config"}),
                    );
                };
                match parse_rollout(&body) {
                    Ok(r) => {
                        m.set_rollout(r);
                        json_response(200, status(&self.app)["rollout"].clone())
                    }
                    Err(e) => json_response(400, json!({ "error": e })),
                }
            }
            ("POST", "/reload") => match self.app.reload() {
                Ok(()) => json_response(200, json!({"reloaded": true})),
                Err(e) => json_response(400, json!({"reloaded": false, "error": format!("{e:#}")})),
            },
            (_, "/status" | "/metrics" | "/rollout" | "/reload") => json_response(
                405,
                json!({"error": format!("{method} is not allowed on {path}")}),
            ),
            _ => json_response(
                404,
                json!({"error": format!("no {path}: try /status, /metrics, /rollout or /reload")}),
            ),
        }
    }
}
