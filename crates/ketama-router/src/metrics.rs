//! The Prometheus text exposition of `GET /metrics`.

use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

use crate::state::App;

/// Renders every metric.
pub fn render(app: &App) -> String {
    let state = app.state.load_full();
    let mut s = String::new();
    let classes = ["error", "1xx", "2xx", "3xx", "4xx", "5xx"];
    let _ = writeln!(s, "# HELP ketama_requests_total Proxied requests by backend and response status class (error: no response).");
    let _ = writeln!(s, "# TYPE ketama_requests_total counter");
    for (server, m) in app.registry.all_metrics() {
        for (i, c) in classes.iter().enumerate() {
            let _ = writeln!(
                s,
                "ketama_requests_total{{backend=\"{server}\",status=\"{c}\"}} {}",
                m.by_class[i].load(Relaxed)
            );
        }
    }
    let _ = writeln!(
        s,
        "# HELP ketama_lookups_total Ring lookups by ring version (only: no migration)."
    );
    let _ = writeln!(s, "# TYPE ketama_lookups_total counter");
    let (old, new) = state.migration.as_ref().map_or((0, 0), |m| m.served());
    let _ = writeln!(
        s,
        "ketama_lookups_total{{ring=\"only\"}} {}",
        app.only_lookups.load(Relaxed)
    );
    let _ = writeln!(s, "ketama_lookups_total{{ring=\"old\"}} {old}");
    let _ = writeln!(s, "ketama_lookups_total{{ring=\"new\"}} {new}");
    let _ = writeln!(s, "# HELP ketama_rollout_bp Share of keys routed by the new ring, in basis points (this router's scope).");
    let _ = writeln!(s, "# TYPE ketama_rollout_bp gauge");
    let bp = state
        .migration
        .as_ref()
        .map_or(0, |m| m.rollout().bp_for(state.scope.as_deref()));
    let _ = writeln!(s, "ketama_rollout_bp {bp}");
    let _ = writeln!(s, "# HELP ketama_ring_points Points on each ring.");
    let _ = writeln!(s, "# TYPE ketama_ring_points gauge");
    let _ = writeln!(
        s,
        "# HELP ketama_ring_bytes Heap bytes of each ring's points."
    );
    let _ = writeln!(s, "# TYPE ketama_ring_bytes gauge");
    let mut rings = vec![("only_or_old", &*state.ring)];
    if let Some(m) = &state.migration {
        rings = vec![("old", m.old()), ("new", m.new_ring())];
    }
    for (name, r) in rings {
        let _ = writeln!(
            s,
            "ketama_ring_points{{ring=\"{name}\"}} {}",
            r.point_count()
        );
        let _ = writeln!(
            s,
            "ketama_ring_bytes{{ring=\"{name}\"}} {}",
            r.points_heap_bytes()
        );
    }
    let _ = writeln!(
        s,
        "# HELP ketama_ring_build_seconds Time the current ring(s) took to build."
    );
    let _ = writeln!(s, "# TYPE ketama_ring_build_seconds gauge");
    let _ = writeln!(s, "ketama_ring_build_seconds {:.6}", state.build_ms / 1e3);
    let _ = writeln!(
        s,
        "# HELP ketama_backend_healthy 1 if the backend passes its health checks."
    );
    let _ = writeln!(s, "# TYPE ketama_backend_healthy gauge");
    for b in &state.backends {
        let _ = writeln!(
            s,
            "ketama_backend_healthy{{backend=\"{}\"}} {}",
            b.server,
            b.health.is_healthy() as u8
        );
    }
    let _ = writeln!(s, "# HELP ketama_reloads_total Config reloads by result.");
    let _ = writeln!(s, "# TYPE ketama_reloads_total counter");
    let _ = writeln!(
        s,
        "ketama_reloads_total{{result=\"ok\"}} {}",
        app.reloads.0.load(Relaxed)
    );
    let _ = writeln!(
        s,
        "ketama_reloads_total{{result=\"rejected\"}} {}",
        app.reloads.1.load(Relaxed)
    );
    let _ = writeln!(
        s,
        "# HELP process_resident_memory_bytes Resident memory of the router."
    );
    let _ = writeln!(s, "# TYPE process_resident_memory_bytes gauge");
    let _ = writeln!(s, "process_resident_memory_bytes {}", resident_bytes());
    s
}

/// Resident set size from /proc (0 where unavailable).
pub fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|t| t.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}
