//! The backends' side: how a backend with `tls = true` is reached
//! (`[upstream_tls]`), loaded once per config.
//!
//! The config refuses a verified TLS backend without `sni`, so an empty
//! SNI comes only with `verify = false`, which is a warning. The engine's
//! pool keys a connection by address, SNI and [`UpstreamTls::group_key`],
//! a hash of every setting here: after a reload that changes any of them
//! no connection made under the old ones is reused.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use ketama_config::{ConfigError, Validated};

use ketama_config::pem::Named;

/// `[upstream_tls]`, loaded.
pub struct UpstreamTls {
    /// A CA of the config's (else the system's roots).
    custom_ca: bool,
    /// A client certificate for mutual TLS.
    client_cert: bool,
    verify: bool,
    h2: bool,
    /// A hash of all of the above, as the pool's group key.
    group_key: u64,
    /// The rustls settings of the engine's connections.
    engine: super::client::ClientConfigs,
}

impl std::fmt::Debug for UpstreamTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamTls")
            .field("custom_ca", &self.custom_ca)
            .field("client_cert", &self.client_cert)
            .field("verify", &self.verify)
            .field("h2", &self.h2)
            .finish()
    }
}

impl UpstreamTls {
    /// Reads `[upstream_tls]`'s files (CA, client certificate and key);
    /// an error names the key of the file at fault.
    pub fn load(v: &Validated) -> Result<UpstreamTls, ConfigError> {
        let u = &v.config.upstream_tls;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        let mut ca_der = None;
        let mut client_der = None;
        if let Some(path) = &u.ca_file {
            let named = Named {
                config: &v.file,
                key: "upstream_tls.ca_file",
                path,
            };
            let certs = named.certificates()?;
            let mut roots = rustls::RootCertStore::empty();
            for c in &certs {
                c.as_ref().hash(&mut hasher);
                roots
                    .add(c.clone())
                    .map_err(|e| named.err(format!("not a usable CA certificate: {e}")))?;
            }
            ca_der = Some(certs);
        }
        if let (Some(cert), Some(key)) = (&u.cert_file, &u.key_file) {
            let cert_file = Named {
                config: &v.file,
                key: "upstream_tls.cert_file",
                path: cert,
            };
            let key_file = Named {
                config: &v.file,
                key: "upstream_tls.key_file",
                path: key,
            };
            let chain = cert_file.certificates()?;
            let key = key_file.private_key()?;
            super::certified_key(chain.clone(), key.clone_key(), &key_file, cert)?;
            for c in &chain {
                c.as_ref().hash(&mut hasher);
            }
            key.secret_der().hash(&mut hasher);
            client_der = Some((chain, key));
        }
        (u.verify, u.h2).hash(&mut hasher);
        let custom_ca = ca_der.is_some();
        let client_cert = client_der.is_some();
        let engine = super::client::ClientConfigs::build(ca_der.as_deref(), client_der, u.h2)
            .map_err(|e| ConfigError {
                file: v.file.clone(),
                key: "upstream_tls".into(),
                message: format!("cannot build the TLS client settings: {e}"),
            })?;
        Ok(UpstreamTls {
            engine,
            custom_ca,
            client_cert,
            verify: u.verify,
            h2: u.h2,
            group_key: hasher.finish(),
        })
    }

    /// How the engine reaches a backend with `sni` (empty: none) at
    /// `addr`: the rustls settings (offering HTTP/2 with `h2`) and the
    /// server name.
    pub fn for_engine(
        &self,
        sni: &str,
        addr: std::net::IpAddr,
    ) -> (
        Arc<rustls::ClientConfig>,
        rustls_pki_types::ServerName<'static>,
    ) {
        self.engine.for_backend(sni, self.verify, addr)
    }

    /// Whether backends are offered HTTP/2 (`[upstream_tls] h2`).
    pub fn h2(&self) -> bool {
        self.h2
    }

    /// The pool's group key for peers made under these settings.
    pub fn group_key(&self) -> u64 {
        self.group_key
    }
}
