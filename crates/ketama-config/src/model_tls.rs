//! The TLS sections of the configuration's shape: `[tls]` (the router's
//! own TLS listeners, local like `[server]`) and `[upstream_tls]` (how
//! backends with `tls = true` are reached, part of the routing config a
//! fleet shares).

use serde::Deserialize;

/// `[tls]`: TLS listeners and the certificates they serve.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    /// TLS listeners, `IP:PORT` each (restart to change).
    pub listen: Vec<String>,
    /// Protocols offered by ALPN, in preference order: `h2`, `http/1.1`.
    #[serde(default = "default_alpn")]
    pub alpn: Vec<String>,
    /// The lowest TLS version: `"1.2"` or `"1.3"`.
    #[serde(default = "default_min_version")]
    pub min_version: String,
    /// A handshake must finish within this long after the accept.
    #[serde(default = "default_handshake_timeout_ms")]
    pub handshake_timeout_ms: u64,
    /// Mutual TLS: clients must present a certificate this CA (PEM) signed.
    pub client_ca_file: Option<String>,
    /// Whether TLS session resumption (tickets and the session cache) is
    /// on.
    #[serde(default = "yes")]
    pub session_resumption: bool,
    /// The certificates, chosen by the client's SNI; the first is the
    /// default.
    #[serde(default)]
    pub certificates: Vec<CertificateSection>,
}

/// `[[tls.certificates]]`: one certificate chain and its key.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CertificateSection {
    /// PEM: the leaf certificate first, then its intermediates.
    pub cert_file: String,
    /// PEM: its private key (PKCS#8, SEC1 or PKCS#1).
    pub key_file: String,
}

/// `[upstream_tls]`: how the router talks TLS to backends with
/// `tls = true`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UpstreamTlsSection {
    /// PEM CA certificates backends' certificates must chain to (default:
    /// the system's trust store).
    pub ca_file: Option<String>,
    /// Verify backends' certificates and names.
    #[serde(default = "yes")]
    pub verify: bool,
    /// PEM client certificate, for mutual TLS to backends.
    pub cert_file: Option<String>,
    /// PEM key of `cert_file`.
    pub key_file: Option<String>,
    /// Offer HTTP/2 by ALPN to TLS backends.
    #[serde(default)]
    pub h2: bool,
}

impl Default for UpstreamTlsSection {
    fn default() -> Self {
        UpstreamTlsSection {
            ca_file: None,
            verify: true,
            cert_file: None,
            key_file: None,
            h2: false,
        }
    }
}

fn default_alpn() -> Vec<String> {
    vec!["h2".into(), "http/1.1".into()]
}
fn default_min_version() -> String {
    "1.2".into()
}
fn default_handshake_timeout_ms() -> u64 {
    10_000
}
fn yes() -> bool {
    true
}
