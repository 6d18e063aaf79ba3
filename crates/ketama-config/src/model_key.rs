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
