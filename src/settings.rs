//! What every part of the configuration shares: the core's keys (`config`) and each
//! machine's section (`machines/<m>/config.rs`) are parsed from the same text with the same
//! rules, so every error names the key (or flag) at fault and where it came from.
//!
//! A machine's section is a [`Section`]: the top-level keys it owns, parsed out of the whole
//! configuration text (keys that are not its own are left to their owners; a key nobody owns
//! is an error), checked against the core's facts it depends on ([`CoreFacts`]), and written
//! back with the values in force for `--check-config`.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::de::DeserializeOwned;

/// Where a value came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Embedded,
    File(PathBuf),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Embedded => f.write_str("embedded default config"),
            Origin::File(p) => write!(f, "config {}", p.display()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {cause}")]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{origin} is not valid JSON: {msg}")]
    Syntax { origin: Origin, msg: String },
    #[error("{origin}: key `{key}`: {msg}")]
    Parse {
        origin: Origin,
        key: String,
        msg: String,
    },
    #[error("{origin}: key `{key}`: {msg}")]
    Invalid {
        origin: String,
        key: &'static str,
        msg: String,
    },
}

/// A command-line flag that replaces a top-level key (`--lease-ms` for `lease_ms`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFlag {
    /// The flag as written (`--lease-ms`), for error messages.
    pub flag: &'static str,
    /// Its value as given.
    pub value: String,
}

/// Flags that replace keys, by key.
pub type KeyFlags = BTreeMap<String, KeyFlag>;

/// What a machine's section may depend on of the core's keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreFacts {
    pub tick_ms: u64,
    pub max_frame_bytes: usize,
    /// Beacons in the cluster.
    pub beacons: usize,
}

/// A machine's part of the configuration.
pub trait Section: Sized + Clone + fmt::Debug + PartialEq {
    /// The top-level keys it owns.
    const KEYS: &'static [&'static str];

    /// Parses and checks its keys (`text` is the whole configuration; [`parse_keys`] reads
    /// a struct of them out of it), with the flags that replace them.
    fn parse(
        text: &str,
        check: &Checker,
        core: &CoreFacts,
        flags: &KeyFlags,
    ) -> Result<Self, ConfigError>;

    /// Its keys with the values in force, for `--check-config` (fed back as a file, they
    /// give the same section).
    fn effective(&self, out: &mut serde_json::Map<String, serde_json::Value>);

    /// What the data directory records of it, so that state written under one value is not
    /// served under another (the registry's node-ID range).
    fn identity(&self, _out: &mut BTreeMap<String, serde_json::Value>) {}
}

/// Reads `T` out of the configuration `text`: a struct of some top-level keys (the others
/// ignored), each nested section refusing keys it does not know. Errors name the key by its
/// path (`sequence.max_step`), with line and column.
pub fn parse_keys<T: DeserializeOwned>(check: &Checker, text: &str) -> Result<T, ConfigError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        if e.inner().is_syntax() || e.inner().is_eof() {
            return ConfigError::Syntax {
                origin: check.origin.clone(),
                msg: e.inner().to_string(),
            };
        }
        let key = match e.path().to_string() {
            p if p == "." => missing_field(e.inner()).unwrap_or_else(|| "(top level)".into()),
            p => p,
        };
        ConfigError::Parse {
            origin: check.origin.clone(),
            key,
            msg: cut_quoted(&e.inner().to_string()),
        }
    })
}

/// Quoted values longer than this are cut in error messages.
const SHOWN_CHARS: usize = 64;

/// `msg` with every quoted value (between backticks or double quotes) longer than
/// [`SHOWN_CHARS`] cut to its start and its length: a 5,000-character value echoed whole
/// buries the message that names it.
pub fn cut_quoted(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len().min(512));
    let mut rest = msg;
    while let Some(open) = rest.find(['`', '"']) {
        let quote = rest[open..].chars().next().expect("found");
        out.push_str(&rest[..=open]);
        rest = &rest[open + 1..];
        let Some(close) = rest.find(quote) else {
            break;
        };
        let value = &rest[..close];
        let chars = value.chars().count();
        if chars > SHOWN_CHARS {
            out.extend(value.chars().take(SHOWN_CHARS - 16));
            out.push_str(&format!("... ({chars} characters)"));
        } else {
            out.push_str(value);
        }
        out.push(quote);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// serde reports a missing field at the parent's path; pull the field's name out of the
/// message so the error still names the key.
fn missing_field(err: &serde_json::Error) -> Option<String> {
    let msg = err.to_string();
    let rest = msg.strip_prefix("missing field `")?;
    Some(rest[..rest.find('`')?].to_owned())
}

/// Checks values as they are parsed, naming the key (or flag) and where it came from.
pub struct Checker {
    origin: Origin,
    /// Host names resolved so far, for the start-up log.
    resolved: std::cell::RefCell<Vec<String>>,
}

impl Checker {
    pub fn new(origin: Origin) -> Checker {
        Checker {
            origin,
            resolved: Default::default(),
        }
    }

    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Host names resolved, for the start-up log.
    pub fn resolved(&self) -> Vec<String> {
        self.resolved.take()
    }

    /// An error at `key`, given in the file or by `from_flag`.
    pub fn err(
        &self,
        key: &'static str,
        from_flag: Option<&'static str>,
        msg: String,
    ) -> ConfigError {
        ConfigError::Invalid {
            origin: match from_flag {
                Some(flag) => format!("flag {flag}"),
                None => self.origin.to_string(),
            },
            key,
            msg: cut_quoted(&msg),
        }
    }

    /// `value` checked to lie in `lo..=hi`.
    pub fn range<T: PartialOrd + fmt::Display + Copy>(
        &self,
        key: &'static str,
        from_flag: Option<&'static str>,
        value: T,
        lo: T,
        hi: T,
    ) -> Result<T, ConfigError> {
        if value < lo || value > hi {
            return Err(self.err(
                key,
                from_flag,
                format!("{value} is out of range {lo}..={hi}"),
            ));
        }
        Ok(value)
    }

    /// An `ip:port`, or a `host:port` resolved now (IPv4 preferred), as the address a beacon
    /// is known by.
    pub fn addr(
        &self,
        key: &'static str,
        flag: Option<&'static str>,
        value: &str,
    ) -> Result<SocketAddr, ConfigError> {
        let value = value.trim();
        let addr = match value.parse::<SocketAddr>() {
            Ok(addr) => addr,
            Err(_) => self.resolve(key, flag, value)?,
        };
        if addr.port() == 0 {
            return Err(self.err(key, flag, format!("`{value}`: port 0 is not allowed")));
        }
        Ok(addr)
    }

    /// A list of addresses (each as [`Checker::addr`]), none listed twice.
    pub fn addrs(
        &self,
        key: &'static str,
        flag: Option<&'static str>,
        values: &[String],
    ) -> Result<std::collections::BTreeSet<SocketAddr>, ConfigError> {
        let mut addrs = std::collections::BTreeSet::new();
        for value in values {
            let addr = self.addr(key, flag, value)?;
            if !addrs.insert(addr) {
                return Err(self.err(key, flag, format!("`{addr}` is listed twice")));
            }
        }
        Ok(addrs)
    }

    fn resolve(
        &self,
        key: &'static str,
        flag: Option<&'static str>,
        value: &str,
    ) -> Result<SocketAddr, ConfigError> {
        let not_an_address = || {
            self.err(
                key,
                flag,
                format!(
                    "`{value}` is not an ip:port or host:port address (for example 127.0.0.1:16000)"
                ),
            )
        };
        let (host, port) = value.rsplit_once(':').ok_or_else(not_an_address)?;
        if host.is_empty() || port.parse::<u16>().is_err() {
            return Err(not_an_address());
        }
        use std::net::ToSocketAddrs;
        let found: Vec<SocketAddr> = value
            .to_socket_addrs()
            .map_err(|e| {
                self.err(
                    key,
                    flag,
                    format!("`{value}`: cannot resolve `{host}`: {e}"),
                )
            })?
            .collect();
        let addr = found
            .iter()
            .find(|a| a.is_ipv4())
            .or(found.first())
            .copied()
            .ok_or_else(|| self.err(key, flag, format!("`{value}`: `{host}` has no address")))?;
        self.resolved
            .borrow_mut()
            .push(format!("`{value}` (key `{key}`) resolved to {addr}"));
        Ok(addr)
    }
}

/// A section parsed alone from `text`, with the default core (for machines' own tests).
#[cfg(test)]
pub fn test_parse<S: Section>(text: &str) -> Result<S, ConfigError> {
    let check = Checker::new(Origin::File("t.json".into()));
    let core = CoreFacts {
        tick_ms: 100,
        max_frame_bytes: crate::wire::frame::DEFAULT_MAX_FRAME,
        beacons: 1,
    };
    S::parse(text, &check, &core, &KeyFlags::new())
}

/// A machine with no keys of its own (a test's).
impl Section for () {
    const KEYS: &'static [&'static str] = &[];

    fn parse(_: &str, _: &Checker, _: &CoreFacts, _: &KeyFlags) -> Result<(), ConfigError> {
        Ok(())
    }

    fn effective(&self, _out: &mut serde_json::Map<String, serde_json::Value>) {}
}
