//! The TLS listeners' side: certificates chosen by SNI, ALPN, versions,
//! client certificates, resumption; built whole from the config at start
//! and at each reload, so a reload swaps every TLS setting but the
//! listening addresses.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ketama_config::{ConfigError, Validated};
use rustls::server::{
    ClientHello, NoServerSessionStorage, ResolvesServerCert, WebPkiClientVerifier,
};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};

use ketama_config::pem::{info, CertFacts, Named};

/// One served certificate, as `/status` and `/metrics` show it.
#[derive(Clone, Debug)]
pub struct CertificateInfo {
    /// `tls.certificates[i].cert_file` as configured.
    pub cert_file: String,
    /// Its names and expiry.
    pub facts: CertFacts,
}

/// Everything the TLS listeners need, built from one config.
pub struct ServerTls {
    /// The acceptor around the rustls config.
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// The handshake deadline, from the accept.
    pub handshake_timeout: Duration,
    /// The certificates in config order (the first is the default).
    pub certificates: Vec<CertificateInfo>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("certificates", &self.certificates)
            .finish_non_exhaustive()
    }
}

/// Picks a certificate by SNI: an exact name, else a wildcard one label
/// deep (`*.example.com` matches `a.example.com`, not `a.b.example.com`
/// or `example.com`); no SNI or no match: the first certificate.
#[derive(Debug)]
struct SniResolver {
    keys: Vec<Arc<CertifiedKey>>,
    exact: HashMap<String, usize>,
    wildcard: HashMap<String, usize>,
}

impl SniResolver {
    fn pick(&self, sni: Option<&str>) -> usize {
        let Some(name) = sni.map(|s| s.trim_end_matches('.').to_ascii_lowercase()) else {
            return 0;
        };
        if let Some(&i) = self.exact.get(&name) {
            return i;
        }
        name.split_once('.')
            .and_then(|(_, parent)| self.wildcard.get(parent).copied())
            .unwrap_or(0)
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.keys[self.pick(hello.server_name())].clone())
    }
}

impl ServerTls {
    /// Loads `[tls]`'s certificates, keys and client CA and builds the
    /// acceptor; `None` without `[tls]`. Every file is read here (never on
    /// a request's path); an error names the key of the file at fault.
    pub fn load(v: &Validated) -> Result<Option<ServerTls>, ConfigError> {
        let Some(t) = &v.config.tls else {
            return Ok(None);
        };
        super::install_crypto_provider();
        let provider = rustls::crypto::ring::default_provider();
        let mut keys = Vec::new();
        let mut certificates = Vec::new();
        let (mut exact, mut wildcard) = (HashMap::new(), HashMap::new());
        for (i, c) in t.certificates.iter().enumerate() {
            let cert_key = format!("tls.certificates[{i}].cert_file");
            let key_key = format!("tls.certificates[{i}].key_file");
            let cert_file = Named {
                config: &v.file,
                key: &cert_key,
                path: &c.cert_file,
            };
            let key_file = Named {
                config: &v.file,
                key: &key_key,
                path: &c.key_file,
            };
            let chain = cert_file.certificates()?;
            let facts = info(&chain[0]).map_err(|e| cert_file.err(e))?;
            let key = key_file.private_key()?;
            let certified = super::certified_key(chain, key, &key_file, &c.cert_file)?;
            for name in &facts.names {
                let map = match name.strip_prefix("*.") {
                    Some(parent) => wildcard.entry(parent.to_string()),
                    None => exact.entry(name.clone()),
                };
                // The first certificate naming a name serves it.
                map.or_insert(i);
            }
            keys.push(Arc::new(certified));
            certificates.push(CertificateInfo {
                cert_file: c.cert_file.clone(),
                facts,
            });
        }
        let versions: &[&rustls::SupportedProtocolVersion] = if t.min_version == "1.3" {
            &[&rustls::version::TLS13]
        } else {
            &[&rustls::version::TLS12, &rustls::version::TLS13]
        };
        let builder = ServerConfig::builder_with_provider(Arc::new(provider.clone()))
            .with_protocol_versions(versions)
            .map_err(|e| ConfigError {
                file: v.file.clone(),
                key: "tls.min_version".into(),
                message: e.to_string(),
            })?;
        let builder = match &t.client_ca_file {
            None => builder.with_no_client_auth(),
            Some(path) => {
                let named = Named {
                    config: &v.file,
                    key: "tls.client_ca_file",
                    path,
                };
                let mut roots = RootCertStore::empty();
                for c in named.certificates()? {
                    roots
                        .add(c)
                        .map_err(|e| named.err(format!("not a usable CA certificate: {e}")))?;
                }
                let verifier = WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    Arc::new(provider),
                )
                .build()
                .map_err(|e| named.err(format!("cannot verify clients with it: {e}")))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_cert_resolver(Arc::new(SniResolver {
            keys,
            exact,
            wildcard,
        }));
        config.alpn_protocols = t.alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
        if t.session_resumption {
            config.ticketer = rustls::crypto::ring::Ticketer::new().map_err(|e| ConfigError {
                file: v.file.clone(),
                key: "tls.session_resumption".into(),
                message: format!("cannot make session tickets: {e}"),
            })?;
        } else {
            config.session_storage = Arc::new(NoServerSessionStorage {});
            config.send_tls13_tickets = 0;
        }
        Ok(Some(ServerTls {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
            handshake_timeout: Duration::from_millis(t.handshake_timeout_ms),
            certificates,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver(names: &[&[&str]]) -> SniResolver {
        let (mut exact, mut wildcard) = (HashMap::new(), HashMap::new());
        for (i, ns) in names.iter().enumerate() {
            for n in *ns {
                match n.strip_prefix("*.") {
                    Some(p) => wildcard.entry(p.to_string()).or_insert(i),
                    None => exact.entry(n.to_string()).or_insert(i),
                };
            }
        }
        SniResolver {
            keys: Vec::new(),
            exact,
            wildcard,
        }
    }

    #[test]
    fn sni_picks_exact_then_one_label_wildcard_then_the_first() {
        let r = resolver(&[&["a.test"], &["*.b.test", "b.test"], &["x.b.test"]]);
        assert_eq!(r.pick(None), 0);
        assert_eq!(r.pick(Some("a.test")), 0);
        assert_eq!(r.pick(Some("B.TEST.")), 1);
        assert_eq!(r.pick(Some("y.b.test")), 1);
        assert_eq!(
            r.pick(Some("x.b.test")),
            2,
            "an exact name beats a wildcard"
        );
        assert_eq!(r.pick(Some("z.y.b.test")), 0, "a wildcard covers one label");
        assert_eq!(r.pick(Some("unknown.test")), 0);
    }
}
