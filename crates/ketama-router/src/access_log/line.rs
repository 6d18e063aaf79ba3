//! One access log line, as JSON or as nginx's `combined` format.
//!
//! JSON fields: `time` (RFC 3339, milliseconds, UTC: when the request
//! head's first byte arrived), `client`, `method`, `uri` (the request
//! target as sent), `protocol`, `status` (0 when nothing was answered),
//! `bytes_sent` (response body bytes, as nginx's `$body_bytes_sent`),
//! `duration_ms` (head's first byte to the response's last byte),
//! `backend` (as configured; empty when none), `ring` (`only`, `old`,
//! `new`; empty when no route was made), `cache` (what the backend's cache
//! said: `hit`, `miss`, `stale`, `bypass`, `peer`, `other`, `none`; empty when no
//! backend answered; see `[cache_status]`), `attempts`, `upstream_ms` (the
//! final attempt: request head sent to the backend's last byte; `null`
//! when no attempt sent one), `spilled` (full backends passed over),
//! `grpc_status` (a gRPC call's `grpc-status`, the backend's or the
//! router's own; `null` for other requests), `labels` (the label
//! requirement applied; `[]` when none); and when the configured `[key]`
//! reads more than the target and the client's address, what else it
//! reads, so that `ketama route --request-format access-log` takes the same key
//! from the line: `fields` (`[[name, value], ...]`: every header field the
//! key reads, as sent and in order; an HTTP/2 request's `:authority`
//! stands as `host` when it sent none), `scheme` (`http`, `https`) and,
//! for an absolute-form target, `target` (the whole target as sent, whose
//! authority stands for `Host`).
//!
//! `combined` is nginx's `$remote_addr - - [$time_local] "$request"
//! $status $body_bytes_sent "$http_referer" "$http_user_agent"` with
//! `"$backend"` appended; as nginx does, `"`, `\` and bytes outside
//! printable ASCII are written `\xHH`, and an empty field is `-`.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use ketama_config::LogFormat;

/// What one line says about a request.
#[derive(Debug)]
pub struct Entry<'a> {
    /// When the request head's first byte arrived.
    pub start: SystemTime,
    /// The client's address.
    pub client: Option<IpAddr>,
    /// The method.
    pub method: &'a str,
    /// The request target as sent (path and query).
    pub uri: &'a [u8],
    /// `HTTP/1.1`, `HTTP/2.0`, ...
    pub protocol: &'a str,
    /// The status sent to the client (0: none).
    pub status: u16,
    /// Response body bytes sent.
    pub bytes_sent: u64,
    /// A gRPC call's `grpc-status` (JSON only; `null` otherwise).
    pub grpc_status: Option<u8>,
    /// Head's first byte to the response's last byte.
    pub duration: Duration,
    /// The backend of the last attempt, as configured ("" when none).
    pub backend: &'a str,
    /// The ring the route used ("" when none).
    pub ring: &'a str,
    /// The backend's cache result ("" when no backend answered).
    pub cache: &'a str,
    /// Backends tried.
    pub attempts: usize,
    /// The final attempt's time in the backend.
    pub upstream: Option<Duration>,
    /// Full backends passed over (bounded loads).
    pub spilled: u32,
    /// The label requirement applied.
    pub labels: &'a [String],
    /// The header fields the key reads, each passed to the visitor
    /// (JSON only; `None`: the key reads none).
    pub fields: Option<KeyFields<'a>>,
    /// The scheme, when the key reads it (JSON only).
    pub scheme: Option<&'static str>,
    /// An absolute-form target as sent, when the key reads fields or the
    /// scheme (JSON only).
    pub target: Option<&'a [u8]>,
    /// `Referer` (combined only).
    pub referer: &'a [u8],
    /// `User-Agent` (combined only).
    pub user_agent: &'a [u8],
}

/// Takes one header field (name, value).
pub type FieldVisitor<'v> = dyn FnMut(&[u8], &[u8]) + 'v;

/// The header fields a key reads, each passed to the visitor given.
#[derive(Clone, Copy)]
pub struct KeyFields<'a>(pub &'a dyn Fn(&mut FieldVisitor<'_>));

impl std::fmt::Debug for KeyFields<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyFields")
    }
}

/// Writes `e` as one line (with its `\n`) into `out`, cleared first.
pub fn format(out: &mut String, format: LogFormat, e: &Entry<'_>) {
    out.clear();
    match format {
        LogFormat::Json => json(out, e),
        LogFormat::Combined => combined(out, e),
    }
    out.push('\n');
}

/// Milliseconds with microseconds as decimals.
fn millis(d: Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

fn json(out: &mut String, e: &Entry<'_>) {
    out.push_str("{\"time\":\"");
    crate::clock::utc_millis(out, e.start);
    out.push_str("\",\"client\":");
    match e.client {
        Some(ip) => {
            let _ = write!(out, "\"{ip}\"");
        }
        None => out.push_str("\"\""),
    }
    out.push_str(",\"method\":");
    json_str(out, e.method.as_bytes());
    out.push_str(",\"uri\":");
    json_str(out, e.uri);
    out.push_str(",\"protocol\":");
    json_str(out, e.protocol.as_bytes());
    let _ = write!(
        out,
        ",\"status\":{},\"bytes_sent\":{},\"duration_ms\":{},\"backend\":",
        e.status,
        e.bytes_sent,
        millis(e.duration)
    );
    json_str(out, e.backend.as_bytes());
    out.push_str(",\"ring\":");
    json_str(out, e.ring.as_bytes());
    out.push_str(",\"cache\":");
    json_str(out, e.cache.as_bytes());
    let _ = write!(out, ",\"attempts\":{},\"upstream_ms\":", e.attempts);
    match e.upstream {
        Some(d) => {
            let _ = write!(out, "{}", millis(d));
        }
        None => out.push_str("null"),
    }
    let _ = write!(out, ",\"spilled\":{},\"grpc_status\":", e.spilled);
    match e.grpc_status {
        Some(c) => {
            let _ = write!(out, "{c}");
        }
        None => out.push_str("null"),
    }
    out.push_str(",\"labels\":[");
    for (i, l) in e.labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_str(out, l.as_bytes());
    }
    out.push(']');
    if let Some(KeyFields(visit)) = e.fields {
        out.push_str(",\"fields\":[");
        let mut first = true;
        visit(&mut |name, value| {
            if !first {
                out.push(',');
            }
            first = false;
            out.push('[');
            json_str(out, name);
            out.push(',');
            json_str(out, value);
            out.push(']');
        });
        out.push(']');
    }
    if let Some(scheme) = e.scheme {
        let _ = write!(out, ",\"scheme\":\"{scheme}\"");
    }
    if let Some(t) = e.target {
        out.push_str(",\"target\":");
        json_str(out, t);
    }
    out.push('}');
}

/// A JSON string: UTF-8 kept, invalid bytes as U+FFFD, controls escaped.
fn json_str(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for c in String::from_utf8_lossy(bytes).chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// nginx's default log escaping: `"`, `\` and bytes outside printable
/// ASCII as `\xHH`; empty as `-`.
fn nginx_str(out: &mut String, bytes: &[u8]) {
    if bytes.is_empty() {
        out.push('-');
        return;
    }
    for &b in bytes {
        if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
            let _ = write!(out, "\\x{b:02X}");
        } else {
            out.push(b as char);
        }
    }
}

fn combined(out: &mut String, e: &Entry<'_>) {
    match e.client {
        Some(ip) => {
            let _ = write!(out, "{ip}");
        }
        None => out.push('-'),
    }
    out.push_str(" - - [");
    crate::clock::nginx_local(out, e.start);
    out.push_str("] \"");
    nginx_str(out, e.method.as_bytes());
    out.push(' ');
    nginx_str(out, e.uri);
    out.push(' ');
    nginx_str(out, e.protocol.as_bytes());
    let _ = write!(out, "\" {} {} \"", e.status, e.bytes_sent);
    nginx_str(out, e.referer);
    out.push_str("\" \"");
    nginx_str(out, e.user_agent);
    out.push_str("\" \"");
    nginx_str(out, e.backend.as_bytes());
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn entry<'a>(labels: &'a [String], uri: &'a [u8]) -> Entry<'a> {
        Entry {
            start: UNIX_EPOCH + Duration::from_millis(1_796_188_032_788),
            client: Some("127.0.0.1".parse().unwrap()),
            method: "GET",
            uri,
            protocol: "HTTP/1.1",
            status: 200,
            bytes_sent: 12,
            duration: Duration::from_micros(1_234_567),
            backend: "10.0.0.1:80",
            ring: "only",
            cache: "hit",
            attempts: 2,
            upstream: Some(Duration::from_micros(900)),
            spilled: 0,
            grpc_status: Some(14),
            labels,
            fields: None,
            scheme: None,
            target: None,
            referer: b"",
            user_agent: b"curl/7.88 \"x\"",
        }
    }

    #[test]
    fn the_fields_a_key_reads_follow_in_order() {
        let visit = |f: &mut FieldVisitor<'_>| {
            f(b"Host", b"A.test");
            f(b"Cookie", b"sid=\"1\"");
            f(b"cookie", b"b=2");
        };
        let mut e = entry(&[], b"/");
        e.fields = Some(KeyFields(&visit));
        e.scheme = Some("https");
        let mut s = String::new();
        format(&mut s, LogFormat::Json, &e);
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(
            v["fields"],
            serde_json::json!([
                ["Host", "A.test"],
                ["Cookie", "sid=\"1\""],
                ["cookie", "b=2"]
            ])
        );
        assert_eq!(v["scheme"], "https");
        // Without them, neither is written.
        format(&mut s, LogFormat::Json, &entry(&[], b"/"));
        assert!(!s.contains("fields") && !s.contains("scheme"), "{s}");
    }

    #[test]
    fn json_line_parses_with_every_field() {
        let labels = vec!["ssd".to_string()];
        let mut s = String::new();
        format(
            &mut s,
            LogFormat::Json,
            &entry(&labels, b"/a?b=\"c\"\x01\xff"),
        );
        assert!(s.ends_with("}\n"));
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["time"], "2026-12-02T05:07:12.788Z");
        assert_eq!(v["uri"], "/a?b=\"c\"\u{1}\u{fffd}");
        assert_eq!(v["duration_ms"], 1234.567);
        assert_eq!(v["upstream_ms"], 0.9);
        assert_eq!(v["attempts"], 2);
        assert_eq!(v["labels"], serde_json::json!(["ssd"]));
        assert_eq!(v["cache"], "hit");
        assert_eq!(v["grpc_status"], 14);
        assert_eq!(v.as_object().unwrap().len(), 16);
    }

    #[test]
    fn combined_line_is_nginx_s() {
        let mut s = String::new();
        format(&mut s, LogFormat::Combined, &entry(&[], b"/a b"));
        assert_eq!(
            s,
            "127.0.0.1 - - [02/Dec/2026:05:07:12 +0000] \"GET /a b HTTP/1.1\" 200 12 \"-\" \"curl/7.88 \\x22x\\x22\" \"10.0.0.1:80\"\n"
        );
    }
}
