//! The built-in demo: a few origin servers on loopback and a config that
//! routes to them.

use std::net::SocketAddr;

/// Starts `n` origins on loopback (see [`crate::origin`]); returns their
/// addresses.
pub fn start_origins(n: usize) -> std::io::Result<Vec<SocketAddr>> {
    (0..n)
        .map(|i| crate::origin::Origin::start(i).map(|o| o.addr()))
        .collect()
}

/// The address to use: `given`, else `default` when it can be bound now,
/// else a free loopback port the system picks.
pub fn pick(given: Option<SocketAddr>, default: &str) -> std::io::Result<SocketAddr> {
    if let Some(a) = given {
        return Ok(a);
    }
    let default: SocketAddr = default.parse().expect("a valid default address");
    if std::net::TcpListener::bind(default).is_ok() {
        return Ok(default);
    }
    std::net::TcpListener::bind((default.ip(), 0))?.local_addr()
}

/// The demo's config for these origins: auth disabled (loopback only), a
/// migration from 160 to 40 points per weight unit at 25%.
pub fn config(origins: &[SocketAddr], listen: &str, admin: &str) -> String {
    let mut s = format!(
        r#"# ketama-router built-in demo
[server]
listen = ["{listen}"]
threads = 1
trace_sample = 0.01

[admin]
listen = "{admin}"
auth = false

[ring]
compat = "nginx"
layout = "compact"
point_multiple = 160

[migration]
ring = {{ compat = "nginx", layout = "compact", point_multiple = 40 }}
global_bp = 2500
scope = "demo"

[health]
path = "/health"
interval_ms = 1000
"#
    );
    for (i, a) in origins.iter().enumerate() {
        s.push_str(&format!(
            "\n[[backends]]\naddress = \"{a}\"\nweight = {}\nlabels = [\"{}\"]\n",
            1 + i % 2,
            if i % 2 == 0 { "eu" } else { "us" }
        ));
    }
    s.push_str("\n[[label_rules]]\nheader = \"x-region\"\nvalue = \"eu\"\nrequire = [\"eu\"]\n");
    s
}
