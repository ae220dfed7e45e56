//! Throw-away certificate authorities and certificates for tests (rcgen), written as PEM
//! files.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, SanType,
};

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

impl Ca {
    /// A new CA named `name`, its certificate written to `dir/name.pem`.
    pub fn new(dir: &Path, name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("CA certificate");
        let pem = dir.join(format!("{name}.pem"));
        std::fs::write(&pem, cert.pem()).expect("write the CA");
        Ca { cert, key, pem }
    }

    /// A certificate for `name` (its common name), valid for 127.0.0.1 and `localhost`,
    /// for servers and clients alike, written to `dir/name.pem` and `dir/name.key`.
    pub fn issue(&self, dir: &Path, name: &str) -> Issued {
        self.make(dir, name, false)
    }

    /// [`Ca::issue`], but valid only in the year 2000.
    pub fn issue_expired(&self, dir: &Path, name: &str) -> Issued {
        self.make(dir, name, true)
    }

    fn make(&self, dir: &Path, name: &str, expired: bool) -> Issued {
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        params
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        if expired {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2000, 12, 31);
        }
        let key = KeyPair::generate().expect("key");
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("certificate");
        let issued = Issued {
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}.key")),
        };
        std::fs::write(&issued.cert, cert.pem()).expect("write the certificate");
        std::fs::write(&issued.key, key.serialize_pem()).expect("write the key");
        issued
    }
}
