//! `[cache_status]`: how the router reads each response's cache result
//! (see [`crate::cache_status`]); a routing section, shared by a fleet
//! through `PREFIX/config`.

use serde::Deserialize;

/// `[cache_status]`: the header read and, for a header other than
/// `Cache-Status`, the values that mean hit, miss and bypass (matched
/// ignoring case).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CacheStatusSection {
    /// The response header (default `cache-status`, read as RFC 9211's
    /// structured list; any other is a comma-separated list whose last
    /// value is matched).
    pub header: String,
    /// Values that are answers from the cache (default nginx's `HIT`,
    /// `STALE`, `UPDATING`).
    pub hit: Vec<String>,
    /// Values where the cache went to the origin (default `MISS`,
    /// `EXPIRED`, `REVALIDATED`).
    pub miss: Vec<String>,
    /// Values where the cache did not take part (default `BYPASS`).
    pub bypass: Vec<String>,
}

impl Default for CacheStatusSection {
    fn default() -> Self {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        CacheStatusSection {
            header: "cache-status".into(),
            hit: v(&["HIT", "STALE", "UPDATING"]),
            miss: v(&["MISS", "EXPIRED", "REVALIDATED"]),
            bypass: v(&["BYPASS"]),
        }
    }
}

impl CacheStatusSection {
    /// The rules this section describes.
    pub fn rules(&self) -> crate::cache_status::CacheRules {
        crate::cache_status::CacheRules::new(&self.header, &self.hit, &self.miss, &self.bypass)
    }
}
