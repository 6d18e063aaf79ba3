//! Any bytes as an HTTP/1 request head, through the router's own reading
//! of it before Pingora's: the framing rules (`crates/ketama-router/src/
//! framing.rs`, compiled in by path: it is pure) and the routing-key cuts
//! the library makes of a target or header (`ketama::haproxy`). Nothing
//! panics; the framing verdict agrees with a count of the head's header
//! lines made here; every key is a piece of the bytes it was cut from.
#![no_main]

use ketama::haproxy::{header_key, UriKey};
use libfuzzer_sys::fuzz_target;

#[path = "../../crates/ketama-router/src/framing.rs"]
#[allow(dead_code)]
mod framing;

/// How many header lines of the head are named `name` (any case).
fn count(head: &[u8], name: &[u8]) -> usize {
    let mut n = 0;
    for line in head.split(|&b| b == b'\n').skip(1) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        if let Some(c) = line.iter().position(|&b| b == b':') {
            n += usize::from(line[..c].eq_ignore_ascii_case(name));
        }
    }
    n
}

fn within(part: &[u8], whole: &[u8]) -> bool {
    let (p, w) = (part.as_ptr() as usize, whole.as_ptr() as usize);
    part.is_empty() || (p >= w && p + part.len() <= w + whole.len())
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, head)) = data.split_first() else { return };
    let http11 = flags & 1 == 1;
    let verdict = framing::check(head, http11);
    let (hosts, lengths, codings) = (
        count(head, b"host"),
        count(head, b"content-length"),
        count(head, b"transfer-encoding"),
    );
    // The length rules come first (400), then the coding's (501), then
    // the Host rules (400).
    let status = verdict.map_err(|r| r.status);
    if lengths > 1 || (lengths > 0 && codings > 0) {
        assert_eq!(status, Err(400), "{}", head.escape_ascii());
    } else if codings > 1 {
        assert_eq!(status, Err(501), "{}", head.escape_ascii());
    } else if hosts > 1 || (http11 && hosts == 0) {
        assert!(status.is_err(), "{}", head.escape_ascii());
    }
    if let Err(r) = verdict {
        assert!(matches!(r.status, 400 | 501) && !r.reason.is_empty());
    }

    // The key cuts, over the same bytes as a target and as a header value.
    let key = UriKey {
        path_only: flags & 2 != 0,
        whole: flags & 4 != 0,
        depth: (flags & 8 != 0).then_some(u32::from(flags >> 5) + 1),
        len: (flags & 16 != 0).then_some(u32::from(flags >> 4) + 1),
    };
    let cut = key.key(head);
    assert!(within(cut, head));
    if let Some(l) = key.len {
        assert!(cut.len() <= l as usize);
    }
    if let Some(v) = header_key(head) {
        assert!(within(v, head));
    }
});
