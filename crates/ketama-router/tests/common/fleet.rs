//! Routers steered through etcd, for the fleet tests: the shared routing
//! config, a router's own file with `[control]`, its `/status` control
//! object.

use std::net::SocketAddr;
use std::path::Path;

use ketama_router::origin::Origin;

use super::*;

pub const PREFIX: &str = "/ketama/test/";

/// The shared routing config over these origins: a migration from the
/// default ring to one of 40 points per weight unit, rollout 0.
pub fn shared(origins: &[&Origin], weights: &[u32]) -> String {
    let mut s = String::from(
        "[ring]\nlayout = \"compact\"\n\n[health]\nenabled = false\n\n[migration]\nglobal_bp = 0\n[migration.ring]\nlayout = \"compact\"\npoint_multiple = 40\n",
    );
    for (o, w) in origins.iter().zip(weights) {
        s.push_str(&format!(
            "\n[[backends]]\naddress = \"{}\"\nweight = {w}\n",
            o.addr()
        ));
    }
    s
}

pub struct FleetRouter {
    pub r: RouterProc,
    pub dir: tempfile::TempDir,
    pub path: std::path::PathBuf,
}

/// A router's own file: listeners, admin and `[control]`, no backends.
pub fn local_file(
    etcd: &[String],
    proxy: SocketAddr,
    admin: SocketAddr,
    scope: &str,
    cache: &Path,
) -> String {
    format!(
        "[server]\nlisten = [\"{proxy}\"]\ngrace_period_seconds = 0\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[control]\netcd = {etcd:?}\nprefix = \"{PREFIX}\"\nscope = \"{scope}\"\nid = \"{scope}-{}\"\ncache_file = \"{}\"\nlease_ttl_s = 3\nretry_min_ms = 20\nretry_max_ms = 300\ntimeout_ms = 1000\n",
        proxy.port(),
        cache.display()
    )
}

pub fn fleet_router(etcd: &[String], scope: &str) -> FleetRouter {
    let (proxy, admin) = (any_port(), any_port());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.toml");
    let cache = dir.path().join("cache.json");
    std::fs::write(&path, local_file(etcd, proxy, admin, scope, &cache)).unwrap();
    let log = dir.path().join("router.log");
    let r = start_router_with(&path, &[], Some(&log));
    FleetRouter { r, dir, path }
}

pub fn control(r: &RouterProc) -> serde_json::Value {
    status_json(r)["control"].clone()
}

pub fn revision(r: &RouterProc, key: &str) -> i64 {
    control(r)[format!("{key}_revision")].as_i64().unwrap_or(-1)
}
