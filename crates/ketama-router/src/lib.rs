//! ketama-router: a backend router on Cloudflare's Pingora that sends each
//! request to the one backend holding it, by consistent hashing of the URL
//! with ketama.
//!
//! - configuration: [`ketama_config`] (the TOML model, validation, and the
//!   routing plan: rings, label requirements, backends);
//! - [`proxy`]: routing key and label rule, the library's routing decision,
//!   the first healthy backend in failover order, the next on connect
//!   failure, 502 when none is left;
//! - [`state`]: the routing state a request uses, and the read-only
//!   handle on it; [`cell`]: its one owner, which every change (reload,
//!   admin rollout, discovery, etcd) goes through, and the rule of what
//!   survives each;
//! - [`discovery`]: backends from DNS (SRV, A/AAAA), re-resolved, a change
//!   rebuilt off the request path;
//! - [`health`] (each backend's health), [`checker`] (active checks), [`reload`] (SIGHUP and `POST /reload`),
//!   [`admin`] (the admin API), [`metrics`] (counters and their
//!   exposition);
//! - [`framing`] (request framing as strict as nginx), [`conn`] (client
//!   connection limit and head/idle deadlines), [`signals`] (handlers
//!   from the first instruction);
//! - [`control`] (steering through etcd), [`clock`] (times as `/status`
//!   and the access log show them), [`access_log`] (one line per
//!   request, written off the request path);
//! - [`server`]: the composition root, the Pingora server assembled from
//!   all of them;
//!   [`demo`] and [`origin`]: the built-in demo and its loopback origins.
//!
//! Pingora users who only want ketama as a `BackendSelection` depend on
//! `ketama-pingora` instead.
//!
//! ```no_run
//! let early = ketama_router::signals::Early::install()?;
//! let v = ketama_config::load("router.toml".as_ref())?;
//! let start = ketama_router::server::Start { upgrade: false, early: early.clone() };
//! let source = ketama_router::cell::ConfigSource::File("router.toml".into());
//! let (server, _cell) = ketama_router::server::build(v, source, start)?;
//! ketama_router::server::run(server, early);
//! # #[allow(unreachable_code)]
//! # Ok::<(), anyhow::Error>(())
//! ```

#![deny(missing_docs)]

pub mod access_log;
pub mod admin;
pub mod cell;
pub mod checker;
pub mod clock;
pub mod conn;
pub mod control;
pub mod demo;
pub mod discovery;
pub mod drain;
pub mod framing;
pub mod health;
pub mod http1;
pub mod listen;
pub mod memory;
pub mod metrics;
pub mod origin;
pub mod policy;
pub mod proxy;
pub mod reload;
pub mod reqline;
pub mod server;
pub mod signals;
pub mod state;
pub mod tls;
pub mod upgrade;
