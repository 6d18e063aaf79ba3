//! TLS on both sides, with rustls (the `ring` provider; no OpenSSL).
//!
//! - [`ServerTls`]: the TLS listeners' certificates (chosen by SNI),
//!   ALPN, versions, client certificates and session resumption, loaded
//!   from `[tls]` at start and at each reload and held in the routing
//!   state, so a reload swaps them for the next handshake while open
//!   connections keep theirs. The handshake itself runs in the
//!   connection guard ([`crate::conn`]), after the connection limit and
//!   under `handshake_timeout_ms`; [`handshake`] counts its failures by
//!   reason.
//! - [`UpstreamTls`]: `[upstream_tls]` (CA, verification, client
//!   certificate, h2), how the engine reaches each backend with
//!   `tls = true`.

mod client;
pub mod handshake;
mod server;
mod upstream;

pub use ketama_config::pem::CertFacts;

/// A Unix time as RFC 3339 UTC (`2027-01-31T12:00:00Z`).
pub fn rfc3339(unix: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix.max(0) as u64);
    crate::clock::utc(t)
}
pub use server::{CertificateInfo, ServerTls};
pub use upstream::UpstreamTls;

/// Installs rustls' `ring` provider as the process default (Pingora's
/// connector builds its configs from the default); idempotent.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A certificate chain and its key, checked to belong together: the key
/// loads for signing and its public half is the leaf's. Errors name the
/// key file's key.
pub(crate) fn certified_key(
    chain: Vec<rustls_pki_types::CertificateDer<'static>>,
    key: rustls_pki_types::PrivateKeyDer<'static>,
    key_file: &ketama_config::pem::Named<'_>,
    cert_path: &str,
) -> Result<rustls::sign::CertifiedKey, ketama_config::ConfigError> {
    install_crypto_provider();
    let signer = rustls::crypto::ring::default_provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| key_file.err(format!("cannot use this key: {e}")))?;
    let certified = rustls::sign::CertifiedKey::new(chain, signer);
    certified.keys_match().map_err(|_| {
        key_file.err(format!(
            "this key does not belong to {cert_path}'s certificate: give the key it was issued for"
        ))
    })?;
    Ok(certified)
}

/// A certificate expiring within this many days is warned about.
pub const EXPIRY_WARNING_DAYS: i64 = 14;

/// What `--check` says of a config's TLS files, after loading every one
/// of them (an error names the key of the file that does not load): see
/// [`certificate_report`].
pub fn check_files(
    v: &ketama_config::Validated,
) -> Result<(Vec<String>, Vec<String>), ketama_config::ConfigError> {
    let server = ServerTls::load(v)?;
    UpstreamTls::load(v)?;
    Ok(certificate_report(&v.file, server.as_ref()))
}

/// A line per served certificate (its names and expiry), and warnings for
/// certificates that expire within [`EXPIRY_WARNING_DAYS`] or have, of
/// TLS settings already loaded (`file` names the config in warnings).
pub fn certificate_report(file: &str, server: Option<&ServerTls>) -> (Vec<String>, Vec<String>) {
    let (mut lines, mut warnings) = (Vec::new(), Vec::new());
    for (i, c) in server
        .iter()
        .flat_map(|s| s.certificates.iter().enumerate())
    {
        let left = c.facts.expires_in();
        lines.push(format!(
            "tls.certificates[{i}]: {} ({}), not after {}",
            c.cert_file,
            c.facts.names.join(", "),
            rfc3339(c.facts.not_after)
        ));
        if left < 0 {
            warnings.push(format!(
                "{file}: tls.certificates[{i}].cert_file: {} expired on {}: renew it; clients refuse it",
                c.cert_file,
                rfc3339(c.facts.not_after)
            ));
        } else if left < EXPIRY_WARNING_DAYS * 86_400 {
            warnings.push(format!(
                "{file}: tls.certificates[{i}].cert_file: {} expires on {} (in {} days): renew it, then reload",
                c.cert_file,
                rfc3339(c.facts.not_after),
                left / 86_400
            ));
        }
    }
    (lines, warnings)
}
