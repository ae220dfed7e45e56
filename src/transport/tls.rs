//! TLS with rustls (the `ring` provider; no OpenSSL): a beacon's server side, the side it
//! and its clients dial with, and the PEM files both are made from.
//!
//! Certificates and keys are re-read when their files change, checked at each new
//! connection (a `stat` of each file), so a renewed certificate is used without a restart
//! and a connection already open keeps the one it began with. A renewed file that does not
//! load is reported and the previous configuration stays in use.

use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::net::TcpStream;
use tracing::warn;

use super::Stream;

/// The PEM files of a beacon's TLS: its certificate chain and key, and the CA that signed
/// its peers' certificates (and clients', when they present one).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the {what} {}: {cause}", path.display())]
    Read {
        what: &'static str,
        path: PathBuf,
        cause: String,
    },
    #[error("the {what} {} holds no {expected} (PEM expected)", path.display())]
    Empty {
        what: &'static str,
        path: PathBuf,
        expected: &'static str,
    },
    #[error("{0}")]
    Setup(String),
    #[error("`{0}` names no host to verify a certificate against")]
    ServerName(String),
}

impl From<rustls::Error> for TlsError {
    fn from(e: rustls::Error) -> TlsError {
        TlsError::Setup(format!("TLS: {e}"))
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_error(what: &'static str, path: &Path, e: impl std::fmt::Display) -> TlsError {
    TlsError::Read {
        what,
        path: path.to_owned(),
        cause: e.to_string(),
    }
}

/// The certificates of a PEM file, in order (a chain: the leaf first).
pub fn load_certs(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| read_error(what, path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| read_error(what, path, e))?;
    if certs.is_empty() {
        return Err(TlsError::Empty {
            what,
            path: path.to_owned(),
            expected: "certificate",
        });
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => TlsError::Empty {
            what: "key file",
            path: path.to_owned(),
            expected: "private key",
        },
        e => read_error("key file", path, e),
    })
}

fn load_roots(path: &Path) -> Result<Arc<RootCertStore>, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs("CA file", path)? {
        roots
            .add(cert)
            .map_err(|e| TlsError::Setup(format!("CA file {}: {e}", path.display())))?;
    }
    Ok(Arc::new(roots))
}

/// A beacon's server side. With a CA, a certificate the other end presents must verify
/// against it (peers must present one: see the handshake); clients may present none and
/// authenticate otherwise.
pub fn server_config(files: &TlsFiles) -> Result<ServerConfig, TlsError> {
    let builder =
        ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
    let builder = match &files.ca {
        Some(ca) => {
            let verifier = WebPkiClientVerifier::builder_with_provider(load_roots(ca)?, provider())
                .allow_unauthenticated()
                .build()
                .map_err(|e| TlsError::Setup(format!("CA file {}: {e}", ca.display())))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    Ok(builder.with_single_cert(
        load_certs("certificate file", &files.cert)?,
        load_key(&files.key)?,
    )?)
}

/// A beacon's client port: as [`server_config`], offering ALPN `h2`, which gRPC clients ask
/// for (the native protocol asks for none).
pub fn client_port_config(files: &TlsFiles) -> Result<ServerConfig, TlsError> {
    let mut config = server_config(files)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// The side that dials a beacon: it verifies the beacon's certificate against `ca` and,
/// given a certificate and key, presents them.
pub fn client_config(
    ca: &Path,
    identity: Option<(&Path, &Path)>,
) -> Result<ClientConfig, TlsError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(load_roots(ca)?);
    Ok(match identity {
        Some((cert, key)) => {
            builder.with_client_auth_cert(load_certs("certificate file", cert)?, load_key(key)?)?
        }
        None => builder.with_no_client_auth(),
    })
}

/// The name a beacon's certificate must carry when it is dialled at `addr` (`ip:port`,
/// `host:port` or `[v6]:port`): its IP address or its host name.
pub fn server_name(addr: &str) -> Result<ServerName<'static>, TlsError> {
    let host = match addr.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() => host,
        _ => addr,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ServerName::IpAddress(ip.into()));
    }
    ServerName::try_from(host.to_owned()).map_err(|_| TlsError::ServerName(addr.to_owned()))
}

/// Whether certificate `der` is valid for `ip` (carries it as an IP address name): a beacon
/// that says it is the peer at `ip` must hold a certificate for that address, not merely
/// one the CA signed for some client.
pub fn certificate_names(der: &CertificateDer<'_>, ip: IpAddr) -> bool {
    let Ok(parsed) = rustls::server::ParsedCertificate::try_from(der) else {
        return false;
    };
    rustls::client::verify_server_name(&parsed, &ServerName::IpAddress(ip.into())).is_ok()
}

/// Dials TLS over an open TCP connection.
pub async fn dial(
    tcp: TcpStream,
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
) -> io::Result<Stream> {
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await?;
    Ok(Stream::Dialled(Box::new(tls)))
}

/// Accepts TLS over an open TCP connection.
pub async fn accept(tcp: TcpStream, config: Arc<ServerConfig>) -> io::Result<Stream> {
    let tls = tokio_rustls::TlsAcceptor::from(config).accept(tcp).await?;
    Ok(Stream::Accepted(Box::new(tls)))
}

/// A configuration made from files, made again when one of them changes.
pub struct Reloading<T> {
    files: TlsFiles,
    build: fn(&TlsFiles) -> Result<T, TlsError>,
    current: Mutex<(Vec<Option<SystemTime>>, Arc<T>)>,
}

impl<T> Reloading<T> {
    /// Builds it now: an error here is a start-up error.
    pub fn new(
        files: TlsFiles,
        build: fn(&TlsFiles) -> Result<T, TlsError>,
    ) -> Result<Self, TlsError> {
        let stamps = stamps(&files);
        let made = build(&files)?;
        Ok(Reloading {
            files,
            build,
            current: Mutex::new((stamps, Arc::new(made))),
        })
    }

    /// The configuration for a new connection: rebuilt first if a file changed since.
    pub fn current(&self) -> Arc<T> {
        let mut current = self.current.lock().expect("never poisoned");
        let now = stamps(&self.files);
        if now != current.0 {
            match (self.build)(&self.files) {
                Ok(made) => {
                    tracing::info!("TLS files changed: certificates reloaded");
                    *current = (now, Arc::new(made));
                }
                Err(e) => {
                    warn!("TLS files changed but do not load ({e}); the previous ones stay in use");
                    current.0 = now;
                }
            }
        }
        current.1.clone()
    }
}

fn stamps(files: &TlsFiles) -> Vec<Option<SystemTime>> {
    [Some(&files.cert), Some(&files.key), files.ca.as_ref()]
        .into_iter()
        .flatten()
        .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .collect()
}

/// A beacon's client side towards its peers: the CA verifies them, its own certificate
/// and key identify it.
pub fn peer_client_config(files: &TlsFiles) -> Result<ClientConfig, TlsError> {
    let ca = files.ca.as_deref().ok_or_else(|| {
        TlsError::Setup("beacons verify each other against `tls.ca`, which is not set".into())
    })?;
    client_config(ca, Some((&files.cert, &files.key)))
}
