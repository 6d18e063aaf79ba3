//! Any bytes as the start of an HTTP/1 request, read by the router's
//! request-line reader (`crates/ketama-router/src/reqline.rs`, compiled in
//! here by path: it is pure, and the router crate would bring all of
//! Pingora into the fuzz build): nothing panics; a line it accepts has a
//! target without spaces or control bytes that is part of the line; the
//! line it hands Pingora in its place is one it accepts again as plain,
//! with the same method, version and (for a plain target) target.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/ketama-router/src/reqline.rs"]
#[allow(dead_code)]
mod reqline;

fuzz_target!(|data: &[u8]| {
    let Some(range) = reqline::find(data) else { return };
    let line = &data[range];
    assert!(!line.contains(&b'\n'));
    let Ok(l) = reqline::parse(line) else { return };
    assert!(l.request_uri.iter().all(|&b| b > 0x20 && b != 0x7f));
    assert!(line.windows(l.request_uri.len()).any(|w| w == l.request_uri));
    let (rewritten, sent) = reqline::rewrite(&l);
    let again_range = reqline::find(&rewritten).expect("a whole line");
    let again = reqline::parse(&rewritten[again_range]).expect("the rewritten line is accepted");
    assert!(again.plain, "{}", rewritten.escape_ascii());
    assert_eq!((again.method, again.http11), (l.method, l.http11));
    assert_eq!(again.authority, None);
    match sent {
        None => assert_eq!(again.request_uri, l.request_uri),
        Some(s) => {
            assert_eq!(s.request_uri, l.request_uri);
            assert_eq!(s.authority.as_deref(), l.authority);
        }
    }
});
