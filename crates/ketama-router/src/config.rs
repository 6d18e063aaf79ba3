//! The router's configuration: TOML, validated, every error naming the key
//! and the file.
//!
//! ```toml
//! [server]
//! listen = ["127.0.0.1:8080"]   # proxy listeners
//! threads = 1                    # worker threads of the proxy service
//! retries = 2                    # failovers after the first backend fails to connect
//! response_headers = true        # x-ketama-backend, x-ketama-ring
//! trace_sample = 0.001           # share of requests whose selection is logged
//! grace_period_seconds = 1       # shutdown grace (Pingora's default is 300)
//! max_header_bytes = 32768       # larger request heads get 431
//!
//! [admin]
//! listen = "127.0.0.1:9901"      # loopback only
//! token = "secret"               # or token_env = "KETAMA_ADMIN_TOKEN", or auth = false
//!
//! [ring]
//! compat = "nginx"               # nginx | pingora-v1 | pingora-v2
//! layout = "compact"             # wide | packed | compact
//! point_multiple = 160
//!
//! [key]
//! source = "path_query"          # path_query ($request_uri) | path | host_path | header
//! # header = "x-cache-key"       # with source = "header"
//!
//! [[backends]]
//! address = "127.0.0.1:9001"
//! weight = 1
//! labels = ["eu"]
//! down = false
//!
//! [[label_rules]]                # first match wins
//! host = "eu.example.com"        # or header = "x-compliance" with value = "eu"
//! require = ["eu"]
//!
//! [migration]                    # optional: old ring = [ring], new ring below
//! ring = { compat = "nginx", layout = "compact", point_multiple = 40 }
//! global_bp = 0
//! scopes = { ams = 2500 }
//! scope = "ams"                  # this router's scope
//!
//! [health]
//! path = "/health"
//! interval_ms = 1000
//! timeout_ms = 500
//! healthy_threshold = 1
//! unhealthy_threshold = 2
//! ```

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;

use ketama::{Compat, Layout};
use serde::Deserialize;

/// A configuration error: the file, the key and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {key}: {message}")]
pub struct ConfigError {
    /// The config file.
    pub file: String,
    /// The key at fault, as a TOML path (`backends[2].address`).
    pub key: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

fn err(file: &str, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        file: file.to_string(),
        key: key.into(),
        message: message.into(),
    }
}

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
    /// The backends, in configuration order.
    pub backends: Vec<BackendSection>,
    /// Which requests require which labels.
    #[serde(default)]
    pub label_rules: Vec<LabelRule>,
    /// An optional migration to a new ring.
    pub migration: Option<MigrationSection>,
    /// Active health checks.
    #[serde(default)]
    pub health: HealthSection,
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
    /// Scheme name.
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

/// `[key]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct KeySection {
    /// `path_query`, `path`, `host_path` or `header`.
    pub source: String,
    /// The header, with `source = "header"`.
    pub header: Option<String>,
}

impl Default for KeySection {
    fn default() -> Self {
        KeySection {
            source: "path_query".into(),
            header: None,
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
        }
    }
}

/// How the routing key is taken from a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// Path and query, as sent (nginx's `$request_uri`).
    PathQuery,
    /// Path only.
    Path,
    /// Host header then path and query.
    HostPath,
    /// A header's value.
    Header(String),
}

/// A validated configuration, ready to build routing state from.
#[derive(Clone, Debug)]
pub struct Validated {
    /// The parsed file.
    pub config: Config,
    /// Proxy listeners.
    pub listen: Vec<SocketAddr>,
    /// Admin listener.
    pub admin_listen: SocketAddr,
    /// The bearer token; `None` when auth is disabled.
    pub token: Option<String>,
    /// `[ring]` parsed.
    pub ring: (Compat, Layout, u32),
    /// `[migration.ring]` parsed.
    pub new_ring: Option<(Compat, Layout, u32)>,
    /// `[key]` parsed.
    pub key: KeySource,
}

/// Reads and validates a config file.
pub fn load(path: &Path) -> Result<Validated, ConfigError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| err(&file, "(file)", format!("cannot read: {e}")))?;
    parse(&text, &file)
}

/// Parses and validates config text; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Validated, ConfigError> {
    let config: Config = toml::from_str(text).map_err(|e| {
        let msg = e.message().to_string();
        let at = e
            .span()
            .map(|s| key_at(text, s.start.min(text.len())))
            .unwrap_or_else(|| "(document)".into());
        err(file, at, msg)
    })?;
    validate(config, file)
}

/// Names the key at a byte offset: `line N (table.key)`, the table taken
/// from the nearest header above (`[[array]]` headers counted to an index).
fn key_at(text: &str, offset: usize) -> String {
    let line_no = text[..offset].matches('\n').count() + 1;
    let mut table = String::new();
    let mut arrays: HashMap<String, usize> = HashMap::new();
    let mut key = None;
    for (i, line) in text.lines().enumerate().take(line_no) {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("[[").and_then(|r| r.strip_suffix("]]")) {
            let n = arrays.entry(name.trim().to_string()).or_insert(0);
            table = format!("{}[{}]", name.trim(), n);
            *n += 1;
        } else if let Some(name) = t.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            table = name.trim().to_string();
        } else if i + 1 == line_no {
            key = t.split_once('=').map(|(k, _)| k.trim().to_string());
        }
    }
    match (key, table.is_empty()) {
        (Some(k), false) => format!("line {line_no} ({table}.{k})"),
        (Some(k), true) => format!("line {line_no} ({k})"),
        (None, false) => format!("line {line_no} ([{table}])"),
        (None, true) => format!("line {line_no}"),
    }
}

fn ring_of(r: &RingSection, file: &str, key: &str) -> Result<(Compat, Layout, u32), ConfigError> {
    let compat: Compat = r
        .compat
        .parse()
        .map_err(|e: ketama::UnknownCompat| err(file, format!("{key}.compat"), e.to_string()))?;
    let layout: Layout = r
        .layout
        .parse()
        .map_err(|e: ketama::UnknownLayout| err(file, format!("{key}.layout"), e.to_string()))?;
    if r.point_multiple == 0 {
        return Err(err(
            file,
            format!("{key}.point_multiple"),
            "must be at least 1 (nginx uses 160)",
        ));
    }
    Ok((compat, layout, r.point_multiple))
}

fn addr(s: &str, file: &str, key: &str) -> Result<SocketAddr, ConfigError> {
    s.parse().map_err(|_| {
        err(
            file,
            key,
            format!("{s:?} is not IP:PORT (e.g. 127.0.0.1:8080 or [::1]:8080)"),
        )
    })
}

fn validate(config: Config, file: &str) -> Result<Validated, ConfigError> {
    let s = &config.server;
    if s.listen.is_empty() {
        return Err(err(
            file,
            "server.listen",
            "give at least one address to listen on",
        ));
    }
    let listen = s
        .listen
        .iter()
        .enumerate()
        .map(|(i, l)| addr(l, file, &format!("server.listen[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    if s.threads == 0 {
        return Err(err(file, "server.threads", "must be at least 1"));
    }
    if !(0.0..=1.0).contains(&s.trace_sample) {
        return Err(err(
            file,
            "server.trace_sample",
            "must be a share from 0.0 to 1.0",
        ));
    }
    let admin_listen = addr(&config.admin.listen, file, "admin.listen")?;
    if !admin_listen.ip().is_loopback() {
        return Err(err(
            file,
            "admin.listen",
            "the admin API listens on loopback only (127.0.0.1 or [::1])",
        ));
    }
    let token = if !config.admin.auth {
        None
    } else if let Some(t) = &config.admin.token {
        if t.is_empty() {
            return Err(err(
                file,
                "admin.token",
                "is empty: give a token, or set auth = false",
            ));
        }
        Some(t.clone())
    } else if let Some(var) = &config.admin.token_env {
        match std::env::var(var) {
            Ok(t) if !t.is_empty() => Some(t),
            _ => {
                return Err(err(
                    file,
                    "admin.token_env",
                    format!(
                        "environment variable {var} is unset or empty: set it, or give admin.token"
                    ),
                ))
            }
        }
    } else {
        return Err(err(
            file,
            "admin",
            "no token: give admin.token or admin.token_env (or auth = false on loopback for a demo)",
        ));
    };
    let ring = ring_of(&config.ring, file, "ring")?;
    let new_ring = match &config.migration {
        None => None,
        Some(m) => {
            if m.global_bp > 10_000 {
                return Err(err(
                    file,
                    "migration.global_bp",
                    "over 10000 basis points: give 0 to 10000",
                ));
            }
            for (name, bp) in &m.scopes {
                if *bp > 10_000 {
                    return Err(err(
                        file,
                        format!("migration.scopes.{name}"),
                        "over 10000 basis points",
                    ));
                }
            }
            Some(ring_of(&m.ring, file, "migration.ring")?)
        }
    };
    let key = match config.key.source.as_str() {
        "path_query" => KeySource::PathQuery,
        "path" => KeySource::Path,
        "host_path" => KeySource::HostPath,
        "header" => match &config.key.header {
            Some(h) if !h.is_empty() => KeySource::Header(h.to_ascii_lowercase()),
            _ => {
                return Err(err(
                    file,
                    "key.header",
                    "source = \"header\" needs the header's name",
                ))
            }
        },
        other => {
            return Err(err(
                file,
                "key.source",
                format!("unknown source {other:?}: use path_query, path, host_path or header"),
            ))
        }
    };
    if config.backends.is_empty() {
        return Err(err(
            file,
            "backends",
            "no backends: add [[backends]] with an address",
        ));
    }
    let mut seen = HashMap::new();
    for (i, b) in config.backends.iter().enumerate() {
        let k = format!("backends[{i}].address");
        addr(&b.address, file, &k)?;
        if let Some(first) = seen.insert(b.address.clone(), i) {
            return Err(err(
                file,
                k,
                format!("{} repeats backends[{first}]", b.address),
            ));
        }
        if let Some(l) = b.labels.iter().find(|l| l.is_empty()) {
            return Err(err(
                file,
                format!("backends[{i}].labels"),
                format!("empty label {l:?}"),
            ));
        }
    }
    for (i, r) in config.label_rules.iter().enumerate() {
        let k = format!("label_rules[{i}]");
        match (&r.host, &r.header, &r.value) {
            (Some(_), None, None) | (None, Some(_), Some(_)) => {}
            _ => {
                return Err(err(
                    file,
                    k,
                    "give either host = \"...\" or header = \"...\" with value = \"...\"",
                ))
            }
        }
        let known = |l: &String| config.backends.iter().any(|b| b.labels.contains(l));
        if let Some(l) = r.require.iter().find(|l| !known(l)) {
            return Err(err(
                file,
                format!("{k}.require"),
                format!("no backend carries label {l:?}"),
            ));
        }
    }
    if ring.0 == Compat::PingoraV1 && !config.label_rules.is_empty() {
        return Err(err(
            file,
            "label_rules",
            "label rules need ring.compat nginx or pingora-v2",
        ));
    }
    Ok(Validated {
        listen,
        admin_listen,
        token,
        ring,
        new_ring,
        key,
        config,
    })
}
