//! `[tls]`, `[upstream_tls]` and the backends' `tls`/`sni`: what can be
//! judged without reading a file. The router loads the certificates and
//! keys themselves (`ketama-router --check` too) and names the key of a
//! file that does not load.

use std::net::SocketAddr;

use super::{addr, err};
use crate::model::Config;
use crate::ConfigError;

/// `[tls]` judged: its listeners, parsed.
pub(super) fn tls_listeners(
    config: &Config,
    file: &str,
    plain: &[SocketAddr],
) -> Result<Vec<SocketAddr>, ConfigError> {
    let Some(t) = &config.tls else {
        return Ok(Vec::new());
    };
    if t.listen.is_empty() {
        return Err(err(
            file,
            "tls.listen",
            "give at least one address to listen on with TLS, or remove [tls]",
        ));
    }
    let mut out = Vec::with_capacity(t.listen.len());
    for (i, l) in t.listen.iter().enumerate() {
        let key = format!("tls.listen[{i}]");
        let a = addr(l, file, &key)?;
        // Port 0 asks the kernel for a free port: never the same socket.
        if a.port() != 0 && (plain.contains(&a) || out.contains(&a)) {
            return Err(err(
                file,
                key,
                format!(
                    "{a} is listened on already: one address serves plain HTTP or TLS, not both"
                ),
            ));
        }
        out.push(a);
    }
    if t.certificates.is_empty() {
        return Err(err(
            file,
            "tls.certificates",
            "[tls] needs at least one certificate: add [[tls.certificates]] with cert_file and key_file",
        ));
    }
    if t.alpn.is_empty() {
        return Err(err(
            file,
            "tls.alpn",
            "offer at least one protocol: [\"h2\", \"http/1.1\"] (the default) or one of them",
        ));
    }
    for (i, p) in t.alpn.iter().enumerate() {
        if p != "h2" && p != "http/1.1" {
            return Err(err(
                file,
                format!("tls.alpn[{i}]"),
                format!("{p:?} is not a protocol the router speaks: use \"h2\" or \"http/1.1\""),
            ));
        }
        if t.alpn[..i].contains(p) {
            return Err(err(
                file,
                format!("tls.alpn[{i}]"),
                format!("{p:?} repeats"),
            ));
        }
    }
    if t.min_version != "1.2" && t.min_version != "1.3" {
        return Err(err(
            file,
            "tls.min_version",
            format!("{:?}: use \"1.2\" or \"1.3\"", t.min_version),
        ));
    }
    if t.handshake_timeout_ms == 0 {
        return Err(err(
            file,
            "tls.handshake_timeout_ms",
            "must be at least 1 (milliseconds)",
        ));
    }
    for (i, c) in t.certificates.iter().enumerate() {
        for (key, path) in [("cert_file", &c.cert_file), ("key_file", &c.key_file)] {
            if path.is_empty() {
                return Err(err(
                    file,
                    format!("tls.certificates[{i}].{key}"),
                    "give the PEM file's path",
                ));
            }
        }
    }
    if t.client_ca_file.as_deref() == Some("") {
        return Err(err(
            file,
            "tls.client_ca_file",
            "give the PEM file's path, or remove the key for no client certificates",
        ));
    }
    Ok(out)
}

/// Whether `name` can be sent as SNI and matched in a certificate: a DNS
/// name (letters, digits, `-`, `_`, dots between labels) or an IP address.
pub(super) fn valid_sni(name: &str) -> bool {
    if name.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// `[upstream_tls]` and each backend's and source's `tls`/`sni`.
pub(super) fn upstream(
    config: &Config,
    file: &str,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let u = &config.upstream_tls;
    match (&u.cert_file, &u.key_file) {
        (Some(_), None) => {
            return Err(err(
                file,
                "upstream_tls.key_file",
                "cert_file is set: give its key_file too",
            ))
        }
        (None, Some(_)) => {
            return Err(err(
                file,
                "upstream_tls.cert_file",
                "key_file is set: give its cert_file too",
            ))
        }
        _ => {}
    }
    for (key, f) in [
        ("ca_file", &u.ca_file),
        ("cert_file", &u.cert_file),
        ("key_file", &u.key_file),
    ] {
        if f.as_deref() == Some("") {
            return Err(err(
                file,
                format!("upstream_tls.{key}"),
                "give the PEM file's path, or remove the key",
            ));
        }
    }
    let sni = |key: String, tls: bool, sni: &Option<String>, needed: bool| {
        match sni {
        Some(_) if !tls => Err(err(
            file,
            key,
            "sni applies to TLS backends only: set tls = true, or remove sni",
        )),
        Some(n) if !valid_sni(n) => Err(err(
            file,
            key,
            format!("{n:?} is not a DNS name or IP address to send as SNI"),
        )),
        None if tls && needed && u.verify => Err(err(
            file,
            key,
            "a verified TLS backend needs the name its certificate carries: set sni = \"origin.example.com\" (or upstream_tls.verify = false, unverified)",
        )),
        _ => Ok(()),
    }
    };
    let h2c = |key: String, tls: bool, h2c: bool| {
        if tls && h2c {
            return Err(err(
                file,
                key,
                "h2c is HTTP/2 in plaintext; for HTTP/2 over TLS keep tls = true, remove h2c and set upstream_tls.h2 = true",
            ));
        }
        Ok(())
    };
    for (i, b) in config.backends.iter().enumerate() {
        sni(format!("backends[{i}].sni"), b.tls, &b.sni, true)?;
        h2c(format!("backends[{i}].h2c"), b.tls, b.h2c)?;
    }
    for (i, d) in config.discovery.iter().enumerate() {
        // A source's backends default to the names DNS gives.
        sni(format!("discovery[{i}].sni"), d.tls, &d.sni, false)?;
        h2c(format!("discovery[{i}].h2c"), d.tls, d.h2c)?;
    }
    let uses_tls = config.backends.iter().any(|b| b.tls) || config.discovery.iter().any(|d| d.tls);
    if !u.verify && uses_tls {
        warnings.push(format!(
            "{file}: upstream_tls.verify: false: TLS backends' certificates are not checked, so anyone on the path can pose as them; give upstream_tls.ca_file instead"
        ));
    }
    Ok(())
}
