//! The cache file: the last applied config and rollout, to start from
//! when etcd is unreachable. Written beside and renamed over, so a crash
//! never leaves half a file.

use std::path::Path;

use ketama_fleet::etcd::Kv;
use serde::{Deserialize, Serialize};

/// A key's applied value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The value as written.
    pub text: String,
    /// Its mod revision.
    pub revision: i64,
}

impl Applied {
    /// The applied form of an etcd value.
    pub fn of(kv: &Kv) -> Self {
        Applied {
            text: String::from_utf8_lossy(&kv.value).into_owned(),
            revision: kv.mod_revision,
        }
    }
}

/// What the cache file holds: the last applied config and rollout.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cache {
    /// The prefix they came from.
    pub prefix: String,
    /// `PREFIX/config`.
    pub config: Option<Applied>,
    /// `PREFIX/rollout`.
    pub rollout: Option<Applied>,
}

/// Parses a cache file's text (`Err`: what is wrong with it).
pub fn parse_cache(text: &str) -> Result<Cache, serde_json::Error> {
    serde_json::from_str(text)
}

/// Reads the cache file; an unreadable one is logged and ignored.
pub fn read_cache(path: &Path) -> Option<Cache> {
    let text = std::fs::read_to_string(path).ok()?;
    match parse_cache(&text) {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::warn!(file = %path.display(), "ignoring an unreadable cache file: {e}");
            None
        }
    }
}

/// Writes the cache file atomically (a temporary file renamed over).
pub fn write_cache(path: &Path, cache: &Cache) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(cache)?)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache.json");
        let cache = Cache {
            prefix: "/p/".into(),
            config: Some(Applied {
                text: "[[backends]]\n".into(),
                revision: 7,
            }),
            rollout: None,
        };
        write_cache(&path, &cache).unwrap();
        assert_eq!(read_cache(&path), Some(cache));
        std::fs::write(&path, "{\"prefix\": 3}").unwrap();
        assert_eq!(read_cache(&path), None);
        assert!(
            parse_cache("{\"prefix\":\"/\",\"config\":{\"text\":\"x\",\"revision\":\"7\"}}")
                .is_err()
        );
    }
}
