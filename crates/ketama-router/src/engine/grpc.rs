//! gRPC's side of a request (gRPC is HTTP/2 with `content-type:
//! application/grpc*`, its status in the trailers): the call's deadline
//! (`grpc-timeout`, capped by `[server] grpc_timeout_max_ms`), the
//! `grpc-status` the router answers with when no backend answered
//! (Envoy's `Grpc::Utility::httpToGrpcStatus`), and the `grpc-status` of
//! an answer, for the access log and the metrics.
//!
//! The router's own answers to a gRPC call are *trailers-only*: `:status
//! 200`, `content-type: application/grpc`, `grpc-status` and
//! `grpc-message` in the one HEADERS frame that ends the stream, as Envoy
//! answers; a gRPC client reads the code as the call's status (nginx's
//! bare `502` page reaches it as `UNAVAILABLE: Received http2 header with
//! status: 502`).

use std::time::Duration;

/// `grpc-status` 4: the call's deadline passed.
pub const DEADLINE_EXCEEDED: u8 = 4;

/// The words of the router's answer when a call's deadline passed.
pub const DEADLINE_WORDS: &str = "the call's deadline passed (grpc-timeout)";

/// Whether a request with this `content-type` is a gRPC call
/// (`application/grpc`, `application/grpc+proto`, `application/grpc-web`
/// and the rest of the family, any case).
pub fn is_grpc(content_type: Option<&[u8]>) -> bool {
    content_type
        .is_some_and(|ct| ct.len() >= 16 && ct[..16].eq_ignore_ascii_case(b"application/grpc"))
}

/// The `grpc-status` of the router's own answer with HTTP status `http`,
/// as Envoy maps them: 400 INTERNAL, 401 UNAUTHENTICATED, 403
/// PERMISSION_DENIED, 404 UNIMPLEMENTED, 429/502/503/504 UNAVAILABLE,
/// anything else UNKNOWN.
pub fn status_of_http(http: u16) -> u8 {
    match http {
        400 => 13,
        401 => 16,
        403 => 7,
        404 => 12,
        429 | 502 | 503 | 504 => 14,
        _ => 2,
    }
}

/// A `grpc-timeout` value (gRPC's PROTOCOL-HTTP2: 1 to 8 ASCII digits and
/// a unit, `H`, `M`, `S`, `m`, `u` or `n`); `None` when it is not one (the
/// call then has no deadline of its own, as gRPC servers read it).
pub fn parse_timeout(v: &[u8]) -> Option<Duration> {
    let (&unit, digits) = v.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// `d` as a `grpc-timeout` value: whole milliseconds (at least 1) while
/// they fit in 8 digits, else seconds, else hours (rounded up).
pub fn format_timeout(d: Duration) -> String {
    let ms = d.as_millis().max(1);
    if ms < 100_000_000 {
        return format!("{ms}m");
    }
    let s = d.as_secs();
    if s < 100_000_000 {
        return format!("{s}S");
    }
    format!("{}H", s.div_ceil(3600).min(99_999_999))
}

/// The call's deadline from now: its `grpc-timeout`, capped by `max`
/// (`[server] grpc_timeout_max_ms`); `None` without one.
pub fn deadline(grpc_timeout: Option<&[u8]>, max: Option<u64>) -> Option<Duration> {
    let own = grpc_timeout.and_then(parse_timeout);
    let cap = max.map(Duration::from_millis);
    match (own, cap) {
        (Some(t), Some(c)) => Some(t.min(c)),
        (t, None) => t,
        // A cap alone makes no deadline (Envoy: `grpc_timeout_header_max`
        // caps the header; a call without one keeps the route's timeout).
        (None, Some(_)) => None,
    }
}

/// `grpc-message` as gRPC writes it: bytes outside printable ASCII, and
/// `%`, percent-encoded.
pub fn encode_message(words: &str) -> String {
    let mut out = String::with_capacity(words.len());
    for &b in words.as_bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The `grpc-status` field's code, when it is one (0 to 255 in decimal).
pub fn status_code(v: &[u8]) -> Option<u8> {
    if v.is_empty() || v.len() > 3 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_content_types() {
        for ct in [
            &b"application/grpc"[..],
            b"application/grpc+proto",
            b"Application/GRPC-web+json",
        ] {
            assert!(is_grpc(Some(ct)), "{ct:?}");
        }
        for ct in [&b"application/json"[..], b"application/grp", b""] {
            assert!(!is_grpc(Some(ct)), "{ct:?}");
        }
        assert!(!is_grpc(None));
    }

    #[test]
    fn timeouts_as_grpc_writes_them() {
        assert_eq!(parse_timeout(b"100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse_timeout(b"2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse_timeout(b"1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_timeout(b"3M"), Some(Duration::from_secs(180)));
        assert_eq!(
            parse_timeout(b"99999999u"),
            Some(Duration::from_micros(99_999_999))
        );
        assert_eq!(parse_timeout(b"5n"), Some(Duration::from_nanos(5)));
        for bad in [&b""[..], b"m", b"123456789m", b"10x", b"-1m", b"1 m", b"10"] {
            assert_eq!(parse_timeout(bad), None, "{bad:?}");
        }
        for d in [
            Duration::from_millis(1),
            Duration::from_micros(10),
            Duration::from_millis(99_999_999),
            Duration::from_secs(100_000_000),
            Duration::from_secs(u64::MAX / 4),
        ] {
            let s = format_timeout(d);
            let back = parse_timeout(s.as_bytes()).unwrap();
            assert!(
                back >= d.min(Duration::from_secs(99_999_999 * 3600)) || s == "1m",
                "{d:?} {s}"
            );
            assert!(s.len() <= 9, "{s}");
        }
    }

    #[test]
    fn the_cap_bounds_the_clients_deadline_and_makes_none_alone() {
        let ms = Duration::from_millis;
        assert_eq!(deadline(Some(b"5S"), Some(1000)), Some(ms(1000)));
        assert_eq!(deadline(Some(b"200m"), Some(1000)), Some(ms(200)));
        assert_eq!(deadline(Some(b"200m"), None), Some(ms(200)));
        assert_eq!(deadline(None, Some(1000)), None);
        assert_eq!(deadline(Some(b"junk"), None), None);
    }

    #[test]
    fn envoys_http_to_grpc_map() {
        assert_eq!(status_of_http(502), 14);
        assert_eq!(status_of_http(503), 14);
        assert_eq!(status_of_http(504), 14);
        assert_eq!(status_of_http(429), 14);
        assert_eq!(status_of_http(404), 12);
        assert_eq!(status_of_http(400), 13);
        assert_eq!(status_of_http(500), 2);
    }

    #[test]
    fn messages_and_codes() {
        assert_eq!(encode_message("no backend: 100%"), "no backend: 100%25");
        assert_eq!(encode_message("é\n"), "%C3%A9%0A");
        assert_eq!(status_code(b"14"), Some(14));
        assert_eq!(status_code(b"0"), Some(0));
        for bad in [&b""[..], b"1a", b"256", b"1000"] {
            assert_eq!(status_code(bad), None, "{bad:?}");
        }
    }
}
