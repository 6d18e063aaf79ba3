//! The built-in demo: a few origin servers on loopback and a config that
//! routes to them.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};

/// Starts `n` tiny HTTP origins on loopback (each answers every request
/// with `origin I: PATH`, and 200 on `/health`), on threads; returns their
/// addresses.
pub fn start_origins(n: usize) -> std::io::Result<Vec<SocketAddr>> {
    let mut addrs = Vec::new();
    for i in 0..n {
        let l = TcpListener::bind("127.0.0.1:0")?;
        addrs.push(l.local_addr()?);
        std::thread::spawn(move || {
            for conn in l.incoming().flatten() {
                std::thread::spawn(move || serve(conn, i));
            }
        });
    }
    Ok(addrs)
}

/// Serves HTTP/1.1 keep-alive requests without bodies on one connection.
fn serve(conn: std::net::TcpStream, i: usize) {
    let Ok(read) = conn.try_clone() else { return };
    let mut r = BufReader::new(read);
    let mut w = conn;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        let mut close = false;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h.to_ascii_lowercase().starts_with("connection: close") {
                close = true;
            }
            if h == "\r\n" || h == "\n" {
                break;
            }
        }
        let body = format!("origin {i}: {path}\n");
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: text/plain\r\nx-origin: {i}\r\n\r\n{body}",
            body.len()
        );
        if w.write_all(resp.as_bytes()).is_err() || close {
            return;
        }
    }
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
