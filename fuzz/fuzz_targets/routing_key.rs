//! Any bytes as a request's target and header value, cut into routing
//! keys as the library cuts them (`ketama::haproxy`: HAProxy's `balance
//! uri` options, `hdr()`, `url_param`, `rdp-cookie`, `req.cook`,
//! `req.hdr`, `use_domain_only`; Envoy's cookie and query parameter;
//! `ketama::nginx`: nginx's variables and
//! templates): nothing panics; every key is a piece of the bytes it was
//! cut from, no longer than its `len` says; nginx's `$uri` starts with a
//! slash and has no empty, `.` or `..` segment inside.
#![no_main]

use ketama::haproxy::{header_key, UriKey};
use libfuzzer_sys::fuzz_target;

fn within(part: &[u8], whole: &[u8]) -> bool {
    let (p, w) = (part.as_ptr() as usize, whole.as_ptr() as usize);
    part.is_empty() || (p >= w && p + part.len() <= w + whole.len())
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, head)) = data.split_first() else { return };
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
    let mut out = Vec::new();
    if ketama::nginx::uri(head, &mut out).is_ok() {
        assert_eq!(out.first(), Some(&b'/'));
        let segs: Vec<&[u8]> = out[1..].split(|&b| b == b'/').collect();
        for (i, s) in segs.iter().enumerate() {
            assert!(*s != b"." && *s != b"..", "{}", out.escape_ascii());
            assert!(!s.is_empty() || i + 1 == segs.len(), "{}", out.escape_ascii());
        }
    }
    let args = ketama::nginx::args(head);
    assert!(within(args, head));
    let name = &head[..head.len().min(usize::from(flags & 7))];
    if let Some(v) = ketama::nginx::arg(args, name) {
        assert!(within(v, args));
    }
    if let Some(v) = ketama::nginx::cookie([head], name) {
        assert!(within(v, head));
    }
    if let Some(h) = ketama::nginx::host(head) {
        assert!(within(h, head) && !h.is_empty());
    }
    if let Ok(text) = std::str::from_utf8(head) {
        let _ = ketama::nginx::Template::parse(text);
        let _ = ketama::haproxy::Balance::parse(text);
    }
    use ketama::haproxy as h;
    for v in [
        h::url_param(head, name),
        h::sample_url_param(head, name),
        h::req_cook([head, head], name),
        h::req_hdr([head]),
        h::rdp_cookie(head, name),
        Some(h::domain_only(head)),
        ketama::envoy::policy::cookie([head], name),
        ketama::envoy::policy::query_parameter(head, name),
    ]
    .into_iter()
    .flatten()
    {
        assert!(within(v, head));
    }
});
