//! Any bytes as an HTTP/1 request head, read by the router's HTTP/1
//! engine (`crates/ketama-router/src/engine/request_head.rs` and `fields.rs`,
//! compiled in by path with the request-line reader they call: all pure)
//! and by a second reader written here as nginx 1.22's code reads a head:
//! `ngx_http_parse_header_line` state for state, a byte at a time (the
//! engine reads whole lines), then `ngx_http_process_request_headers`
//! (lines nginx ignores, fields it takes once, `ngx_http_validate_host`)
//! and `ngx_http_process_request_header` (the checks after the last
//! line, in their order). The request line is the shared reader's in both.
//! Both must agree: the same accept or refuse (and status), the same head
//! length, method, target and header lines (where nginx refuses a line
//! before its end, the engine refuses it at its end); the engine's answer
//! must not change when the bytes arrive in two pieces. Half the inputs
//! are read with `underscores_in_headers` on.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/ketama-router/src/reqline.rs"]
#[allow(dead_code)]
mod reqline;

#[path = "../../crates/ketama-router/src/engine/fields.rs"]
#[allow(dead_code)]
mod fields;

#[path = "../../crates/ketama-router/src/engine/request_head.rs"]
#[allow(dead_code)]
mod head;

use head::{Head, Reader, Rules};

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

fn rules(underscores: bool) -> Rules<'static> {
    Rules {
        underscores,
        ..Rules::new(1 << 20)
    }
}

fn engine(data: &[u8], underscores: bool) -> Verdict {
    let mut h = Head::default();
    let mut r = Reader::new();
    match r.advance(data, &mut h, &rules(underscores)) {
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

/// nginx's `ngx_http_parse_header_line` states.
#[derive(Clone, Copy, PartialEq)]
enum S {
    Start,
    Name,
    SpaceBeforeValue,
    Value,
    SpaceAfterValue,
    AlmostDone,
    HeaderAlmostDone,
}

/// nginx's `lowcase` table: whether the byte is a name byte.
fn lowcase(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

/// `ngx_http_validate_host`, transliterated.
fn validate_host(h: &[u8]) -> bool {
    let (mut dot_pos, mut host_len) = (h.len(), h.len());
    let mut state = 0; // usual, literal, rest
    for (i, &ch) in h.iter().enumerate() {
        match ch {
            b'.' => {
                if dot_pos == i.wrapping_sub(1) {
                    return false;
                }
                dot_pos = i;
            }
            b':' => {
                if state == 0 {
                    host_len = i;
                    state = 2;
                }
            }
            b'[' => {
                if i == 0 {
                    state = 1;
                }
            }
            b']' => {
                if state == 1 {
                    host_len = i + 1;
                    state = 2;
                }
            }
            _ => {
                if ch == b'/' || ch <= 0x20 || ch == 0x7f {
                    return false;
                }
            }
        }
    }
    if host_len > 0 && dot_pos == host_len - 1 {
        host_len -= 1;
    }
    host_len != 0
}

/// `ngx_atoof`, transliterated: `None` for nginx's `NGX_ERROR`.
fn atoof(v: &[u8]) -> Option<i64> {
    if v.is_empty() {
        return None;
    }
    let (cutoff, cutlim) = (i64::MAX / 10, i64::MAX % 10);
    let mut value: i64 = 0;
    for &c in v {
        if !c.is_ascii_digit() {
            return None;
        }
        let d = i64::from(c - b'0');
        if value >= cutoff && (value > cutoff || d > cutlim) {
            return None;
        }
        value = value * 10 + d;
    }
    Some(value)
}

const UNIQUE: [&str; 11] = [
    "host",
    "if-modified-since",
    "if-unmodified-since",
    "if-match",
    "if-none-match",
    "content-length",
    "content-range",
    "if-range",
    "transfer-encoding",
    "expect",
    "authorization",
];

/// The second reader.
fn oracle(data: &[u8], underscores: bool) -> Verdict {
    // nginx skips every CR and LF before the request line.
    let mut i = 0;
    while matches!(data.get(i), Some(b'\r' | b'\n')) {
        i += 1;
    }
    if i == data.len() {
        return Verdict::Partial;
    }
    // The request line: to its LF; a CR must be that LF's.
    let lf = data[i..].iter().position(|&b| b == b'\n').map(|p| i + p);
    let cr = data[i..].iter().position(|&b| b == b'\r').map(|p| i + p);
    if let Some(cr) = cr {
        if lf.is_none_or(|lf| cr + 1 < lf) && cr + 1 < data.len() {
            return Verdict::Refused(match reqline::parse(&data[i..cr]) {
                Err(reqline::LineError::Version) => 505,
                _ => 400,
            });
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
    // Header lines, a byte at a time.
    let mut state = S::Start;
    let (mut name_start, mut name_end, mut start, mut end) = (0, 0, 0, 0);
    let mut invalid = false;
    let mut seen_unique = [false; UNIQUE.len()];
    let mut headers = Vec::new();
    let mut host = false;
    let mut length: Option<Vec<u8>> = None;
    let mut coding: Option<Vec<u8>> = None;
    let mut p = lf + 1;
    let len = loop {
        let Some(&ch) = data.get(p) else {
            return Verdict::Partial;
        };
        let mut done = false;
        match state {
            S::Start => {
                name_start = p;
                invalid = false;
                match ch {
                    b'\r' => {
                        state = S::HeaderAlmostDone;
                    }
                    b'\n' => break p + 1,
                    _ => {
                        state = S::Name;
                        if !lowcase(ch) {
                            if ch == b'_' {
                                invalid |= !underscores;
                            } else if ch <= 0x20 || ch == 0x7f || ch == b':' {
                                return Verdict::Refused(400);
                            } else {
                                invalid = true;
                            }
                        }
                    }
                }
            }
            S::Name => {
                if lowcase(ch) {
                } else if ch == b'_' {
                    invalid |= !underscores;
                } else if ch == b':' {
                    name_end = p;
                    state = S::SpaceBeforeValue;
                } else if ch == b'\r' {
                    (name_end, start, end) = (p, p, p);
                    state = S::AlmostDone;
                } else if ch == b'\n' {
                    (name_end, start, end) = (p, p, p);
                    done = true;
                } else if ch <= 0x20 || ch == 0x7f {
                    return Verdict::Refused(400);
                } else {
                    invalid = true;
                }
            }
            S::SpaceBeforeValue => match ch {
                b' ' => {}
                b'\r' => {
                    (start, end) = (p, p);
                    state = S::AlmostDone;
                }
                b'\n' => {
                    (start, end) = (p, p);
                    done = true;
                }
                0 => return Verdict::Refused(400),
                _ => {
                    start = p;
                    state = S::Value;
                }
            },
            S::Value => match ch {
                b' ' => {
                    end = p;
                    state = S::SpaceAfterValue;
                }
                b'\r' => {
                    end = p;
                    state = S::AlmostDone;
                }
                b'\n' => {
                    end = p;
                    done = true;
                }
                0 => return Verdict::Refused(400),
                _ => {}
            },
            S::SpaceAfterValue => match ch {
                b' ' => {}
                b'\r' => state = S::AlmostDone,
                b'\n' => done = true,
                0 => return Verdict::Refused(400),
                _ => state = S::Value,
            },
            S::AlmostDone => match ch {
                b'\n' => done = true,
                b'\r' => {}
                _ => return Verdict::Refused(400),
            },
            S::HeaderAlmostDone => match ch {
                b'\n' => break p + 1,
                _ => return Verdict::Refused(400),
            },
        }
        p += 1;
        if !done {
            continue;
        }
        state = S::Start;
        if invalid {
            continue;
        }
        let (name, value) = (&data[name_start..name_end], &data[start..end]);
        let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
        if let Some(u) = UNIQUE.iter().position(|u| *u == lower) {
            if seen_unique[u] {
                return Verdict::Refused(400);
            }
            seen_unique[u] = true;
        }
        match lower.as_str() {
            "host" => {
                if !validate_host(value) {
                    return Verdict::Refused(400);
                }
                host = true;
            }
            "content-length" => length = Some(value.to_vec()),
            "transfer-encoding" => coding = Some(value.to_vec()),
            _ => {}
        }
        headers.push((name.to_vec(), value.to_vec()));
    };
    // ngx_http_process_request_header, in its order.
    if line.http11 && !host {
        return Verdict::Refused(400);
    }
    if length.as_deref().is_some_and(|v| atoof(v).is_none()) {
        return Verdict::Refused(400);
    }
    if let Some(c) = coding {
        if !line.http11 {
            return Verdict::Refused(400);
        }
        if !c.eq_ignore_ascii_case(b"chunked") {
            return Verdict::Refused(501);
        }
        if length.is_some() {
            return Verdict::Refused(400);
        }
    }
    if line.method == b"CONNECT" || line.method == b"TRACE" {
        return Verdict::Refused(405);
    }
    Verdict::Head {
        len,
        method: line.method.to_vec(),
        target: line.target.to_vec(),
        headers,
    }
}

fuzz_target!(|data: &[u8]| {
    let underscores = data.first().is_some_and(|b| b & 1 == 1);
    let e = engine(data, underscores);
    let o = oracle(data, underscores);
    match (&e, &o) {
        // nginx refuses a bad byte in a header line as soon as it reads
        // it; the engine reads whole lines: once the line ends, it must
        // refuse alike.
        (Verdict::Partial, Verdict::Refused(s)) => {
            let ended = [data, b"\n\n"].concat();
            assert_eq!(engine(&ended, underscores), Verdict::Refused(*s), "{}", data.escape_ascii());
        }
        _ => assert_eq!(e, o, "{}", data.escape_ascii()),
    }
    // In two pieces: the same answer, whatever the split.
    if !data.is_empty() {
        let cut = data[0] as usize % data.len();
        let mut h = Head::default();
        let mut r = Reader::new();
        let rules = rules(underscores);
        let first = r.advance(&data[..cut], &mut h, &rules);
        if first == Ok(false) {
            let again = match r.advance(data, &mut h, &rules) {
                Ok(false) => Verdict::Partial,
                Err(e) => Verdict::Refused(e.status),
                Ok(true) => engine(data, underscores),
            };
            assert_eq!(again, e, "cut at {cut}: {}", data.escape_ascii());
        } else if let Err(x) = first {
            // Refused early: the whole bytes are refused alike.
            assert_eq!(Verdict::Refused(x.status), e, "cut at {cut}: {}", data.escape_ascii());
        }
    }
});
