//! Each case as nginx 1.22 answered it (`hash $request_uri consistent`
//! in front of origins that echo the request line); the differential test
//! (`tests/nginx_diff.rs`) sends the same and more to a live nginx.

use super::*;

fn answer(line: &[u8]) -> Result<(Vec<u8>, bool), u16> {
    parse(line)
        .map(|l| {
            // The target forwarded in origin-form, as the engine writes it.
            let slash: &[u8] = if l.empty_path { b"/" } else { b"" };
            ([slash, l.request_uri].concat(), l.http11)
        })
        .map_err(|e| e.status())
}

#[test]
fn as_nginx_answered() {
    let ok = |line: &[u8], forward: &[u8]| {
        let got = answer(line);
        assert_eq!(
            got.as_ref().map(|g| g.0.as_slice()),
            Ok(forward),
            "{}",
            line.escape_ascii()
        );
    };
    let no = |line: &[u8], status: u16| {
        assert_eq!(
            answer(line).map(|g| g.0),
            Err(status),
            "{}",
            line.escape_ascii()
        );
    };
    ok(b"GET /x#frag HTTP/1.1", b"/x#frag");
    ok(b"GET /a?x#y HTTP/1.1", b"/a?x#y");
    ok(b"GET /a#b?c HTTP/1.1", b"/a#b?c");
    ok(b"GET /a#/../../x HTTP/1.1", b"/a#/../../x");
    ok(b"GET /a#%zz HTTP/1.1", b"/a#%zz");
    ok(b"GET http://example.test/abs?q=1 HTTP/1.1", b"/abs?q=1");
    ok(b"GET http://h HTTP/1.1", b"/");
    ok(b"GET http://h?x HTTP/1.1", b"/?x");
    ok(b"GET http://h:80/x HTTP/1.1", b"/x");
    ok(b"GET http://h:/x HTTP/1.1", b"/x");
    ok(b"GET http://h:99999/x HTTP/1.1", b"/x");
    ok(b"GET HTTP://h/x HTTP/1.1", b"/x");
    ok(b"GET ftp://h/x HTTP/1.1", b"/x");
    ok(b"GET h://h/x HTTP/1.1", b"/x");
    ok(b"GET ht-tp://h/x HTTP/1.1", b"/x");
    ok(b"GET http://[::1]/x HTTP/1.1", b"/x");
    ok(b"GET http://-h/x HTTP/1.1", b"/x");
    ok(b"GET http://h./x HTTP/1.1", b"/x");
    ok(b"GET http://h/x#f HTTP/1.1", b"/x#f");
    ok(b"GET /a  HTTP/1.1", b"/a");
    ok(b"GET  /a HTTP/1.1", b"/a");
    ok(b"GET /a HTTP/1.1 ", b"/a");
    ok(b"GET /a HTTP/1.1  ", b"/a");
    ok(b"GET /a HTTP/1.2", b"/a");
    ok(b"GET /a HTTP/1.10", b"/a");
    ok(b"GET /a HTTP/1.01", b"/a");
    ok(b"GET /a HTTP/1.999", b"/a");
    ok(b"G-T /a HTTP/1.1", b"/a");
    ok(b"G_T /a HTTP/1.1", b"/a");
    ok(b"PROPFIND /a HTTP/1.1", b"/a");
    ok(b"GET /a\x80b HTTP/1.1", b"/a\x80b");
    ok(b"GET /a<b> HTTP/1.1", b"/a<b>");
    ok(b"GET /a{b}|^` HTTP/1.1", b"/a{b}|^`");
    ok(b"GET /a\\..\\..\\b HTTP/1.1", b"/a\\..\\..\\b");
    ok(b"GET /%2F HTTP/1.1", b"/%2F");
    ok(b"GET /a?%zz HTTP/1.1", b"/a?%zz");
    ok(b"GET /a?%00 HTTP/1.1", b"/a?%00");
    ok(b"GET /a/.. HTTP/1.1", b"/a/..");
    ok(b"GET /. HTTP/1.1", b"/.");
    ok(b"GET /a/./../b HTTP/1.1", b"/a/./../b");
    ok(b"GET /a/.../b HTTP/1.1", b"/a/.../b");
    ok(b"GET /a/..b HTTP/1.1", b"/a/..b");
    ok(b"GET /a%5c..%5c..%5cb HTTP/1.1", b"/a%5c..%5c..%5cb");
    ok(b"GET /%C3%A9 HTTP/1.1", b"/%C3%A9");
    ok(b"GET //a HTTP/1.1", b"//a");
    for bad in [
        &b"GET /a b HTTP/1.1"[..],
        b"GET /a?b c HTTP/1.1",
        b"GET /a\tb HTTP/1.1",
        b"GET /a\x7fb HTTP/1.1",
        b"GET /a\x01b HTTP/1.1",
        b"GET /%zz HTTP/1.1",
        b"GET /% HTTP/1.1",
        b"GET /%2 HTTP/1.1",
        b"GET /a% HTTP/1.1",
        b"GET /a%G1 HTTP/1.1",
        b"GET /a%1G HTTP/1.1",
        b"GET /%00 HTTP/1.1",
        b"GET /../a HTTP/1.1",
        b"GET /.. HTTP/1.1",
        b"GET /..?x HTTP/1.1",
        b"GET /..#x HTTP/1.1",
        b"GET /%2e%2e/a HTTP/1.1",
        b"GET /a/%2e%2e/%2e%2e/b HTTP/1.1",
        b"GET /a%2F..%2F..%2Fb HTTP/1.1",
        b"GET /a/b/../../.. HTTP/1.1",
        b"GET /./../a HTTP/1.1",
        b"GET http://user@h/x HTTP/1.1",
        b"GET http:/h/x HTTP/1.1",
        b"GET http://h_x/y HTTP/1.1",
        b"GET http://h:8a/x HTTP/1.1",
        b"GET http://[::1/x HTTP/1.1",
        b"GET http://h%41/x HTTP/1.1",
        b"GET http:///x HTTP/1.1",
        b"GET http://h#f HTTP/1.1",
        b"GET http://h/%zz HTTP/1.1",
        b"GET http://h/../x HTTP/1.1",
        b"GET a HTTP/1.1",
        b"GET * HTTP/1.1",
        b"OPTIONS * HTTP/1.1",
        b"CONNECT h:443 HTTP/1.1",
        b"GET /a HTTP/0.9",
        b"GET /a",
        b"GET /a HTTP/1.1\r",
        b"GET /a http/1.1",
        b"GET /a HTTP/1",
        b"GET /a HTTP/1.",
        b"GET /a HTTP/1.1x",
        b"GET /a HTTP/01.1",
        b"GET /a HTTP/1.1000",
        b"GET /a HTTP/1.1\t",
        b"get /a HTTP/1.1",
        b"GET1 /a HTTP/1.1",
        b"G\x80T /a HTTP/1.1",
        b"GET\t/a HTTP/1.1",
        b"GET /a\tHTTP/1.1",
        b" GET /a HTTP/1.1",
    ] {
        no(bad, 400);
    }
    for v in [
        "HTTP/2.0",
        "HTTP/3.0",
        "HTTP/2",
        "HTTP/10.0",
        "HTTP/99.1",
        "HTTP/100.1",
        "HTTP/1000.1",
        "HTTP/9.9",
        "HTTP/2x",
    ] {
        no(format!("GET /a {v}").as_bytes(), 505);
    }
}

#[test]
fn versions() {
    let v = |l: &[u8]| parse(l).map(|l| l.http11);
    assert_eq!(v(b"GET / HTTP/1.1"), Ok(true));
    assert_eq!(v(b"GET / HTTP/1.0"), Ok(false));
    assert_eq!(v(b"GET / HTTP/1.00"), Ok(false));
    assert_eq!(v(b"GET / HTTP/1.5"), Ok(true));
}

#[test]
fn absolute_form_gives_its_authority() {
    let l = parse(b"GET http://example.test:8080/a?b HTTP/1.1").unwrap();
    assert_eq!(l.authority, Some(&b"example.test:8080"[..]));
    assert_eq!(l.request_uri, b"/a?b");
    let l = parse(b"GET http://h?x HTTP/1.1").unwrap();
    assert_eq!((l.request_uri, l.empty_path), (&b"?x"[..], true));
    assert_eq!(parse(b"GET /a HTTP/1.1").unwrap().authority, None);
}
