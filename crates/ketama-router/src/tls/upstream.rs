//! The backends' side: how a backend with `tls = true` is reached
//! (`[upstream_tls]`), loaded once per config and applied to each
//! request's peer.
//!
//! Pingora turns verification off when a peer's SNI is empty; the config
//! refuses a verified TLS backend without `sni`, so that happens only with
//! `verify = false`, which is a warning. Pingora's pool keys a connection
//! by address, SNI, client certificate and the verify flags but not by the
//! CA: [`UpstreamTls::group_key`] hashes every setting here into the
//! peer's `group_key`, so after a reload that changes any of them no
//! connection made under the old ones is reused.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use ketama_config::{ConfigError, Validated};
use pingora::protocols::ALPN;
use pingora::upstreams::peer::HttpPeer;
use pingora::utils::tls::{parse_x509, CertKey, WrappedX509};

use ketama_config::pem::Named;

/// `[upstream_tls]`, loaded.
pub struct UpstreamTls {
    /// The CA certificates backends must chain to (`None`: the system's).
    ca: Option<Arc<[WrappedX509]>>,
    /// The client certificate for mutual TLS.
    client: Option<Arc<CertKey>>,
    verify: bool,
    h2: bool,
    /// A hash of all of the above, as the pool's group key.
    group_key: u64,
    /// The same settings for the HTTP/1 engine's own connections.
    engine: super::client::ClientConfigs,
}

impl std::fmt::Debug for UpstreamTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamTls")
            .field("custom_ca", &self.ca.is_some())
            .field("client_cert", &self.client.is_some())
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
        let ca = match &u.ca_file {
            None => None,
            Some(path) => {
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
                ca_der = Some(certs.clone());
                let wrapped: Vec<WrappedX509> = certs
                    .into_iter()
                    .map(|c| WrappedX509::new(c.as_ref().to_vec(), parse_x509))
                    .collect();
                Some(Arc::from(wrapped.into_boxed_slice()))
            }
        };
        let client = match (&u.cert_file, &u.key_file) {
            (Some(cert), Some(key)) => {
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
                client_der = Some((chain.clone(), key.clone_key()));
                let der: Vec<Vec<u8>> = chain.iter().map(|c| c.as_ref().to_vec()).collect();
                Some(Arc::new(CertKey::new(der, key.secret_der().to_vec())))
            }
            _ => None,
        };
        (u.verify, u.h2).hash(&mut hasher);
        let engine =
            super::client::ClientConfigs::build(ca_der.as_deref(), client_der).map_err(|e| {
                ConfigError {
                    file: v.file.clone(),
                    key: "upstream_tls".into(),
                    message: format!("cannot build the TLS client settings: {e}"),
                }
            })?;
        Ok(UpstreamTls {
            engine,
            ca,
            client,
            verify: u.verify,
            h2: u.h2,
            group_key: hasher.finish(),
        })
    }

    /// How the HTTP/1 engine reaches a backend with `sni` (empty: none) at
    /// `addr`: the rustls settings and the server name.
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

    /// Turns `peer` (made with TLS on and its SNI) into one reached under
    /// these settings: a few reference counts, no allocation.
    pub fn apply(&self, peer: &mut HttpPeer) {
        let o = &mut peer.options;
        o.verify_cert = self.verify;
        o.verify_hostname = self.verify;
        o.ca = self.ca.clone();
        if self.h2 {
            o.alpn = ALPN::H2H1;
        }
        peer.client_cert_key = self.client.clone();
        peer.group_key = self.group_key;
    }
}
