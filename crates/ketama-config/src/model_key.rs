//! `[key]` and `[key.normalize]`: where the routing key comes from, and
//! how the request is read for it.

use serde::Deserialize;

/// `[key]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct KeySection {
    /// `path_query` (the default), `path`, `host_path` or `header`.
    pub source: Option<String>,
    /// nginx's `hash <template>`: literal text and `$variables`
    /// ([`ketama::nginx::Template`]), instead of `source`.
    pub template: Option<String>,
    /// The header, with `source = "header"`.
    pub header: Option<String>,
    /// HAProxy's `balance` line instead of `source`: `uri [path-only]
    /// [whole] [depth N] [len N]` or `hdr(NAME)`.
    pub balance: Option<String>,
    /// `[key.normalize]`: the target (and host) as every key source reads
    /// them.
    pub normalize: NormalizeSection,
    /// `[[key.hash_policy]]`: Envoy's `hash_policy` list instead of
    /// `source` (Envoy's and gRPC's schemes).
    pub hash_policy: Vec<HashPolicySection>,
    /// Whose reading of `hash_policy` applies: `envoy` (the default) or
    /// `grpc` (header policies only, values joined with commas).
    pub hash_policy_peer: Option<String>,
}

/// One `[[key.hash_policy]]`: exactly one of `header`, `cookie`,
/// `query_parameter` and `source_ip`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HashPolicySection {
    /// Hash this field's values.
    pub header: Option<String>,
    /// With `header`: rewrite each value first.
    pub regex_rewrite: Option<RegexRewriteSection>,
    /// Hash this cookie's value.
    pub cookie: Option<String>,
    /// With `cookie`: generate the cookie when absent, living this long
    /// (seconds; 0: a session cookie).
    pub ttl_s: Option<u64>,
    /// With `cookie` and `ttl_s`: the generated cookie's `Path`.
    pub path: Option<String>,
    /// With `cookie` and `ttl_s`: the generated cookie's attributes.
    pub attributes: Vec<CookieAttributeSection>,
    /// Hash this query parameter's first value.
    pub query_parameter: Option<String>,
    /// Hash the client's address.
    pub source_ip: bool,
    /// Stop at this policy once a hash exists.
    pub terminal: bool,
}

/// `regex_rewrite = { pattern = "...", substitution = "..." }`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RegexRewriteSection {
    /// An RE2 pattern.
    pub pattern: String,
    /// What replaces each match (`\\1` for a group).
    pub substitution: String,
}

/// `attributes = [{ name = "SameSite", value = "Lax" }]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CookieAttributeSection {
    /// The attribute's name.
    pub name: String,
    /// Its value (empty: the name alone).
    pub value: String,
}

/// `[key.normalize]` (off by default): the query and host rewritten for
/// the key only; the request is forwarded as sent.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct NormalizeSection {
    /// Sort the query's parameters (whole chunks, bytewise).
    pub sort_query: bool,
    /// Drop the parameters with these names.
    pub drop_query: Option<Vec<String>>,
    /// Keep only the parameters with these names.
    pub keep_query: Option<Vec<String>>,
    /// Lowercase the `Host` a key reads (`host_path`).
    pub lowercase_host: bool,
}
