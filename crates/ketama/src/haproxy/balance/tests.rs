use super::*;

#[test]
fn lines_parse_as_haproxy_reads_them() {
    let ok = [
        (
            "uri whole depth 2",
            Balance::Uri(UriKey {
                whole: true,
                depth: Some(2),
                ..UriKey::default()
            }),
        ),
        (
            "hdr(Host) use_domain_only",
            Balance::Hdr {
                name: b"Host"[..].into(),
                domain_only: true,
            },
        ),
        (
            "hdr(x-k)",
            Balance::Hdr {
                name: b"x-k"[..].into(),
                domain_only: false,
            },
        ),
        ("url_param id", Balance::UrlParam(b"id"[..].into())),
        ("source", Balance::Source),
        ("rdp-cookie", Balance::RdpCookie(b"mstshash"[..].into())),
        ("rdp-cookie(user)", Balance::RdpCookie(b"user"[..].into())),
        (
            "hash req.cook(sid)",
            Balance::Hash(Fetch::Cookie(b"sid"[..].into())),
        ),
        (
            "hash req.hdr(X-K)",
            Balance::Hash(Fetch::Header(b"X-K"[..].into())),
        ),
        (
            "hash url_param(u)",
            Balance::Hash(Fetch::UrlParam(b"u"[..].into())),
        ),
    ];
    for (line, want) in ok {
        assert_eq!(Balance::parse(line), Ok(want), "{line}");
    }
    for (line, says) in [
        ("url_param id check_post", "not supported"),
        ("url_param", "needs the parameter's name"),
        ("hdr()", "hdr(NAME)"),
        ("hdr(x) foo", "use_domain_only"),
        ("hash req.cook(sid),lower", "no converter"),
        ("hash src", "with its argument"),
        ("hash base(x)", "req.cook(NAME)"),
        ("roundrobin", "ketama-router takes"),
        ("uri depth 0", "positive integer"),
    ] {
        let e = Balance::parse(line).unwrap_err();
        assert!(e.contains(says), "{line}: {e}");
    }
}

#[test]
fn url_param_is_get_server_ph() {
    assert_eq!(url_param(b"/a?id=1", b"id"), Some(&b"1"[..]));
    assert_eq!(url_param(b"/a?id=", b"id"), Some(&b""[..]));
    assert_eq!(url_param(b"/a?xid=1&id=2#f", b"id"), Some(&b"2#f"[..]));
    assert_eq!(url_param(b"/a?id", b"id"), None);
    assert_eq!(url_param(b"/a?x=1;id=2", b"id"), None, "only & separates");
    assert_eq!(url_param(b"/a", b"id"), None);
    assert_eq!(url_param(b"/a?b=?id=3&id=4", b"id"), Some(&b"4"[..]));
}

#[test]
fn the_url_param_fetch_splits_on_more() {
    assert_eq!(sample_url_param(b"/a?x=1;id=2", b"id"), Some(&b"2"[..]));
    assert_eq!(sample_url_param(b"/a?id=2;x", b"id"), Some(&b"2"[..]));
    assert_eq!(sample_url_param(b"/a?b=?id=3", b"id"), Some(&b"3"[..]));
    assert_eq!(sample_url_param(b"/a?ID=3", b"id"), None);
    assert_eq!(sample_url_param(b"/a?id=", b"id"), Some(&b""[..]));
    assert_eq!(sample_url_param(b"/a?id", b"id"), None);
}

#[test]
fn cookies_are_the_last_one_named() {
    let c = |lines: &[&'static [u8]], n: &[u8]| req_cook(lines.iter().copied(), n);
    assert_eq!(c(&[b"sid=1; sid=2"], b"sid"), Some(&b"2"[..]));
    assert_eq!(c(&[b"sid=1", b"a=1"], b"sid"), Some(&b"1"[..]));
    assert_eq!(c(&[b"SID=1"], b"sid"), None);
    assert_eq!(c(&[b"$sid=1; sid = 2 ,x=1"], b"sid"), Some(&b"2"[..]));
    assert_eq!(c(&[b"sid="], b"sid"), None, "no room past the =");
    assert_eq!(
        c(&[b"a=1; sid="], b"sid"),
        Some(&b""[..]),
        "counted from the part's start"
    );
    assert_eq!(
        c(&[b"sid=\"a,b\"; x"], b"sid"),
        Some(&b"\"a,b\""[..]),
        "a comma inside quotes splits nothing"
    );
    assert_eq!(c(&[b"sid=a,b; sid"], b"sid"), Some(&b"a"[..]));
}

#[test]
fn headers_are_the_last_value() {
    assert_eq!(req_hdr([&b"a"[..]]), Some(&b"a"[..]));
    assert_eq!(req_hdr([&b"a,"[..]]), Some(&b""[..]));
    assert_eq!(req_hdr([&b"a, \"b,c\""[..]]), Some(&b"\"b,c\""[..]));
    assert_eq!(req_hdr(std::iter::empty()), None);
}

#[test]
fn domains_rdp_cookies_and_sources() {
    assert_eq!(domain_only(b"a.b.example.com"), b"example");
    assert_eq!(domain_only(b"example.com."), b"com");
    assert_eq!(
        domain_only(b".com"),
        b".com",
        "the first byte is never looked at"
    );
    assert_eq!(rdp_cookie(b"mstshash=u\r", b"mstshash"), Some(&b"u"[..]));
    assert_eq!(rdp_cookie(b"mstshash=", b"mstshash"), None);
    assert_eq!(rdp_cookie(b"  user=x", b"user"), Some(&b"x"[..]));
    let v6: IpAddr = "2001:db8::1:2".parse().unwrap();
    assert_eq!(source_hash(v6), 0x2001_0db8 ^ 0x0001_0002);
}
