//! The gauges a scrape reads from the running router: taken once into a
//! [`Snapshot`] and rendered whole, so no family is shared between
//! scrapes or cleared under one.

use std::fmt::Write as _;

use super::{family_head, resident_bytes, BackendMetrics};

/// What one scrape reads of the running router besides the counters,
/// taken once and rendered whole.
#[derive(Debug, Default)]
pub struct Snapshot<'a> {
    /// The new ring's share in this router's scope, basis points.
    pub rollout_bp: u16,
    /// (ring version, points, heap bytes) of each ring.
    pub rings: Vec<(&'static str, u64, u64)>,
    /// The current rings' build time.
    pub build_ms: f64,
    /// Backends each discovery source contributes now.
    pub discovered: Vec<(String, usize)>,
    /// The share of the keyspace the last discovered change moved.
    pub moved_share: f64,
    /// With `[control]`: connected, and the applied config and rollout
    /// revisions.
    pub control: Option<(bool, i64, i64)>,
    /// The current backends' counters and whether each is healthy.
    pub backends: Vec<(&'a BackendMetrics, bool)>,
    /// Each served certificate's names (comma-separated) and not-after
    /// time (Unix seconds).
    pub certificates: Vec<(String, i64)>,
    /// Client connections open now.
    pub connections: usize,
    /// Access log lines (written, dropped) since start.
    pub access_log: (u64, u64),
}

/// Writes `value` as a sample value (integers without a fraction).
fn number(out: &mut String, value: f64) {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        out.push_str(itoa::Buffer::new().format(value as i64));
    } else {
        let _ = write!(out, "{value}");
    }
}

/// Writes one gauge family: its head, then `name{labels} value` lines.
fn gauge(out: &mut String, name: &str, help: &str, samples: &[(String, f64)], om: bool) {
    family_head(out, name, "gauge", help, om);
    for (labels, value) in samples {
        out.push_str(name);
        if !labels.is_empty() {
            out.push('{');
            out.push_str(labels);
            out.push('}');
        }
        out.push(' ');
        number(out, *value);
        out.push('\n');
    }
}

/// A `name="value"` label pair, the value escaped for the exposition.
fn label(name: &str, value: &str) -> String {
    let v = value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    format!("{name}=\"{v}\"")
}

/// The state's gauges, from one snapshot.
pub(super) fn render_gauges(out: &mut String, snap: &Snapshot<'_>, om: bool) {
    let one = |v: f64| vec![(String::new(), v)];
    gauge(
        out,
        "ketama_rollout_bp",
        "Share of keys routed by the new ring, in basis points (this router's scope)",
        &one(snap.rollout_bp as f64),
        om,
    );
    let rings = |f: fn(&(&'static str, u64, u64)) -> u64| -> Vec<(String, f64)> {
        snap.rings
            .iter()
            .map(|r| (label("ring", r.0), f(r) as f64))
            .collect()
    };
    gauge(
        out,
        "ketama_ring_points",
        "Points on each ring",
        &rings(|r| r.1),
        om,
    );
    gauge(
        out,
        "ketama_ring_bytes",
        "Heap bytes of each ring's points",
        &rings(|r| r.2),
        om,
    );
    gauge(
        out,
        "ketama_ring_build_seconds",
        "Time the current ring(s) took to build",
        &one(snap.build_ms / 1e3),
        om,
    );
    gauge(
        out,
        "process_resident_memory_bytes",
        "Resident memory of the router",
        &one(resident_bytes() as f64),
        om,
    );
    let found: Vec<(String, f64)> = snap
        .discovered
        .iter()
        .map(|(src, n)| (label("source", src), *n as f64))
        .collect();
    gauge(
        out,
        "ketama_discovery_backends",
        "Backends each discovery source contributes now",
        &found,
        om,
    );
    gauge(
        out,
        "ketama_ring_moved_share",
        "Share of the keyspace whose backend the last discovered change moved",
        &one(snap.moved_share),
        om,
    );
    let (connected, revisions) = match snap.control {
        Some((up, config, rollout)) => (
            one(up as u8 as f64),
            vec![
                (label("key", "config"), config as f64),
                (label("key", "rollout"), rollout as f64),
            ],
        ),
        None => (one(0.0), Vec::new()),
    };
    gauge(
        out,
        "ketama_control_connected",
        "1 while etcd answers this router (only with [control])",
        &connected,
        om,
    );
    gauge(
        out,
        "ketama_control_applied_revision",
        "Mod revision of each etcd key this router applied (0: none)",
        &revisions,
        om,
    );
    gauge(
        out,
        "ketama_client_connections",
        "Client connections open now, every listener (TLS ones from the accept, handshakes included)",
        &one(snap.connections as f64),
        om,
    );
    // Counters the access log keeps itself, rendered here from its counts.
    for (name, help, n) in [
        (
            "ketama_access_log_lines",
            "Access log lines written",
            snap.access_log.0,
        ),
        (
            "ketama_access_log_dropped",
            "Access log lines dropped: the buffer was full (the disk did not keep up) or the write failed",
            snap.access_log.1,
        ),
    ] {
        family_head(out, name, "counter", help, om);
        let _ = writeln!(out, "{name}_total {n}");
    }
    let expiry: Vec<(String, f64)> = snap
        .certificates
        .iter()
        .map(|(names, t)| (label("names", names), *t as f64))
        .collect();
    gauge(
        out,
        "ketama_tls_certificate_expiry_timestamp_seconds",
        "When each certificate the TLS listeners serve expires (Unix time), by its names",
        &expiry,
        om,
    );
}
