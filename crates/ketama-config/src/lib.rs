//! ketama-router's configuration, without Pingora: the TOML model
//! ([`model`]), its validation ([`parse`], [`load`]: every error names the
//! file and the key), the routing plan it builds ([`Plan`]: rings, label
//! requirements, backends in node order) and the rollout document of the
//! admin API ([`parse_rollout`]), and the pure part of DNS discovery
//! ([`discovery`]: what answers mean as backends and what each hashes as).
//! The router, `ketama` tools and fuzz targets share it, so a configuration
//! is judged the same way everywhere.
//!
//! ```
//! let text = r#"
//! [admin]
//! listen = "127.0.0.1:9901"
//! auth = false
//!
//! [[backends]]
//! address = "127.0.0.1:9001"
//!
//! [[backends]]
//! address = "127.0.0.1:9002"
//! weight = 2
//! "#;
//! let v = ketama_config::parse(text, "router.toml")?;
//! let plan = ketama_config::Plan::build(&v, &[])?; // no discovered backends
//! let mut route = plan.table.route(b"/a/b.jpg", None, None)?;
//! let first = plan.table.next(&mut route)?.expect("two backends serve");
//! println!("/a/b.jpg goes to {}", plan.backends[first].server);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod cache_status;
pub mod clock;
pub mod discovery;
pub mod keys;
pub mod model;
mod model_cache;
mod model_key;
mod model_log;
mod model_tls;
pub mod pem;
mod plan;
mod position;
mod rollout;
mod validate;

pub use discovery::Discovered;
pub use model::{AccessLogSection, Config, LogFormat, Routing};
pub use plan::{Plan, PlannedBackend, PlannedRule};
pub use rollout::{parse_rollout, rollout_json, RolloutError};
pub use validate::{
    check_shared, key_section, load, parse, parse_shared, request_key, Control, KeyForm, Matcher,
    Normalize, Validated,
};

/// A configuration error: the file, the key and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {key}: {message}")]
pub struct ConfigError {
    /// The config file.
    pub file: String,
    /// The key at fault, as a TOML path (`backends[2].address`).
    pub key: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// This crate's README (what crates.io shows), compiled and run as a
/// doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctests;
