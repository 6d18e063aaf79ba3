use std::net::IpAddr;

use super::*;

struct R {
    uri: &'static [u8],
    fields: Vec<(&'static [u8], &'static [u8])>,
    authority: Option<&'static [u8]>,
    addr: Option<IpAddr>,
    tls: bool,
}

impl Request for R {
    fn request_uri(&self) -> &[u8] {
        self.uri
    }
    fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields.iter().copied()
    }
    fn absolute_authority(&self) -> Option<&[u8]> {
        self.authority
    }
    fn remote_addr(&self) -> Option<IpAddr> {
        self.addr
    }
    fn tls(&self) -> bool {
        self.tls
    }
}

fn req() -> R {
    R {
        uri: b"/A//b/%2e%2E/c.ts?X=1&utm=2#f",
        fields: vec![
            (b"Host", b"Cdn.Example:8080"),
            (b"Cookie", b"a=1"),
            (b"X-Forwarded-For", b"1.1.1.1"),
            (b"cookie", b"SID=s1; b=2"),
            (b"x-forwarded-for", b"2.2.2.2"),
            (b"User-Agent", b"ua"),
        ],
        authority: None,
        addr: Some("::ffff:127.0.0.1".parse().unwrap()),
        tls: true,
    }
}

fn key(t: &str, r: &R) -> Vec<u8> {
    let t = Template::parse(t).unwrap();
    let mut buf = Vec::new();
    t.with_key(r, &mut buf, |k| k.unwrap().to_vec())
}

#[test]
fn each_variable_gives_nginxs_bytes() {
    let r = req();
    let cases: &[(&str, &[u8])] = &[
        ("$request_uri", b"/A//b/%2e%2E/c.ts?X=1&utm=2#f"),
        ("$uri", b"/A/c.ts"),
        ("$document_uri", b"/A/c.ts"),
        ("$args", b"X=1&utm=2"),
        ("$arg_x", b"1"),
        ("${arg_X}", b"1"),
        ("$arg_none", b""),
        ("$cookie_sid", b"s1"),
        ("$http_cookie", b"a=1; SID=s1; b=2"),
        ("$http_x_forwarded_for", b"1.1.1.1, 2.2.2.2"),
        ("$http_user_agent", b"ua"),
        ("$HTTP_USER_AGENT", b"ua"),
        ("$http_host", b"Cdn.Example:8080"),
        ("$host", b"cdn.example"),
        ("$remote_addr", b"::ffff:127.0.0.1"),
        ("$scheme", b"https"),
        ("$scheme://$host$uri", b"https://cdn.example/A/c.ts"),
        ("k:${host}x$arg_utm", b"k:cdn.examplex2"),
        ("no variables", b"no variables"),
    ];
    for (t, want) in cases {
        assert_eq!(key(t, &r), *want, "{t}");
    }
}

#[test]
fn host_prefers_the_absolute_form_authority() {
    let mut r = req();
    r.authority = Some(b"ABS.example.");
    assert_eq!(key("$host", &r), b"abs.example");
    assert_eq!(key("$http_host", &r), b"Cdn.Example:8080");
    r.fields.clear();
    r.authority = None;
    assert_eq!(key("$host|$http_host|$cookie_a", &r), b"||");
}

#[test]
fn the_sources_are_templates() {
    let r = req();
    let mut buf = Vec::new();
    let k = |t: Template, buf: &mut Vec<u8>| t.with_key(&r, buf, |k| k.unwrap().to_vec());
    assert_eq!(k(Template::of(Var::Path), &mut buf), b"/A//b/%2e%2E/c.ts");
    assert_eq!(
        k(Template::host_path(), &mut buf),
        b"Cdn.Example:8080/A//b/%2e%2E/c.ts?X=1&utm=2#f"
    );
    assert_eq!(
        Template::of(Var::Http(b"x_y"[..].into())).text(),
        "$http_x_y"
    );
}

#[test]
fn a_uri_nginx_refuses_is_an_error() {
    let mut r = req();
    r.uri = b"/../x";
    let t = Template::parse("$host$uri").unwrap();
    let mut buf = Vec::new();
    assert_eq!(
        t.with_key(&r, &mut buf, |k| k.map(<[u8]>::to_vec)),
        Err(vars::InvalidUri)
    );
}

#[test]
fn templates_nginx_refuses_are_refused_by_name() {
    for (t, what) in [
        ("$", "names no variable"),
        ("a$-b", "names no variable"),
        ("${host", "not closed"),
        ("${ho-st}", "not closed"),
        ("$foo", "$foo is not a variable"),
        ("$arg_", "$arg_ is not a variable"),
        ("$1", "regex capture"),
    ] {
        let e = Template::parse(t).unwrap_err().to_string();
        assert!(e.contains(what), "{t}: {e}");
    }
}
