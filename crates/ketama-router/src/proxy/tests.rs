//! The proxy's pure parts: the routing key, label rules, the headers it
//! adds, and the words of its error bodies.

use super::*;
use crate::health::HealthRegistry;
use crate::metrics::Metrics;
use crate::reqline::Sent;
use crate::state::Key;

fn req(target: &str, headers: &[(&str, &str)]) -> RequestHeader {
    let mut r = RequestHeader::build("GET", target.as_bytes(), None).unwrap();
    for (k, v) in headers {
        r.append_header(k.to_string(), *v).unwrap();
    }
    r
}

fn view(r: &RequestHeader) -> PingoraRequest<'_> {
    PingoraRequest { req: r, sent: None }
}

fn key_of(r: &RequestHeader, key: &Key) -> Vec<u8> {
    with_routing_key(&PingoraRequest { req: r, sent: None }, key, |k| k.to_vec())
}

#[test]
fn routing_keys() {
    let r = req(
        "/a/b.jpg?w=1&h=2",
        &[("host", "img.example:8080"), ("x-k", "v1")],
    );
    assert_eq!(key_of(&r, &Key::PathQuery), b"/a/b.jpg?w=1&h=2");
    assert_eq!(key_of(&r, &Key::Path), b"/a/b.jpg");
    assert_eq!(
        key_of(&r, &Key::HostPath),
        b"img.example:8080/a/b.jpg?w=1&h=2"
    );
    let h = Key::Header(http::HeaderName::from_static("x-k"));
    assert_eq!(key_of(&r, &h), b"v1");
    // A missing header is the empty key (every such request on one node).
    let none = Key::Header(http::HeaderName::from_static("x-none"));
    assert_eq!(key_of(&r, &none), b"");
    // Without a query, path_query is the path; without a Host, host_path
    // is the path and query alone.
    let r = req("/plain", &[]);
    assert_eq!(key_of(&r, &Key::PathQuery), b"/plain");
    assert_eq!(key_of(&r, &Key::HostPath), b"/plain");
}

#[test]
fn forwarded_headers() {
    let ip: std::net::IpAddr = "192.0.2.7".parse().unwrap();
    let mut r = req("/", &[]);
    add_forwarded_headers(&mut r, Some(ip), false).unwrap();
    assert_eq!(r.headers["x-forwarded-for"], "192.0.2.7");
    assert_eq!(r.headers["x-forwarded-proto"], "http");
    // A client that came over TLS; a client's own value is replaced.
    let mut r = req("/", &[("x-forwarded-proto", "gopher")]);
    add_forwarded_headers(&mut r, Some(ip), true).unwrap();
    let protos: Vec<_> = r.headers.get_all("x-forwarded-proto").iter().collect();
    assert_eq!(protos, ["https"]);
    // Every line that came in, in order, then the client.
    let mut r = req(
        "/",
        &[
            ("x-forwarded-for", "10.0.0.1"),
            ("x-forwarded-for", "10.0.0.2, 10.0.0.3"),
        ],
    );
    add_forwarded_headers(&mut r, Some(ip), false).unwrap();
    let all: Vec<_> = r.headers.get_all("x-forwarded-for").iter().collect();
    assert_eq!(all, ["10.0.0.1, 10.0.0.2, 10.0.0.3, 192.0.2.7"]);
    // No client address (a Unix socket): the chain is left as it came.
    let mut r = req("/", &[("x-forwarded-for", "10.0.0.1")]);
    add_forwarded_headers(&mut r, None, false).unwrap();
    assert_eq!(r.headers["x-forwarded-for"], "10.0.0.1");
    // The cache hands out the value it built, not a new one: the same
    // bytes in memory (a reference count, no allocation).
    let (a, b) = (forwarded_for(ip), forwarded_for(ip));
    assert_eq!(a, "192.0.2.7");
    assert_eq!(a.as_bytes().as_ptr(), b.as_bytes().as_ptr());
    // An address of the same slot (256 apart) takes it over: its own value,
    // and the first address's is built anew afterwards.
    let other: std::net::IpAddr = "192.0.3.7".parse().unwrap();
    assert_eq!(forwarded_for(other), "192.0.3.7");
    let c = forwarded_for(ip);
    assert_eq!(c, "192.0.2.7");
    assert_ne!(c.as_bytes().as_ptr(), a.as_bytes().as_ptr());
    let v6: std::net::IpAddr = "2001:db8::1".parse().unwrap();
    assert_eq!(forwarded_for(v6), "2001:db8::1");
}

fn state(extra: &str) -> RoutingState {
    let text = format!(
        "[admin]\nlisten = \"127.0.0.1:1\"\nauth = false\n{extra}\n[[backends]]\naddress = \"127.0.0.1:9001\"\nlabels = [\"eu\"]\n[[backends]]\naddress = \"127.0.0.1:9002\"\nlabels = [\"us\"]\n"
    );
    let v = ketama_config::parse(&text, "t.toml").unwrap();
    RoutingState::build_with(
        v,
        &HealthRegistry::default(),
        &Metrics::default(),
        &[],
        None,
        crate::state::Files::All,
    )
    .unwrap()
}

#[test]
fn label_rules_match_as_documented() {
    let s = state(
        "[[label_rules]]\nhost = \"EU.example\"\nrequire = [\"eu\"]\n[[label_rules]]\nheader = \"x-region\"\nvalue = \"us\"\nrequire = [\"us\"]\n",
    );
    // Host: the port stripped, ASCII case ignored.
    assert_eq!(
        matching_rule(&view(&req("/", &[("host", "eu.EXAMPLE:8443")])), &s),
        Some(0)
    );
    assert_eq!(
        matching_rule(&view(&req("/", &[("host", "eu.example.org")])), &s),
        None
    );
    // Header: the exact value.
    assert_eq!(
        matching_rule(&view(&req("/", &[("x-region", "us")])), &s),
        Some(1)
    );
    assert_eq!(
        matching_rule(&view(&req("/", &[("x-region", "US")])), &s),
        None
    );
    // The first rule that matches wins.
    let both = req("/", &[("host", "eu.example"), ("x-region", "us")]);
    assert_eq!(matching_rule(&view(&both), &s), Some(0));
    // The rule's requirement routes to its label only.
    let (mut route, _) = decide(
        &PingoraRequest {
            req: &both,
            sent: None,
        },
        &s,
    )
    .unwrap();
    let n = s.plan.table.next(&mut route).unwrap().unwrap();
    assert_eq!(s.backends[n].server, "127.0.0.1:9001");
    assert_eq!(s.plan.table.next(&mut route).unwrap(), None);
}

#[test]
fn response_headers() {
    let s = state("");
    let mut resp = ResponseHeader::build(200, None).unwrap();
    add_response_headers(&mut resp, &s, Some(1), ketama::Version::Only, 0).unwrap();
    assert_eq!(resp.headers["x-ketama-backend"], "127.0.0.1:9002");
    assert_eq!(resp.headers["x-ketama-ring"], "only");
    assert!(resp.headers.get("x-ketama-spill").is_none());
    let mut resp = ResponseHeader::build(502, None).unwrap();
    add_response_headers(&mut resp, &s, None, ketama::Version::New, 3).unwrap();
    assert!(resp.headers.get("x-ketama-backend").is_none());
    assert_eq!(resp.headers["x-ketama-spill"], "3");
    assert_eq!(spill_header(1), "1");
    assert_eq!(spill_header(1000), "1000");
}

#[test]
fn error_bodies_in_words() {
    let e = Error::new(ErrorType::ConnectRefused);
    assert_eq!(in_words(&e), "the backend refused the connection");
    let e = Error::explain(ErrorType::HTTPStatus(400), "duplicate Content-Length");
    assert_eq!(in_words(&e), "duplicate Content-Length");
    let e = Error::new(ErrorType::InternalError);
    assert_eq!(in_words(&e), "the request could not be proxied");
}

#[test]
fn a_target_as_sent_is_the_key() {
    // Pingora's header holds `/x` (the fragment dropped); the client sent
    // an absolute-form target with one.
    let r = req("/x?q", &[("host", "example.test")]);
    let sent = Sent {
        request_uri: b"?q#f".to_vec(),
        forward: b"/?q#f".to_vec(),
        authority: Some(b"example.test".to_vec()),
        absolute: Some(b"http://example.test?q#f".to_vec()),
    };
    let key = |k: &Key| {
        with_routing_key(
            &PingoraRequest {
                req: &r,
                sent: Some(&sent),
            },
            k,
            |b| b.to_vec(),
        )
    };
    assert_eq!(key(&Key::PathQuery), b"?q#f");
    // HAProxy's `balance uri` hashes the target as sent, up to its `?`.
    let uri = |u| Key::HaproxyUri(u);
    assert_eq!(
        key(&uri(ketama::haproxy::UriKey::default())),
        b"http://example.test"
    );
    let whole = ketama::haproxy::UriKey {
        whole: true,
        ..Default::default()
    };
    assert_eq!(key(&uri(whole)), b"http://example.test?q#f");
    let h = Key::HaproxyHeader(http::HeaderName::from_static("host"));
    assert_eq!(key(&h), b"example.test");
    assert_eq!(key(&Key::Path), b"/");
    assert_eq!(key(&Key::HostPath), b"example.test?q#f");
    assert_eq!(
        with_routing_key(
            &PingoraRequest {
                req: &r,
                sent: None
            },
            &Key::PathQuery,
            |b| b.to_vec()
        ),
        b"/x?q"
    );
}
