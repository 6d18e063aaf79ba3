use super::*;
use crate::engine::fields::ConnectionType;

/// The head in `bytes` read whole, or the refusal's status.
fn read(bytes: &[u8]) -> Result<(Head, usize), u16> {
    let mut head = Head::default();
    let mut r = Reader::new();
    match r.advance(bytes, &mut head, &Rules::new(32 * 1024)) {
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
    let mut r = Reader::new();
    for n in 1..=bytes.len() {
        match r.advance(&bytes[..n], &mut head, &Rules::new(32 * 1024)) {
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
    assert!(!h.chunked && h.expect_continue);
    assert_eq!(h.connection, Some(ConnectionType::KeepAlive));
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
        (b"GET / HTTP/1.1\r\nX\x7f: a\r\nHost: a\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nX: a\x00b\r\nHost: a\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a\r\n\r\r\n", 400),
        (b"GET / HTTP/1.1\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost:\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a\r\nIf-Match: x\r\nif-match: y\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -3\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        (b"TRACE / HTTP/1.1\r\nHost: a\r\n\r\n", 405),
        (b"CONNECT /x HTTP/1.1\r\nHost: a\r\n\r\n", 405),
        (b"TRACE / HTTP/1.1\r\n\r\n", 400),
    ] {
        assert_eq!(read(raw).map(|(_, n)| n), Err(status), "{}", raw.escape_ascii());
        assert_eq!(
            read_trickled(raw).map(|(_, n)| n),
            Err(status),
            "trickled: {}",
            raw.escape_ascii()
        );
    }
    // HTTP/1.0 needs no Host; values may hold bytes over 0x7f, tabs and
    // control bytes; lines nginx ignores are left out; a name alone is a
    // field with an empty value; stray CRs before the request line and
    // before a line's LF are skipped.
    let raw = b"\r\rGET / HTTP/1.0\r\nX-A: caf\xc3\xa9\tb\x01\x7f \r\nX_B: 1\r\nX@C: 2\r\nNoColon\r\r\nX-D:\tv\r\n\r\n";
    let (h, _) = read(raw).unwrap();
    assert_eq!(h.header(raw, b"x-a"), Some(&b"caf\xc3\xa9\tb\x01\x7f"[..]));
    let names: Vec<&[u8]> = h.headers.iter().map(|f| f.name.of(raw)).collect();
    assert_eq!(names, [&b"X-A"[..], b"NoColon", b"X-D"]);
    assert_eq!(h.header(raw, b"nocolon"), Some(&b""[..]));
    assert_eq!(h.header(raw, b"x-d"), Some(&b"\tv"[..]));
    assert!(!h.wants_keep_alive());
    // With underscores_in_headers, a `_` field is read; stripped fields
    // are left out.
    let strip = ["X-d".to_string()];
    let rules = Rules {
        underscores: true,
        strip: &strip,
        ..Rules::new(32 * 1024)
    };
    let mut h = Head::default();
    assert_eq!(Reader::new().advance(raw, &mut h, &rules), Ok(true));
    let names: Vec<&[u8]> = h.headers.iter().map(|f| f.name.of(raw)).collect();
    assert_eq!(names, [&b"X-A"[..], b"X_B", b"NoColon"]);
}

#[test]
fn connection_and_framing_as_nginx_reads_them() {
    let keep = |raw: &[u8]| read(raw).unwrap().0.wants_keep_alive();
    assert!(keep(
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: x-closet-y\r\nConnection: keep-alive\r\n\r\n"
    ));
    assert!(!keep(
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nConnection: foo-closed\r\n\r\n"
    ));
    assert!(keep(
        b"GET / HTTP/1.0\r\nConnection: Keep-Alive, Upgrade\r\n\r\n"
    ));
    assert!(keep(
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Content-Length, Upgrade\r\n\r\n"
    ));
    let (h, _) =
        read(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 00000000000000000005\r\n\r\n")
            .unwrap();
    assert_eq!(h.content_length, Some(5));
    let (h, _) =
        read(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: CHUNKED \r\n\r\n").unwrap();
    assert!(h.chunked);
    // Any number of lines fits in the byte limit.
    let mut raw = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
    for i in 0..1000 {
        raw.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    raw.extend_from_slice(b"\r\n");
    assert_eq!(read(&raw).unwrap().0.headers.len(), 1001);
}

#[test]
fn the_size_limit_is_414_in_the_line_and_431_after() {
    let mut head = Head::default();
    let long_line = [b"GET /".as_slice(), &[b'a'; 2000], b" HTTP/1.1\r\n"].concat();
    let mut r = Reader::new();
    assert_eq!(
        r.advance(&long_line, &mut head, &Rules::new(1024))
            .unwrap_err()
            .status,
        414
    );
    let mut r = Reader::new();
    let long_header = [
        b"GET / HTTP/1.1\r\nX: ".as_slice(),
        &[b'a'; 2000],
        b"\r\n\r\n",
    ]
    .concat();
    assert_eq!(
        r.advance(&long_header, &mut head, &Rules::new(1024))
            .unwrap_err()
            .status,
        431
    );
    // Refused as soon as the limit passes, before the line ends.
    let mut r = Reader::new();
    assert_eq!(
        r.advance(&long_line[..1100], &mut head, &Rules::new(1024))
            .unwrap_err()
            .status,
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
    let mut r = Reader::new();
    let mut last = 0;
    for n in 1..line.len() {
        assert_eq!(
            r.advance(&line[..n], &mut head, &Rules::new(1 << 20)),
            Ok(false)
        );
        assert!(r.scanned >= last && r.scanned <= n);
        last = r.scanned;
    }
    assert_eq!(r.advance(&line, &mut head, &Rules::new(1 << 20)), Ok(true));
    assert_eq!(head.request_uri.of(&line).len(), 20_001);
}

#[test]
fn empty_lines_before_a_head_are_given_back_and_not_counted() {
    // 1 MiB of empty lines, then a head: every limit counts from the
    // request line, and the reader hands the empty lines back as it goes.
    let rules = Rules::new(1024);
    let mut buf = Vec::new();
    let mut r = Reader::new();
    let mut head = Head::default();
    for _ in 0..1024 {
        buf.extend(std::iter::repeat_n(*b"\r\n", 512).flatten());
        assert_eq!(r.advance(&buf, &mut head, &rules), Ok(false));
        assert_eq!(r.blank(), buf.len());
        buf.drain(..r.blank());
        r.dropped();
    }
    buf.extend_from_slice(b"\n\r\nGET /");
    assert_eq!(r.advance(&buf, &mut head, &rules), Ok(false));
    assert_eq!(r.blank(), 3);
    buf.drain(..3);
    r.dropped();
    buf.extend_from_slice(&[b'a'; 900]);
    buf.extend_from_slice(b" HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(r.advance(&buf, &mut head, &rules), Ok(true));
    assert_eq!(head.len, buf.len());
    assert_eq!(head.request_uri.of(&buf).len(), 901);
}
