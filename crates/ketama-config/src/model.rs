//! The configuration's shape: one struct per TOML section, with defaults.
//! Deserialising checks types and unknown keys; [`crate::parse`] checks
//! the rest.

use std::collections::HashMap;

use serde::Deserialize;

pub use crate::model_cache::CacheStatusSection;
pub use crate::model_key::{KeySection, NormalizeSection};
pub use crate::model_log::{AccessLogSection, LogFormat};
pub use crate::model_tls::{CertificateSection, TlsSection, UpstreamTlsSection};

/// The whole configuration.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Proxy settings.
    #[serde(default)]
    pub server: ServerSection,
    /// The admin API.
    pub admin: AdminSection,
    /// The ring.
    #[serde(default)]
    pub ring: RingSection,
    /// The routing key.
    #[serde(default)]
    pub key: KeySection,
    /// The static backends, in configuration order.
    #[serde(default)]
    pub backends: Vec<BackendSection>,
    /// Backends from DNS (SRV or A/AAAA), beside the static ones.
    #[serde(default)]
    pub discovery: Vec<DiscoverySection>,
    /// Which requests require which labels.
    #[serde(default)]
    pub label_rules: Vec<LabelRule>,
    /// An optional migration to a new ring.
    pub migration: Option<MigrationSection>,
    /// Active health checks.
    #[serde(default)]
    pub health: HealthSection,
    /// Bounded loads (absent: off).
    pub balance: Option<BalanceSection>,
    /// Steering through etcd (absent: this file is the only source).
    pub control: Option<ControlSection>,
    /// TLS listeners (absent: none).
    pub tls: Option<TlsSection>,
    /// TLS to backends with `tls = true`.
    #[serde(default)]
    pub upstream_tls: UpstreamTlsSection,
    /// The access log (absent: none).
    pub access_log: Option<AccessLogSection>,
    /// How each response's cache result is read.
    #[serde(default)]
    pub cache_status: CacheStatusSection,
}

/// The routing part of a configuration, as a fleet shares it through etcd
/// (`PREFIX/config`): every section but the local ones (`[server]`,
/// `[admin]`, `[control]`: listeners, the admin API and how to reach etcd
/// stay in each router's own file).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Routing {
    /// The ring.
    #[serde(default)]
    pub ring: RingSection,
    /// The routing key.
    #[serde(default)]
    pub key: KeySection,
    /// The static backends, in configuration order.
    #[serde(default)]
    pub backends: Vec<BackendSection>,
    /// Backends from DNS.
    #[serde(default)]
    pub discovery: Vec<DiscoverySection>,
    /// Which requests require which labels.
    #[serde(default)]
    pub label_rules: Vec<LabelRule>,
    /// An optional migration to a new ring.
    pub migration: Option<MigrationSection>,
    /// Active health checks.
    #[serde(default)]
    pub health: HealthSection,
    /// Bounded loads (absent: off).
    pub balance: Option<BalanceSection>,
    /// TLS to backends with `tls = true`.
    #[serde(default)]
    pub upstream_tls: UpstreamTlsSection,
    /// How each response's cache result is read.
    #[serde(default)]
    pub cache_status: CacheStatusSection,
}

impl Config {
    /// This configuration with its routing sections replaced by `shared`'s.
    pub fn with_routing(&self, shared: Routing) -> Config {
        Config {
            server: self.server.clone(),
            admin: self.admin.clone(),
            control: self.control.clone(),
            tls: self.tls.clone(),
            access_log: self.access_log.clone(),
            ring: shared.ring,
            key: shared.key,
            backends: shared.backends,
            discovery: shared.discovery,
            label_rules: shared.label_rules,
            migration: shared.migration,
            health: shared.health,
            balance: shared.balance,
            upstream_tls: shared.upstream_tls,
            cache_status: shared.cache_status,
        }
    }
}

/// `[control]`: the routing config and the rollout come from etcd (see
/// the README's fleet section).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ControlSection {
    /// etcd endpoint URLs (`http://` or `https://`), tried in order.
    pub etcd: Vec<String>,
    /// The fleet's key prefix (`/ketama/prod/`).
    pub prefix: String,
    /// This router's scope (data center): picks the rollout's per-scope
    /// share. Replaces `[migration] scope`.
    pub scope: Option<String>,
    /// This router's id in `PREFIX/routers/` (default: host name and first
    /// listen address).
    pub id: Option<String>,
    /// Where the last applied config and rollout are kept, to start from
    /// when etcd is unreachable.
    pub cache_file: Option<String>,
    /// Environment variable holding the etcd user name (auth enabled).
    pub user_env: Option<String>,
    /// Environment variable holding the etcd password.
    pub password_env: Option<String>,
    /// PEM file of the CA that signed etcd's certificate.
    pub ca_file: Option<String>,
    /// PEM client certificate, for etcd's client certificate auth.
    pub cert_file: Option<String>,
    /// PEM key of `cert_file`.
    pub key_file: Option<String>,
    /// Connect and request timeout.
    #[serde(default = "control_timeout_ms")]
    pub timeout_ms: u64,
    /// The registration lease's time to live.
    #[serde(default = "control_lease_ttl_s")]
    pub lease_ttl_s: u64,
    /// First retry delay after etcd fails; doubles up to `retry_max_ms`,
    /// with jitter.
    #[serde(default = "control_retry_min_ms")]
    pub retry_min_ms: u64,
    /// Longest retry delay.
    #[serde(default = "control_retry_max_ms")]
    pub retry_max_ms: u64,
    /// A silent watch is reopened after this long (finds half-open
    /// connections).
    #[serde(default = "control_watch_idle_ms")]
    pub watch_idle_ms: u64,
    /// How often this router writes its cache and answer counters into its
    /// registration (`PREFIX/routers/ID`).
    #[serde(default = "control_report_interval_ms")]
    pub report_interval_ms: u64,
}

fn control_timeout_ms() -> u64 {
    2000
}
fn control_lease_ttl_s() -> u64 {
    10
}
fn control_retry_min_ms() -> u64 {
    100
}
fn control_retry_max_ms() -> u64 {
    5000
}
fn control_watch_idle_ms() -> u64 {
    60_000
}
fn control_report_interval_ms() -> u64 {
    5000
}

/// `[balance]`: consistent hashing with bounded loads.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BalanceSection {
    /// How far above the average in-flight load a backend may go, in
    /// percent (125: 1.25x; 100 to 1000).
    pub factor: u32,
}

/// `[server]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSection {
    /// Proxy listeners.
    pub listen: Vec<String>,
    /// Worker threads.
    pub threads: usize,
    /// Failovers after a connect failure.
    pub retries: usize,
    /// Whether to add `x-ketama-backend` and `x-ketama-ring`.
    pub response_headers: bool,
    /// Share of requests whose selection is logged through `tracing`.
    pub trace_sample: f64,
    /// Seconds to wait on shutdown.
    pub grace_period_seconds: u64,
    /// Idle connections kept to backends (all backends together).
    pub upstream_keepalive_pool_size: usize,
    /// Let idle worker threads take work from busy ones.
    pub work_stealing: bool,
    /// Largest request head (URI and headers) proxied; larger gets 431.
    pub max_header_bytes: usize,
    /// Deadline for a client's whole request head, from the connection's
    /// accept (or a kept-alive request's first byte): a head trickled a byte
    /// at a time is closed (with a best-effort 408). nginx's
    /// `client_header_timeout`.
    pub client_header_timeout_ms: u64,
    /// How long an idle kept-alive client connection waits for its next
    /// request. nginx's `keepalive_timeout`.
    pub keepalive_timeout_ms: u64,
    /// Streams one HTTP/2 connection may open; then `GOAWAY`, the client
    /// opens another connection. nginx's `keepalive_requests`.
    pub keepalive_requests: u64,
    /// The longest life of an HTTP/2 connection; then `GOAWAY`, its open
    /// streams finished. nginx's `keepalive_time`.
    pub keepalive_time_ms: u64,
    /// The cap on a gRPC call's deadline (its `grpc-timeout`); `None`: the
    /// client's deadline as it is. Envoy's `grpc_timeout_header_max`.
    pub grpc_timeout_max_ms: Option<u64>,
    /// The longest wait between two reads of a request body. nginx's
    /// `client_body_timeout`.
    pub client_body_timeout_ms: u64,
    /// The longest wait for a client to take response bytes: past it with
    /// no byte taken, an HTTP/1 connection is closed and an HTTP/2 stream
    /// reset; the clock restarts whenever the client takes bytes. nginx's
    /// `send_timeout`.
    pub send_timeout_ms: u64,
    /// Client connections open at once; past it new ones are closed at
    /// accept. `None`: derived from the file limit, leaving a reserve for
    /// upstream connections, health checks and the admin API.
    pub max_connections: Option<usize>,
    /// Connect timeout to a backend; a timeout fails over like a refused
    /// connect. Overridable per backend.
    pub connect_timeout_ms: u64,
    /// Longest wait for a backend's response bytes. Overridable per backend.
    pub read_timeout_ms: u64,
    /// Longest wait to write to a backend. Overridable per backend.
    pub write_timeout_ms: u64,
    /// Failed attempts (connect errors, timeouts) within `fail_timeout_ms`
    /// that take a backend out of rotation for `fail_timeout_ms`, without
    /// waiting for the active checks; 0 turns this off. nginx's
    /// `max_fails`. Overridable per backend.
    pub max_fails: u32,
    /// nginx's `fail_timeout`. Overridable per backend.
    pub fail_timeout_ms: u64,
    /// Add `X-Forwarded-For` (appended) and `X-Forwarded-Proto` to
    /// proxied requests.
    pub forwarded_headers: bool,
    /// Plain listeners also take HTTP/2 with prior knowledge (h2c).
    pub h2c: bool,
    /// HTTP/1.1 requests a client pipelines (sends before the answers to
    /// the earlier ones) are all answered, in order, one at a time, as
    /// nginx answers them; `false`: the connection closes after the first
    /// answer, and the client retries the rest (Pingora's default).
    pub pipelining: bool,
    /// Streams open at once on one HTTP/2 connection (plain and TLS
    /// listeners).
    pub h2_max_concurrent_streams: u32,
    /// Bytes each HTTP/1 body read asks for, from backends and from
    /// clients. A body of known length takes no more than its length and
    /// one byte; a large body moves in fewer, larger socket calls. nginx's
    /// `proxy_buffer_size` and `client_body_buffer_size` in one.
    pub body_buffer_bytes: usize,
    /// Whether `_` is a request header name byte like any other
    /// (nginx's `underscores_in_headers`). `false`: a field whose name
    /// holds one is ignored, neither routed on nor forwarded, so a
    /// backend cannot take a client's `X_Forwarded_For` for the router's
    /// `X-Forwarded-For`.
    pub underscores_in_headers: bool,
    /// Request fields removed before routing and forwarding (any case):
    /// fields a client may not send through the router, such as one its
    /// backends trust from their peers only.
    pub strip_request_headers: Vec<String>,
    /// The Unix socket a graceful upgrade hands the listeners over
    /// (`ketama-router --upgrade`), in a directory closed to other users.
    /// `None`: `upgrade.sock` in systemd's `$RUNTIME_DIRECTORY`, else no
    /// upgrade socket (`--upgrade` is refused).
    pub upgrade_sock: Option<String>,
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            listen: vec!["127.0.0.1:8080".into()],
            threads: 1,
            retries: 2,
            response_headers: true,
            trace_sample: 0.0,
            grace_period_seconds: 1,
            upstream_keepalive_pool_size: 128,
            // Measured: per-thread runtimes without stealing serve about 15%
            // more requests per second here (scripts/loadbench.sh).
            work_stealing: false,
            max_header_bytes: 32 * 1024,
            client_header_timeout_ms: 60_000,
            keepalive_timeout_ms: 75_000,
            keepalive_requests: 1_000,
            keepalive_time_ms: 3_600_000,
            grpc_timeout_max_ms: None,
            client_body_timeout_ms: 60_000,
            send_timeout_ms: 60_000,
            max_connections: None,
            connect_timeout_ms: 1_000,
            read_timeout_ms: 60_000,
            write_timeout_ms: 60_000,
            max_fails: 1,
            fail_timeout_ms: 10_000,
            forwarded_headers: true,
            h2c: false,
            pipelining: true,
            h2_max_concurrent_streams: 128,
            // Measured: 256 KiB reads move a 1 MiB body in half the socket
            // calls of Pingora's 64 KiB (docs/router-benchmarks.md).
            body_buffer_bytes: 256 * 1024,
            underscores_in_headers: false,
            strip_request_headers: Vec::new(),
            upgrade_sock: None,
        }
    }
}

/// `[admin]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AdminSection {
    /// Loopback address of the admin API.
    pub listen: String,
    /// The bearer token.
    pub token: Option<String>,
    /// An environment variable holding the token.
    pub token_env: Option<String>,
    /// `false` disables authentication (loopback only, for demos).
    #[serde(default = "yes")]
    pub auth: bool,
}

fn yes() -> bool {
    true
}

/// `[ring]` and `[migration.ring]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RingSection {
    /// Scheme name (`scheme` is read as the same key).
    #[serde(alias = "scheme")]
    pub compat: String,
    /// Layout name.
    pub layout: String,
    /// Points per weight unit.
    pub point_multiple: u32,
}

impl Default for RingSection {
    fn default() -> Self {
        RingSection {
            compat: "nginx".into(),
            layout: "compact".into(),
            point_multiple: ketama::DEFAULT_POINT_MULTIPLE,
        }
    }
}

/// `[[backends]]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackendSection {
    /// `IP:PORT`.
    pub address: String,
    /// Weight (0: drained).
    #[serde(default = "one")]
    pub weight: u32,
    /// Labels.
    #[serde(default)]
    pub labels: Vec<String>,
    /// Administratively down.
    #[serde(default)]
    pub down: bool,
    /// HAProxy's server id (`[ring] compat = "haproxy"` only; without it,
    /// HAProxy's counter rule over the backends' order).
    pub id: Option<u32>,
    /// This backend's connect timeout (default: `server.connect_timeout_ms`).
    pub connect_timeout_ms: Option<u64>,
    /// This backend's read timeout (default: `server.read_timeout_ms`).
    pub read_timeout_ms: Option<u64>,
    /// This backend's write timeout (default: `server.write_timeout_ms`).
    pub write_timeout_ms: Option<u64>,
    /// This backend's `max_fails` (default: `server.max_fails`).
    pub max_fails: Option<u32>,
    /// This backend's `fail_timeout_ms` (default: `server.fail_timeout_ms`).
    pub fail_timeout_ms: Option<u64>,
    /// Reach it over TLS (`[upstream_tls]` settings).
    #[serde(default)]
    pub tls: bool,
    /// The name sent as SNI and verified in its certificate (with `tls`).
    pub sni: Option<String>,
    /// Speak HTTP/2 to it with prior knowledge, in plaintext (gRPC's
    /// `grpc://`, nginx's `grpc_pass`).
    #[serde(default)]
    pub h2c: bool,
}

fn one() -> u32 {
    1
}

/// `[[label_rules]]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LabelRule {
    /// Match on the Host header (without port).
    pub host: Option<String>,
    /// Match on a request header...
    pub header: Option<String>,
    /// ...having this value.
    pub value: Option<String>,
    /// Labels required when the rule matches.
    pub require: Vec<String>,
}

/// `[migration]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MigrationSection {
    /// The new ring's settings.
    pub ring: RingSection,
    /// Global rollout in basis points.
    #[serde(default)]
    pub global_bp: u32,
    /// Per-scope rollouts in basis points.
    #[serde(default)]
    pub scopes: HashMap<String, u32>,
    /// This router's scope.
    pub scope: Option<String>,
    /// A request header telling a key's new owner its previous one (the
    /// old ring's first eligible backend, as configured), on requests the
    /// new ring routes elsewhere; off when absent.
    pub previous_owner_header: Option<String>,
    /// `[migration.key]`: the new side's key, when the migration changes
    /// the key (the old side keeps `[key]`).
    pub key: Option<KeySection>,
}

/// `[health]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HealthSection {
    /// Whether to run checks.
    pub enabled: bool,
    /// Path requested.
    pub path: String,
    /// Time between checks.
    pub interval_ms: u64,
    /// Time a check may take.
    pub timeout_ms: u64,
    /// Successes that make an unhealthy backend healthy.
    pub healthy_threshold: u32,
    /// Failures that make a healthy backend unhealthy.
    pub unhealthy_threshold: u32,
    /// Check with gRPC's health protocol (`grpc.health.v1.Health/Check`)
    /// instead of `GET path`.
    pub grpc: bool,
    /// The service asked about with `grpc` (empty: the server as a whole).
    pub grpc_service: String,
}

impl Default for HealthSection {
    fn default() -> Self {
        HealthSection {
            enabled: true,
            path: "/health".into(),
            interval_ms: 1000,
            timeout_ms: 500,
            healthy_threshold: 1,
            unhealthy_threshold: 2,
            grpc: false,
            grpc_service: String::new(),
        }
    }
}

/// `[[discovery]]`: backends published in DNS, re-resolved around the
/// records' TTL.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DiscoverySection {
    /// An SRV name (`_cache._tcp.service.consul`): one backend per target
    /// and port.
    pub srv: Option<String>,
    /// A host name (`cache.internal`): one backend per A/AAAA address,
    /// with `port`.
    pub name: Option<String>,
    /// The port of a `name` source's backends.
    pub port: Option<u16>,
    /// SRV: `"equal"` (default) or `"srv"` (the records' weights); a name:
    /// a number (default 1).
    pub weight: Option<DiscoveryWeight>,
    /// Labels every backend of the source carries.
    #[serde(default)]
    pub labels: Vec<String>,
    /// Name servers (`IP:PORT`); empty: the system's (`/etc/resolv.conf`).
    #[serde(default)]
    pub resolvers: Vec<String>,
    /// The shortest time between resolutions (also the retry after an
    /// error), whatever the TTL.
    #[serde(default = "discovery_min_interval")]
    pub min_interval_ms: u64,
    /// The longest time between resolutions, whatever the TTL.
    #[serde(default = "discovery_max_interval")]
    pub max_interval_ms: u64,
    /// How long one resolution may take.
    #[serde(default = "discovery_timeout")]
    pub timeout_ms: u64,
    /// A resolution that would remove more than this share of the source's
    /// weight is held until seen `confirm` times in a row.
    #[serde(default = "discovery_max_remove_share")]
    pub max_remove_share: f64,
    /// See `max_remove_share`.
    #[serde(default = "discovery_confirm")]
    pub confirm: u32,
    /// At start, wait until this source has resolved (instead of starting
    /// without it).
    #[serde(default)]
    pub wait_for_discovery: bool,
    /// Reach its backends over TLS (`[upstream_tls]` settings).
    #[serde(default)]
    pub tls: bool,
    /// The SNI sent and verified (default: the SRV target, or `name`).
    pub sni: Option<String>,
    /// Speak HTTP/2 with prior knowledge to its backends, in plaintext.
    #[serde(default)]
    pub h2c: bool,
}

fn discovery_min_interval() -> u64 {
    1_000
}
fn discovery_max_interval() -> u64 {
    60_000
}
fn discovery_timeout() -> u64 {
    2_000
}
fn discovery_max_remove_share() -> f64 {
    0.5
}
fn discovery_confirm() -> u32 {
    3
}

/// A discovery source's `weight`: a mode name or a number.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum DiscoveryWeight {
    /// A fixed weight for every backend of the source.
    Fixed(u32),
    /// `"equal"` or `"srv"`.
    Mode(String),
}
