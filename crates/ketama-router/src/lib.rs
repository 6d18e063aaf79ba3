//! ketama-router: a backend router on Cloudflare's Pingora that sends each
//! request to the one backend holding it, by consistent hashing of the URL
//! with ketama.
//!
//! - [`config`]: the TOML configuration, validated with errors naming the
//!   key and the file.
//! - [`selection`]: ketama as a Pingora `BackendSelection`, a drop-in for
//!   `LoadBalancer<KetamaHashing>`.
//! - [`proxy`]: key, ring or migration, the first healthy backend in
//!   failover order, the next one on connect failure, 502 when none is left.
//! - [`state`]: the routing state behind `ArcSwap`, swapped whole on reload.
//! - [`health`], [`admin`], [`metrics`]: active checks, the admin API, the
//!   Prometheus text.
//!
//! ```no_run
//! let v = ketama_router::config::load("router.toml".as_ref())?;
//! let (server, _app) = ketama_router::server::build(v, Some("router.toml".into()), None)?;
//! server.run_forever();
//! # #[allow(unreachable_code)]
//! # Ok::<(), anyhow::Error>(())
//! ```

#![deny(missing_docs)]

pub mod admin;
pub mod config;
pub mod demo;
pub mod health;
pub mod metrics;
pub mod proxy;
pub mod selection;
pub mod server;
pub mod state;
