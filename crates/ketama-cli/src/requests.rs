//! Requests read from input lines, for a configured key to read as the
//! router reads a request ([`ketama::request::Request`]): a request
//! target as sent, or a line of the router's JSON access log (its `uri`,
//! `client`, `protocol`, and the `fields` and `scheme` it records when the
//! router's key reads them). What a line cannot say is refused naming the
//! line, never guessed at.

use std::net::IpAddr;

use anyhow::{bail, Context as _};

use crate::key_args::RequestFormat;

/// One request, owned.
#[derive(Debug, Default)]
pub struct Request {
    /// The target as sent.
    target: Vec<u8>,
    /// An absolute-form target's authority and `$request_uri`, as
    /// positions in `target`.
    absolute: Option<(std::ops::Range<usize>, std::ops::Range<usize>)>,
    fields: Vec<(Vec<u8>, Vec<u8>)>,
    client: Option<IpAddr>,
    https: bool,
    h2: bool,
}

/// The line `n` (1-based) in `format`.
pub fn parse(line: &[u8], format: RequestFormat, n: usize) -> anyhow::Result<Request> {
    match format {
        RequestFormat::Target => target(line.to_vec(), n),
        RequestFormat::AccessLog => access_log(line, n),
    }
}

/// A target as sent: origin-form (`/`...), absolute-form
/// (`scheme://authority[/path][?query]`) or `*`.
fn target(target: Vec<u8>, n: usize) -> anyhow::Result<Request> {
    if target.is_empty() {
        bail!("line {n}: an empty request target: write one per line, e.g. /a/b.jpg?w=1");
    }
    if target.iter().any(|&b| b <= b' ' || b == 0x7f) {
        bail!(
            "line {n}: the target {:?} holds a space or a control byte, which no request target does",
            String::from_utf8_lossy(&target)
        );
    }
    let absolute = match target[0] {
        b'/' | b'*' => None,
        _ => Some(absolute_form(&target).with_context(|| {
            format!(
                "line {n}: {:?} is neither an origin-form target (/path?query) nor an absolute-form one (http://host/path?query)",
                String::from_utf8_lossy(&target)
            )
        })?),
    };
    Ok(Request {
        target,
        absolute,
        ..Request::default()
    })
}

/// An absolute-form target's authority and `$request_uri` (nginx's: from
/// the path, or the `?` when there is none, on; the `/` of `//` for a
/// target of scheme and authority alone).
fn absolute_form(t: &[u8]) -> Option<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    let scheme = t
        .iter()
        .position(|&b| !(b.is_ascii_alphanumeric() || b"+-.".contains(&b)))?;
    if scheme == 0 || !t[0].is_ascii_alphabetic() || t.get(scheme..scheme + 3)? != b"://" {
        return None;
    }
    let host = scheme + 3;
    let end = t[host..]
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .map_or(t.len(), |i| host + i);
    if end == host {
        return None;
    }
    let uri = match end == t.len() {
        true => host - 1..host,
        false => end..t.len(),
    };
    Some((host..end, uri))
}

/// A line of the router's JSON access log.
fn access_log(line: &[u8], n: usize) -> anyhow::Result<Request> {
    let v: serde_json::Value = serde_json::from_slice(line).with_context(|| {
        format!("line {n}: not a JSON access log line (write [access_log] format = \"json\")")
    })?;
    let text = |name: &str| -> anyhow::Result<&str> {
        v.get(name).and_then(|x| x.as_str()).with_context(|| {
            format!("line {n}: no {name:?} string: not a line of the router's JSON access log")
        })
    };
    // An absolute-form target is logged whole as `target` (`uri` holds
    // its $request_uri) when the key reads more than the path.
    let sent = match v.get("target").and_then(|t| t.as_str()) {
        Some(t) => t,
        None => text("uri")?,
    };
    let mut req = target(sent.as_bytes().to_vec(), n)?;
    let client = text("client")?;
    if !client.is_empty() {
        req.client = Some(
            client
                .parse()
                .with_context(|| format!("line {n}: client {client:?} is not an address"))?,
        );
    }
    req.h2 = text("protocol")?.starts_with("HTTP/2");
    req.https = match v.get("scheme").and_then(|s| s.as_str()) {
        Some("https") => true,
        Some("http") | None => false,
        Some(other) => bail!("line {n}: scheme {other:?} is neither http nor https"),
    };
    if let Some(fields) = v.get("fields") {
        let bad = || format!("line {n}: fields must be [[name, value], ...]");
        for f in fields.as_array().with_context(bad)? {
            match f.as_array().map(|p| &p[..]) {
                Some([name, value]) => match (name.as_str(), value.as_str()) {
                    (Some(name), Some(value)) => req
                        .fields
                        .push((name.as_bytes().to_vec(), value.as_bytes().to_vec())),
                    _ => bail!(bad()),
                },
                _ => bail!(bad()),
            }
        }
    }
    Ok(req)
}

/// The requests of a file, one a line (empty lines skipped); refused
/// naming the file and line, or when it holds none.
pub fn read_file(path: &std::path::Path, format: RequestFormat) -> anyhow::Result<Vec<Request>> {
    let text =
        std::fs::read(path).with_context(|| format!("cannot read keys file {}", path.display()))?;
    let mut requests = Vec::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if !line.is_empty() {
            let req = parse(line, format, i + 1)
                .with_context(|| format!("keys file {}", path.display()))?;
            requests.push(req);
        }
    }
    if requests.is_empty() {
        bail!(
            "keys file {} holds no request: write one a line",
            path.display()
        );
    }
    Ok(requests)
}

impl Request {
    fn host(&self) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(b"host"))
            .map(|(_, v)| &v[..])
    }
}

impl ketama::request::Request for Request {
    fn request_uri(&self) -> &[u8] {
        match &self.absolute {
            Some((_, uri)) => &self.target[uri.clone()],
            None => &self.target,
        }
    }

    fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields.iter().map(|(n, v)| (&n[..], &v[..]))
    }

    fn absolute_authority(&self) -> Option<&[u8]> {
        self.absolute.as_ref().map(|(a, _)| &self.target[a.clone()])
    }

    fn remote_addr(&self) -> Option<IpAddr> {
        self.client
    }

    fn tls(&self) -> bool {
        self.https
    }

    fn absolute_target(&self) -> Option<&[u8]> {
        self.absolute.as_ref().map(|_| &self.target[..])
    }

    /// An HTTP/2 request's `:scheme` and `:authority`: the access log
    /// records the authority as its `host` field.
    fn scheme_authority(&self) -> Option<(&[u8], &[u8])> {
        if !self.h2 {
            return None;
        }
        let scheme: &[u8] = if self.https { b"https" } else { b"http" };
        Some((scheme, self.host()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ketama::request::Request as _;

    #[test]
    fn absolute_form_targets_split_as_nginx_reads_them() {
        let r = target(b"http://A.test:8080/p?q".to_vec(), 1).unwrap();
        assert_eq!(r.absolute_authority(), Some(&b"A.test:8080"[..]));
        assert_eq!(r.request_uri(), b"/p?q");
        assert_eq!(r.absolute_target(), Some(&b"http://A.test:8080/p?q"[..]));
        let r = target(b"http://h?q".to_vec(), 1).unwrap();
        assert_eq!(r.request_uri(), b"?q");
        let r = target(b"http://h".to_vec(), 1).unwrap();
        assert_eq!(r.request_uri(), b"/");
        let r = target(b"/a?b".to_vec(), 1).unwrap();
        assert_eq!(
            (r.request_uri(), r.absolute_authority()),
            (&b"/a?b"[..], None)
        );
        for bad in [&b"a b"[..], b"", b"x", b"http://", b"1ttp://h/"] {
            assert!(target(bad.to_vec(), 3).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_access_log_line_gives_its_fields_client_and_scheme() {
        let line = br#"{"client":"10.0.0.7","uri":"/a","protocol":"HTTP/2.0","fields":[["host","x.test"],["cookie","a=1"]],"scheme":"https"}"#;
        let r = parse(line, RequestFormat::AccessLog, 1).unwrap();
        assert_eq!(r.remote_addr(), Some("10.0.0.7".parse().unwrap()));
        assert!(r.tls());
        assert_eq!(r.scheme_authority(), Some((&b"https"[..], &b"x.test"[..])));
        assert_eq!(r.cookie_lines().collect::<Vec<_>>(), vec![&b"a=1"[..]]);
        let e = parse(b"{\"uri\":\"/\"}", RequestFormat::AccessLog, 4).unwrap_err();
        assert!(format!("{e:#}").contains("line 4: no \"client\""), "{e:#}");
        let e = parse(b"GET / HTTP/1.1", RequestFormat::AccessLog, 2).unwrap_err();
        assert!(format!("{e:#}").contains("line 2: not a JSON"), "{e:#}");
    }
}
