//! Any bytes as an HTTP/1 request head, read by the router's HTTP/1
//! engine (`crates/ketama-router/src/http1/head.rs`, compiled in by path
//! with the request-line reader it calls: both are pure) and by a second
//! reader made here of other parts: httparse for the header lines (the
//! parser Pingora reads heads with), the request-line reader for the line
//! (nginx's rules), and `framing.rs` for framing (plus nginx's numeric
//! `Content-Length`). Both must agree: the same accept or refuse (and
//! status), the same head length, method, target and header lines (where
//! httparse refuses a header line before its end, the engine refuses it
//! at its end); the engine's answer must not change when the bytes arrive
//! in two pieces.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/ketama-router/src/reqline.rs"]
#[allow(dead_code)]
mod reqline;

#[path = "../../crates/ketama-router/src/framing.rs"]
#[allow(dead_code)]
mod framing;

#[path = "../../crates/ketama-router/src/http1/head.rs"]
#[allow(dead_code)]
mod head;

use head::{Head, Reader};

/// What a reader made of the bytes.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// More bytes are needed.
    Partial,
    /// Refused with this status.
    Refused(u16),
    /// A head of this length, method, target and header lines.
    Head {
        len: usize,
        method: Vec<u8>,
        target: Vec<u8>,
        headers: Vec<(Vec<u8>, Vec<u8>)>,
    },
}

fn engine(data: &[u8]) -> Verdict {
    let mut h = Head::default();
    let mut r = Reader::new(1 << 20);
    match r.advance(data, &mut h) {
        Ok(false) => Verdict::Partial,
        Err(e) => Verdict::Refused(e.status),
        Ok(true) => Verdict::Head {
            len: h.len,
            method: h.method.of(data).to_vec(),
            target: h.target.of(data).to_vec(),
            headers: h
                .headers
                .iter()
                .map(|x| (x.name.of(data).to_vec(), x.value.of(data).to_vec()))
                .collect(),
        },
    }
}

/// The second reader.
fn oracle(data: &[u8]) -> Verdict {
    // Empty lines first, as httparse skips them.
    let mut i = 0;
    loop {
        match data.get(i) {
            None => return Verdict::Partial,
            Some(b'\n') => i += 1,
            Some(b'\r') => match data.get(i + 1) {
                None => return Verdict::Partial,
                Some(b'\n') => i += 2,
                Some(_) => return Verdict::Refused(400),
            },
            Some(_) => break,
        }
    }
    // A CR that does not end a line is refused as soon as it is seen.
    let bare_cr = |from: usize| {
        data[from..]
            .windows(2)
            .position(|w| w[0] == b'\r' && w[1] != b'\n')
            .map(|p| from + p)
    };
    let lf = data[i..].iter().position(|&b| b == b'\n').map(|p| i + p);
    if let Some(cr) = bare_cr(i) {
        if lf.is_none_or(|lf| cr < lf) {
            return Verdict::Refused(400);
        }
    }
    let Some(lf) = lf else {
        return Verdict::Partial;
    };
    let end = if lf > i && data[lf - 1] == b'\r' { lf - 1 } else { lf };
    let line = match reqline::parse(&data[i..end]) {
        Ok(l) => l,
        Err(e) => return Verdict::Refused(e.status()),
    };
    let mut raw = [httparse::EMPTY_HEADER; head::MAX_HEADERS];
    let rest = &data[lf + 1..];
    let (n, headers) = match httparse::parse_headers(rest, &mut raw) {
        Ok(httparse::Status::Complete((n, h))) => (n, h),
        Ok(httparse::Status::Partial) => return Verdict::Partial,
        Err(_) => return Verdict::Refused(400),
    };
    let len = lf + 1 + n;
    if let Err(r) = framing::check(&data[i..len], line.http11) {
        return Verdict::Refused(r.status);
    }
    let bad_length = headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("content-length") && head::parse_length(h.value.trim_ascii()).is_none()
    });
    if bad_length {
        return Verdict::Refused(400);
    }
    Verdict::Head {
        len,
        method: line.method.to_vec(),
        target: line.target.to_vec(),
        headers: headers
            .iter()
            .map(|h| (h.name.as_bytes().to_vec(), h.value.trim_ascii().to_vec()))
            .collect(),
    }
}

fuzz_target!(|data: &[u8]| {
    let e = engine(data);
    let o = oracle(data);
    match (&e, &o) {
        // httparse refuses a bad byte in a header line as soon as it sees
        // it; the engine reads whole lines: once the line ends, it must
        // refuse alike.
        (Verdict::Partial, Verdict::Refused(s)) => {
            let ended = [data, b"\n\n"].concat();
            assert_eq!(engine(&ended), Verdict::Refused(*s), "{}", data.escape_ascii());
        }
        _ => assert_eq!(e, o, "{}", data.escape_ascii()),
    }
    // In two pieces: the same answer, whatever the split.
    if !data.is_empty() {
        let cut = data[0] as usize % data.len();
        let mut h = Head::default();
        let mut r = Reader::new(1 << 20);
        let first = r.advance(&data[..cut], &mut h);
        if first == Ok(false) {
            let again = match r.advance(data, &mut h) {
                Ok(false) => Verdict::Partial,
                Err(e) => Verdict::Refused(e.status),
                Ok(true) => engine(data),
            };
            assert_eq!(again, e, "cut at {cut}: {}", data.escape_ascii());
        } else if let Err(x) = first {
            // Refused early: the whole bytes are refused alike.
            assert_eq!(Verdict::Refused(x.status), e, "cut at {cut}: {}", data.escape_ascii());
        }
    }
});
