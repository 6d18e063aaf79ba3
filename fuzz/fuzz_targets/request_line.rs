//! Any bytes as an HTTP/1 request line, read by the router's request-line
//! reader (`crates/ketama-router/src/reqline.rs`, compiled in here by
//! path: it is pure, and the router crate would bring tokio, rustls and
//! h2 into the fuzz build): nothing panics; a line it accepts has a
//! target without spaces or control bytes that is part of the line; the
//! origin-form target the engine forwards for it, on a line of its own,
//! is accepted again with the same `$request_uri`, method and version
//! (a backend reads what the router routed by).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/ketama-router/src/reqline.rs"]
#[allow(dead_code)]
mod reqline;

fuzz_target!(|line: &[u8]| {
    let Ok(l) = reqline::parse(line) else { return };
    assert!(!line.contains(&b'\n'));
    assert!(l.request_uri.iter().all(|&b| b > 0x20 && b != 0x7f));
    assert!(line.windows(l.request_uri.len()).any(|w| w == l.request_uri));
    let slash: &[u8] = if l.empty_path { b"/" } else { b"" };
    let version: &[u8] = if l.http11 { b" HTTP/1.1" } else { b" HTTP/1.0" };
    let forwarded = [l.method, b" ", slash, l.request_uri, version].concat();
    let again = reqline::parse(&forwarded)
        .unwrap_or_else(|e| panic!("{:?}: {}", e, forwarded.escape_ascii()));
    let uri = [slash, l.request_uri].concat();
    assert_eq!(again.request_uri, &uri[..]);
    assert_eq!((again.method, again.http11, again.authority), (l.method, l.http11, None));
});
