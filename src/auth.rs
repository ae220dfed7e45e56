//! Who may do what: identities (a token sent in the `Hello`, or a client certificate that
//! the cluster's CA verified) and their roles.
//!
//! With no `auth` configured every connection may do everything (a lone beacon on loopback
//! stays as simple to start as ever). With it, a client must authenticate in its `Hello`,
//! and each request needs a role: `read` for what only looks, `service` for what a service
//! does with its own registration, `admin` for the rest. A service is a reader too, and an
//! admin everything.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What an identity may do; each role includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Every show command and watch.
    Read,
    /// Register, report and unregister its own registrations; the service side of
    /// sequences, assignments and tasks.
    Service,
    /// Everything: unregistering others, creating and deleting sequences, resources and
    /// queues.
    Admin,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Read => "read",
            Role::Service => "service",
            Role::Admin => "admin",
        })
    }
}

impl Role {
    /// The role named `name` (`read`, `service`, `admin`).
    pub fn named(name: &str) -> Option<Role> {
        match name {
            "read" => Some(Role::Read),
            "service" => Some(Role::Service),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

/// How an identity was established.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    Token,
    Certificate,
}

impl Proof {
    /// `token` or `certificate`.
    pub fn as_str(self) -> &'static str {
        match self {
            Proof::Token => "token",
            Proof::Certificate => "certificate",
        }
    }

    /// The proof named `name`.
    pub fn named(name: &str) -> Option<Proof> {
        match name {
            "token" => Some(Proof::Token),
            "certificate" => Some(Proof::Certificate),
            _ => None,
        }
    }
}

/// Who is on the other end of a client connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub role: Role,
    pub proof: Proof,
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = match self.proof {
            Proof::Token => "token",
            Proof::Certificate => "certificate",
        };
        write!(f, "`{}` ({how}, role {})", self.name, self.role)
    }
}

/// A token as configured: kept only as its SHA-256, so that the configuration may hold the
/// hash alone and a comparison takes the same time whatever it finds.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenHash([u8; 32]);

impl fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenHash(..)")
    }
}

impl TokenHash {
    pub fn of(token: &str) -> TokenHash {
        let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
        let mut out = [0u8; 32];
        out.copy_from_slice(digest.as_ref());
        TokenHash(out)
    }

    /// From 64 hex digits (`sha256sum` of the token, without a newline).
    pub fn from_hex(hex: &str) -> Option<TokenHash> {
        let hex = hex.trim();
        if hex.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(TokenHash(out))
    }

    /// As 64 hex digits (what `token_sha256` takes).
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Compares without stopping at the first difference.
    fn matches(&self, other: &TokenHash) -> bool {
        self.0
            .iter()
            .zip(other.0.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

/// One configured token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenEntry {
    pub name: String,
    pub role: Role,
    pub hash: TokenHash,
    /// Where it was read from, when from a file.
    pub file: Option<PathBuf>,
}

/// Key `auth`: who may connect, and as what.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthConfig {
    pub tokens: Vec<TokenEntry>,
    /// Client certificate names (their common name) and their roles.
    pub certs: BTreeMap<String, Role>,
    /// Accept tokens over plain TCP on a non-loopback address.
    pub allow_plaintext_tokens: bool,
    /// The token beacons of the cluster prove themselves to each other with, where TLS does
    /// not (no `tls.ca`).
    pub peer_token: Option<PeerToken>,
}

/// `auth.peer_token`: sent in a beacon's `Hello` to its peers, checked in theirs.
#[derive(Clone, PartialEq, Eq)]
pub struct PeerToken {
    token: String,
    hash: TokenHash,
}

impl fmt::Debug for PeerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PeerToken(..)")
    }
}

impl PeerToken {
    pub fn new(token: &str) -> PeerToken {
        PeerToken {
            token: token.to_owned(),
            hash: TokenHash::of(token),
        }
    }

    /// What this beacon sends.
    pub fn expose(&self) -> &str {
        &self.token
    }

    /// Whether a peer sent the same.
    pub fn accepts(&self, sent: &str) -> bool {
        self.hash.matches(&TokenHash::of(sent))
    }

    /// The proof that `side` ("dialer" or "acceptor") of a handshake knows the token: an
    /// HMAC-SHA256 over the side, the challenge it answers, its own challenge, the cluster
    /// and its identity, so a proof cannot be replayed on another connection, reflected back
    /// or moved to another beacon.
    pub fn prove(
        &self,
        side: &str,
        answered: &[u8],
        own: &[u8],
        cluster: &str,
        node: &str,
    ) -> Vec<u8> {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, self.token.as_bytes());
        let tag = ring::hmac::sign(&key, &proof_input(side, answered, own, cluster, node));
        tag.as_ref().to_vec()
    }

    /// Whether `proof` is the other side's proof of the token (compared in constant time).
    pub fn verify(
        &self,
        proof: &[u8],
        side: &str,
        answered: &[u8],
        own: &[u8],
        cluster: &str,
        node: &str,
    ) -> bool {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, self.token.as_bytes());
        ring::hmac::verify(
            &key,
            &proof_input(side, answered, own, cluster, node),
            proof,
        )
        .is_ok()
    }
}

/// What a handshake proof covers, each part length-prefixed so none can run into the next.
fn proof_input(side: &str, answered: &[u8], own: &[u8], cluster: &str, node: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for part in [
        side.as_bytes(),
        answered,
        own,
        cluster.as_bytes(),
        node.as_bytes(),
    ] {
        out.extend((part.len() as u32).to_be_bytes());
        out.extend(part);
    }
    out
}

/// A fresh random challenge for a peer handshake.
pub fn challenge() -> Vec<u8> {
    use ring::rand::SecureRandom;
    let mut out = vec![0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut out)
        .expect("the system's random source works");
    out
}

/// Why a client could not authenticate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error(
        "this beacon requires authentication: send a token (nebcli --token or BEACON_TOKEN) or connect with a client certificate"
    )]
    Missing,
    #[error("the token is not one this beacon knows")]
    UnknownToken,
    #[error(
        "a token over plain TCP is refused (this beacon listens on {listen}): configure TLS, or set auth.allow_plaintext_tokens"
    )]
    Plaintext { listen: std::net::SocketAddr },
    #[error("certificate `{0}` has no role here (key auth.certs)")]
    UnknownCertificate(String),
}

impl AuthConfig {
    /// Whether connections must authenticate.
    pub fn enabled(&self) -> bool {
        !self.tokens.is_empty() || !self.certs.is_empty()
    }

    /// The identity of a client that sent `token` (empty: none) over a connection that is
    /// TLS (`tls`) or not, and presented a verified certificate named `cert` (if any), to
    /// a beacon listening on `listen`.
    pub fn authenticate(
        &self,
        token: &str,
        tls: bool,
        cert: Option<&str>,
        listen: std::net::SocketAddr,
    ) -> Result<Identity, AuthError> {
        if !token.is_empty() {
            if !tls && !listen.ip().is_loopback() && !self.allow_plaintext_tokens {
                return Err(AuthError::Plaintext { listen });
            }
            let hash = TokenHash::of(token);
            // Every entry is compared, so the time taken does not say which one matched.
            let found = self
                .tokens
                .iter()
                .filter(|t| t.hash.matches(&hash))
                .fold(None, |found, t| found.or(Some(t)));
            return found
                .map(|t| Identity {
                    name: t.name.clone(),
                    role: t.role,
                    proof: Proof::Token,
                })
                .ok_or(AuthError::UnknownToken);
        }
        match cert {
            Some(name) => self
                .certs
                .get(name)
                .map(|role| Identity {
                    name: name.to_owned(),
                    role: *role,
                    proof: Proof::Certificate,
                })
                .ok_or_else(|| AuthError::UnknownCertificate(name.to_owned())),
            None => Err(AuthError::Missing),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> AuthConfig {
        AuthConfig {
            tokens: vec![
                TokenEntry {
                    name: "ops".into(),
                    role: Role::Admin,
                    hash: TokenHash::of("s3cret"),
                    file: None,
                },
                TokenEntry {
                    name: "billing".into(),
                    role: Role::Service,
                    hash: TokenHash::from_hex(
                        "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
                    )
                    .unwrap(),
                    file: None,
                },
            ],
            certs: [("dashboard".to_owned(), Role::Read)].into(),
            allow_plaintext_tokens: false,
            peer_token: Some(PeerToken::new("beacons-only")),
        }
    }

    #[test]
    fn tokens_and_certificates_name_their_identity() {
        let c = config();
        let lo: std::net::SocketAddr = "127.0.0.1:16000".parse().unwrap();
        let id = c.authenticate("s3cret", false, None, lo).unwrap();
        assert_eq!((id.name.as_str(), id.role), ("ops", Role::Admin));
        // "password", given as its SHA-256.
        let id = c.authenticate("password", false, None, lo).unwrap();
        assert_eq!((id.name.as_str(), id.role), ("billing", Role::Service));
        assert_eq!(
            c.authenticate("nope", false, None, lo),
            Err(AuthError::UnknownToken)
        );
        let id = c.authenticate("", true, Some("dashboard"), lo).unwrap();
        assert_eq!((id.role, id.proof), (Role::Read, Proof::Certificate));
        assert_eq!(
            c.authenticate("", true, Some("mallory"), lo),
            Err(AuthError::UnknownCertificate("mallory".into()))
        );
        assert_eq!(c.authenticate("", false, None, lo), Err(AuthError::Missing));
    }

    #[test]
    fn a_token_crosses_a_network_only_under_tls_or_when_allowed() {
        let mut c = config();
        let net: std::net::SocketAddr = "10.0.0.1:16000".parse().unwrap();
        assert!(matches!(
            c.authenticate("s3cret", false, None, net),
            Err(AuthError::Plaintext { .. })
        ));
        assert!(c.authenticate("s3cret", true, None, net).is_ok());
        c.allow_plaintext_tokens = true;
        assert!(c.authenticate("s3cret", false, None, net).is_ok());
    }

    #[test]
    fn handshake_proofs_bind_the_side_the_challenges_and_the_identity() {
        let p = PeerToken::new("beacons-only");
        let (a, b) = (challenge(), challenge());
        assert_ne!(a, b, "fresh each time");
        let proof = p.prove("acceptor", &a, &b, "demo", "127.0.0.1:16000");
        assert!(p.verify(&proof, "acceptor", &a, &b, "demo", "127.0.0.1:16000"));
        // Reflected as the other side, replayed over other challenges, or moved to another
        // beacon or cluster, it fails; so does a proof made with another token.
        assert!(!p.verify(&proof, "dialer", &a, &b, "demo", "127.0.0.1:16000"));
        assert!(!p.verify(&proof, "acceptor", &b, &a, "demo", "127.0.0.1:16000"));
        assert!(!p.verify(&proof, "acceptor", &a, &b, "demo", "127.0.0.1:17000"));
        assert!(!p.verify(&proof, "acceptor", &a, &b, "other", "127.0.0.1:16000"));
        let other = PeerToken::new("guess");
        let forged = other.prove("acceptor", &a, &b, "demo", "127.0.0.1:16000");
        assert!(!p.verify(&forged, "acceptor", &a, &b, "demo", "127.0.0.1:16000"));
    }

    #[test]
    fn the_peer_token_accepts_itself_only() {
        let p = config().peer_token.unwrap();
        assert!(p.accepts("beacons-only"));
        assert!(!p.accepts("") && !p.accepts("beacons-onl"));
        assert_eq!(format!("{p:?}"), "PeerToken(..)", "never printed");
    }

    #[test]
    fn roles_are_ordered_and_hashes_parse_strictly() {
        assert!(Role::Read < Role::Service && Role::Service < Role::Admin);
        assert!(TokenHash::from_hex("abc").is_none());
        assert!(TokenHash::from_hex(&"zz".repeat(32)).is_none());
    }
}
