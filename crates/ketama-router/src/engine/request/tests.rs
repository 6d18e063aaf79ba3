//! What routing and forwarding read of a request as the engine reads it:
//! the routing key of every source (a target as sent included), the label
//! rules, the `X-Forwarded-*` values, the `x-ketama-*` fields and the
//! words of the router's own answers.

use super::*;
use crate::engine::head_write::{forwarded_for, request_head, Upstream};
use crate::engine::record::{describe, Record};
use crate::engine::request_head::{Reader, Rules};
use crate::health::HealthRegistry;
use crate::metrics::Metrics;
use crate::policy::route::{decide, matching_rule, with_routing_key};
use crate::policy::Failure;
use crate::state::RoutingState;
use ketama::key::{KeyForm, Normalize, RequestKey};

/// A GET of `target` with `fields`, read by the engine's reader: its head
/// and its bytes.
fn read(target: &str, fields: &[(&str, &str)]) -> (Head, Vec<u8>) {
    let mut raw = format!("GET {target} HTTP/1.1\r\n");
    for (n, v) in fields {
        raw.push_str(&format!("{n}: {v}\r\n"));
    }
    if !fields.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        raw.push_str("Host: default.test\r\n");
    }
    raw.push_str("\r\n");
    let mut head = Head::default();
    let whole = Reader::new()
        .advance(raw.as_bytes(), &mut head, &Rules::new(32 * 1024))
        .unwrap();
    assert!(whole, "{raw}");
    (head, raw.into_bytes())
}

fn path_query() -> KeyForm {
    KeyForm::Template(ketama::nginx::Template::of(ketama::nginx::Var::RequestUri))
}

fn path() -> KeyForm {
    KeyForm::Template(ketama::nginx::Template::of(ketama::nginx::Var::Path))
}

fn host_path() -> KeyForm {
    KeyForm::Template(ketama::nginx::Template::host_path())
}

fn header(var: &str) -> KeyForm {
    KeyForm::Template(ketama::nginx::Template::of(ketama::nginx::Var::Http(
        var.as_bytes().into(),
    )))
}

fn key_of(target: &str, fields: &[(&str, &str)], key: &KeyForm) -> Vec<u8> {
    normalized_key(target, fields, key, &Normalize::default())
}

fn normalized_key(target: &str, fields: &[(&str, &str)], key: &KeyForm, n: &Normalize) -> Vec<u8> {
    let key = &RequestKey::new(key.clone(), n.clone());
    let (head, buf) = read(target, fields);
    let r = H1Request {
        head: &head,
        buf: &buf,
        peer: None,
        tls: false,
    };
    with_routing_key(&r, key, &mut None, |k| match k {
        ketama::request::Taken::Bytes(b) => b.to_vec(),
        ketama::request::Taken::Nothing => Vec::new(),
        ketama::request::Taken::Address(a) => a.to_string().into_bytes(),
        ketama::request::Taken::Envoy(h) => h.to_string().into_bytes(),
    })
}

#[test]
fn normalized_keys_read_the_rewritten_query_and_host() {
    use ketama::query::{QueryFilter, QueryRules};
    let n = Normalize {
        query: QueryRules {
            sort: true,
            filter: QueryFilter::Drop(vec![b"utm".to_vec().into()]),
        },
        lowercase_host: true,
    };
    let f = [("Host", "IMG.Example:8080")];
    let t = "/a/b.jpg?w=1&utm=x&h=2";
    let k = |key: &KeyForm| normalized_key(t, &f, key, &n);
    assert_eq!(k(&path_query()), b"/a/b.jpg?h=2&w=1");
    assert_eq!(k(&path()), b"/a/b.jpg");
    assert_eq!(k(&host_path()), b"img.example:8080/a/b.jpg?h=2&w=1");
    let whole = ketama::haproxy::UriKey {
        whole: true,
        ..Default::default()
    };
    assert_eq!(
        k(&KeyForm::Haproxy(ketama::haproxy::Balance::Uri(whole))),
        b"/a/b.jpg?h=2&w=1"
    );
    // An absolute-form target is rewritten as well.
    let abs = normalized_key(
        "http://h.test/p?b&a",
        &[],
        &KeyForm::Haproxy(ketama::haproxy::Balance::Uri(whole)),
        &n,
    );
    assert_eq!(abs, b"http://h.test/p?a&b");
    // Without normalization, as sent.
    assert_eq!(key_of(t, &f, &path_query()), t.as_bytes());
}

#[test]
fn routing_keys() {
    let f = [("Host", "img.example:8080"), ("X-K", "v1")];
    let t = "/a/b.jpg?w=1&h=2";
    assert_eq!(key_of(t, &f, &path_query()), b"/a/b.jpg?w=1&h=2");
    assert_eq!(key_of(t, &f, &path()), b"/a/b.jpg");
    assert_eq!(
        key_of(t, &f, &host_path()),
        b"img.example:8080/a/b.jpg?w=1&h=2"
    );
    let h = header("x_k");
    assert_eq!(key_of(t, &f, &h), b"v1");
    // A missing header is the empty key (routed round robin).
    let none = header("x_none");
    assert_eq!(key_of(t, &f, &none), b"");
    // Without a query, path_query is the path.
    assert_eq!(key_of("/plain", &[], &path_query()), b"/plain");
    // A fragment is part of nginx's $request_uri, and of the key.
    assert_eq!(key_of("/x#frag", &[], &path_query()), b"/x#frag");
}

#[test]
fn an_absolute_target_routes_by_what_nginx_reads_of_it() {
    let t = "http://example.test?q#f";
    let f = [("Host", "other.test")];
    assert_eq!(key_of(t, &f, &path_query()), b"?q#f");
    // HAProxy's `balance uri` hashes the target as sent, up to its `?`.
    let uri = |u| KeyForm::Haproxy(ketama::haproxy::Balance::Uri(u));
    assert_eq!(
        key_of(t, &f, &uri(ketama::haproxy::UriKey::default())),
        b"http://example.test"
    );
    let whole = ketama::haproxy::UriKey {
        whole: true,
        ..Default::default()
    };
    assert_eq!(key_of(t, &f, &uri(whole)), b"http://example.test?q#f");
    // The target's authority stands for Host.
    let h = KeyForm::Haproxy(ketama::haproxy::Balance::parse("hdr(host)").unwrap());
    assert_eq!(key_of(t, &f, &h), b"example.test");
    assert_eq!(key_of(t, &f, &host_path()), b"example.test?q#f");
    // Forwarded in origin-form, with the authority as Host.
    let (head, buf) = read(t, &f);
    let mut out = Vec::new();
    let up = Upstream {
        chunked: false,
        forwarded: None,
        hint: None,
    };
    request_head(
        &H1Request {
            head: &head,
            buf: &buf,
            peer: None,
            tls: false,
        },
        &up,
        &mut out,
    );
    let out = String::from_utf8(out).unwrap();
    assert!(out.starts_with("GET /?q#f HTTP/1.1\r\n"), "{out}");
    assert!(
        out.contains("Host: example.test\r\n") && !out.contains("other.test"),
        "{out}"
    );
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
    let rule = |fields: &[(&str, &str)]| {
        let (head, buf) = read("/", fields);
        matching_rule(
            &H1Request {
                head: &head,
                buf: &buf,
                peer: None,
                tls: false,
            },
            &s,
        )
    };
    // Host: the port stripped, ASCII case ignored.
    assert_eq!(rule(&[("Host", "eu.EXAMPLE:8443")]), Some(0));
    assert_eq!(rule(&[("Host", "eu.example.org")]), None);
    // Header: the exact value.
    assert_eq!(rule(&[("X-Region", "us")]), Some(1));
    assert_eq!(rule(&[("X-Region", "US")]), None);
    // The first rule that matches wins.
    let both = [("Host", "eu.example"), ("X-Region", "us")];
    assert_eq!(rule(&both), Some(0));
    // The rule's requirement routes to its label only.
    let (head, buf) = read("/", &both);
    let mut route = decide(
        &H1Request {
            head: &head,
            buf: &buf,
            peer: None,
            tls: false,
        },
        &s,
    )
    .unwrap()
    .route;
    let n = s.plan.table.next(&mut route).unwrap().unwrap();
    assert_eq!(s.backends[n].server, "127.0.0.1:9001");
    assert_eq!(s.plan.table.next(&mut route).unwrap(), None);
}

#[test]
fn forwarded_for_appends_the_client_to_every_line_that_came() {
    let ip: std::net::IpAddr = "192.0.2.7".parse().unwrap();
    let value = |fields: &[(&str, &str)]| {
        let (head, buf) = read("/", fields);
        let mut out = Vec::new();
        forwarded_for(
            &H1Request {
                head: &head,
                buf: &buf,
                peer: None,
                tls: false,
            },
            ip,
            &mut out,
        );
        String::from_utf8(out).unwrap()
    };
    assert_eq!(value(&[]), "x-forwarded-for: 192.0.2.7\r\n");
    assert_eq!(
        value(&[
            ("X-Forwarded-For", "10.0.0.1"),
            ("X-Forwarded-For", "10.0.0.2, 10.0.0.3")
        ]),
        "x-forwarded-for: 10.0.0.1, 10.0.0.2, 10.0.0.3, 192.0.2.7\r\n"
    );
    let v6: std::net::IpAddr = "2001:db8::1".parse().unwrap();
    let (head, buf) = read("/", &[]);
    let mut out = Vec::new();
    forwarded_for(
        &H1Request {
            head: &head,
            buf: &buf,
            peer: None,
            tls: false,
        },
        v6,
        &mut out,
    );
    assert_eq!(out, b"x-forwarded-for: 2001:db8::1\r\n");
}

#[test]
fn ketama_fields_and_the_words_of_an_answer() {
    let s = state("");
    let mut r = Record::default();
    let shown = |r: &Record, n| -> Vec<(Vec<u8>, Vec<u8>)> {
        r.ketama_fields(&s, n)
            .iter()
            .map(|(a, b)| (a.to_vec(), b.to_vec()))
            .collect()
    };
    assert_eq!(
        shown(&r, 1),
        [
            (b"x-ketama-backend".to_vec(), b"127.0.0.1:9002".to_vec()),
            (b"x-ketama-ring".to_vec(), b"only".to_vec())
        ]
    );
    r.attempt_started(0, 3, None);
    assert_eq!(shown(&r, 0)[2], (b"x-ketama-spill".to_vec(), b"3".to_vec()));
    assert_eq!(
        describe(Failure::Connect),
        "the backend refused the connection"
    );
    assert_eq!(describe(Failure::Other), "the request could not be proxied");
    // Off with response_headers = false.
    let quiet = state("[server]\nresponse_headers = false\n");
    assert_eq!(Record::default().ketama_fields(&quiet, 0).iter().count(), 0);
}
