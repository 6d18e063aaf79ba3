use super::*;

/// The head in `bytes` read whole, or the refusal's status.
fn read(bytes: &[u8]) -> Result<(Head, usize), u16> {
    let mut head = Head::default();
    let mut r = Reader::new(32 * 1024);
    match r.advance(bytes, &mut head) {
        Ok(true) => {
            let n = head.len;
            Ok((head, n))
        }
        Ok(false) => Err(0),
        Err(e) => Err(e.status),
    }
}

/// The same bytes fed one at a time give the same answer.
fn read_trickled(bytes: &[u8]) -> Result<(Head, usize), u16> {
    let mut head = Head::default();
    let mut r = Reader::new(32 * 1024);
    for n in 1..=bytes.len() {
        match r.advance(&bytes[..n], &mut head) {
            Ok(true) => {
                let len = head.len;
                return Ok((head, len));
            }
            Ok(false) => {}
            Err(e) => return Err(e.status),
        }
    }
    Err(0)
}

#[test]
fn a_head_and_its_facts() {
    let raw = b"\r\nPOST /a?b=1 HTTP/1.1\r\nHost: x\r\nContent-Length:  12 \r\nConnection: Keep-Alive, Upgrade\r\nUpgrade: websocket\r\nExpect: 100-Continue\r\n\r\nbody";
    let (h, n) = read(raw).unwrap();
    assert_eq!(n, raw.len() - 4);
    assert_eq!(h.method.of(raw), b"POST");
    assert_eq!(h.request_uri.of(raw), b"/a?b=1");
    assert!(h.http11);
    assert_eq!(h.content_length, Some(12));
    assert!(!h.chunked && h.keep_alive && h.upgrade && h.expect_continue && !h.close);
    assert_eq!(h.header(raw, b"host"), Some(&b"x"[..]));
    assert_eq!(h.header(raw, b"CONTENT-LENGTH"), Some(&b"12"[..]));
    assert_eq!(h.headers.len(), 5);
    assert!(h.wants_keep_alive() && h.has_body());
    assert_eq!(read_trickled(raw).map(|(_, n)| n), Ok(n));
}

#[test]
fn the_end_of_a_head_is_an_lf_with_an_optional_cr() {
    for raw in [
        &b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"[..],
        b"GET / HTTP/1.1\nHost: a\n\n",
        b"GET / HTTP/1.1\r\nHost: a\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\n\n",
    ] {
        let (h, n) = read(raw).unwrap();
        assert_eq!(n, raw.len(), "{}", raw.escape_ascii());
        assert_eq!(h.header(raw, b"host"), Some(&b"a"[..]));
        assert_eq!(read_trickled(raw).map(|(_, n)| n), Ok(n));
    }
    // The case the old scan missed: a POST whose head ends `\n\r\n`.
    let raw = b"POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 3\n\r\nabc";
    let (h, n) = read(raw).unwrap();
    assert_eq!((n, h.content_length), (raw.len() - 3, Some(3)));
}

#[test]
fn refusals_and_their_statuses() {
    for (raw, status) in [
        (&b"get / HTTP/1.1\r\nHost: a\r\n\r\n"[..], 400),
        (b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
        (b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHo\x01st: a\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nX: a\x7fb\r\nHost: a\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -3\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
        (b"\rGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ] {
        assert_eq!(read(raw).map(|(_, n)| n), Err(status), "{}", raw.escape_ascii());
        assert_eq!(
            read_trickled(raw).map(|(_, n)| n),
            Err(status),
            "trickled: {}",
            raw.escape_ascii()
        );
    }
    // HTTP/1.0 needs no Host; values may hold bytes over 0x7f and tabs.
    let raw = b"GET / HTTP/1.0\r\nX-A: caf\xc3\xa9\tb \r\n\r\n";
    let (h, _) = read(raw).unwrap();
    assert_eq!(h.header(raw, b"x-a"), Some(&b"caf\xc3\xa9\tb"[..]));
    assert!(!h.wants_keep_alive());
}

#[test]
fn the_size_limit_is_414_in_the_line_and_431_after() {
    let mut head = Head::default();
    let long_line = [b"GET /".as_slice(), &[b'a'; 2000], b" HTTP/1.1\r\n"].concat();
    let mut r = Reader::new(1024);
    assert_eq!(r.advance(&long_line, &mut head).unwrap_err().status, 414);
    let mut r = Reader::new(1024);
    let long_header = [
        b"GET / HTTP/1.1\r\nX: ".as_slice(),
        &[b'a'; 2000],
        b"\r\n\r\n",
    ]
    .concat();
    assert_eq!(r.advance(&long_header, &mut head).unwrap_err().status, 431);
    // Refused as soon as the limit passes, before the line ends.
    let mut r = Reader::new(1024);
    assert_eq!(
        r.advance(&long_line[..1100], &mut head).unwrap_err().status,
        414
    );
}

#[test]
fn a_trickled_line_is_searched_once() {
    // Each byte fed alone: the reader's scan position only moves forward,
    // so the work is linear in the line's length.
    let line = [
        b"GET /".as_slice(),
        &[b'a'; 20_000],
        b" HTTP/1.1\r\nHost: a\r\n\r\n",
    ]
    .concat();
    let mut head = Head::default();
    let mut r = Reader::new(1 << 20);
    let mut last = 0;
    for n in 1..line.len() {
        assert_eq!(r.advance(&line[..n], &mut head), Ok(false));
        assert!(r.scanned >= last && r.scanned <= n);
        last = r.scanned;
    }
    assert_eq!(r.advance(&line, &mut head), Ok(true));
    assert_eq!(head.request_uri.of(&line).len(), 20_001);
}

#[test]
fn too_many_header_lines() {
    let mut raw = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
    for i in 0..MAX_HEADERS {
        raw.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    raw.extend_from_slice(b"\r\n");
    let mut head = Head::default();
    let mut r = Reader::new(1 << 20);
    assert_eq!(r.advance(&raw, &mut head).unwrap_err().status, 400);
}

#[test]
fn lengths_as_nginx_reads_them() {
    assert_eq!(parse_length(b"0"), Some(0));
    assert_eq!(parse_length(b"0012"), Some(12));
    assert_eq!(parse_length(b"9223372036854775807"), Some(i64::MAX as u64));
    for bad in [
        &b""[..],
        b"+1",
        b"-1",
        b"1 2",
        b"0x10",
        b"9223372036854775808",
    ] {
        assert_eq!(parse_length(bad), None, "{}", bad.escape_ascii());
    }
}
