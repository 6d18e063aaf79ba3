//! Any bytes as the router's cache file (the last applied config and
//! rollout, read at start when etcd is away): parsed by the router's own
//! code (`crates/ketama-router/src/control/cache.rs`, compiled in by
//! path), then each entry as the router would apply it (the shared config
//! through `ketama_config::parse_shared`, the rollout through
//! `parse_rollout`). Nothing panics; a cache that parses writes out and
//! parses back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/ketama-router/src/control/cache.rs"]
#[allow(dead_code)]
mod cache;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(c) = cache::parse_cache(text) else { return };
    if let Some(config) = &c.config {
        let _ = ketama_config::parse_shared(&config.text, "cache config");
    }
    if let Some(rollout) = &c.rollout {
        let _ = ketama_config::parse_rollout(rollout.text.as_bytes());
    }
    let written = serde_json::to_string_pretty(&c).expect("a parsed cache writes out");
    assert_eq!(cache::parse_cache(&written).expect("and parses back"), c);
});
