//! A TLS handshake on a client connection: under its deadline, with its
//! failure reason for `ketama_tls_handshake_failures_total{reason}`.

use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

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

    /// The reason of a failed handshake, from rustls' own error.
    pub fn of(e: &std::io::Error) -> Failure {
        use rustls::Error as E;
        match e.get_ref().and_then(|i| i.downcast_ref::<E>()) {
            Some(E::PeerIncompatible(_)) => Failure::NoSharedVersionOrCipher,
            Some(E::NoCertificatesPresented | E::InvalidCertificate(_)) => {
                Failure::BadClientCertificate
            }
            _ => Failure::Other,
        }
    }
}

/// Runs the server side of a handshake on an accepted connection, within
/// the handshake timeout.
pub async fn accept(tls: &ServerTls, tcp: TcpStream) -> Result<TlsStream<TcpStream>, Failure> {
    match tokio::time::timeout(tls.handshake_timeout, tls.acceptor.accept(tcp)).await {
        Err(_) => Err(Failure::Timeout),
        Ok(Err(e)) => {
            let f = Failure::of(&e);
            tracing::debug!(reason = f.name(), "TLS handshake failed: {e}");
            Err(f)
        }
        Ok(Ok(s)) => Ok(s),
    }
}

#[cfg(test)]
mod tests {
    use super::Failure;
    use rustls::{CertificateError, Error, PeerIncompatible};

    fn io(e: Error) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e)
    }

    #[test]
    fn reasons_from_rustls_errors() {
        assert_eq!(
            Failure::of(&io(Error::PeerIncompatible(
                PeerIncompatible::NoCipherSuitesInCommon
            ))),
            Failure::NoSharedVersionOrCipher
        );
        assert_eq!(
            Failure::of(&io(Error::NoCertificatesPresented)),
            Failure::BadClientCertificate
        );
        assert_eq!(
            Failure::of(&io(Error::InvalidCertificate(
                CertificateError::UnknownIssuer
            ))),
            Failure::BadClientCertificate
        );
        assert_eq!(Failure::of(&io(Error::DecryptError)), Failure::Other);
        // Not TLS at all: the connection's own error.
        assert_eq!(
            Failure::of(&std::io::ErrorKind::UnexpectedEof.into()),
            Failure::Other
        );
    }
}
