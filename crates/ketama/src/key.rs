//! A request's routing key as a configured router takes it: one of the
//! key forms ([`KeyForm`]: nginx's `hash <template>`, HAProxy's
//! `balance`, Envoy's `hash_policy` list) over the request as
//! [`Normalize`] rewrites it for keys. The router and the command-line
//! tools call the same [`RequestKey::take`], so that a key priced over a
//! trace or an access log is the key the router routes by.
//!
//! ```
//! use ketama::key::{KeyBufs, KeyForm, Normalize, RequestKey};
//! use ketama::nginx::Template;
//! use ketama::query::QueryRules;
//! use ketama::request::{Request, Taken};
//!
//! struct Logged(&'static [u8]);
//! impl Request for Logged {
//!     fn request_uri(&self) -> &[u8] {
//!         self.0
//!     }
//!     fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
//!         [(&b"host"[..], &b"Cdn.Example"[..])].into_iter()
//!     }
//! }
//!
//! let key = RequestKey::new(
//!     KeyForm::Template(Template::parse("$host$request_uri").unwrap()),
//!     Normalize { query: QueryRules { sort: true, ..QueryRules::default() }, lowercase_host: false },
//! );
//! let mut bufs = KeyBufs::default();
//! let mut cookie = None;
//! let k = key.take(&Logged(b"/v/1.ts?y=2&x=1"), &mut bufs, &mut cookie, |t| match t {
//!     Taken::Bytes(b) => b.to_vec(),
//!     _ => unreachable!(),
//! });
//! assert_eq!(k, b"cdn.example/v/1.ts?x=1&y=2");
//! ```
//!
//! Cost: what the form costs (a borrowed piece of the request for a
//! template of one variable, the pieces written to a reused buffer
//! otherwise), plus one pass and a sort of the query's chunks when the
//! query is normalized; nothing is allocated once the buffers have grown.

use std::net::IpAddr;

use crate::envoy::policy::{HashPolicy, Method};
use crate::haproxy::Balance;
use crate::haproxy::Fetch;
use crate::nginx::{Template, Var};
use crate::query::QueryRules;
use crate::request::{Request, Taken};

/// Where the key comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyForm {
    /// nginx's `hash <template>`: `[key] template`, and what each `source`
    /// stands for. An empty key is [`Taken::Nothing`] (nginx routes it
    /// round robin).
    Template(Template),
    /// HAProxy's `balance` line; `uri` reads the target as HAProxy sees
    /// it (scheme and authority included for absolute-form and HTTP/2).
    Haproxy(Balance),
    /// Envoy's `hash_policy` list, for Envoy's and gRPC's schemes.
    HashPolicy(HashPolicy),
}

/// The request as every key form reads it (`[key.normalize]`); the
/// request itself is forwarded as sent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Normalize {
    /// The query's rules ([`crate::query`]).
    pub query: QueryRules,
    /// Lowercase the `Host` a key reads.
    pub lowercase_host: bool,
}

impl Normalize {
    /// Whether requests are read as sent.
    pub fn is_identity(&self) -> bool {
        self.query.is_identity() && !self.lowercase_host
    }
}

/// A header field a key reads, matched as the form matches it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldName {
    /// This name, in any case.
    Exact(Box<[u8]>),
    /// nginx's `$http_NAME`: any case, `-` read as `_`.
    NginxVar(Box<[u8]>),
}

impl FieldName {
    fn matches(&self, name: &[u8]) -> bool {
        match self {
            FieldName::Exact(n) => n.eq_ignore_ascii_case(name),
            FieldName::NginxVar(v) => crate::nginx::http_var_matches(name, v),
        }
    }
}

/// A configured key: its form over the request as normalized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestKey {
    form: KeyForm,
    normalize: Normalize,
    fields: Vec<FieldName>,
    scheme: bool,
}

/// The buffers a key is assembled in, reused from request to request
/// (one per thread in the router).
#[derive(Debug, Default)]
pub struct KeyBufs {
    key: Vec<u8>,
    uri: Vec<u8>,
    absolute: Vec<u8>,
    host: Vec<u8>,
    authority: Vec<u8>,
    chunks: Vec<(usize, usize)>,
}

impl RequestKey {
    /// The key `form` takes of requests as `normalize` rewrites them.
    pub fn new(form: KeyForm, normalize: Normalize) -> RequestKey {
        let (fields, scheme) = fields_of(&form);
        RequestKey {
            form,
            normalize,
            fields,
            scheme,
        }
    }

    /// The form.
    pub fn form(&self) -> &KeyForm {
        &self.form
    }

    /// The normalization.
    pub fn normalize(&self) -> &Normalize {
        &self.normalize
    }

    /// Whether the key reads the header field `name` (beyond the target
    /// and the client's address): what an access log must record for the
    /// key to be taken again from the log.
    pub fn reads_field(&self, name: &[u8]) -> bool {
        self.fields.iter().any(|f| f.matches(name))
    }

    /// Whether the key reads any header field.
    pub fn reads_any_field(&self) -> bool {
        !self.fields.is_empty()
    }

    /// Whether the key reads the request's scheme.
    pub fn reads_scheme(&self) -> bool {
        self.scheme
    }

    /// Calls `f` with what the key takes of `req`, without copying it when
    /// it is one piece of the request as sent; a cookie Envoy's policies
    /// generated goes to `set_cookie`; [`Taken::Nothing`] where the key's
    /// peer routes round robin.
    pub fn take<R>(
        &self,
        req: &impl Request,
        bufs: &mut KeyBufs,
        set_cookie: &mut Option<String>,
        f: impl FnOnce(Taken<'_>) -> R,
    ) -> R {
        let KeyBufs {
            key,
            uri,
            absolute,
            host,
            authority,
            chunks,
        } = bufs;
        if self.normalize.is_identity() {
            return form_key(req, &self.form, key, set_cookie, f);
        }
        let q = &self.normalize.query;
        q.apply(req.request_uri(), uri, chunks);
        let abs = req.absolute_target().map(|t| {
            q.apply(t, absolute, chunks);
            &absolute[..]
        });
        let lower = |from: Option<&[u8]>, to: &mut Vec<u8>| {
            to.clear();
            to.extend(from?.iter().map(u8::to_ascii_lowercase));
            Some(())
        };
        let lowercase = self.normalize.lowercase_host;
        let host_field = req
            .headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(b"host"))
            .map(|(_, v)| v)
            .or_else(|| req.uri_host());
        let host = lowercase
            .then(|| lower(host_field, host).map(|()| &host[..]))
            .flatten();
        let authority = lowercase
            .then(|| lower(req.absolute_authority(), authority).map(|()| &authority[..]))
            .flatten();
        let view = Normalized {
            req,
            uri,
            absolute: abs,
            host,
            authority,
        };
        form_key(&view, &self.form, key, set_cookie, f)
    }
}

/// The fields `form` reads, and whether it reads the scheme.
fn fields_of(form: &KeyForm) -> (Vec<FieldName>, bool) {
    let exact = |n: &[u8]| FieldName::Exact(n.into());
    let (mut fields, mut scheme) = (Vec::new(), false);
    match form {
        KeyForm::Template(t) => {
            for v in t.vars() {
                match v {
                    Var::Http(n) | Var::HttpJoined(n, _) => {
                        fields.push(FieldName::NginxVar(n.clone()))
                    }
                    Var::Cookie(_) => fields.push(exact(b"cookie")),
                    Var::Host | Var::RawHost => fields.push(exact(b"host")),
                    Var::Scheme => scheme = true,
                    Var::RequestUri
                    | Var::Uri
                    | Var::Args
                    | Var::Arg(_)
                    | Var::RemoteAddr
                    | Var::Path => {}
                }
            }
        }
        KeyForm::Haproxy(b) => match b {
            // HTTP/2's target is scheme://authority/path to HAProxy.
            Balance::Uri(_) => {
                fields.push(exact(b"host"));
                scheme = true;
            }
            Balance::Hdr { name, .. } | Balance::Hash(Fetch::Header(name)) => {
                fields.push(exact(name))
            }
            Balance::RdpCookie(_) | Balance::Hash(Fetch::Cookie(_)) => {
                fields.push(exact(b"cookie"))
            }
            Balance::UrlParam(_) | Balance::Source | Balance::Hash(Fetch::UrlParam(_)) => {}
        },
        KeyForm::HashPolicy(p) => {
            for (m, _) in &p.policies {
                match m {
                    Method::Header { name, .. } => fields.push(exact(name)),
                    Method::Cookie { .. } => fields.push(exact(b"cookie")),
                    Method::QueryParameter(_) | Method::SourceIp => {}
                }
            }
        }
    }
    (fields, scheme)
}

/// Calls `f` with what `form` takes of `req`.
fn form_key<R>(
    req: &impl Request,
    form: &KeyForm,
    buf: &mut Vec<u8>,
    set_cookie: &mut Option<String>,
    f: impl FnOnce(Taken<'_>) -> R,
) -> R {
    match form {
        KeyForm::HashPolicy(p) => {
            let h = p.hash(req);
            *set_cookie = h.set_cookie;
            f(h.hash.map_or(Taken::Nothing, Taken::Envoy))
        }
        // A `$uri` nginx refuses never comes from the router (it refuses
        // such a request, as nginx does); were it to, its key is empty.
        KeyForm::Template(t) => match t.piece(req) {
            Some(k) => f(nginx_key(k)),
            None => t.with_key(req, buf, |k| f(nginx_key(k.unwrap_or(b"")))),
        },
        KeyForm::Haproxy(Balance::Uri(u)) => {
            if let Some(t) = req.absolute_target() {
                return f(Taken::Bytes(u.key(t)));
            }
            match req.scheme_authority() {
                // HTTP/2: HAProxy hashes scheme://authority/path?query.
                Some((scheme, authority)) => {
                    buf.clear();
                    buf.extend_from_slice(scheme);
                    buf.extend_from_slice(b"://");
                    buf.extend_from_slice(authority);
                    buf.extend_from_slice(req.request_uri());
                    f(Taken::Bytes(u.key(buf)))
                }
                None => f(Taken::Bytes(u.key(req.request_uri()))),
            }
        }
        KeyForm::Haproxy(b) => f(b.key(req)),
    }
}

/// An nginx key: empty, it is routed round robin.
fn nginx_key(k: &[u8]) -> Taken<'_> {
    match k {
        b"" => Taken::Nothing,
        k => Taken::Bytes(k),
    }
}

/// A request as [`Normalize`] has keys read it.
struct Normalized<'a, R> {
    req: &'a R,
    uri: &'a [u8],
    absolute: Option<&'a [u8]>,
    /// The host field and the absolute-form authority, lowercased (with
    /// `lowercase_host`).
    host: Option<&'a [u8]>,
    authority: Option<&'a [u8]>,
}

impl<R: Request> Request for Normalized<'_, R> {
    fn request_uri(&self) -> &[u8] {
        self.uri
    }

    fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.req.headers().map(|(n, v)| match self.host {
            Some(h) if n.eq_ignore_ascii_case(b"host") => (n, h),
            _ => (n, v),
        })
    }

    fn absolute_authority(&self) -> Option<&[u8]> {
        self.authority.or_else(|| self.req.absolute_authority())
    }

    fn remote_addr(&self) -> Option<IpAddr> {
        self.req.remote_addr()
    }

    fn sockets(&self) -> Option<(std::net::SocketAddr, std::net::SocketAddr)> {
        self.req.sockets()
    }

    fn tls(&self) -> bool {
        self.req.tls()
    }

    fn absolute_target(&self) -> Option<&[u8]> {
        self.absolute
    }

    fn scheme_authority(&self) -> Option<(&[u8], &[u8])> {
        self.req.scheme_authority()
    }

    fn uri_host(&self) -> Option<&[u8]> {
        self.host.or_else(|| self.req.uri_host())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Req<'a> {
        uri: &'a [u8],
        fields: Vec<(&'a [u8], &'a [u8])>,
    }

    impl Request for Req<'_> {
        fn request_uri(&self) -> &[u8] {
            self.uri
        }
        fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
            self.fields.iter().copied()
        }
    }

    fn taken(key: &RequestKey, req: &Req<'_>) -> Option<Vec<u8>> {
        let mut cookie = None;
        key.take(req, &mut KeyBufs::default(), &mut cookie, |t| match t {
            Taken::Bytes(b) => Some(b.to_vec()),
            Taken::Nothing => None,
            other => panic!("{other:?}"),
        })
    }

    fn template(t: &str, normalize: Normalize) -> RequestKey {
        RequestKey::new(KeyForm::Template(Template::parse(t).unwrap()), normalize)
    }

    #[test]
    fn a_normalized_host_and_query_are_what_every_variable_reads() {
        let n = Normalize {
            query: QueryRules {
                sort: true,
                ..QueryRules::default()
            },
            lowercase_host: true,
        };
        let req = Req {
            uri: b"/a?b=2&a=1",
            fields: vec![(b"Host", b"X.Test"), (b"X-Id", b"7")],
        };
        let key = template("$http_host$request_uri|$args|$arg_a|$http_x_id", n.clone());
        assert_eq!(
            taken(&key, &req).unwrap(),
            b"x.test/a?a=1&b=2|a=1&b=2|1|7".to_vec()
        );
        // As sent without normalization.
        let plain = template("$http_host$request_uri", Normalize::default());
        assert_eq!(taken(&plain, &req).unwrap(), b"X.Test/a?b=2&a=1".to_vec());
    }

    #[test]
    fn an_empty_key_is_nothing() {
        let key = template("$cookie_sid", Normalize::default());
        let req = Req {
            uri: b"/",
            fields: vec![],
        };
        assert_eq!(taken(&key, &req), None);
    }

    #[test]
    fn the_fields_a_key_reads_are_named() {
        let key = template("$scheme$host$http_x_user_id$cookie_a", Normalize::default());
        assert!(key.reads_field(b"X-User-Id"));
        assert!(key.reads_field(b"host"));
        assert!(key.reads_field(b"Cookie"));
        assert!(!key.reads_field(b"x-other"));
        assert!(key.reads_scheme());
        let plain = template("$request_uri$remote_addr", Normalize::default());
        assert!(!plain.reads_field(b"host") && !plain.reads_scheme());
        let hdr = RequestKey::new(
            KeyForm::Haproxy(Balance::parse("hdr(X-Tenant)").unwrap()),
            Normalize::default(),
        );
        assert!(hdr.reads_field(b"x-tenant") && !hdr.reads_field(b"x_tenant"));
    }
}
