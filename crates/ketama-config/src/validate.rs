//! From TOML text to a [`Validated`] configuration: every error names the
//! file and the key, and says what to do.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ketama::{Layout, RingSettings, Scheme};

use crate::discovery::{DiscoverySource, Query, WeightMode};
use crate::model::{Config, ControlSection, DiscoveryWeight, RingSection, Routing};
use crate::ConfigError;

fn err(file: &str, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        file: file.to_string(),
        key: key.into(),
        message: message.into(),
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
    /// A header's value (lowercase name).
    Header(String),
}

/// When a label rule applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Matcher {
    /// The Host header (port stripped) equals this, ignoring ASCII case.
    Host(String),
    /// The header (lowercase name) has exactly this value.
    Header(String, String),
}

/// A validated configuration, ready to build a routing plan from.
#[derive(Clone, Debug)]
pub struct Validated {
    /// The file it came from, as named in errors.
    pub file: String,
    /// The parsed file.
    pub config: Config,
    /// Proxy listeners.
    pub listen: Vec<SocketAddr>,
    /// Admin listener.
    pub admin_listen: SocketAddr,
    /// The bearer token; `None` when auth is disabled.
    pub token: Option<String>,
    /// `[ring]` parsed.
    pub ring: RingSettings,
    /// `[migration.ring]` parsed.
    pub new_ring: Option<RingSettings>,
    /// `[key]` parsed.
    pub key: KeySource,
    /// Each backend's address, parsed (in `backends` order).
    pub addrs: Vec<SocketAddr>,
    /// `[[label_rules]]` parsed, in order.
    pub rules: Vec<(Matcher, Vec<String>)>,
    /// What is allowed but probably not meant (each names the file and
    /// key); the router logs them and `--check` prints them.
    pub warnings: Vec<String>,
    /// `[[discovery]]` sources.
    pub discovery: Vec<DiscoverySource>,
    /// `[balance] factor`, parsed (`None`: bounded loads off).
    pub balance: Option<ketama::load::BalanceFactor>,
    /// `[control]`, resolved (credentials read from their variables).
    pub control: Option<Control>,
}

/// `[control]` validated: how this router reaches its fleet's etcd.
#[derive(Clone, PartialEq, Eq)]
pub struct Control {
    /// Endpoint URLs.
    pub endpoints: Vec<String>,
    /// Key prefix, ending with `/`.
    pub prefix: String,
    /// This router's scope.
    pub scope: Option<String>,
    /// This router's id, when configured.
    pub id: Option<String>,
    /// Where the last applied state is kept.
    pub cache_file: Option<PathBuf>,
    /// User and password, read from the configured variables.
    pub credentials: Option<(String, String)>,
    /// CA certificate file.
    pub ca_file: Option<PathBuf>,
    /// Client certificate and key files.
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// Request timeout.
    pub timeout: Duration,
    /// Registration lease TTL, seconds.
    pub lease_ttl_s: u64,
    /// Retry backoff bounds.
    pub retry: (Duration, Duration),
    /// Idle time before a silent watch is reopened.
    pub watch_idle: Duration,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the password.
        f.debug_struct("Control")
            .field("endpoints", &self.endpoints)
            .field("prefix", &self.prefix)
            .field("scope", &self.scope)
            .field("id", &self.id)
            .field("cache_file", &self.cache_file)
            .field("user", &self.credentials.as_ref().map(|c| &c.0))
            .finish_non_exhaustive()
    }
}

impl Validated {
    /// Whether SRV targets hash as `target:port` (every ring uses the
    /// nginx scheme) rather than by address; see [`crate::discovery`].
    pub fn nginx_identity(&self) -> bool {
        self.ring.compat == Scheme::Nginx && self.new_ring.is_none_or(|r| r.compat == Scheme::Nginx)
    }

    /// This router's scope: `[control] scope`, else `[migration] scope`.
    pub fn scope(&self) -> Option<&str> {
        match &self.control {
            Some(c) => c.scope.as_deref(),
            None => self.config.migration.as_ref()?.scope.as_deref(),
        }
    }

    /// Whether the file has backends or discovery sources of its own (an
    /// etcd-steered router's file may leave them to the fleet's config).
    pub fn has_backends(&self) -> bool {
        !self.config.backends.is_empty() || !self.discovery.is_empty()
    }

    /// This router's file with the routing sections replaced by a fleet's
    /// shared ones (see [`parse_shared`]), validated as a whole; errors
    /// name `name` (say `etcd /ketama/prod/config@42`).
    pub fn with_shared(&self, shared: Routing, name: &str) -> Result<Validated, ConfigError> {
        validate(self.config.with_routing(shared), name, true)
    }
}

/// Parses a fleet's shared routing config (etcd's `PREFIX/config`): the
/// routing sections of a router's file and nothing else. `[server]`,
/// `[admin]` and `[control]` stay in each router's file, and so does the
/// scope (`[control] scope`); each is refused here with the fix. Errors
/// name `name` and the line. Validate the result against a router's file
/// with [`Validated::with_shared`].
pub fn parse_shared(text: &str, name: &str) -> Result<Routing, ConfigError> {
    if let Ok(table) = toml::from_str::<toml::Table>(text) {
        for key in ["server", "admin", "control"] {
            if table.contains_key(key) {
                return Err(err(
                    name,
                    key,
                    format!(
                        "[{key}] stays in each router's own file: remove it from the shared config"
                    ),
                ));
            }
        }
    }
    let routing: Routing = from_toml(text, name)?;
    if routing
        .migration
        .as_ref()
        .is_some_and(|m| m.scope.is_some())
    {
        return Err(err(
            name,
            "migration.scope",
            "a scope is each router's own: set [control] scope in its file, not in the shared config",
        ));
    }
    Ok(routing)
}

/// [`parse_shared`], then validated against a neutral router file (what
/// `ketama fleet push` checks before writing): every error a router would
/// report for this config, naming `name`.
pub fn check_shared(text: &str, name: &str) -> Result<Validated, ConfigError> {
    let routing = parse_shared(text, name)?;
    let local = parse(
        "[admin]\nlisten = \"127.0.0.1:1\"\nauth = false\n[control]\netcd = [\"http://127.0.0.1:2379\"]\nprefix = \"/\"\n",
        "(neutral router file)",
    )?;
    local.with_shared(routing, name)
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
    let config: Config = from_toml(text, file)?;
    let has_control = config.control.is_some();
    validate(config, file, !has_control)
}

/// Deserialises TOML, pointing errors at the right line and key.
fn from_toml<T: serde::de::DeserializeOwned>(text: &str, file: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let mut msg = e.message().trim().replace('\n', "; ");
        let mut at = e.span().map(|s| s.start.min(text.len()));
        // An array or inline table left open is reported where the parser
        // gave up (the next line); point at where it was opened instead.
        if msg.starts_with("invalid array") || msg.starts_with("invalid inline table") {
            if let Some(open) = at.and_then(|o| crate::position::unclosed_opener(text, o)) {
                at = Some(open);
                msg = format!("{msg} (opened here and never closed)");
            }
        }
        let at = at
            .map(|o| crate::position::key_at(text, o))
            .unwrap_or_else(|| "(document)".into());
        err(file, at, msg)
    })
}

fn ring_of(r: &RingSection, file: &str, key: &str) -> Result<RingSettings, ConfigError> {
    let compat: Scheme = r
        .compat
        .parse()
        .map_err(|e: ketama::UnknownScheme| err(file, format!("{key}.compat"), e.to_string()))?;
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
    Ok(RingSettings {
        compat,
        layout,
        point_multiple: r.point_multiple,
    })
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

fn validate(config: Config, file: &str, need_backends: bool) -> Result<Validated, ConfigError> {
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
    for (key, ms) in [
        (
            "server.client_header_timeout_ms",
            s.client_header_timeout_ms,
        ),
        ("server.keepalive_timeout_ms", s.keepalive_timeout_ms),
        ("server.client_body_timeout_ms", s.client_body_timeout_ms),
        ("server.connect_timeout_ms", s.connect_timeout_ms),
        ("server.read_timeout_ms", s.read_timeout_ms),
        ("server.write_timeout_ms", s.write_timeout_ms),
        ("server.fail_timeout_ms", s.fail_timeout_ms),
    ] {
        if ms == 0 {
            return Err(err(file, key, "must be at least 1 (milliseconds)"));
        }
    }
    if !(1024..=1 << 20).contains(&s.max_header_bytes) {
        return Err(err(
            file,
            "server.max_header_bytes",
            "must be from 1024 to 1048576 (1 MiB, Pingora's own cap on a request head)",
        ));
    }
    if s.max_connections == Some(0) {
        return Err(err(
            file,
            "server.max_connections",
            "must be at least 1 (leave it out to derive it from the file limit)",
        ));
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
    for (i, l) in listen.iter().enumerate() {
        let clash = l.port() == admin_listen.port()
            && (l.ip() == admin_listen.ip() || l.ip().is_unspecified());
        if clash {
            return Err(err(
                file,
                "admin.listen",
                format!("{admin_listen} is also server.listen[{i}] ({l}): the proxy and the admin API need different addresses"),
            ));
        }
        if let Some(j) = listen[..i].iter().position(|m| m == l) {
            return Err(err(
                file,
                format!("server.listen[{i}]"),
                format!("{l} repeats server.listen[{j}]"),
            ));
        }
    }
    let mut warnings = Vec::new();
    if !config.admin.auth && (config.admin.token.is_some() || config.admin.token_env.is_some()) {
        warnings.push(format!(
            "{file}: admin: auth = false, so admin.token/admin.token_env is ignored: the admin API takes requests without a token"
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
    let discovery = discovery_sources(&config, file)?;
    let balance = match &config.balance {
        None => None,
        Some(b) => Some(
            ketama::load::BalanceFactor::new(b.factor)
                .map_err(|e| err(file, "balance.factor", e.to_string()))?,
        ),
    };
    let control = match &config.control {
        Some(c) => Some(control_of(c, file)?),
        None => None,
    };
    if control.as_ref().is_some_and(|c| c.scope.is_some())
        && config.migration.as_ref().is_some_and(|m| m.scope.is_some())
    {
        return Err(err(
            file,
            "migration.scope",
            "with [control], this router's scope is [control] scope: remove migration.scope",
        ));
    }
    if need_backends && config.backends.is_empty() && discovery.is_empty() {
        return Err(err(
            file,
            "backends",
            "no backends: add [[backends]] with an address, or a [[discovery]] source",
        ));
    }
    let mut seen: HashMap<SocketAddr, usize> = HashMap::new();
    let mut addrs = Vec::with_capacity(config.backends.len());
    for (i, b) in config.backends.iter().enumerate() {
        let k = format!("backends[{i}].address");
        let a = addr(&b.address, file, &k)?;
        for (key, ms) in [
            ("connect_timeout_ms", b.connect_timeout_ms),
            ("read_timeout_ms", b.read_timeout_ms),
            ("write_timeout_ms", b.write_timeout_ms),
            ("fail_timeout_ms", b.fail_timeout_ms),
        ] {
            if ms == Some(0) {
                return Err(err(
                    file,
                    format!("backends[{i}].{key}"),
                    "must be at least 1 (milliseconds)",
                ));
            }
        }
        if let Some(first) = seen.insert(a, i) {
            return Err(err(
                file,
                k,
                if config.backends[first].address == b.address {
                    format!("{} repeats backends[{first}]", b.address)
                } else {
                    format!(
                        "{} repeats backends[{first}] ({}): the same socket address; keep one",
                        b.address, config.backends[first].address
                    )
                },
            ));
        }
        addrs.push(a);
        if let Some(l) = b.labels.iter().find(|l| l.is_empty()) {
            return Err(err(
                file,
                format!("backends[{i}].labels"),
                format!("empty label {l:?}"),
            ));
        }
    }
    let mut rules = Vec::with_capacity(config.label_rules.len());
    for (i, r) in config.label_rules.iter().enumerate() {
        let k = format!("label_rules[{i}]");
        let matcher = match (&r.host, &r.header, &r.value) {
            (Some(h), None, None) => Matcher::Host(h.to_ascii_lowercase()),
            (None, Some(h), Some(v)) => Matcher::Header(h.to_ascii_lowercase(), v.clone()),
            _ => {
                return Err(err(
                    file,
                    k,
                    "give either host = \"...\" or header = \"...\" with value = \"...\"",
                ))
            }
        };
        let known = |l: &String| {
            config.backends.iter().any(|b| b.labels.contains(l))
                || discovery.iter().any(|d| d.labels.contains(l))
        };
        if let Some(l) = r.require.iter().find(|l| !known(l)) {
            return Err(err(
                file,
                format!("{k}.require"),
                format!("no backend carries label {l:?}"),
            ));
        }
        rules.push((matcher, r.require.clone()));
    }
    for (key, settings) in [
        ("ring.compat", Some(ring)),
        ("migration.ring.compat", new_ring),
    ] {
        let obstacle =
            settings.and_then(|s| s.compat.requirement_obstacle().map(|w| (s.compat, w)));
        if let (Some((compat, why)), false) = (obstacle, rules.is_empty()) {
            return Err(err(
                file,
                key,
                format!("label rules need the nginx or pingora-v2 scheme, not {compat} ({why}): change the scheme or remove [[label_rules]]"),
            ));
        }
    }
    Ok(Validated {
        file: file.to_string(),
        listen,
        admin_listen,
        token,
        ring,
        new_ring,
        key,
        addrs,
        rules,
        warnings,
        discovery,
        balance,
        control,
        config,
    })
}

fn control_of(c: &ControlSection, file: &str) -> Result<Control, ConfigError> {
    if c.etcd.is_empty() {
        return Err(err(
            file,
            "control.etcd",
            "give at least one etcd URL: etcd = [\"http://127.0.0.1:2379\"]",
        ));
    }
    for (i, url) in c.etcd.iter().enumerate() {
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"));
        if rest.is_none_or(|r| r.is_empty() || r.contains(char::is_whitespace)) {
            return Err(err(
                file,
                format!("control.etcd[{i}]"),
                format!("{url:?} is not an http:// or https:// URL (e.g. http://10.0.0.5:2379)"),
            ));
        }
    }
    if !c.prefix.starts_with('/') || c.prefix.contains(char::is_whitespace) {
        return Err(err(
            file,
            "control.prefix",
            "a key prefix starting with / (e.g. \"/ketama/prod/\")",
        ));
    }
    let mut prefix = c.prefix.clone();
    if !prefix.ends_with('/') {
        prefix.push('/');
    }
    let var = |key: &str, name: &str| -> Result<String, ConfigError> {
        match std::env::var(name) {
            Ok(v) if !v.is_empty() => Ok(v),
            _ => Err(err(
                file,
                key,
                format!("environment variable {name} is not set: export it, or remove {key}"),
            )),
        }
    };
    let credentials = match (&c.user_env, &c.password_env) {
        (None, None) => None,
        (Some(u), Some(p)) => Some((var("control.user_env", u)?, var("control.password_env", p)?)),
        (Some(_), None) => {
            return Err(err(
                file,
                "control.password_env",
                "a user needs its password's variable too",
            ))
        }
        (None, Some(_)) => {
            return Err(err(
                file,
                "control.user_env",
                "a password needs its user's variable too",
            ))
        }
    };
    let client_cert = match (&c.cert_file, &c.key_file) {
        (None, None) => None,
        (Some(cert), Some(key)) => Some((PathBuf::from(cert), PathBuf::from(key))),
        (Some(_), None) => {
            return Err(err(
                file,
                "control.key_file",
                "a client certificate needs its key file",
            ))
        }
        (None, Some(_)) => {
            return Err(err(
                file,
                "control.cert_file",
                "a key file needs its certificate",
            ))
        }
    };
    if client_cert.is_some() && c.ca_file.is_none() {
        return Err(err(
            file,
            "control.ca_file",
            "client certificates need the CA of etcd's certificate: give ca_file",
        ));
    }
    for (key, v, lo, hi) in [
        ("control.timeout_ms", c.timeout_ms, 1, 600_000),
        ("control.lease_ttl_s", c.lease_ttl_s, 3, 3600),
        ("control.retry_min_ms", c.retry_min_ms, 1, 600_000),
        (
            "control.retry_max_ms",
            c.retry_max_ms,
            c.retry_min_ms.max(1),
            600_000,
        ),
        ("control.watch_idle_ms", c.watch_idle_ms, 1000, 3_600_000),
    ] {
        if !(lo..=hi).contains(&v) {
            return Err(err(file, key, format!("must be from {lo} to {hi}")));
        }
    }
    if let Some(id) = &c.id {
        if id.is_empty() || id.contains(['/', ' ']) {
            return Err(err(
                file,
                "control.id",
                "an id without spaces or slashes (it ends a key)",
            ));
        }
    }
    let ms = Duration::from_millis;
    Ok(Control {
        endpoints: c.etcd.clone(),
        prefix,
        scope: c.scope.clone(),
        id: c.id.clone(),
        cache_file: c.cache_file.as_ref().map(PathBuf::from),
        credentials,
        ca_file: c.ca_file.as_ref().map(PathBuf::from),
        client_cert,
        timeout: ms(c.timeout_ms),
        lease_ttl_s: c.lease_ttl_s,
        retry: (ms(c.retry_min_ms), ms(c.retry_max_ms)),
        watch_idle: ms(c.watch_idle_ms),
    })
}

fn discovery_sources(config: &Config, file: &str) -> Result<Vec<DiscoverySource>, ConfigError> {
    let mut out: Vec<DiscoverySource> = Vec::new();
    for (i, d) in config.discovery.iter().enumerate() {
        let k = |key: &str| format!("discovery[{i}].{key}");
        let name_ok = |n: &str| !n.is_empty() && n.len() <= 253 && !n.contains(char::is_whitespace);
        let query = match (&d.srv, &d.name, d.port) {
            (Some(srv), None, None) if name_ok(srv) => Query::Srv(srv.clone()),
            (None, Some(name), Some(port)) if name_ok(name) && port > 0 => Query::Host {
                name: name.clone(),
                port,
            },
            (Some(_), None, Some(_)) => {
                return Err(err(file, k("port"), "an SRV source takes its ports from the records: remove port"))
            }
            (None, Some(_), None) => {
                return Err(err(file, k("port"), "a name source needs the backends' port: port = 8080"))
            }
            _ => {
                return Err(err(
                    file,
                    format!("discovery[{i}]"),
                    "give either srv = \"_service._tcp.domain\" or name = \"host.domain\" with port = N",
                ))
            }
        };
        let weight = match (&query, &d.weight) {
            (Query::Srv(_), None) => WeightMode::Equal,
            (Query::Srv(_), Some(DiscoveryWeight::Mode(m))) if m == "equal" => WeightMode::Equal,
            (Query::Srv(_), Some(DiscoveryWeight::Mode(m))) if m == "srv" => WeightMode::Srv,
            (Query::Host { .. }, None) => WeightMode::Fixed(1),
            (Query::Host { .. }, Some(DiscoveryWeight::Fixed(w))) => WeightMode::Fixed(*w),
            (Query::Srv(_), _) => {
                return Err(err(
                    file,
                    k("weight"),
                    "an SRV source's weight is \"equal\" (default) or \"srv\"",
                ))
            }
            (Query::Host { .. }, _) => {
                return Err(err(
                    file,
                    k("weight"),
                    "a name source's weight is a number (default 1)",
                ))
            }
        };
        let resolvers = d
            .resolvers
            .iter()
            .enumerate()
            .map(|(j, r)| addr(r, file, &format!("discovery[{i}].resolvers[{j}]")))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(l) = d.labels.iter().find(|l| l.is_empty()) {
            return Err(err(file, k("labels"), format!("empty label {l:?}")));
        }
        for (key, ms) in [
            ("min_interval_ms", d.min_interval_ms),
            ("max_interval_ms", d.max_interval_ms),
            ("timeout_ms", d.timeout_ms),
        ] {
            if ms == 0 {
                return Err(err(file, k(key), "must be at least 1 (milliseconds)"));
            }
        }
        if d.min_interval_ms > d.max_interval_ms {
            return Err(err(file, k("min_interval_ms"), "is over max_interval_ms"));
        }
        if !(d.max_remove_share > 0.0 && d.max_remove_share <= 1.0) {
            return Err(err(
                file,
                k("max_remove_share"),
                "must be a share over 0, at most 1.0",
            ));
        }
        if d.confirm == 0 {
            return Err(err(file, k("confirm"), "must be at least 1"));
        }
        if let Some(j) = out.iter().position(|o| o.query == query) {
            return Err(err(
                file,
                format!("discovery[{i}]"),
                format!("repeats discovery[{j}] ({query})"),
            ));
        }
        let ms = std::time::Duration::from_millis;
        out.push(DiscoverySource {
            index: i,
            query,
            weight,
            labels: d.labels.clone(),
            resolvers,
            min_interval: ms(d.min_interval_ms),
            max_interval: ms(d.max_interval_ms),
            timeout: ms(d.timeout_ms),
            max_remove_share: d.max_remove_share,
            confirm: d.confirm,
            wait: d.wait_for_discovery,
        });
    }
    Ok(out)
}
