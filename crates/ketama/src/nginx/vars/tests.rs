use super::*;

fn u(t: &[u8]) -> Result<Vec<u8>, InvalidUri> {
    let mut out = b"kept".to_vec();
    append_uri(t, &mut out).map(|()| out[4..].to_vec())
}

#[test]
fn uri_is_nginx_complex_uri() {
    let ok: &[(&[u8], &[u8])] = &[
        (b"/", b"/"),
        (b"/a/b", b"/a/b"),
        (b"/a//b///c", b"/a/b/c"),
        (b"/a/./b/.", b"/a/b/"),
        (b"/a/b/..", b"/a/"),
        (b"/a/b/../../c", b"/c"),
        (b"/a/.../b", b"/a/.../b"),
        (b"/a/..b/.c", b"/a/..b/.c"),
        (b"/%61%2fb", b"/a/b"),
        (b"/a%2F..%2Fb", b"/b"),
        (b"/a/%2e%2e/x", b"/x"),
        (b"/a/%2E%2E", b"/"),
        (b"/a%25b", b"/a%b"),
        (b"/a%23b", b"/a#b"),
        (b"/a%3Fb", b"/a?b"),
        (b"/a%3fb?x=%zz", b"/a?b"),
        (b"/a/..?x", b"/"),
        (b"/a/.#x", b"/a/"),
        (b"/a#/../../x", b"/a"),
        (b"/a+b%20c", b"/a+b c"),
        (b"?q=1", b"/"),
        (b"", b"/"),
        (b"/a/b/%2e.", b"/a/"),
    ];
    for (t, want) in ok {
        assert_eq!(u(t).as_deref(), Ok(*want), "{}", t.escape_ascii());
    }
    for t in [
        &b"/.."[..],
        b"/../a",
        b"/a/../..",
        b"/%",
        b"/%2",
        b"/%zz",
        b"/%00",
        b"/a/%2e%2e/%2e%2e/b",
        b"/%G1",
        b"/%2e%2e/x",
    ] {
        assert_eq!(u(t), Err(InvalidUri), "{}", t.escape_ascii());
    }
    // On Err the buffer is as it was.
    let mut out = b"kept".to_vec();
    assert!(append_uri(b"/..", &mut out).is_err());
    assert_eq!(out, b"kept");
}

#[test]
fn args_end_at_a_fragment() {
    assert_eq!(args(b"/a?x=1&y#f?z"), b"x=1&y");
    assert_eq!(args(b"/a#f?x"), b"");
    assert_eq!(args(b"/a"), b"");
    assert_eq!(args(b"?"), b"");
}

#[test]
fn arg_is_the_first_named_argument_with_an_equals() {
    assert_eq!(arg(b"a=1&b=2", b"b"), Some(&b"2"[..]));
    assert_eq!(arg(b"B=2&b=3", b"b"), Some(&b"2"[..]));
    assert_eq!(arg(b"b&b=3", b"b"), Some(&b"3"[..]));
    assert_eq!(arg(b"ab=1&b=", b"b"), Some(&b""[..]));
    assert_eq!(arg(b"ab=1;b=2", b"b"), None);
    assert_eq!(arg(b"", b"b"), None);
    assert_eq!(arg(b"b=%20x", b"b"), Some(&b"%20x"[..]));
}

#[test]
fn cookie_follows_nginx_multi_header_lines() {
    let c =
        |lines: &[&'static [u8]], n: &[u8]| cookie(lines.iter().copied(), n).map(<[u8]>::to_vec);
    assert_eq!(c(&[b"a=1; b=2"], b"b"), Some(b"2".to_vec()));
    assert_eq!(
        c(&[b"a=1", b"B = \"q\" ;x"], b"b"),
        Some(b"\"q\" ".to_vec())
    );
    assert_eq!(c(&[b"a=1,b=2"], b"b"), Some(b"2".to_vec()));
    assert_eq!(c(&[b"ab=1; b=2"], b"b"), Some(b"2".to_vec()));
    assert_eq!(
        c(&[b"b;b=2"], b"b"),
        None,
        "nginx skips past what followed the name"
    );
    assert_eq!(c(&[b"b=;x"], b"b"), Some(b"".to_vec()));
    assert_eq!(c(&[b"x", b"sid=1"], b"sid"), Some(b"1".to_vec()));
    assert_eq!(c(&[b"a=1; sid"], b"sid"), None);
}

#[test]
fn http_vars_match_dashes_and_case() {
    assert!(http_var_matches(b"X-Forwarded-Proto", b"x_forwarded_proto"));
    assert!(http_var_matches(b"x_y", b"x_y"));
    assert!(!http_var_matches(b"x-y", b"x_yz"));
    let mut out = Vec::new();
    let fields = [
        (&b"Cookie"[..], &b"a=1"[..]),
        (b"X", b"y"),
        (b"cookie", b""),
        (b"COOKIE", b"b=2"),
    ];
    write_joined(fields.iter().copied(), b"cookie", b';', &mut out);
    assert_eq!(out, b"a=1; ; b=2");
}

#[test]
fn host_is_nginx_validate_host() {
    let ok: &[(&[u8], &[u8])] = &[
        (b"a", b"a"),
        (b"A.B.", b"A.B"),
        (b"a:80", b"a"),
        (b"a.:80", b"a"),
        (b"a:b:c", b"a"),
        (b"[::1]:8080", b"[::1]"),
        (b".a", b".a"),
        (b"a\x80", b"a\x80"),
    ];
    for (h, want) in ok {
        assert_eq!(host(h), Some(*want), "{}", h.escape_ascii());
    }
    for h in [
        &b""[..],
        b".",
        b"a..b",
        b"a/b",
        b"a b",
        b":80",
        b"a:1..2",
        b"a\x7f",
    ] {
        assert_eq!(host(h), None, "{}", h.escape_ascii());
    }
    let mut out = Vec::new();
    write_host(b"CDN.Example.:1", &mut out);
    assert_eq!(out, b"cdn.example");
}
