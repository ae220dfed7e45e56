//! Throw-away certificate authorities and certificates (rcgen), written as PEM files: for
//! trying TLS in a minute (`nebcli certs`) and for tests. Not a way to run a production CA.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, SanType,
};

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("cannot make the certificate `{name}`: {cause}")]
    Make { name: String, cause: rcgen::Error },
    #[error("`{0}` is neither an IP address nor a DNS name")]
    Host(String),
    #[error("cannot write {}: {cause}", path.display())]
    Write {
        path: PathBuf,
        cause: std::io::Error,
    },
}

/// A CA that signs certificates.
pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
    /// Its certificate as a PEM file.
    pub pem: PathBuf,
}

/// A certificate and its key as PEM files.
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

fn make_err(name: &str) -> impl Fn(rcgen::Error) -> CertError + '_ {
    move |cause| CertError::Make {
        name: name.to_owned(),
        cause,
    }
}

/// Writes `text` to `path`; a key readable by its owner only.
fn write(path: &Path, text: &str, secret: bool) -> Result<(), CertError> {
    let err = |cause| CertError::Write {
        path: path.to_owned(),
        cause,
    };
    std::fs::write(path, text).map_err(err)?;
    if secret {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    }
    Ok(())
}

impl Ca {
    /// A new CA named `name`, its certificate written to `dir/name.pem`.
    pub fn new(dir: &Path, name: &str) -> Result<Ca, CertError> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(make_err(name))?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().map_err(make_err(name))?;
        let cert = params.self_signed(&key).map_err(make_err(name))?;
        let pem = dir.join(format!("{name}.pem"));
        write(&pem, &cert.pem(), false)?;
        Ok(Ca { cert, key, pem })
    }

    /// Writes the CA's private key to `path` (owner-readable only), for issuing more later.
    pub fn write_key(&self, path: &Path) -> Result<(), CertError> {
        write(path, &self.key.serialize_pem(), true)
    }

    /// A certificate for `name` (its common name), valid for 127.0.0.1 and `localhost`,
    /// for servers and clients alike, written to `dir/name.pem` and `dir/name.key`.
    pub fn issue(&self, dir: &Path, name: &str) -> Result<Issued, CertError> {
        self.make(dir, name, &[], true, false)
    }

    /// [`Ca::issue`], also valid for `hosts` (IP addresses or DNS names).
    pub fn issue_for(&self, dir: &Path, name: &str, hosts: &[String]) -> Result<Issued, CertError> {
        self.make(dir, name, hosts, true, false)
    }

    /// A client's certificate: its name only, valid for no host.
    pub fn issue_client(&self, dir: &Path, name: &str) -> Result<Issued, CertError> {
        self.make(dir, name, &[], false, false)
    }

    /// [`Ca::issue`], but valid only in the year 2000.
    pub fn issue_expired(&self, dir: &Path, name: &str) -> Result<Issued, CertError> {
        self.make(dir, name, &[], true, true)
    }

    fn make(
        &self,
        dir: &Path,
        name: &str,
        hosts: &[String],
        loopback: bool,
        expired: bool,
    ) -> Result<Issued, CertError> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(make_err(name))?;
        if loopback {
            let localhost = "localhost".to_owned().try_into().map_err(make_err(name))?;
            params.subject_alt_names.push(SanType::DnsName(localhost));
            params
                .subject_alt_names
                .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        }
        for host in hosts {
            let san = match host.parse::<IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(
                    host.clone()
                        .try_into()
                        .map_err(|_| CertError::Host(host.clone()))?,
                ),
            };
            if !params.subject_alt_names.contains(&san) {
                params.subject_alt_names.push(san);
            }
        }
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        if expired {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2000, 12, 31);
        }
        let key = KeyPair::generate().map_err(make_err(name))?;
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .map_err(make_err(name))?;
        let issued = Issued {
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}.key")),
        };
        write(&issued.cert, &cert.pem(), false)?;
        write(&issued.key, &key.serialize_pem(), true)?;
        Ok(issued)
    }
}
