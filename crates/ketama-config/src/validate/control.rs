//! `[control]`: how this router reaches its fleet's etcd.

use std::path::PathBuf;
use std::time::Duration;

use super::{err, Control};
use crate::model::ControlSection;
use crate::ConfigError;

pub(super) fn control_of(c: &ControlSection, file: &str) -> Result<Control, ConfigError> {
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
        (
            "control.report_interval_ms",
            c.report_interval_ms,
            100,
            3_600_000,
        ),
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
        report_interval: ms(c.report_interval_ms),
    })
}
