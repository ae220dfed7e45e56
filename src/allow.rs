//! Who may open a client connection and register a service: NebulaBeacon's `ip_white`, here
//! enforced. A list of networks (`10.0.0.0/8`, `192.168.1.7`); empty admits everyone.
//!
//! Each beacon starts with its configuration's `ip_allow`; the cluster's replicated list
//! (`nebcli set ip_white ...`, kept in the config store as `beacon/ip_white`) replaces it on
//! every beacon once applied, and deleting that document brings the files' lists back. The
//! beacons of the cluster are always admitted, so that no list can cut them off from each
//! other.

use std::net::IpAddr;

use ipnet::IpNet;

/// Most networks in one list.
pub const MAX_NETWORKS: usize = 1024;

/// A list of networks; empty admits everyone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist {
    nets: Vec<IpNet>,
}

/// A list that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllowError {
    #[error("`{0}` is not a network (`10.0.0.0/8`, `fd00::/8`) nor an IP address")]
    NotANetwork(String),
    #[error("{0} networks is more than the {MAX_NETWORKS} a list may hold")]
    TooMany(usize),
}

impl Allowlist {
    /// The list that admits everyone.
    pub fn everyone() -> Allowlist {
        Allowlist::default()
    }

    /// The networks in `words` (each a network or an address, which stands for itself).
    pub fn from_words<'a>(
        words: impl IntoIterator<Item = &'a str>,
    ) -> Result<Allowlist, AllowError> {
        let mut nets = Vec::new();
        for word in words {
            let net = match word.parse::<IpNet>() {
                Ok(net) => net.trunc(),
                Err(_) => word
                    .parse::<IpAddr>()
                    .map(IpNet::from)
                    .map_err(|_| AllowError::NotANetwork(word.to_owned()))?,
            };
            if !nets.contains(&net) {
                nets.push(net);
            }
        }
        if nets.len() > MAX_NETWORKS {
            return Err(AllowError::TooMany(nets.len()));
        }
        Ok(Allowlist { nets })
    }

    /// The networks in `text`, separated by spaces, commas or new lines.
    pub fn parse(text: &str) -> Result<Allowlist, AllowError> {
        Allowlist::from_words(
            text.split(|c: char| c == ',' || c.is_whitespace())
                .filter(|w| !w.is_empty()),
        )
    }

    /// Whether `ip` may connect (an IPv4 address mapped into IPv6 counts as itself).
    pub fn admits(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.nets.is_empty() || self.nets.iter().any(|n| n.contains(&ip))
    }

    /// Whether it admits everyone (no network listed).
    pub fn is_everyone(&self) -> bool {
        self.nets.is_empty()
    }

    /// The networks, as written back (`10.0.0.0/8`).
    pub fn networks(&self) -> Vec<String> {
        self.nets.iter().map(|n| n.to_string()).collect()
    }
}

impl std::fmt::Display for Allowlist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.nets.is_empty() {
            return f.write_str("everyone");
        }
        f.write_str(&self.networks().join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn networks_and_addresses_admit_what_they_cover() {
        let list = Allowlist::parse("10.0.0.0/8, 192.168.1.7\nfd00::/8 10.1.2.3/8").unwrap();
        assert_eq!(
            list.networks(),
            ["10.0.0.0/8", "192.168.1.7/32", "fd00::/8"]
        );
        assert!(list.admits(ip("10.200.0.1")));
        assert!(list.admits(ip("192.168.1.7")));
        assert!(!list.admits(ip("192.168.1.8")));
        assert!(list.admits(ip("fd12::1")));
        assert!(
            list.admits(ip("::ffff:10.0.0.1")),
            "a mapped address is itself"
        );
        assert!(!list.admits(ip("127.0.0.1")));
        assert!(Allowlist::parse("").unwrap().admits(ip("8.8.8.8")));
        assert_eq!(Allowlist::everyone().to_string(), "everyone");
    }

    #[test]
    fn what_is_not_a_network_is_named() {
        assert_eq!(
            Allowlist::parse("10.0.0.0/8 10.0.0.0/40"),
            Err(AllowError::NotANetwork("10.0.0.0/40".into()))
        );
        assert_eq!(
            Allowlist::parse("localhost"),
            Err(AllowError::NotANetwork("localhost".into()))
        );
        let many: Vec<String> = (0..1100)
            .map(|i| format!("10.{}.{}.0/24", i / 256, i % 256))
            .collect();
        assert_eq!(
            Allowlist::from_words(many.iter().map(String::as_str)),
            Err(AllowError::TooMany(1100))
        );
    }
}
