//! The rustls client settings the engine reaches TLS backends with:
//! `[upstream_tls]`, built once per config instead of per connection.
//!
//! | backend | verification | SNI |
//! |---|---|---|
//! | `sni` set, `verify = true` | the chain against the CA (`ca_file`, else the system's roots and `SSL_CERT_FILE`/`SSL_CERT_DIR`), and the name | sent |
//! | `sni` set, `verify = false` | none (handshake signatures only) | sent |
//! | no `sni` (discovered backends, `verify = false`) | none, as nginx and Pingora | not sent |
//!
//! ALPN offers `http/1.1`, or with `h2 = true` `h2` first, then
//! `http/1.1` (a backend that picks HTTP/1.1 is spoken to in HTTP/1.1);
//! a client certificate is presented when configured.

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

/// The three settings a TLS backend is reached with.
#[derive(Debug, Clone)]
pub struct ClientConfigs {
    /// Chain and name verified.
    pub verified: Arc<ClientConfig>,
    /// Nothing verified (`verify = false`).
    pub unverified: Arc<ClientConfig>,
    /// Nothing verified, no SNI sent (no `sni`).
    pub no_sni: Arc<ClientConfig>,
}

/// The system's root certificates, read once per process (a reload does
/// not read `/etc/ssl/certs` again).
fn platform_roots() -> Arc<RootCertStore> {
    static ROOTS: OnceLock<Arc<RootCertStore>> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let mut roots = RootCertStore::empty();
            // The system's store, or SSL_CERT_FILE and SSL_CERT_DIR.
            match rustls_native_certs::load_native_certs() {
                Ok(certs) => {
                    let (added, _) = roots.add_parsable_certificates(certs);
                    if added == 0 {
                        tracing::warn!("no usable system root certificate found");
                    }
                }
                Err(e) => tracing::warn!("cannot read the system's root certificates: {e}"),
            }
            Arc::new(roots)
        })
        .clone()
}

/// Accepts any certificate, checking only the handshake's signatures
/// (as nginx's `proxy_ssl_verify off`).
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

impl ClientConfigs {
    /// Builds the three from the CA (`None`: the system's roots) and the
    /// client certificate, if any.
    pub fn build(
        ca: Option<&[CertificateDer<'static>]>,
        client: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
        h2: bool,
    ) -> Result<ClientConfigs, rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = match ca {
            Some(certs) => {
                let mut roots = RootCertStore::empty();
                for c in certs {
                    roots.add(c.clone())?;
                }
                Arc::new(roots)
            }
            None => platform_roots(),
        };
        let make = |verify: bool, sni: bool| -> Result<Arc<ClientConfig>, rustls::Error> {
            let builder = ClientConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(&[&rustls::version::TLS12, &rustls::version::TLS13])?;
            let builder = if verify {
                builder.with_root_certificates(roots.clone())
            } else {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(NoVerification(provider.clone())))
            };
            let mut config = match &client {
                Some((chain, key)) => {
                    builder.with_client_auth_cert(chain.clone(), key.clone_key())?
                }
                None => builder.with_no_client_auth(),
            };
            config.alpn_protocols = if h2 {
                vec![b"h2".to_vec(), b"http/1.1".to_vec()]
            } else {
                vec![b"http/1.1".to_vec()]
            };
            config.enable_sni = sni;
            Ok(Arc::new(config))
        };
        Ok(ClientConfigs {
            verified: make(true, true)?,
            unverified: make(false, true)?,
            no_sni: make(false, false)?,
        })
    }

    /// The settings and the name to reach a backend with `sni` (empty:
    /// none) under `verify`; the name is its address when no SNI is sent.
    pub fn for_backend(
        &self,
        sni: &str,
        verify: bool,
        addr: std::net::IpAddr,
    ) -> (Arc<ClientConfig>, ServerName<'static>) {
        if sni.is_empty() {
            return (self.no_sni.clone(), ServerName::IpAddress(addr.into()));
        }
        // A leftmost label with underscores is verified with dashes, as
        // Pingora does (a certificate cannot name it otherwise).
        let name = replace_leftmost_underscore(sni).unwrap_or_else(|| sni.to_string());
        let name = ServerName::try_from(name).unwrap_or(ServerName::IpAddress(addr.into()));
        let config = if verify {
            self.verified.clone()
        } else {
            self.unverified.clone()
        };
        (config, name)
    }
}

/// `a_b.example.com` as `a-b.example.com`; `None` when nothing changes.
fn replace_leftmost_underscore(sni: &str) -> Option<String> {
    let (leftmost, rest) = sni.split_once('.')?;
    if !rest.contains('.') || !leftmost.contains('_') {
        return None;
    }
    Some(format!("{}.{rest}", leftmost.replace('_', "-")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn underscores_in_the_leftmost_label() {
        assert_eq!(
            replace_leftmost_underscore("a_b.example.com").as_deref(),
            Some("a-b.example.com")
        );
        assert_eq!(replace_leftmost_underscore("a_b.com"), None);
        assert_eq!(replace_leftmost_underscore("ab.ex_ample.com"), None);
    }
}
