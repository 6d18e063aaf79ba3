//! Request framing, as strict as nginx: a request whose length two parties
//! could read differently is refused before anything is forwarded, so
//! nothing can be smuggled onto a shared upstream connection.
//!
//! Pingora has parsed the head when a filter first runs, and has already
//! dropped some of what must be checked (it removes `Content-Length` when
//! `Transfer-Encoding` is present, and folds repeated equal
//! `Content-Length` values into one framing length while forwarding the
//! header as sent). So the checks read the raw head bytes Pingora keeps.
//!
//! | request | answer |
//! |---|---|
//! | `Content-Length` repeated, or a list (`35, 35`) | 400 |
//! | `Transfer-Encoding` and `Content-Length` together | 400 |
//! | `Transfer-Encoding` other than one lone `chunked` | 501 |
//! | HTTP/1.1 without `Host`, or any request with two | 400 |
//!
//! Each answer closes the connection. Invalid chunked framing inside a
//! body is Pingora's to find while the body streams; the proxy answers it
//! with 400 as a client error.

/// Why a request head is refused: the status to answer and the reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// 400 or 501.
    pub status: u16,
    /// What was wrong, for the response body.
    pub reason: &'static str,
}

fn refuse(status: u16, reason: &'static str) -> Result<(), Refusal> {
    Err(Refusal { status, reason })
}

/// Checks a raw request head (request line and header lines, as received)
/// of an HTTP/1.x request; `http11` is whether it is HTTP/1.1.
pub fn check(raw_head: &[u8], http11: bool) -> Result<(), Refusal> {
    let (mut lengths, mut length_list) = (0usize, false);
    let (mut codings, mut lone_chunked) = (0usize, false);
    let mut hosts = 0usize;
    // The first line is the request line; the head ends at an empty line.
    for line in raw_head.split(|&b| b == b'\n').skip(1) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.eq_ignore_ascii_case(b"content-length") {
            lengths += 1;
            length_list |= value.contains(&b',');
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            codings += 1;
            lone_chunked = value.eq_ignore_ascii_case(b"chunked");
        } else if name.eq_ignore_ascii_case(b"host") {
            hosts += 1;
        }
    }
    if lengths > 1 || length_list {
        return refuse(
            400,
            "Content-Length is repeated or a list: send it once, as one number",
        );
    }
    if codings > 0 && lengths > 0 {
        return refuse(
            400,
            "Transfer-Encoding and Content-Length together: send one of them",
        );
    }
    if codings > 1 || (codings == 1 && !lone_chunked) {
        return refuse(501, "only Transfer-Encoding: chunked is implemented, alone");
    }
    if hosts > 1 {
        return refuse(400, "Host is repeated: send it once");
    }
    if http11 && hosts == 0 {
        return refuse(400, "an HTTP/1.1 request needs a Host header");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(head: &str, http11: bool) -> Option<u16> {
        check(head.as_bytes(), http11).err().map(|r| r.status)
    }

    #[test]
    fn the_rules() {
        let ok = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 35\r\n\r\nbody";
        assert_eq!(status(ok, true), None);
        assert_eq!(status("GET / HTTP/1.1\r\nhost: a\r\n\r\n", true), None);
        assert_eq!(status("GET / HTTP/1.0\r\n\r\n", false), None);
        assert_eq!(
            status(
                "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n",
                true
            ),
            None
        );
        for (head, want) in [
            ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 35, 35\r\n\r\n", 400),
            ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 35\r\ncontent-length: 35\r\n\r\n", 400),
            ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
            ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
            ("GET / HTTP/1.1\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
            ("GET / HTTP/1.1\nHost: a\nHost: b\n\n", 400),
        ] {
            assert_eq!(status(head, true), Some(want), "{head:?}");
        }
        // Lines after the head (a body) are not headers.
        assert_eq!(
            status("GET / HTTP/1.1\r\nHost: a\r\n\r\nHost: b\r\n", true),
            None
        );
    }
}
