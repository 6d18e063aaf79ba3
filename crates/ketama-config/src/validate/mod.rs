//! From TOML text to a [`Validated`] configuration: every error names the
//! file and the key, and says what to do.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ketama::{Layout, RingSettings, Scheme};

use crate::discovery::DiscoverySource;
use crate::model::{Config, RingSection, Routing};
use crate::ConfigError;

mod control;
mod key;
mod sections;
mod sources;
mod tls;

use control::control_of;
use sources::discovery_sources;

pub(super) fn err(file: &str, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        file: file.to_string(),
        key: key.into(),
        message: message.into(),
    }
}

pub use ketama::key::{KeyForm, Normalize};
pub use key::request_key;

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
    /// TLS listeners (`[tls] listen`; empty without `[tls]`).
    pub tls_listen: Vec<SocketAddr>,
    /// Admin listener.
    pub admin_listen: SocketAddr,
    /// The bearer token; `None` when auth is disabled.
    pub token: Option<String>,
    /// `[ring]` parsed.
    pub ring: RingSettings,
    /// `[migration.ring]` parsed.
    pub new_ring: Option<RingSettings>,
    /// `[key]` parsed.
    pub key: ketama::key::RequestKey,
    /// `[migration.key]` parsed: the new side's key, when the migration
    /// changes it.
    pub new_key: Option<ketama::key::RequestKey>,
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
    /// How often the registration carries fresh counters.
    pub report_interval: Duration,
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

/// The `[key]` table of config text (with `[key.normalize]` and
/// `[[key.hash_policy]]`), every other table ignored: what the
/// command-line tools read of a router's config file, or of a file holding
/// only `[key]`. Validate it with [`request_key`].
pub fn key_section(text: &str, file: &str) -> Result<crate::model::KeySection, ConfigError> {
    #[derive(serde::Deserialize)]
    struct KeyOnly {
        #[serde(default)]
        key: crate::model::KeySection,
    }
    from_toml::<KeyOnly>(text, file).map(|k| k.key)
}

/// Deserialises TOML, pointing errors at the right line and key.
fn from_toml<T: serde::de::DeserializeOwned>(text: &str, file: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let mut msg = e.message().trim().replace('\n', "; ");
        let mut at = e.span().map(|s| s.start.min(text.len()));
        // An array or inline table left open is reported where the parser
        // gave up (the next line); point at where it was opened instead.
        let unclosed = [
            "invalid array",
            "invalid inline table",
            "unclosed array",
            "unclosed inline table",
            "missing comma between array elements",
            "missing comma between key-value pairs",
        ];
        if unclosed.iter().any(|m| msg.starts_with(m)) {
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

pub(super) fn ring_of(r: &RingSection, file: &str, key: &str) -> Result<RingSettings, ConfigError> {
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
    }
    .normalized())
}

pub(super) fn addr(s: &str, file: &str, key: &str) -> Result<SocketAddr, ConfigError> {
    s.parse().map_err(|_| {
        err(
            file,
            key,
            format!("{s:?} is not IP:PORT (e.g. 127.0.0.1:8080 or [::1]:8080)"),
        )
    })
}

fn validate(config: Config, file: &str, need_backends: bool) -> Result<Validated, ConfigError> {
    let listen = sections::listeners(&config, file)?;
    let mut warnings = Vec::new();
    let (admin_listen, token) = sections::admin(&config, file, &listen, &mut warnings)?;
    let tls_listen = tls::tls_listeners(&config, file, &listen)?;
    if admin_listen.port() != 0 && tls_listen.contains(&admin_listen) {
        return Err(err(
            file,
            "admin.listen",
            format!("{admin_listen} is a TLS listener too: give the admin API its own address"),
        ));
    }
    tls::upstream(&config, file, &mut warnings)?;
    sections::access_log(&config, file)?;
    sections::cache_status(&config, file)?;
    let key::Keys {
        ring,
        new_ring,
        key,
        new_key,
    } = key::rings_and_key(&config, file)?;
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
    let addrs = sections::backends(&config, file, need_backends, &discovery)?;
    let rules = sections::label_rules(&config, file, &discovery, (ring, new_ring))?;
    Ok(Validated {
        file: file.to_string(),
        listen,
        tls_listen,
        admin_listen,
        token,
        ring,
        new_ring,
        key,
        new_key,
        addrs,
        rules,
        warnings,
        discovery,
        balance,
        control,
        config,
    })
}
