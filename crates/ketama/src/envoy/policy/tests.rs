//! Envoy's own cases (`test/common/http/hash_policy_test.cc` and the
//! `RouterMatcher*HashPolicyTest`s of `test/common/router/config_impl_test.cc`),
//! with their expected values written as Envoy writes them, in XXH64 of
//! strings (the XXH64 itself is checked against the reference vectors in
//! `envoy/tests.rs`).

use std::net::{IpAddr, SocketAddr};

use super::*;

#[derive(Default)]
struct R {
    target: &'static str,
    fields: Vec<(&'static str, &'static str)>,
    addr: Option<SocketAddr>,
    local: Option<SocketAddr>,
}

impl Request for R {
    fn request_uri(&self) -> &[u8] {
        self.target.as_bytes()
    }
    fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields
            .iter()
            .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
    }
    fn remote_addr(&self) -> Option<IpAddr> {
        self.addr.map(|a| a.ip())
    }
    fn sockets(&self) -> Option<(SocketAddr, SocketAddr)> {
        Some((self.addr?, self.local?))
    }
}

fn x(s: &str) -> u64 {
    xxh64(s.as_bytes(), 0)
}

fn header(name: &str) -> Method {
    Method::Header {
        name: name.as_bytes().into(),
        rewrite: None,
    }
}

fn policy(methods: Vec<(Method, bool)>) -> HashPolicy {
    HashPolicy {
        policies: methods,
        peer: Peer::Envoy,
    }
}

fn one(m: Method) -> HashPolicy {
    policy(vec![(m, false)])
}

#[test]
fn header_policies_hash_every_value_sorted() {
    let p = one(header("x-test-header"));
    let r = R {
        fields: vec![("x-test-header", "test-value")],
        ..R::default()
    };
    assert_eq!(p.hash(&r).hash, Some(x("test-value")));
    let r = R {
        fields: vec![("X-Test-Header", "value2"), ("x-test-header", "value1")],
        ..R::default()
    };
    assert_eq!(p.hash(&r).hash, Some(xxh64(b"value2", xxh64(b"value1", 0))));
    let swapped = R {
        fields: vec![("x-test-header", "value1"), ("x-test-header", "value2")],
        ..R::default()
    };
    assert_eq!(p.hash(&r), p.hash(&swapped));
    assert_eq!(p.hash(&R::default()).hash, None);
    let rewrite = Method::Header {
        name: b"x-test-header"[..].into(),
        rewrite: Some(Rewrite::new("test", "replaced").unwrap()),
    };
    let r = R {
        fields: vec![("x-test-header", "test-value")],
        ..R::default()
    };
    assert_eq!(one(rewrite).hash(&r).hash, Some(x("replaced-value")));
    let groups = Method::Header {
        name: b"x-test-header"[..].into(),
        rewrite: Some(Rewrite::new("^(\\w+)-(\\w+)$", "\\2:\\1$").unwrap()),
    };
    assert_eq!(one(groups).hash(&r).hash, Some(x("value:test$")));
}

#[test]
fn grpc_joins_values_with_commas_in_order() {
    let p = HashPolicy {
        policies: vec![(header("x-k"), false)],
        peer: Peer::Grpc,
    };
    let r = R {
        fields: vec![("x-k", "b"), ("x-k", "a")],
        ..R::default()
    };
    assert_eq!(p.hash(&r).hash, Some(x("b,a")));
    let r = R {
        fields: vec![("x-k", "only")],
        ..R::default()
    };
    assert_eq!(p.hash(&r).hash, Some(x("only")));
}

#[test]
fn cookies_are_envoys_first_match_unquoted_and_generated_with_a_ttl() {
    let p = one(Method::Cookie {
        name: b"test-cookie"[..].into(),
        generate: None,
    });
    let r = R {
        fields: vec![("cookie", "test-cookie=cookie-value")],
        ..R::default()
    };
    assert_eq!(p.hash(&r).hash, Some(x("cookie-value")));
    let r = R {
        fields: vec![
            ("cookie", "a=1;test-cookie=\"q\""),
            ("cookie", "test-cookie=2"),
        ],
        ..R::default()
    };
    assert_eq!(p.hash(&r).hash, Some(x("q")));
    assert_eq!(
        p.hash(&R::default()),
        Hashed::default(),
        "absent without a ttl: no hash"
    );
    let spec = CookieSpec {
        ttl: 60,
        path: "/".into(),
        attributes: vec![
            ("SameSite".into(), "Lax".into()),
            ("Secure".into(), String::new()),
        ],
    };
    let p = one(Method::Cookie {
        name: b"hash"[..].into(),
        generate: Some(spec),
    });
    let r = R {
        addr: Some("10.0.0.7:5555".parse().unwrap()),
        local: Some("10.0.0.1:80".parse().unwrap()),
        ..R::default()
    };
    let value = format!("{:016x}", x("10.0.0.7:555510.0.0.1:80"));
    let got = p.hash(&r);
    assert_eq!(got.hash, Some(x(&value)));
    assert_eq!(
        got.set_cookie.as_deref(),
        Some(
            format!("hash=\"{value}\"; Max-Age=60; Path=/; SameSite=Lax; Secure; HttpOnly")
                .as_str()
        )
    );
    // The cookie sent back routes as the generation did.
    let back = R {
        fields: vec![(
            "cookie",
            Box::leak(format!("hash={value}").into_boxed_str()),
        )],
        ..R::default()
    };
    assert_eq!(p.hash(&back).hash, got.hash);
    // An empty value is no value: generated again.
    let empty = R {
        fields: vec![("cookie", "hash=")],
        ..r
    };
    assert!(p.hash(&empty).set_cookie.is_some());
    // A session cookie has no Max-Age.
    let session = CookieSpec {
        ttl: 0,
        path: String::new(),
        attributes: vec![],
    };
    assert_eq!(
        set_cookie_value(b"hash", "v", &session),
        "hash=\"v\"; HttpOnly"
    );
}

#[test]
fn source_ip_hashes_the_address_without_its_port() {
    let p = one(Method::SourceIp);
    let r = |a: &str| R {
        addr: Some(a.parse().unwrap()),
        ..R::default()
    };
    assert_eq!(p.hash(&r("192.168.1.1:80")).hash, Some(x("192.168.1.1")));
    assert_eq!(p.hash(&r("1.2.3.4:8081")), p.hash(&r("1.2.3.4:1331")));
    assert_ne!(p.hash(&r("1.2.3.4:1")), p.hash(&r("4.3.2.1:1")));
    assert_eq!(
        p.hash(&r("[1:2:3:4:5::]:8081")).hash,
        Some(x("1:2:3:4:5::"))
    );
    assert_eq!(p.hash(&R::default()).hash, None);
}

#[test]
fn query_parameters_are_the_first_value_undecoded() {
    let p = one(Method::QueryParameter(b"test-param"[..].into()));
    let r = |t| R {
        target: t,
        ..R::default()
    };
    assert_eq!(
        p.hash(&r("/test?test-param=param-value")).hash,
        Some(x("param-value"))
    );
    assert_eq!(p.hash(&r("/test?some-param=other-value")).hash, None);
    assert_eq!(p.hash(&r("/test")).hash, None);
    assert_eq!(
        p.hash(&r("/t?test-param=a%20b&test-param=2")).hash,
        Some(x("a%20b"))
    );
}

#[test]
fn policies_combine_by_rotation_and_a_terminal_one_stops() {
    let addr = Some("4.3.2.1:9".parse().unwrap());
    let p = policy(vec![
        (header("foo_header"), false),
        (Method::SourceIp, false),
    ]);
    let h = p
        .hash(&R {
            fields: vec![("foo_header", "bar")],
            ..R::default()
        })
        .hash
        .unwrap();
    let ip = p
        .hash(&R {
            addr,
            ..R::default()
        })
        .hash
        .unwrap();
    let both = p
        .hash(&R {
            fields: vec![("foo_header", "bar")],
            addr,
            ..R::default()
        })
        .hash
        .unwrap();
    assert_eq!(h, x("bar"));
    assert_eq!(ip, x("4.3.2.1"));
    assert_eq!(both, x("bar").rotate_left(1) ^ x("4.3.2.1"));
    assert!(h != ip && ip != both && h != both);
    // Cookie, header (terminal), source_ip: once a hash exists at the
    // terminal policy (its own or an earlier one's), the address is never
    // read; with neither, it is.
    let cookie = Method::Cookie {
        name: b"cookie_hash"[..].into(),
        generate: None,
    };
    let p = policy(vec![
        (cookie, false),
        (header("foo_header"), true),
        (Method::SourceIp, false),
    ]);
    let full = R {
        fields: vec![("Cookie", "cookie_hash=foo;"), ("foo_header", "bar")],
        addr,
        ..R::default()
    };
    let other = R {
        addr: Some("1.2.3.4:9".parse().unwrap()),
        fields: full.fields.clone(),
        ..R::default()
    };
    assert_eq!(p.hash(&full).hash, Some(x("foo").rotate_left(1) ^ x("bar")));
    assert_eq!(p.hash(&full), p.hash(&other));
    let no_header = R {
        fields: vec![("Cookie", "cookie_hash=foo;")],
        addr,
        ..R::default()
    };
    assert_eq!(p.hash(&no_header).hash, Some(x("foo")));
    assert_eq!(
        p.hash(&R {
            addr,
            ..R::default()
        })
        .hash,
        Some(x("4.3.2.1"))
    );
}

#[test]
fn rewrites_refuse_what_re2_would_not_mean() {
    assert!(Rewrite::new("(", "x")
        .unwrap_err()
        .contains("regex_rewrite.pattern"));
    assert!(Rewrite::new("a", "\\x").unwrap_err().contains("backslash"));
}
