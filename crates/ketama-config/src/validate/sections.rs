//! Validation of the proxy's own sections, one function each:
//! `[server]`, `[admin]`, the rings and key, `[[backends]]`,
//! `[[label_rules]]`. Errors name the file and the key.

use std::collections::HashMap;
use std::net::SocketAddr;

use ketama::RingSettings;

use super::{addr, err, Matcher};
use crate::discovery::DiscoverySource;
use crate::model::Config;
use crate::ConfigError;

/// `[server]`: the listeners and every limit.
pub(super) fn listeners(config: &Config, file: &str) -> Result<Vec<SocketAddr>, ConfigError> {
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
        ("server.keepalive_time_ms", s.keepalive_time_ms),
        ("server.client_body_timeout_ms", s.client_body_timeout_ms),
        ("server.send_timeout_ms", s.send_timeout_ms),
        ("server.connect_timeout_ms", s.connect_timeout_ms),
        ("server.read_timeout_ms", s.read_timeout_ms),
        ("server.write_timeout_ms", s.write_timeout_ms),
        ("server.fail_timeout_ms", s.fail_timeout_ms),
    ] {
        if ms == 0 {
            return Err(err(file, key, "must be at least 1 (milliseconds)"));
        }
    }
    if s.grpc_timeout_max_ms == Some(0) {
        return Err(err(
            file,
            "server.grpc_timeout_max_ms",
            "must be at least 1 (milliseconds), or absent for no cap",
        ));
    }
    if s.keepalive_requests == 0 {
        return Err(err(
            file,
            "server.keepalive_requests",
            "must be at least 1 (streams an HTTP/2 connection may open)",
        ));
    }
    if !(1024..=1 << 20).contains(&s.max_header_bytes) {
        return Err(err(
            file,
            "server.max_header_bytes",
            "must be from 1024 to 1048576 (1 MiB, Pingora's own cap on a request head)",
        ));
    }
    if !(16 << 10..=16 << 20).contains(&s.body_buffer_bytes) {
        return Err(err(
            file,
            "server.body_buffer_bytes",
            "must be from 16384 to 16777216 (16 KiB to 16 MiB)",
        ));
    }
    for (i, name) in s.strip_request_headers.iter().enumerate() {
        let key = format!("server.strip_request_headers[{i}]");
        let token = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
            return Err(err(
                file,
                &key,
                "is not a header name: give names such as \"x-ketama-fill\"",
            ));
        }
        const FRAMING: [&str; 8] = [
            "host",
            "content-length",
            "transfer-encoding",
            "connection",
            "expect",
            "upgrade",
            "te",
            "keep-alive",
        ];
        if FRAMING.iter().any(|f| name.eq_ignore_ascii_case(f)) {
            return Err(err(
                file,
                &key,
                "frames the request or the connection, which the router reads itself: it cannot be stripped",
            ));
        }
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
    Ok(listen)
}

/// `[admin]`: its listener (loopback, apart from the proxy's) and the
/// token, with what is allowed but probably not meant in `warnings`.
/// `[access_log]`: a path, and bounds that keep the writer useful.
pub(super) fn access_log(config: &Config, file: &str) -> Result<(), ConfigError> {
    let Some(a) = &config.access_log else {
        return Ok(());
    };
    if a.path.trim().is_empty() {
        return Err(err(
            file,
            "access_log.path",
            "is empty: name a file, or \"-\" for standard output (remove [access_log] for no log)",
        ));
    }
    if !(4096..=1 << 30).contains(&a.buffer_bytes) {
        return Err(err(
            file,
            "access_log.buffer_bytes",
            "must be from 4096 to 1073741824 (1 GiB)",
        ));
    }
    if !(1..=60_000).contains(&a.flush_ms) {
        return Err(err(
            file,
            "access_log.flush_ms",
            "must be from 1 to 60000 (a minute)",
        ));
    }
    Ok(())
}

/// `[cache_status]`: a header name, and values that are tokens, each in
/// one list only.
pub(super) fn cache_status(config: &Config, file: &str) -> Result<(), ConfigError> {
    let c = &config.cache_status;
    let token = |v: &str| {
        !v.is_empty()
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    let hint = config
        .migration
        .as_ref()
        .and_then(|m| m.previous_owner_header.as_deref());
    if let Some(h) = hint.filter(|h| !token(h)) {
        return Err(err(
            file,
            "migration.previous_owner_header",
            format!("{h:?} is not a header name: e.g. \"x-ketama-previous-owner\""),
        ));
    }
    if !token(&c.header) {
        return Err(err(
            file,
            "cache_status.header",
            format!(
                "{:?} is not a header name: name the response header that carries the cache's answer (cache-status, x-cache, ...)",
                c.header
            ),
        ));
    }
    let mut seen: Vec<(String, &str)> = Vec::new();
    for (list, values) in [("hit", &c.hit), ("miss", &c.miss), ("bypass", &c.bypass)] {
        for (i, v) in values.iter().enumerate() {
            let key = format!("cache_status.{list}[{i}]");
            if !token(v.trim()) {
                return Err(err(
                    file,
                    key,
                    format!("{v:?} is not one value: give each value as a word without commas or spaces (HIT, MISS, ...)"),
                ));
            }
            let upper = v.trim().to_ascii_uppercase();
            if let Some((_, other)) = seen.iter().find(|(u, _)| *u == upper) {
                return Err(err(
                    file,
                    key,
                    format!("{v:?} is in cache_status.{other} too: a value means one result; remove one"),
                ));
            }
            seen.push((upper, list));
        }
    }
    Ok(())
}

pub(super) fn admin(
    config: &Config,
    file: &str,
    listen: &[SocketAddr],
    warnings: &mut Vec<String>,
) -> Result<(SocketAddr, Option<String>), ConfigError> {
    let admin_listen = addr(&config.admin.listen, file, "admin.listen")?;
    if !admin_listen.ip().is_loopback() {
        return Err(err(
            file,
            "admin.listen",
            "the admin API listens on loopback only (127.0.0.1 or [::1])",
        ));
    }
    for (i, l) in listen.iter().enumerate() {
        // Port 0 asks the kernel for a free port: never the same socket.
        let clash = l.port() != 0
            && l.port() == admin_listen.port()
            && (l.ip() == admin_listen.ip() || l.ip().is_unspecified());
        if clash {
            return Err(err(
                file,
                "admin.listen",
                format!("{admin_listen} is also server.listen[{i}] ({l}): the proxy and the admin API need different addresses"),
            ));
        }
        if let Some(j) = listen[..i].iter().position(|m| m == l && l.port() != 0) {
            return Err(err(
                file,
                format!("server.listen[{i}]"),
                format!("{l} repeats server.listen[{j}]"),
            ));
        }
    }
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
    Ok((admin_listen, token))
}

/// `[[backends]]`: each address parsed, none repeated, labels not empty.
pub(super) fn backends(
    config: &Config,
    file: &str,
    need_backends: bool,
    discovery: &[DiscoverySource],
) -> Result<Vec<SocketAddr>, ConfigError> {
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
    Ok(addrs)
}

/// `[[label_rules]]`: each matcher, labels some backend carries, and a
/// scheme that takes requirements.
pub(super) fn label_rules(
    config: &Config,
    file: &str,
    discovery: &[DiscoverySource],
    rings: (RingSettings, Option<RingSettings>),
) -> Result<Vec<(Matcher, Vec<String>)>, ConfigError> {
    let (ring, new_ring) = rings;
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
    Ok(rules)
}
