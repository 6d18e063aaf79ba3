//! A TLS handshake on a client connection: under its deadline, with its
//! failure reason for `ketama_tls_handshake_failures_total{reason}`.

use pingora::protocols::l4::stream::Stream as L4Stream;
use pingora::protocols::tls::TlsStream;
use pingora::protocols::Stream;

use super::ServerTls;

/// Why a handshake failed, as the metric's `reason` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// No TLS version or cipher suite both sides support.
    NoSharedVersionOrCipher,
    /// With `client_ca_file`: no client certificate, or one that does not
    /// verify.
    BadClientCertificate,
    /// Not finished within `handshake_timeout_ms`.
    Timeout,
    /// Anything else (not TLS at all, a closed connection, a bad message).
    Other,
}

impl Failure {
    /// Every reason, for metrics that show zeros.
    pub const ALL: [Failure; 4] = [
        Failure::NoSharedVersionOrCipher,
        Failure::BadClientCertificate,
        Failure::Timeout,
        Failure::Other,
    ];

    /// The label value.
    pub fn name(self) -> &'static str {
        match self {
            Failure::NoSharedVersionOrCipher => "no_shared_version_or_cipher",
            Failure::BadClientCertificate => "bad_client_certificate",
            Failure::Timeout => "timeout",
            Failure::Other => "other",
        }
    }

    /// The reason in a handshake error's text. Pingora keeps only the
    /// message of rustls' error, so this reads rustls' wording:
    /// `PeerIncompatible` for versions and suites, the certificate errors
    /// for client certificates.
    pub fn of(message: &str) -> Failure {
        if message.contains("peer is incompatible") {
            Failure::NoSharedVersionOrCipher
        } else if message.contains("invalid peer certificate")
            || message.contains("peer sent no certificates")
        {
            Failure::BadClientCertificate
        } else {
            Failure::Other
        }
    }
}

/// Runs the server side of a handshake on an accepted connection.
pub async fn accept(tls: &ServerTls, stream: Stream) -> Result<TlsStream<L4Stream>, Failure> {
    // Pingora's listeners hand over their own TCP stream type; anything
    // else cannot take TLS here.
    let tcp = stream
        .into_any()
        .downcast::<L4Stream>()
        .map_err(|_| Failure::Other)?;
    match tokio::time::timeout(tls.handshake_timeout, tls.acceptor.tls_handshake(*tcp)).await {
        Err(_) => Err(Failure::Timeout),
        Ok(Err(e)) => {
            let f = Failure::of(&e.to_string());
            tracing::debug!(reason = f.name(), "TLS handshake failed: {e}");
            Err(f)
        }
        Ok(Ok(s)) => Ok(s),
    }
}

#[cfg(test)]
mod tests {
    use super::Failure;

    #[test]
    fn reasons_from_rustls_messages() {
        assert_eq!(
            Failure::of("tls connect error: peer is incompatible: NoCipherSuitesInCommon"),
            Failure::NoSharedVersionOrCipher
        );
        assert_eq!(
            Failure::of("tls connect error: peer sent no certificates"),
            Failure::BadClientCertificate
        );
        assert_eq!(
            Failure::of("tls connect error: invalid peer certificate: UnknownIssuer"),
            Failure::BadClientCertificate
        );
        assert_eq!(
            Failure::of("tls connect error: corrupt message"),
            Failure::Other
        );
    }
}
