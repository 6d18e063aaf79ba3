//! ketama-router against nginx, the peer it promises to route like: nginx
//! 1.22 with `hash $request_uri consistent` and the router with its
//! defaults, both in front of the same four origins, each sent the same
//! raw bytes; every answer's status, and for a forwarded request the
//! origin that got it and the request line it saw, must be the same.

mod common;

use common::diff::{answers, compare, pair};
use rand::{Rng, SeedableRng};

fn get(target: &[u8]) -> Vec<u8> {
    [
        b"GET ",
        target,
        b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ]
    .concat()
}

fn line(line: &[u8]) -> Vec<u8> {
    [line, b"\r\nHost: x\r\nConnection: close\r\n\r\n"].concat()
}

#[test]
fn request_lines_are_read_as_nginx_reads_them() {
    let p = pair();
    let mut cases: Vec<Vec<u8>> = [
        // The issue's table.
        &b"/x#frag"[..],
        b"http://example.test/abs?q=1",
        b"/a b",
        // Targets.
        b"/a\tb",
        b"/a\x7fb",
        b"/a\x01b",
        b"/a\x80b",
        b"/a\xffb",
        b"/%zz",
        b"/%",
        b"/%2",
        b"/%2F",
        b"/%00",
        b"/a%20b",
        b"/../a",
        b"/a/../b",
        b"/a/./b",
        b"/a//b",
        b"/a?b c",
        b"/a?x#y",
        b"/a#b?c",
        b"/a;b",
        b"/a\\b",
        b"/a\"b",
        b"/a<b>",
        b"/a{b}|^`",
        b"/a?%zz",
        b"/a?%00",
        b"/%2e%2e/a",
        b"/a/%2e%2e/%2e%2e/b",
        b"/a/..",
        b"/..",
        b"/.",
        b"/a/..?x",
        b"/..?x",
        b"/..#x",
        b"/a#%zz",
        b"/a#/../../x",
        b"/a%2F..%2F..%2Fb",
        b"/a%5c..%5c..%5cb",
        b"/a%",
        b"/a%G1",
        b"/%C3%A9",
        b"/%ff",
        b"/a+b",
        b"//a",
        b"/a/b/../../..",
        b"/./../a",
        b"/a/.../b",
        b"/a/..b",
        b"/[x]@!$&'()*+,;=:",
        b"a",
        b"*",
        // Absolute-form.
        b"http://h/x",
        b"http://h",
        b"http://h:80/x",
        b"https://h/x",
        b"HTTP://h/x",
        b"ftp://h/x",
        b"http://h/x#f",
        b"http://h?x",
        b"http://user@h/x",
        b"http:/h/x",
        b"http://[::1]/x",
        b"http://h_x/y",
        b"http://h:/x",
        b"http://h:8a/x",
        b"http://-h/x",
        b"http://h./x",
        b"http://[::1/x",
        b"http://h%41/x",
        b"http:///x",
        b"http://h#f",
        b"http://h/%zz",
        b"http://h/../x",
        b"h://h/x",
        b"ht-tp://h/x",
    ]
    .iter()
    .map(|t| get(t))
    .collect();
    // Request lines.
    for l in [
        &b"GET /a HTTP/2.0"[..],
        b"GET /a HTTP/3.0",
        b"GET /a HTTP/10.0",
        b"GET /a HTTP/1000.1",
        b"GET /a HTTP/1.2",
        b"GET /a HTTP/1.10",
        b"GET /a HTTP/1.999",
        b"GET /a HTTP/1.1000",
        b"GET /a HTTP/01.1",
        b"GET /a HTTP/0.9",
        b"GET /a HTTP/1",
        b"GET /a HTTP/1.",
        b"GET /a HTTP/1.1x",
        b"GET /a http/1.1",
        b"GET /a  HTTP/1.1",
        b"GET  /a HTTP/1.1",
        b"GET /a HTTP/1.1 ",
        b"GET /a HTTP/1.1\t",
        b"GET /a HTTP/1.1\r",
        b"get /a HTTP/1.1",
        b"G-T /a HTTP/1.1",
        b"GET1 /a HTTP/1.1",
        b"G\x80T /a HTTP/1.1",
        b"GET\t/a HTTP/1.1",
        b" GET /a HTTP/1.1",
        b"\r\n\r\nGET /a HTTP/1.1",
        b"OPTIONS * HTTP/1.1",
        b"CONNECT h:443 HTTP/1.1",
    ] {
        cases.push(line(l));
    }
    // The authority of an absolute-form target stands for Host; without
    // Host at all, HTTP/1.1 is refused either way.
    cases.push(
        b"GET http://example.test/abs?q=1 HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n"
            .to_vec(),
    );
    cases.push(b"GET http://h/x HTTP/1.1\r\nConnection: close\r\n\r\n".to_vec());
    cases.push(b"GET http://h/x HTTP/1.0\r\n\r\n".to_vec());
    // A 64 KiB request line: 414 (a header line as long stays 431 in the
    // router, where nginx answers 400: tests/keepalive.rs).
    cases.push(get(&[&b"/"[..], &[b'a'; 65536]].concat()));
    let failures: Vec<String> = cases.iter().filter_map(|c| compare(&p, c).err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn pipelined_requests_are_all_answered_in_order_by_their_own_keys() {
    let p = pair();
    let mut burst: Vec<u8> = (0..50)
        .flat_map(|i| format!("GET /p/{i}?k={i} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes())
        .collect();
    // A body between them, then the last one closing.
    burst.extend_from_slice(
        b"POST /with-body HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
    );
    burst.extend_from_slice(b"GET /last#f HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let nginx = answers(p.nginx.addr, &burst);
    assert_eq!(nginx.len(), 52, "{nginx:?}");
    assert_eq!(answers(p.router.proxy, &burst), nginx);
    // A bad request in the middle: the ones before it are answered, it
    // gets its 400, and the connection closes.
    let mut bad =
        b"GET /one HTTP/1.1\r\nHost: x\r\n\r\nGET /two HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
    bad.extend_from_slice(
        b"GET /a b HTTP/1.1\r\nHost: x\r\n\r\nGET /never HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let nginx = answers(p.nginx.addr, &bad);
    assert_eq!(
        nginx.iter().map(|a| a.0).collect::<Vec<_>>(),
        [200, 200, 400]
    );
    assert_eq!(answers(p.router.proxy, &bad), nginx);
}

/// A random target of reserved, unreserved and percent-encoded bytes,
/// `#`, `?` and `;` (sometimes a bad escape or a dot segment).
fn random_target(rng: &mut impl Rng) -> Vec<u8> {
    const PIECES: &[&[u8]] = &[
        b"a",
        b"Z",
        b"0",
        b"-",
        b".",
        b"_",
        b"~",
        b"/",
        b"//",
        b"?",
        b"#",
        b";",
        b"=",
        b"&",
        b":",
        b"@",
        b"!",
        b"$",
        b"'",
        b"(",
        b")",
        b"*",
        b"+",
        b",",
        b"[",
        b"]",
        b"..",
        b"/..",
        b"/.",
        b"%",
        b"%2",
        b"%zz",
        b"\"",
        b"<",
        b">",
        b"{",
        b"}",
        b"|",
        b"\\",
        b"^",
        b"`",
        b"\xc3\xa9",
    ];
    let mut t = vec![b'/'];
    for _ in 0..rng.random_range(0..12) {
        if rng.random_bool(0.25) {
            t.extend_from_slice(format!("%{:02X}", rng.random_range(1u8..=255)).as_bytes());
        } else {
            t.extend_from_slice(PIECES[rng.random_range(0..PIECES.len())]);
        }
    }
    t
}

#[test]
fn a_thousand_random_targets_route_alike() {
    let p = pair();
    let mut rng = rand::rngs::StdRng::seed_from_u64(28);
    let (mut failures, mut forwarded) = (Vec::new(), 0);
    for _ in 0..1000 {
        let req = get(&random_target(&mut rng));
        match compare(&p, &req) {
            Ok(()) => forwarded += (answers(p.router.proxy, &req)[0].0 == 200) as usize,
            Err(e) => failures.push(e),
        }
    }
    assert!(
        failures.is_empty(),
        "{} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The comparison means something: most were forwarded.
    assert!(forwarded > 500, "{forwarded}");
}
