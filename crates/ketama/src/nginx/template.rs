//! nginx's `hash <template>`: literal text and variables, parsed once,
//! evaluated per request over a [`Request`].

use std::fmt;

use super::vars;
use crate::request::Request;

/// A variable of a [`Template`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Var {
    /// `$request_uri`: the target as sent.
    RequestUri,
    /// `$uri`: the decoded, normalized path ([`vars::uri`]).
    Uri,
    /// `$args`: the query as sent ([`vars::args`]).
    Args,
    /// `$arg_NAME` ([`vars::arg`]); the name lowercased.
    Arg(Box<[u8]>),
    /// `$cookie_NAME` ([`vars::cookie`]); the name lowercased.
    Cookie(Box<[u8]>),
    /// `$http_NAME`: the first field so named ([`vars::http_var_matches`]);
    /// the name lowercased, `_` for `-`.
    Http(Box<[u8]>),
    /// `$http_cookie` (with `;`) and `$http_x_forwarded_for` (with `,`):
    /// every field so named, joined by the byte and a space.
    HttpJoined(Box<[u8]>, u8),
    /// `$host`: the validated host, lowercased, port cut ([`vars::host`]);
    /// empty without one (nginx's `server_name`, empty by default).
    Host,
    /// `$remote_addr`: the client's address, without its port.
    RemoteAddr,
    /// `$scheme`: `http` or `https`.
    Scheme,
    /// The path as sent, up to its `?` or `#` (`[key] source = "path"`;
    /// no nginx variable says it).
    Path,
    /// The host as sent, unvalidated: an absolute-form target's authority,
    /// else the `Host` field (`[key] source = "host_path"`).
    RawHost,
}

/// A piece of a template.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Text(Box<[u8]>),
    Var(Var),
}

/// Why a template was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// A `$` with no name after it.
    #[error("template {template:?}: a $ at byte {at} names no variable; write $name or ${{name}}, and no literal $ (nginx has none either)")]
    NoName {
        /// The template.
        template: String,
        /// The `$`'s offset.
        at: usize,
    },
    /// `${name` without its `}`.
    #[error(
        "template {template:?}: the ${{ at byte {at} is not closed by a }} right after the name"
    )]
    Unclosed {
        /// The template.
        template: String,
        /// The `$`'s offset.
        at: usize,
    },
    /// A variable the router does not know.
    #[error("template {template:?}: ${name} is not a variable a routing key can read; use $request_uri, $uri, $args, $arg_NAME, $cookie_NAME, $http_NAME, $host, $remote_addr or $scheme")]
    Unknown {
        /// The template.
        template: String,
        /// The variable's name.
        name: String,
    },
    /// A regex capture (`$1`).
    #[error("template {template:?}: ${name} is a regex capture, which means nothing outside nginx's location or map; key on the variable it came from")]
    Capture {
        /// The template.
        template: String,
        /// The capture's number.
        name: String,
    },
}

/// nginx's `hash <template>`: its literal text and variables (`$name`,
/// `${name}`), each variable giving nginx 1.22's bytes for it; the key
/// is their concatenation.
///
/// ```
/// use ketama::nginx::Template;
/// use ketama::request::Request;
///
/// struct Get(&'static [u8], Vec<(&'static [u8], &'static [u8])>);
/// impl Request for Get {
///     fn request_uri(&self) -> &[u8] { self.0 }
///     fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
///         self.1.iter().copied()
///     }
/// }
///
/// let t = Template::parse("$scheme://$host$uri?v=${arg_v}|$cookie_sid")?;
/// let req = Get(b"/a//b/../c?V=2", vec![
///     (b"Host", b"CDN.example:8080"),
///     (b"Cookie", b"lang=en; SID=42"),
/// ]);
/// let mut buf = Vec::new();
/// let key = t.with_key(&req, &mut buf, |k| k.unwrap().to_vec());
/// assert_eq!(key, b"http://cdn.example/a/c?v=2|42");
/// # Ok::<(), ketama::nginx::TemplateError>(())
/// ```
///
/// Cost: a template of one variable that is a piece of the request
/// (`$request_uri`, `$args`, `$arg_*`, `$cookie_*`, `$http_*`) is passed
/// on without a copy; others are written to the caller's buffer, one pass
/// over each piece, no allocation once the buffer grew.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    text: String,
    parts: Vec<Part>,
}

impl Template {
    /// Parses `text` as nginx compiles a complex value: `$` then a name of
    /// `A-Z a-z 0-9 _`, or `${name}`; everything else literal.
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        let b = text.as_bytes();
        let mut parts = Vec::new();
        let mut lit = Vec::new();
        let mut i = 0;
        while i < b.len() {
            if b[i] != b'$' {
                lit.push(b[i]);
                i += 1;
                continue;
            }
            let at = i;
            i += 1;
            let bracket = b.get(i) == Some(&b'{');
            if bracket {
                i += 1;
            }
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let name = &text[start..i];
            if bracket {
                if b.get(i) != Some(&b'}') {
                    return Err(TemplateError::Unclosed {
                        template: text.into(),
                        at,
                    });
                }
                i += 1;
            }
            if name.is_empty() {
                return Err(TemplateError::NoName {
                    template: text.into(),
                    at,
                });
            }
            if !lit.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut lit).into()));
            }
            parts.push(Part::Var(var(text, name)?));
        }
        if !lit.is_empty() {
            parts.push(Part::Text(lit.into()));
        }
        Ok(Template {
            text: text.into(),
            parts,
        })
    }

    /// A template of one variable.
    pub fn of(var: Var) -> Template {
        let text = match &var {
            Var::Path => "(the path as sent)".into(),
            Var::RawHost => "(the host as sent)".into(),
            v => format!("${}", VarName(v)),
        };
        Template {
            text,
            parts: vec![Part::Var(var)],
        }
    }

    /// Host as sent, then the target as sent (`[key] source =
    /// "host_path"`).
    pub fn host_path() -> Template {
        Template {
            text: "(the host as sent)$request_uri".into(),
            parts: vec![Part::Var(Var::RawHost), Part::Var(Var::RequestUri)],
        }
    }

    /// The template's text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The variables it reads, in order.
    pub fn vars(&self) -> impl Iterator<Item = &Var> {
        self.parts.iter().filter_map(|p| match p {
            Part::Var(v) => Some(v),
            Part::Text(_) => None,
        })
    }

    /// The key of `req` when the template is one variable whose value is
    /// a piece of the request as sent (the empty string when not found);
    /// `None` when the key must be written ([`Template::with_key`]).
    pub fn piece<'r>(&self, req: &'r impl Request) -> Option<&'r [u8]> {
        match &self.parts[..] {
            [Part::Var(v)] => borrowed(v, req).map(|p| p.unwrap_or(b"")),
            _ => None,
        }
    }

    /// Calls `f` with the key of `req`: a piece of the request when the
    /// template is one such variable, else the pieces written to `buf`.
    /// `Err` when the template reads `$uri` of a path nginx refuses.
    pub fn with_key<R>(
        &self,
        req: &impl Request,
        buf: &mut Vec<u8>,
        f: impl FnOnce(Result<&[u8], vars::InvalidUri>) -> R,
    ) -> R {
        if let Some(piece) = self.piece(req) {
            return f(Ok(piece));
        }
        buf.clear();
        for p in &self.parts {
            match p {
                Part::Text(t) => buf.extend_from_slice(t),
                Part::Var(v) => {
                    if let Err(e) = write_var(v, req, buf) {
                        return f(Err(e));
                    }
                }
            }
        }
        f(Ok(buf))
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The variable `name` of `template`.
fn var(template: &str, name: &str) -> Result<Var, TemplateError> {
    let lower = name.to_ascii_lowercase();
    let tail = |p: &str| {
        lower
            .strip_prefix(p)
            .filter(|t| !t.is_empty())
            .map(|t| t.as_bytes().into())
    };
    Ok(match lower.as_str() {
        "request_uri" => Var::RequestUri,
        "uri" | "document_uri" => Var::Uri,
        "args" | "query_string" => Var::Args,
        "host" => Var::Host,
        "remote_addr" => Var::RemoteAddr,
        "scheme" => Var::Scheme,
        "http_cookie" => Var::HttpJoined(b"cookie"[..].into(), b';'),
        "http_x_forwarded_for" => Var::HttpJoined(b"x_forwarded_for"[..].into(), b','),
        _ if name.as_bytes()[0].is_ascii_digit() => {
            return Err(TemplateError::Capture {
                template: template.into(),
                name: name.into(),
            })
        }
        _ => {
            if let Some(n) = tail("arg_") {
                Var::Arg(n)
            } else if let Some(n) = tail("cookie_") {
                Var::Cookie(n)
            } else if let Some(n) = tail("http_") {
                Var::Http(n)
            } else {
                return Err(TemplateError::Unknown {
                    template: template.into(),
                    name: name.into(),
                });
            }
        }
    })
}

/// The variable's name as a template writes it.
struct VarName<'a>(&'a Var);

impl fmt::Display for VarName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        match self.0 {
            Var::RequestUri => f.write_str("request_uri"),
            Var::Uri => f.write_str("uri"),
            Var::Args => f.write_str("args"),
            Var::Arg(n) => write!(f, "arg_{}", s(n)),
            Var::Cookie(n) => write!(f, "cookie_{}", s(n)),
            Var::Http(n) | Var::HttpJoined(n, _) => write!(f, "http_{}", s(n)),
            Var::Host => f.write_str("host"),
            Var::RemoteAddr => f.write_str("remote_addr"),
            Var::Scheme => f.write_str("scheme"),
            Var::Path => f.write_str("path"),
            Var::RawHost => f.write_str("raw_host"),
        }
    }
}

/// The value of `v` when it is a piece of `req` as sent (`Some(None)`: the
/// variable is not found, the empty string); `None` when it must be
/// written.
fn borrowed<'r>(v: &Var, req: &'r impl Request) -> Option<Option<&'r [u8]>> {
    Some(match v {
        Var::RequestUri => Some(req.request_uri()),
        Var::Path => Some(path(req.request_uri())),
        Var::Args => Some(vars::args(req.request_uri())),
        Var::Arg(n) => vars::arg(vars::args(req.request_uri()), n),
        Var::Cookie(n) => vars::cookie(req.cookie_lines(), n),
        Var::Http(n) => req
            .headers()
            .find(|(name, _)| vars::http_var_matches(name, n))
            .map(|(_, v)| v),
        Var::RawHost => req.raw_host(),
        Var::Scheme => Some(if req.tls() { b"https" } else { b"http" }),
        Var::Uri | Var::HttpJoined(..) | Var::Host | Var::RemoteAddr => return None,
    })
}

/// Appends the value of `v` to `out`.
fn write_var(v: &Var, req: &impl Request, out: &mut Vec<u8>) -> Result<(), vars::InvalidUri> {
    match v {
        Var::Uri => vars::append_uri(req.request_uri(), out)?,
        Var::HttpJoined(n, sep) => vars::write_joined(req.headers(), n, *sep, out),
        Var::Host => {
            if let Some(h) = req.raw_host() {
                vars::write_host(h, out);
            }
        }
        Var::RemoteAddr => {
            if let Some(a) = req.remote_addr() {
                vars::write_addr(a, out);
            }
        }
        _ => out.extend_from_slice(borrowed(v, req).flatten().unwrap_or(b"")),
    }
    Ok(())
}

/// The path of a target as sent: up to its `?` or `#`; `/` for an
/// absolute-form target without one.
fn path(request_uri: &[u8]) -> &[u8] {
    let end = request_uri
        .iter()
        .position(|&b| b == b'?' || b == b'#')
        .unwrap_or(request_uri.len());
    if end == 0 {
        b"/"
    } else {
        &request_uri[..end]
    }
}

#[cfg(test)]
mod tests;
