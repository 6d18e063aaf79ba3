//! `[ring]`, `[migration]` and `[key]`: the rings, and the key each
//! request is routed by (a template, HAProxy's balance line, or Envoy's
//! hash policies), and how the request is read for it.

use ketama::key::RequestKey;
use ketama::RingSettings;

use super::{err, ring_of, KeyForm, Normalize};
use crate::model::{Config, NormalizeSection};
use crate::model_key::{HashPolicySection, KeySection};
use crate::ConfigError;

/// `[ring]`, `[migration]` (with `[migration.key]`) and `[key]`.
pub(super) fn rings_and_key(config: &Config, file: &str) -> Result<Keys, ConfigError> {
    let ring = ring_of(&config.ring, file, "ring")?;
    let new_ring = match &config.migration {
        None => None,
        Some(m) => {
            if m.global_bp > 10_000 {
                return Err(err(
                    file,
                    "migration.global_bp",
                    "over 10000 basis points: give 0 to 10000",
                ));
            }
            for (name, bp) in &m.scopes {
                if *bp > 10_000 {
                    return Err(err(
                        file,
                        format!("migration.scopes.{name}"),
                        "over 10000 basis points",
                    ));
                }
            }
            Some(ring_of(&m.ring, file, "migration.ring")?)
        }
    };
    let new_key = config.migration.as_ref().and_then(|m| m.key.as_ref());
    let mut rings = vec![(ring.compat, "ring.compat")];
    if let (Some(r), None) = (&new_ring, new_key) {
        rings.push((r.compat, "migration.ring"));
    }
    let key = request_key(&config.key, file, &rings)?;
    let new_key = match (new_key, &new_ring) {
        (Some(k), Some(r)) => Some(
            request_key(k, file, &[(r.compat, "migration.ring")]).map_err(|mut e| {
                e.key = format!("migration.{}", e.key);
                e
            })?,
        ),
        _ => None,
    };
    Ok(Keys {
        ring,
        new_ring,
        key,
        new_key,
    })
}

/// `[ring]`, `[migration]` and `[key]` validated.
pub(super) struct Keys {
    pub(super) ring: RingSettings,
    pub(super) new_ring: Option<RingSettings>,
    pub(super) key: RequestKey,
    pub(super) new_key: Option<RequestKey>,
}

/// `[key]` and `[key.normalize]` validated for rings of these schemes
/// (each named as errors should name its setting): the key every request
/// is routed by, as the router takes it. The command-line tools read a
/// `[key]` through this too, so that a key priced there is the router's.
pub fn request_key(
    k: &KeySection,
    file: &str,
    rings: &[(ketama::Scheme, &str)],
) -> Result<RequestKey, ConfigError> {
    let key = key_source(k, file)?;
    let envoy = |s: ketama::Scheme| {
        matches!(
            s,
            ketama::Scheme::EnvoyRingHash(_) | ketama::Scheme::Maglev(_)
        )
    };
    let source = key == KeyForm::Haproxy(ketama::haproxy::Balance::Source);
    let policy = matches!(key, KeyForm::HashPolicy(_));
    for &(scheme, name) in rings {
        if source && !matches!(scheme, ketama::Scheme::Haproxy(_)) {
            return Err(err(
                file,
                "key.balance",
                format!("balance source hashes the client's address as HAProxy does, which only a haproxy ring places; {name} is {scheme}: make it haproxy (or haproxy:FUNCTION[+avalanche])"),
            ));
        }
        if policy && !envoy(scheme) {
            return Err(err(
                file,
                "key.hash_policy",
                format!("hash policies make Envoy's 64-bit hash, which only envoy-ring-hash and maglev rings place; {name} is {scheme}: make it envoy-ring-hash (envoy-ring-hash:grpc for gRPC) or maglev"),
            ));
        }
    }
    Ok(RequestKey::new(key, normalize(&k.normalize, file)?))
}

/// `[[key.hash_policy]]` and `hash_policy_peer`.
fn hash_policy(
    k: &KeySection,
    file: &str,
) -> Result<ketama::envoy::policy::HashPolicy, ConfigError> {
    use ketama::envoy::policy::{CookieSpec, HashPolicy, Method, Peer, Rewrite};
    let peer = match k.hash_policy_peer.as_deref() {
        None | Some("envoy") => Peer::Envoy,
        Some("grpc") => Peer::Grpc,
        Some(other) => {
            return Err(err(
                file,
                "key.hash_policy_peer",
                format!("unknown peer {other:?}: envoy (Envoy's reading) or grpc (gRPC's: header policies, values joined with commas)"),
            ))
        }
    };
    let mut policies = Vec::new();
    for (i, p) in k.hash_policy.iter().enumerate() {
        let at = |what: &str| format!("key.hash_policy[{i}].{what}");
        let method = method(p, &at, file)?;
        let method = match method {
            "header" => {
                let name = p.header.as_deref().unwrap_or_default();
                let rewrite = match &p.regex_rewrite {
                    Some(r) => Some(
                        Rewrite::new(&r.pattern, &r.substitution)
                            .map_err(|m| err(file, at("regex_rewrite"), m))?,
                    ),
                    None => None,
                };
                Method::Header {
                    name: name.to_ascii_lowercase().into_bytes().into(),
                    rewrite,
                }
            }
            "cookie" => {
                let name = p.cookie.as_deref().unwrap_or_default();
                let generate = p.ttl_s.map(|ttl| CookieSpec {
                    ttl,
                    path: p.path.clone().unwrap_or_default(),
                    attributes: p
                        .attributes
                        .iter()
                        .map(|a| (a.name.clone(), a.value.clone()))
                        .collect(),
                });
                Method::Cookie {
                    name: name.as_bytes().into(),
                    generate,
                }
            }
            "query_parameter" => Method::QueryParameter(
                p.query_parameter
                    .as_deref()
                    .unwrap_or_default()
                    .as_bytes()
                    .into(),
            ),
            _ => Method::SourceIp,
        };
        if peer == Peer::Grpc && !matches!(method, Method::Header { .. }) {
            return Err(err(
                file,
                at("header"),
                "gRPC's ring_hash reads header policies only (gRFC A42): make this a header policy, or set hash_policy_peer = \"envoy\"",
            ));
        }
        policies.push((method, p.terminal));
    }
    Ok(HashPolicy { policies, peer })
}

/// Which one method a policy names, its companions checked.
fn method(
    p: &HashPolicySection,
    at: &impl Fn(&str) -> String,
    file: &str,
) -> Result<&'static str, ConfigError> {
    let named = [
        ("header", p.header.is_some()),
        ("cookie", p.cookie.is_some()),
        ("query_parameter", p.query_parameter.is_some()),
        ("source_ip", p.source_ip),
    ];
    let given: Vec<&str> = named.iter().filter(|(_, g)| *g).map(|(n, _)| *n).collect();
    let [m] = given[..] else {
        return Err(err(
            file,
            at("header"),
            format!("a hash policy names exactly one of header, cookie, query_parameter and source_ip (this one: {})", if given.is_empty() { "none".into() } else { given.join(", ") }),
        ));
    };
    for (name, value) in [
        ("header", &p.header),
        ("cookie", &p.cookie),
        ("query_parameter", &p.query_parameter),
    ] {
        if value.as_deref() == Some("") {
            return Err(err(
                file,
                at(name),
                format!("an empty {name} name: give the name as the request writes it"),
            ));
        }
    }
    if p.regex_rewrite.is_some() && m != "header" {
        return Err(err(
            file,
            at("regex_rewrite"),
            "regex_rewrite goes with a header policy only",
        ));
    }
    if m != "cookie" && (p.ttl_s.is_some() || p.path.is_some() || !p.attributes.is_empty()) {
        return Err(err(
            file,
            at("ttl_s"),
            "ttl_s, path and attributes go with a cookie policy only",
        ));
    }
    if m == "cookie" && p.ttl_s.is_none() && (p.path.is_some() || !p.attributes.is_empty()) {
        return Err(err(file, at("path"), "path and attributes describe the cookie generated with ttl_s: give ttl_s too, or remove them"));
    }
    Ok(m)
}

/// `[key]`: one of `balance`, `template` and `source` (with `header`).
fn key_source(k: &KeySection, file: &str) -> Result<KeyForm, ConfigError> {
    use ketama::nginx::{Template, Var};
    let source = k.source.as_deref();
    if let Some(b) = &k.balance {
        if source.is_some() || k.header.is_some() || k.template.is_some() {
            return Err(err(
                file,
                "key.balance",
                "give one of balance (HAProxy's form), template (nginx's) or source/header, not two",
            ));
        }
        return ketama::haproxy::Balance::parse(b)
            .map(KeyForm::Haproxy)
            .map_err(|m| err(file, "key.balance", m));
    }
    if !k.hash_policy.is_empty() {
        if source.is_some() || k.header.is_some() || k.template.is_some() {
            return Err(err(
                file,
                "key.hash_policy",
                "give hash_policy (Envoy's list) or template or source/header, not two",
            ));
        }
        return hash_policy(k, file).map(KeyForm::HashPolicy);
    }
    if k.hash_policy_peer.is_some() {
        return Err(err(
            file,
            "key.hash_policy_peer",
            "hash_policy_peer says whose reading of [[key.hash_policy]] applies: add the policies, or remove it",
        ));
    }
    if let Some(t) = &k.template {
        if source.is_some() || k.header.is_some() {
            return Err(err(
                file,
                "key.template",
                "give template or source/header, not both: a template says every source (source = \"path_query\" is template = \"$request_uri\", source = \"header\" is \"$http_NAME\")",
            ));
        }
        let t = Template::parse(t).map_err(|e| err(file, "key.template", e.to_string()))?;
        return Ok(KeyForm::Template(t));
    }
    let t = match source.unwrap_or("path_query") {
        "path_query" => Template::of(Var::RequestUri),
        "path" => Template::of(Var::Path),
        "host_path" => Template::host_path(),
        "header" => match &k.header {
            Some(h) if !h.is_empty() => {
                let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
                if !h.bytes().all(token) {
                    return Err(err(
                        file,
                        "key.header",
                        format!("{h:?} is not a header name: give the field's name as sent, e.g. X-Cache-Key"),
                    ));
                }
                let name = h.to_ascii_lowercase().replace('-', "_");
                Template::of(Var::Http(name.into_bytes().into()))
            }
            _ => {
                return Err(err(
                    file,
                    "key.header",
                    "source = \"header\" needs the header's name",
                ))
            }
        },
        other => {
            return Err(err(
                file,
                "key.source",
                format!("unknown source {other:?}: use path_query, path, host_path or header, or write a template"),
            ))
        }
    };
    Ok(KeyForm::Template(t))
}

/// `[key.normalize]`: `drop_query` or `keep_query`, not both; no empty
/// names.
fn normalize(n: &NormalizeSection, file: &str) -> Result<Normalize, ConfigError> {
    use ketama::query::{QueryFilter, QueryRules};
    let names = |key: &str, list: &[String]| {
        if let Some(i) = list.iter().position(|n| n.is_empty()) {
            return Err(err(
                file,
                format!("key.normalize.{key}[{i}]"),
                "an empty name: give the parameter's name as the query writes it",
            ));
        }
        Ok(list.iter().map(|n| n.as_bytes().into()).collect())
    };
    let filter = match (&n.drop_query, &n.keep_query) {
        (Some(_), Some(_)) => return Err(err(
            file,
            "key.normalize.keep_query",
            "give drop_query (the names left out) or keep_query (the only names kept), not both",
        )),
        (Some(d), None) => QueryFilter::Drop(names("drop_query", d)?),
        (None, Some(k)) => QueryFilter::Keep(names("keep_query", k)?),
        (None, None) => QueryFilter::All,
    };
    Ok(Normalize {
        query: QueryRules {
            sort: n.sort_query,
            filter,
        },
        lowercase_host: n.lowercase_host,
    })
}
