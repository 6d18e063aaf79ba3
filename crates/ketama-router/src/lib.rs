//! ketama-router: a reverse proxy that sends each request to the one
//! backend holding it, by consistent hashing of the URL with ketama, and
//! hands the backend what nginx would hand it.
//!
//! Every request, HTTP/1 or HTTP/2, takes one path:
//!
//! ```text
//! accept -> head -> route -> upstream -> body -> keep-alive
//! ```
//!
//! - **accept**: [`listen`] (the listening sockets, bound or taken over
//!   at a graceful upgrade through [`handover`]), then [`conn`] (the
//!   connection limit, the TLS handshake with [`tls`], the protocol);
//! - **head**, **upstream**, **body**, **keep-alive**: [`engine`], the
//!   router's own HTTP engine (HTTP/1 and, with the `h2` crate, HTTP/2),
//!   with nginx 1.22's rules for what a client may send and what a
//!   backend is handed ([`reqline`]: the request line);
//! - **route**: [`policy`] (the routing key and label rule, the library's
//!   routing decision, the first healthy backend in failover order, which
//!   failures are a backend's and which are retried);
//! - [`state`]: the routing state a request uses, and the read-only
//!   handle on it; [`cell`]: its one owner, which every change (reload,
//!   admin rollout, discovery, etcd) goes through, and the rule of what
//!   survives each; configuration comes from [`ketama_config`];
//! - [`discovery`] (backends from DNS), [`health`] and [`checker`]
//!   (passive and active health), [`reload`] (SIGHUP and `POST /reload`),
//!   [`control`] (steering through etcd), [`admin`] (the admin API),
//!   [`metrics`], [`access_log`], [`clock`];
//! - [`server`]: the composition root; [`process`]: the worker runtimes,
//!   background services and signals ([`signals`] from the first
//!   instruction, [`drain`] for a graceful stop, [`upgrade`] for the
//!   upgrade socket's rules); [`memory`]; [`demo`] and [`origin`]: the
//!   built-in demo and its loopback origins.
//!
//! Pingora users who only want ketama as a `BackendSelection` depend on
//! `ketama-pingora` instead.
//!
//! ```no_run
//! let early = ketama_router::signals::Early::install()?;
//! let v = ketama_config::load("router.toml".as_ref())?;
//! let start = ketama_router::server::Start { upgrade: false, early };
//! let source = ketama_router::cell::ConfigSource::File("router.toml".into());
//! let (server, _cell) = ketama_router::server::build(v, source, start)?;
//! ketama_router::server::run(server);
//! # #[allow(unreachable_code)]
//! # Ok::<(), anyhow::Error>(())
//! ```

#![deny(missing_docs)]

pub mod access_log;
pub mod admin;
pub mod cell;
pub mod checker;
pub use ketama_config::clock;
pub mod conn;
pub mod control;
pub mod demo;
pub mod discovery;
pub mod drain;
pub mod engine;
pub mod handover;
pub mod health;
pub mod listen;
pub mod memory;
pub mod metrics;
pub mod origin;
pub mod policy;
pub mod probe;
pub mod process;
pub mod reload;
pub mod reqline;
pub mod server;
pub mod service;
pub mod signals;
pub mod state;
pub mod tls;
pub mod upgrade;
