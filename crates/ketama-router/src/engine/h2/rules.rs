//! An HTTP/2 request's fields under the rules an HTTP/1 head is read by
//! ([`crate::engine::fields`], [`crate::engine::request_head`]), applied
//! as nginx 1.22 applies them to HTTP/2 (its `ngx_http_v2` state machine
//! hands each field to the same handlers as HTTP/1's, then runs
//! `ngx_http_process_request_header`):
//!
//! | request | nginx, and the router |
//! |---|---|
//! | no `:scheme` or `:path` (a `CONNECT` as RFC 9113 writes it), a `:method` other than `A-Z _ -`, a `:path` not starting with `/` (`*`), a path whose `..` climbs above the root or with a bad `%` escape | 400 (the request line's rules, [`crate::reqline`]) |
//! | a name with a byte other than `a-z 0-9 -` (`x.y`, `x_y` unless `underscores_in_headers`) | the field is ignored: neither routed on nor forwarded |
//! | a name `strip_request_headers` lists | left out, as on HTTP/1 |
//! | `:authority` and a `host` field, or two `host` fields | 400 (nginx passes `:authority` to its `Host` handler: a second `Host`) |
//! | a second of a field nginx takes once ([`UNIQUE`]) | 400 |
//! | neither `:authority` nor `host` | 400 |
//! | a host nginx refuses (`ngx_http_validate_host`) | 400 |
//! | `content-length` other than a number | 400 |
//! | `CONNECT`, `TRACE` | 405 |
//! | `content-length` above 0 on a stream the client already ended | 400 |
//!
//! What RFC 9113 makes malformed (connection-specific fields, `te` other
//! than `trailers`, upper-case names, pseudo-headers missing, repeated or
//! out of place, DATA that does not add up to `content-length`) the `h2`
//! crate refuses before this, by resetting the stream.

use http::header::{HeaderName, HOST};
use http::request::Parts;

use crate::engine::fields::{self, UNIQUE};
use crate::engine::request_head::{
    Refusal, Rules, BAD_HOST, DUPLICATE, DUPLICATE_FRAMING, LENGTH_INVALID, METHOD,
};
use crate::reqline;

const BAD_PSEUDO: Refusal = Refusal {
    status: 400,
    reason: "bad_request_line",
    why: "a :method, :scheme or :path nginx refuses",
};

const NO_AUTHORITY: Refusal = Refusal {
    status: 400,
    reason: "bad_framing",
    why: "an HTTP/2 request needs :authority or a host field",
};

const EMPTY_WITH_LENGTH: Refusal = Refusal {
    status: 400,
    reason: "bad_framing",
    why: "content-length above 0 on a stream with no body",
};

/// Applies the rules (see the module docs) to `parts`: the fields nginx
/// ignores and those `rules.strip` names are removed; a refusal is the
/// answer nginx gives. `ended`: the client ended the stream with its
/// headers.
pub fn apply(parts: &mut Parts, rules: &Rules<'_>, ended: bool) -> Result<(), Refusal> {
    let method = parts.method.as_str().as_bytes();
    let path = parts.uri.path_and_query().map(|p| p.as_str().as_bytes());
    let good_method = method
        .iter()
        .all(|&b| b.is_ascii_uppercase() || b == b'_' || b == b'-');
    let good_path = path.is_some_and(|p| {
        let end = p.iter().position(|&b| b == b'?').unwrap_or(p.len());
        p.starts_with(b"/") && reqline::valid_path(&p[..end])
    });
    // The `h2` crate refuses a request without `:scheme` but `CONNECT`
    // (RFC 9113 section 8.5), which nginx refuses for it.
    if parts.method == http::Method::CONNECT || !good_method || !good_path {
        return Err(BAD_PSEUDO);
    }
    let dropped: Vec<HeaderName> = parts
        .headers
        .keys()
        .filter(|n| {
            let n = n.as_str().as_bytes();
            fields::name_ignored(n, rules.underscores) || rules.strips(n)
        })
        .cloned()
        .collect();
    for n in dropped {
        parts.headers.remove(n);
    }
    let hosts = parts.headers.get_all(HOST).iter().count();
    let authority = parts.uri.authority().map(|a| a.as_str().as_bytes());
    if hosts > 1 || (hosts == 1 && authority.is_some()) {
        return Err(DUPLICATE_FRAMING);
    }
    // `host` was counted above, with `:authority`.
    for name in UNIQUE.iter().filter(|n| **n != b"host") {
        let Ok(n) = HeaderName::from_bytes(name) else {
            continue;
        };
        if parts.headers.get_all(&n).iter().nth(1).is_some() {
            let framing = *name == b"content-length" || *name == b"transfer-encoding";
            return Err(if framing {
                DUPLICATE_FRAMING
            } else {
                DUPLICATE
            });
        }
    }
    let host = authority.or_else(|| parts.headers.get(HOST).map(|v| v.as_bytes()));
    match host {
        None => return Err(NO_AUTHORITY),
        Some(h) if !fields::valid_host(h) => return Err(BAD_HOST),
        Some(_) => {}
    }
    let length = match parts.headers.get(http::header::CONTENT_LENGTH) {
        None => None,
        Some(v) => Some(fields::parse_length(v.as_bytes()).ok_or(LENGTH_INVALID)?),
    };
    if matches!(parts.method.as_str(), "CONNECT" | "TRACE") {
        return Err(METHOD);
    }
    if ended && length.is_some_and(|n| n > 0) {
        return Err(EMPTY_WITH_LENGTH);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(uri: &str, fields: &[(&str, &str)]) -> Parts {
        let mut b = http::Request::get(uri);
        for (n, v) in fields {
            b = b.header(*n, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn the_rules_of_an_http1_head_as_nginx_applies_them_to_http2() {
        let strip = ["x-ketama-fill".to_string()];
        let rules = Rules {
            strip: &strip,
            ..Rules::new(32 * 1024)
        };
        let mut p = parts(
            "https://a.test/x",
            &[
                ("x_forwarded_for", "6.6.6.6"),
                ("x.y", "1"),
                ("X-Ketama-Fill", "1"),
                ("accept", "*/*"),
            ],
        );
        assert_eq!(apply(&mut p, &rules, true), Ok(()));
        let names: Vec<_> = p.headers.keys().map(|n| n.as_str()).collect();
        assert_eq!(names, ["accept"]);
        let underscores = Rules {
            underscores: true,
            ..Rules::new(32 * 1024)
        };
        let mut p = parts("https://a.test/x", &[("x_a", "1")]);
        assert_eq!(apply(&mut p, &underscores, true), Ok(()));
        assert!(p.headers.contains_key("x_a"));

        let status = |uri: &str, fields: &[(&str, &str)], ended: bool| {
            apply(&mut parts(uri, fields), &rules, ended).map_err(|r| r.status)
        };
        assert_eq!(
            status("https://a.test/", &[("host", "a.test")], true),
            Err(400)
        );
        assert_eq!(status("/", &[("host", "a.test")], true), Ok(()));
        assert_eq!(status("/", &[("host", "a"), ("host", "b")], true), Err(400));
        assert_eq!(status("/", &[], true), Err(400));
        assert_eq!(
            status(
                "https://a.test/",
                &[("if-match", "a"), ("if-match", "b")],
                true
            ),
            Err(400)
        );
        assert_eq!(status("/", &[("host", "a/b")], true), Err(400));
        assert_eq!(status("/", &[("host", "..")], true), Err(400));
        assert_eq!(
            status("https://a.test/", &[("content-length", "+5")], false),
            Err(400)
        );
        assert_eq!(
            status("https://a.test/", &[("content-length", "5")], true),
            Err(400)
        );
        assert_eq!(
            status("https://a.test/", &[("content-length", "5")], false),
            Ok(())
        );
        assert_eq!(
            status("https://a.test/", &[("content-length", "0")], true),
            Ok(())
        );
        assert_eq!(status("https://a.test/../x", &[], true), Err(400));
        assert_eq!(
            status("https://a.test/a/%2e%2e/%2e%2e/x", &[], true),
            Err(400)
        );
        assert_eq!(status("https://a.test/a/../x?y=/../..", &[], true), Ok(()));
        assert_eq!(status("https://a.test/%zz", &[], true), Err(400));
        let mut star = parts("*", &[("host", "a.test")]);
        star.method = http::Method::OPTIONS;
        assert_eq!(
            apply(&mut star, &rules, true).map_err(|r| r.status),
            Err(400)
        );
        let mut lower = parts("https://a.test/", &[]);
        lower.method = http::Method::from_bytes(b"get").unwrap();
        assert_eq!(
            apply(&mut lower, &rules, true).map_err(|r| r.status),
            Err(400)
        );
        let mut connect = parts("a.test:443", &[]);
        connect.method = http::Method::CONNECT;
        assert_eq!(
            apply(&mut connect, &rules, true).map_err(|r| r.status),
            Err(400)
        );
        let mut trace = parts("https://a.test/", &[]);
        trace.method = http::Method::TRACE;
        assert_eq!(
            apply(&mut trace, &rules, true).map_err(|r| r.status),
            Err(405)
        );
    }
}
