//! Reading the PEM files a config names for TLS (certificates, keys, CA
//! bundles): every failure is a [`ConfigError`] naming the config file,
//! the key that names the file, and what to do. The router builds its TLS
//! from these; `ketama fleet push` checks a shared config's files with
//! [`check_upstream_files`] before writing it.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::{ConfigError, Validated};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Where a PEM file was named: the config file and the key.
#[derive(Clone, Copy, Debug)]
pub struct Named<'a> {
    /// The config file (as errors name it).
    pub config: &'a str,
    /// The key (`tls.certificates[0].cert_file`).
    pub key: &'a str,
    /// The PEM file's path.
    pub path: &'a str,
}

impl Named<'_> {
    /// An error about this file.
    pub fn err(&self, message: impl std::fmt::Display) -> ConfigError {
        ConfigError {
            file: self.config.to_string(),
            key: self.key.to_string(),
            message: format!("{}: {message}", self.path),
        }
    }

    fn read(&self) -> Result<Vec<u8>, ConfigError> {
        std::fs::read(self.path).map_err(|e| self.err(format!("cannot read: {e}")))
    }

    /// The certificates of a PEM file, in file order (at least one).
    pub fn certificates(&self) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
        self.certificates_in(&self.read()?)
    }

    /// [`certificates`](Self::certificates) of the file's bytes, already
    /// read.
    pub fn certificates_in(&self, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(format!("not a PEM certificate file: {e}")))?;
        if certs.is_empty() {
            return Err(self.err(
                "no certificate in it (expected -----BEGIN CERTIFICATE-----): give the PEM certificate file",
            ));
        }
        for c in &certs {
            info(c).map_err(|e| self.err(e))?;
        }
        Ok(certs)
    }

    /// The private key of a PEM file (PKCS#8, SEC1 or PKCS#1).
    pub fn private_key(&self) -> Result<PrivateKeyDer<'static>, ConfigError> {
        self.private_key_in(&self.read()?)
    }

    /// [`private_key`](Self::private_key) of the file's bytes, already
    /// read.
    pub fn private_key_in(&self, pem: &[u8]) -> Result<PrivateKeyDer<'static>, ConfigError> {
        PrivateKeyDer::from_pem_slice(pem).map_err(|e| {
            self.err(format!(
                "no private key in it ({e}): give the PEM key (BEGIN PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY)"
            ))
        })
    }
}

/// What a certificate says about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertFacts {
    /// Its DNS names (subjectAltName; the subject's CN when it has none),
    /// lowercase.
    pub names: Vec<String>,
    /// Not valid after, in seconds since the Unix epoch.
    pub not_after: i64,
}

impl CertFacts {
    /// Seconds until it expires (negative: expired).
    pub fn expires_in(&self) -> i64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        self.not_after - now
    }
}

/// Parses a certificate's names and expiry.
pub fn info(der: &CertificateDer<'_>) -> Result<CertFacts, String> {
    use x509_parser::extensions::GeneralName;
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref())
        .map_err(|e| format!("a certificate does not parse: {e}"))?;
    let mut names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                GeneralName::DNSName(d) => names.push(d.to_ascii_lowercase()),
                GeneralName::IPAddress(b) if b.len() == 4 => {
                    let a: [u8; 4] = (*b).try_into().unwrap_or_default();
                    names.push(std::net::IpAddr::from(a).to_string());
                }
                GeneralName::IPAddress(b) if b.len() == 16 => {
                    let a: [u8; 16] = (*b).try_into().unwrap_or_default();
                    names.push(std::net::IpAddr::from(a).to_string());
                }
                _ => {}
            }
        }
    }
    if names.is_empty() {
        if let Some(cn) = cert.subject().iter_common_name().next() {
            if let Ok(cn) = cn.as_str() {
                names.push(cn.to_ascii_lowercase());
            }
        }
    }
    Ok(CertFacts {
        names,
        not_after: cert.validity().not_after.timestamp(),
    })
}

/// Reads `[upstream_tls]`'s files (CA bundle, client certificate and
/// key) as PEM: what can be checked without a TLS library. The router
/// checks again when it applies the config, and also that the key is the
/// certificate's.
pub fn check_upstream_files(v: &Validated) -> Result<(), ConfigError> {
    let u = &v.config.upstream_tls;
    let named = |key, path| Named {
        config: &v.file,
        key,
        path,
    };
    if let Some(p) = &u.ca_file {
        named("upstream_tls.ca_file", p).certificates()?;
    }
    if let Some(p) = &u.cert_file {
        named("upstream_tls.cert_file", p).certificates()?;
    }
    if let Some(p) = &u.key_file {
        named("upstream_tls.key_file", p).private_key()?;
    }
    Ok(())
}
