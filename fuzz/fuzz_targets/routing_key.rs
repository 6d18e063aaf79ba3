//! Any bytes as a request's target and header value, cut into routing
//! keys as the library cuts them (`ketama::haproxy`: HAProxy's `balance
//! uri` options and `hdr()`): nothing panics; every key is a piece of the
//! bytes it was cut from, no longer than its `len` says.
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
});
