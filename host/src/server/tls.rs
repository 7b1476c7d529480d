//! TLS for every listener, from `--tls-cert` and `--tls-key` (PEM files),
//! with rustls on the `ring` provider: no OpenSSL to link or patch, and the
//! same provider the command line's client uses.
//!
//! The handshake runs inside the connection's task, after the connection
//! caps admitted it, and must finish within the header read timeout, so a
//! client that opens a socket and sends nothing holds it no longer than one
//! that sends no request line over plain HTTP.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// Why the certificate or key could not be used; the server does not start.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("TLS certificate {path}: {source}")]
    Certificate {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("TLS certificate {path}: no CERTIFICATE block in the file")]
    NoCertificate { path: PathBuf },
    #[error("TLS key {path}: {source}")]
    Key {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("TLS certificate {cert} and key {key} cannot be used together: {source}")]
    Rejected {
        cert: PathBuf,
        key: PathBuf,
        source: rustls::Error,
    },
}

/// The server side of TLS: accepts connections with one certificate chain.
#[derive(Clone)]
pub struct Tls {
    acceptor: TlsAcceptor,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls")
    }
}

impl Tls {
    /// Reads a certificate chain (leaf first) and its private key (PKCS#8,
    /// PKCS#1 or SEC1), both PEM.
    pub fn load(cert: &Path, key: &Path) -> Result<Tls, TlsError> {
        let chain = CertificateDer::pem_file_iter(cert)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|source| TlsError::Certificate {
                path: cert.to_owned(),
                source,
            })?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate {
                path: cert.to_owned(),
            });
        }
        let private = PrivateKeyDer::from_pem_file(key).map_err(|source| TlsError::Key {
            path: key.to_owned(),
            source,
        })?;
        let rejected = |source| TlsError::Rejected {
            cert: cert.to_owned(),
            key: key.to_owned(),
            source,
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(rejected)?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .map_err(rejected)?;
        // The connection layer speaks HTTP/1.1 only.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }

    pub(crate) fn acceptor(&self) -> &TlsAcceptor {
        &self.acceptor
    }
}
