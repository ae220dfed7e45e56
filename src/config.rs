//! Daemon configuration: a JSON file (or the embedded default) plus command-line overrides.
//!
//! This module parses the core's keys (identity, the beacon list, the tick, the data
//! directory, the admin API, TLS, authentication) and composes every machine's section
//! ([`Sections`], each parsed in its machine's folder from the same text); it names no
//! machine. A key that neither the core nor a machine owns is an error.
//!
//! Every error names the key (or flag) at fault and where it came from, so a beacon with a bad
//! configuration stops at start with a line that says what to fix.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::auth::{AuthConfig, PeerToken, Role, TokenEntry, TokenHash};
use crate::consensus::Mode;
use crate::machines::Sections;
use crate::settings::{Checker, CoreFacts, parse_keys};
pub use crate::settings::{ConfigError, KeyFlag, KeyFlags, Origin};
use crate::transport::tls::TlsFiles;

/// The configuration used when `beacon` is started without `--config`: a single beacon on
/// 127.0.0.1:16000, leader at once. The same text as `conf/beacon.json`.
pub const EMBEDDED_DEFAULT: &str = include_str!("../conf/beacon.json");

/// Limits on `tick_ms`: below 10 ms heartbeats would swamp the loopback; above a minute a
/// failover would take minutes.
pub const TICK_MS_RANGE: std::ops::RangeInclusive<u64> = 10..=60_000;
/// Limits on `max_frame_bytes`.
pub const MAX_FRAME_RANGE: std::ops::RangeInclusive<usize> = 1024..=(256 << 20);

/// A validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Name shared by every beacon of one cluster; peers of another cluster are refused.
    pub cluster: String,
    /// This beacon's identity and cluster listen address.
    pub node: SocketAddr,
    /// The voters: every beacon of the cluster that elects the leader and makes its
    /// majorities, sorted (this one included unless it is a learner).
    pub beacons: Vec<SocketAddr>,
    /// Key `learners`: beacons that follow the leader and keep a full replica (they serve
    /// reads, and send writes on to the leader) but never lead and count for no majority;
    /// sorted.
    pub learners: Vec<SocketAddr>,
    /// The log index of the change of membership `beacons` and `learners` are: 0 for a new
    /// cluster's lists; what the cluster answered `--join` (the change that added this
    /// beacon), recorded in the data directory's identity. Not a key of the file.
    pub members_index: u64,
    /// Heartbeat / check interval.
    pub tick_ms: u64,
    /// Where this beacon keeps its state.
    pub data_dir: PathBuf,
    /// Admin HTTP listen address; `None` disables it.
    pub admin: Option<SocketAddr>,
    /// Key `dns`: where this beacon answers DNS (UDP and TCP) from its replica; `None`
    /// (the default) answers none.
    pub dns: Option<SocketAddr>,
    /// Key `dns_ttl_s`: the TTL of DNS answers (0, the default: resolvers ask again every
    /// time, so a service leaves discovery the moment it leaves the registry).
    pub dns_ttl_s: u32,
    /// Largest frame body accepted or sent.
    pub max_frame_bytes: usize,
    /// Log entries kept for followers that fall behind.
    pub log_keep: usize,
    /// Key `watch`: how far back a watch can resume, and how often an idle one hears.
    pub watch: WatchConfig,
    /// Key `members`: how learners added by `member add` are promoted.
    pub members: MembersConfig,
    /// Key `limits`: what this beacon takes at once before it answers `BUSY`.
    pub limits: Limits,
    /// How writes are made safe; defaults to quorum with 3 or more beacons.
    pub mode: Mode,
    /// Beacon identity -> the address to connect to it at, where that differs (a NAT, a
    /// port forward, a proxy). Identities stay what the `beacon` list says.
    pub dial: BTreeMap<SocketAddr, SocketAddr>,
    /// Every machine's section, parsed and checked in its folder.
    pub machines: Sections,
    /// Key `tls`: TLS on the beacon port for peers and clients; `None`: plain TCP.
    pub tls: Option<TlsFiles>,
    /// Key `auth`: tokens and certificate names with their roles; empty: no authentication.
    pub auth: AuthConfig,
    /// Key `ip_allow`: the networks that may open client connections and register services
    /// until the cluster's replicated list (`nebcli set ip_white`) replaces it; empty:
    /// everyone. The beacons themselves are always admitted.
    pub ip_allow: crate::allow::Allowlist,
    /// Host names given where an address is configured, and what each resolved to at load
    /// (for the start-up log).
    pub resolved: Vec<String>,
    /// The file it was read from and the flags given, when it came from a file: what a
    /// beacon reads again to reload its tokens.
    pub source: Option<(PathBuf, Overrides)>,
}

/// Values given on the command line; each replaces the matching key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--listen`: replaces `node`.
    pub listen: Option<String>,
    /// `--peers`: replaces `beacon`; this node is added if missing (and not a learner).
    pub peers: Option<Vec<String>>,
    /// `--learners`: replaces `learners`.
    pub learners: Option<Vec<String>>,
    /// `--tick-ms`.
    pub tick_ms: Option<u64>,
    /// `--cluster`.
    pub cluster: Option<String>,
    /// `--data-dir`.
    pub data_dir: Option<String>,
    /// `--admin`: an address, or `off`.
    pub admin: Option<String>,
    /// `--dns`: an address, or `off`.
    pub dns: Option<String>,
    /// `--mode`: `classic` or `quorum`.
    pub mode: Option<String>,
    /// `--tls-cert`, `--tls-key`, `--tls-ca`: replace `tls.cert`, `tls.key`, `tls.ca`.
    pub tls_cert: Option<String>,
    pub tls_key: Option<String>,
    pub tls_ca: Option<String>,
    /// Flags that replace a machine's key (`--lease-ms` for `lease_ms`), by key.
    pub keys: KeyFlags,
}

impl Overrides {
    /// Adds flag `flag` replacing key `key` with `value`.
    pub fn with_key(mut self, flag: &'static str, key: &str, value: impl ToString) -> Overrides {
        self.keys.insert(
            key.to_owned(),
            KeyFlag {
                flag,
                value: value.to_string(),
            },
        );
        self
    }
}

/// The core's keys (the rest of the file is the machines'; a key nobody owns is refused
/// apart, see [`unknown_keys`]).
#[derive(Debug, Deserialize)]
struct RawConfig {
    #[serde(default = "default_cluster")]
    cluster: String,
    /// Required unless `--listen` gives it.
    #[serde(default)]
    node: Option<String>,
    #[serde(default)]
    beacon: Vec<String>,
    #[serde(default)]
    learners: Vec<String>,
    #[serde(default = "default_tick_ms")]
    tick_ms: u64,
    #[serde(default = "default_data_dir")]
    data_dir: String,
    #[serde(default)]
    admin: Option<String>,
    #[serde(default)]
    dns: Option<String>,
    #[serde(default)]
    dns_ttl_s: u32,
    #[serde(default = "default_max_frame")]
    max_frame_bytes: usize,
    #[serde(default = "default_log_keep")]
    log_keep: usize,
    #[serde(default)]
    watch: RawWatch,
    #[serde(default)]
    members: RawMembers,
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    dial: BTreeMap<String, String>,
    #[serde(default)]
    tls: RawTls,
    #[serde(default)]
    auth: RawAuth,
    #[serde(default)]
    ip_allow: Vec<String>,
}

/// Key `watch`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawWatch {
    history: usize,
    history_bytes: usize,
    progress_ms: u64,
    queue_bytes: usize,
    queue_notices: usize,
}

impl Default for RawWatch {
    fn default() -> Self {
        let d = WatchConfig::default();
        RawWatch {
            history: d.history,
            history_bytes: d.history_bytes,
            progress_ms: d.progress_ms,
            queue_bytes: d.queue.queue_bytes,
            queue_notices: d.queue.queue_notices,
        }
    }
}

/// Limits on `watch.history`: a million changes is some hundreds of MB.
pub const WATCH_HISTORY_RANGE: std::ops::RangeInclusive<usize> = 0..=1_000_000;
/// Limits on `watch.history_bytes`: up to 4 GiB.
pub const WATCH_HISTORY_BYTES_RANGE: std::ops::RangeInclusive<usize> = 0..=(4 << 30);
/// Limits on `watch.progress_ms`.
pub const WATCH_PROGRESS_RANGE: std::ops::RangeInclusive<u64> = 100..=3_600_000;
/// Limits on `watch.queue_bytes`: 64 KiB (a few notices) to 1 GiB.
pub const WATCH_QUEUE_BYTES_RANGE: std::ops::RangeInclusive<usize> = (64 << 10)..=(1 << 30);
/// Limits on `watch.queue_notices`.
pub const WATCH_QUEUE_NOTICES_RANGE: std::ops::RangeInclusive<usize> = 16..=1_000_000;

/// Key `watch`: the committed changes each beacon keeps so that a watch can resume from a
/// log index (older indexes are answered `COMPACTED`), and how often an idle watch is told
/// how far the log has come (a progress notice).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchConfig {
    /// Changes kept (`history`, default 10,000; 0 keeps none: every resume is `COMPACTED`).
    pub history: usize,
    /// Bytes those changes may hold (`history_bytes`, default 64 MiB): changes that carry
    /// large buffers (task payloads and results) are kept fewer.
    pub history_bytes: usize,
    /// Milliseconds an idle watch waits for a progress notice (`progress_ms`, default 5,000).
    pub progress_ms: u64,
    /// What one watcher may hold queued at this beacon before it is dropped
    /// (`queue_bytes`, default 1 MiB; `queue_notices`, default 4,096): a watcher that falls
    /// behind resumes from its log index (see [`crate::machines::watchers`]).
    pub queue: crate::machines::watchers::WatchLimits,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            history: 10_000,
            history_bytes: 64 << 20,
            progress_ms: 5_000,
            queue: Default::default(),
        }
    }
}

impl RawWatch {
    fn check(self, check: &Checker) -> Result<WatchConfig, ConfigError> {
        let (history, bytes, progress) = (
            WATCH_HISTORY_RANGE,
            WATCH_HISTORY_BYTES_RANGE,
            WATCH_PROGRESS_RANGE,
        );
        Ok(WatchConfig {
            history: check.range(
                "watch.history",
                None,
                self.history,
                *history.start(),
                *history.end(),
            )?,
            history_bytes: check.range(
                "watch.history_bytes",
                None,
                self.history_bytes,
                *bytes.start(),
                *bytes.end(),
            )?,
            progress_ms: check.range(
                "watch.progress_ms",
                None,
                self.progress_ms,
                *progress.start(),
                *progress.end(),
            )?,
            queue: crate::machines::watchers::WatchLimits {
                queue_bytes: check.range(
                    "watch.queue_bytes",
                    None,
                    self.queue_bytes,
                    *WATCH_QUEUE_BYTES_RANGE.start(),
                    *WATCH_QUEUE_BYTES_RANGE.end(),
                )?,
                queue_notices: check.range(
                    "watch.queue_notices",
                    None,
                    self.queue_notices,
                    *WATCH_QUEUE_NOTICES_RANGE.start(),
                    *WATCH_QUEUE_NOTICES_RANGE.end(),
                )?,
            },
        })
    }
}

/// Key `limits`: what one beacon takes at once before it answers `BUSY` (see
/// `server::admission`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Requests under way at this beacon at most (`max_pending`, default 10,000).
    pub max_pending: usize,
    /// Requests one client may have under way (`client_in_flight`, default 1,000).
    pub client_in_flight: usize,
    /// Requests a second one client may make (`client_rate`, default 0: no limit).
    pub client_rate: u32,
    /// The longest new work may wait for the core before it is refused `BUSY`
    /// (`queue_delay_ms`, default 5; 0: no limit but the counts).
    pub queue_delay_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_pending: 10_000,
            client_in_flight: 1_000,
            client_rate: 0,
            queue_delay_ms: 5,
        }
    }
}

/// Key `limits`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawLimits {
    max_pending: usize,
    client_in_flight: usize,
    client_rate: u32,
    queue_delay_ms: u64,
}

impl Default for RawLimits {
    fn default() -> Self {
        let d = Limits::default();
        RawLimits {
            max_pending: d.max_pending,
            client_in_flight: d.client_in_flight,
            client_rate: d.client_rate,
            queue_delay_ms: d.queue_delay_ms,
        }
    }
}

impl RawLimits {
    fn check(self, check: &Checker) -> Result<Limits, ConfigError> {
        Ok(Limits {
            max_pending: check.range(
                "limits.max_pending",
                None,
                self.max_pending,
                16,
                10_000_000,
            )?,
            client_in_flight: check.range(
                "limits.client_in_flight",
                None,
                self.client_in_flight,
                1,
                10_000_000,
            )?,
            client_rate: check.range(
                "limits.client_rate",
                None,
                self.client_rate,
                0,
                100_000_000,
            )?,
            queue_delay_ms: check.range(
                "limits.queue_delay_ms",
                None,
                self.queue_delay_ms,
                0,
                60_000,
            )?,
        })
    }
}

/// Key `members`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawMembers {
    auto_promote: bool,
    promote_after_ms: u64,
}

impl Default for RawMembers {
    fn default() -> Self {
        let d = MembersConfig::default();
        RawMembers {
            auto_promote: d.auto_promote,
            promote_after_ms: d.promote_after_ms,
        }
    }
}

/// Limits on `members.promote_after_ms`.
pub const PROMOTE_AFTER_RANGE: std::ops::RangeInclusive<u64> = 0..=3_600_000;

/// Key `members`: a beacon added by `member add` (or `beacon --join`) joins as a learner,
/// takes the log or a snapshot, and is made a voter by the leader once it has kept up for
/// `promote_after_ms`; a voter added before it has caught up could cost the cluster its
/// quorum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MembersConfig {
    /// Promote such learners without an operator (`auto_promote`, default true); off,
    /// `member promote` does it.
    pub auto_promote: bool,
    /// How long a learner must keep up first (`promote_after_ms`, default 2,000).
    pub promote_after_ms: u64,
}

impl Default for MembersConfig {
    fn default() -> Self {
        MembersConfig {
            auto_promote: true,
            promote_after_ms: 2_000,
        }
    }
}

impl RawMembers {
    fn check(self, check: &Checker) -> Result<MembersConfig, ConfigError> {
        let range = PROMOTE_AFTER_RANGE;
        Ok(MembersConfig {
            auto_promote: self.auto_promote,
            promote_after_ms: check.range(
                "members.promote_after_ms",
                None,
                self.promote_after_ms,
                *range.start(),
                *range.end(),
            )?,
        })
    }
}

/// Key `auth`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawAuth {
    tokens: Vec<RawToken>,
    certs: Vec<RawCert>,
    allow_plaintext_tokens: bool,
    peer_token: Option<String>,
    peer_token_file: Option<String>,
}

/// One entry of `auth.tokens`: the token itself, a file holding it, or its SHA-256.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToken {
    name: String,
    role: Role,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    token_file: Option<String>,
    #[serde(default)]
    token_sha256: Option<String>,
}

/// One entry of `auth.certs`: a client certificate's common name and its role.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCert {
    name: String,
    role: Role,
}

impl RawAuth {
    fn check(self, check: &Checker) -> Result<AuthConfig, ConfigError> {
        let mut names = BTreeSet::new();
        let mut tokens: Vec<TokenEntry> = Vec::new();
        for t in self.tokens {
            let err = |msg: String| check.err("auth.tokens", None, format!("`{}`: {msg}", t.name));
            if t.name.trim().is_empty() {
                return Err(check.err("auth.tokens", None, "an entry without a name".into()));
            }
            if !names.insert(t.name.clone()) {
                return Err(err("named twice".into()));
            }
            let (hash, file) = match (&t.token, &t.token_file, &t.token_sha256) {
                (Some(token), None, None) if !token.is_empty() => (TokenHash::of(token), None),
                (None, Some(path), None) => {
                    let text = std::fs::read_to_string(path)
                        .map_err(|e| err(format!("token_file {path}: {e}")))?;
                    let token = text.trim();
                    if token.is_empty() {
                        return Err(err(format!("token_file {path} is empty")));
                    }
                    (TokenHash::of(token), Some(PathBuf::from(path)))
                }
                (None, None, Some(hex)) => (
                    TokenHash::from_hex(hex)
                        .ok_or_else(|| err("token_sha256 must be 64 hex digits".into()))?,
                    None,
                ),
                _ => {
                    return Err(err(
                        "give exactly one of `token` (not empty), `token_file` and `token_sha256`"
                            .into(),
                    ));
                }
            };
            if tokens.iter().any(|other| other.hash == hash) {
                return Err(err("its token is another entry's too".into()));
            }
            tokens.push(TokenEntry {
                name: t.name,
                role: t.role,
                hash,
                file,
            });
        }
        let mut certs = BTreeMap::new();
        for c in self.certs {
            if c.name.trim().is_empty() || certs.insert(c.name.clone(), c.role).is_some() {
                return Err(check.err(
                    "auth.certs",
                    None,
                    format!("`{}`: empty or named twice", c.name),
                ));
            }
        }
        let peer_token = match (self.peer_token, self.peer_token_file) {
            (None, None) => None,
            (Some(t), None) if !t.is_empty() => Some(PeerToken::new(&t)),
            (None, Some(path)) => {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| check.err("auth.peer_token_file", None, format!("{path}: {e}")))?;
                if text.trim().is_empty() {
                    return Err(check.err(
                        "auth.peer_token_file",
                        None,
                        format!("{path} is empty"),
                    ));
                }
                Some(PeerToken::new(text.trim()))
            }
            _ => {
                return Err(check.err(
                    "auth.peer_token",
                    None,
                    "give one of `peer_token` (not empty) and `peer_token_file`".into(),
                ));
            }
        };
        Ok(AuthConfig {
            tokens,
            certs,
            allow_plaintext_tokens: self.allow_plaintext_tokens,
            peer_token,
        })
    }
}

/// Key `tls`: PEM files; `cert` and `key` together turn TLS on.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawTls {
    cert: Option<String>,
    key: Option<String>,
    ca: Option<String>,
}

impl RawTls {
    fn check(
        self,
        check: &Checker,
        o: &Overrides,
        beacons: usize,
    ) -> Result<Option<TlsFiles>, ConfigError> {
        let pick = |file: Option<String>, flag: &Option<String>, name: &'static str| match flag {
            Some(v) => (Some(v.clone()), Some(name)),
            None => (file, None),
        };
        let (cert, cert_flag) = pick(self.cert, &o.tls_cert, "--tls-cert");
        let (key, key_flag) = pick(self.key, &o.tls_key, "--tls-key");
        let (ca, ca_flag) = pick(self.ca, &o.tls_ca, "--tls-ca");
        let files = match (cert, key) {
            (None, None) => {
                if ca.is_some() {
                    return Err(check.err(
                        "tls.ca",
                        ca_flag,
                        "set without `tls.cert` and `tls.key`: a CA alone turns nothing on".into(),
                    ));
                }
                return Ok(None);
            }
            (Some(_), None) => {
                return Err(check.err(
                    "tls.key",
                    key_flag,
                    "`tls.cert` is set: give its key too".into(),
                ));
            }
            (None, Some(_)) => {
                return Err(check.err(
                    "tls.cert",
                    cert_flag,
                    "`tls.key` is set: give its certificate too".into(),
                ));
            }
            (Some(cert), Some(key)) => TlsFiles {
                cert: cert.into(),
                key: key.into(),
                ca: ca.map(PathBuf::from),
            },
        };
        if files.ca.is_none() && beacons > 1 {
            return Err(check.err(
                "tls.ca",
                ca_flag,
                format!("a cluster of {beacons} beacons needs the CA that signed their certificates, so that they can verify each other"),
            ));
        }
        // Checked now, so that a wrong path is a configuration error, not a failed start.
        let what: [(&'static str, Option<&'static str>, &PathBuf); 2] = [
            ("tls.cert", cert_flag, &files.cert),
            ("tls.key", key_flag, &files.key),
        ];
        for (key, flag, path) in what
            .into_iter()
            .chain(files.ca.as_ref().map(|p| ("tls.ca", ca_flag, p)))
        {
            std::fs::metadata(path)
                .map_err(|e| check.err(key, flag, format!("{}: {e}", path.display())))?;
        }
        Ok(Some(files))
    }
}

fn default_cluster() -> String {
    "default".into()
}
/// A hung or cut-off leader is replaced on the fourth silent tick, so the tick sets that
/// failover's time (about 400 ms at 100 ms, under etcd's default election timeout of
/// 1 s); heartbeats carry no state when idle, so ten a second per peer cost nothing.
pub const DEFAULT_TICK_MS: u64 = 100;

fn default_tick_ms() -> u64 {
    DEFAULT_TICK_MS
}
fn default_data_dir() -> String {
    "data/{node}".into()
}
fn default_max_frame() -> usize {
    crate::wire::frame::DEFAULT_MAX_FRAME
}

/// The default admin address: the beacon's own IP, its port + 88 (16000 -> 16088, as
/// NebulaBeacon's), so that beacons on one machine do not collide; none past port 65535.
fn default_admin(node: SocketAddr) -> Option<SocketAddr> {
    let port = node.port().checked_add(88)?;
    Some(SocketAddr::new(node.ip(), port))
}
fn default_log_keep() -> usize {
    10_000
}

impl Config {
    /// The effective configuration as a config file (`--check-config`): every key with the
    /// value in force, defaults and flags applied, host names resolved. Fed back as a file it
    /// gives the same configuration. Tokens appear as their SHA-256 (`token_sha256`) or their
    /// file; `auth.peer_token`, which beacons send each other, appears as configured.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let mut v = json!({
            "cluster": self.cluster,
            "node": self.node.to_string(),
            "beacon": self.beacon_names(),
            "learners": self.learners.iter().map(|l| l.to_string()).collect::<Vec<_>>(),
            "mode": self.mode.as_str(),
            "tick_ms": self.tick_ms,
            "data_dir": self.data_dir.display().to_string(),
            "admin": self.admin.map_or("off".to_owned(), |a| a.to_string()),
            "dns": self.dns.map_or("off".to_owned(), |a| a.to_string()),
            "dns_ttl_s": self.dns_ttl_s,
            "max_frame_bytes": self.max_frame_bytes,
            "log_keep": self.log_keep,
            "watch": {
                "history": self.watch.history,
                "history_bytes": self.watch.history_bytes,
                "progress_ms": self.watch.progress_ms,
                "queue_bytes": self.watch.queue.queue_bytes,
                "queue_notices": self.watch.queue.queue_notices,
            },
            "members": {
                "auto_promote": self.members.auto_promote,
                "promote_after_ms": self.members.promote_after_ms,
            },
            "limits": {
                "max_pending": self.limits.max_pending,
                "client_in_flight": self.limits.client_in_flight,
                "client_rate": self.limits.client_rate,
                "queue_delay_ms": self.limits.queue_delay_ms,
            },
            "dial": self.dial.iter().map(|(b, via)| (b.to_string(), json!(via.to_string())))
                .collect::<serde_json::Map<_, _>>(),
            "ip_allow": self.ip_allow.networks(),
        });
        if let serde_json::Value::Object(keys) = &mut v {
            self.machines.effective(keys);
        }
        if let Some(tls) = &self.tls {
            v["tls"] = json!({"cert": tls.cert, "key": tls.key});
            if let Some(ca) = &tls.ca {
                v["tls"]["ca"] = json!(ca);
            }
        }
        let auth = &self.auth;
        if auth.enabled() || auth.peer_token.is_some() || auth.allow_plaintext_tokens {
            let tokens: Vec<serde_json::Value> = auth
                .tokens
                .iter()
                .map(|t| match &t.file {
                    Some(file) => json!({"name": t.name, "role": t.role, "token_file": file}),
                    None => {
                        json!({"name": t.name, "role": t.role, "token_sha256": t.hash.to_hex()})
                    }
                })
                .collect();
            let certs: Vec<serde_json::Value> = auth
                .certs
                .iter()
                .map(|(name, role)| json!({"name": name, "role": role}))
                .collect();
            v["auth"] = json!({
                "tokens": tokens,
                "certs": certs,
                "allow_plaintext_tokens": auth.allow_plaintext_tokens,
            });
            if let Some(peer) = &auth.peer_token {
                v["auth"]["peer_token"] = json!(peer.expose());
            }
        }
        v
    }

    /// Where this beacon's admin HTTP API and status page are, as a URL its peers pass on
    /// to operators: the admin address, with this beacon's own IP when the admin listens
    /// on every interface. `None` when the admin API is off.
    pub fn admin_url(&self) -> Option<String> {
        let admin = self.admin?;
        let ip = if admin.ip().is_unspecified() {
            self.node.ip()
        } else {
            admin.ip()
        };
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        Some(format!("{scheme}://{}", SocketAddr::new(ip, admin.port())))
    }

    /// The beacon list as `ip:port` strings, sorted, as the wire carries it.
    pub fn beacon_names(&self) -> Vec<String> {
        self.beacons.iter().map(|b| b.to_string()).collect()
    }

    /// Every beacon of the cluster, voters and learners, sorted: the peers this one links
    /// with (itself included).
    pub fn members(&self) -> Vec<SocketAddr> {
        let mut all: Vec<SocketAddr> = self.beacons.iter().chain(&self.learners).copied().collect();
        all.sort();
        all
    }

    /// Whether this beacon is a learner (key `learners` lists it).
    pub fn is_learner(&self) -> bool {
        self.learners.contains(&self.node)
    }

    /// Reads `path` (or the embedded default when `None`), applies `overrides`, validates.
    pub fn load(path: Option<&Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
        let (origin, text) = match path {
            None => (Origin::Embedded, EMBEDDED_DEFAULT.to_owned()),
            Some(p) => (
                Origin::File(p.to_owned()),
                std::fs::read_to_string(p).map_err(|cause| ConfigError::Read {
                    path: p.to_owned(),
                    cause,
                })?,
            ),
        };
        Self::from_json(origin, &text, overrides)
    }

    /// Parses configuration text.
    pub fn from_json(
        origin: Origin,
        text: &str,
        overrides: &Overrides,
    ) -> Result<Config, ConfigError> {
        let check = Checker::new(origin.clone());
        let raw: RawConfig = parse_keys(&check, text)?;
        unknown_keys(&check, text)?;
        let source = match &origin {
            Origin::File(path) => Some((path.clone(), overrides.clone())),
            Origin::Embedded => None,
        };
        Ok(Config {
            source,
            ..raw.apply(text, check, overrides)?
        })
    }

    /// What the core's keys tell the machines' sections.
    pub fn core_facts(&self) -> CoreFacts {
        CoreFacts {
            tick_ms: self.tick_ms,
            max_frame_bytes: self.max_frame_bytes,
            beacons: self.beacons.len(),
        }
    }
}

/// The core's top-level keys.
const CORE_KEYS: &[&str] = &[
    "cluster",
    "node",
    "beacon",
    "learners",
    "tick_ms",
    "data_dir",
    "admin",
    "dns",
    "dns_ttl_s",
    "max_frame_bytes",
    "log_keep",
    "watch",
    "members",
    "limits",
    "mode",
    "dial",
    "tls",
    "auth",
    "ip_allow",
];

/// Refuses a top-level key that neither the core nor a machine owns (a typo never goes
/// unnoticed), naming the keys there are.
fn unknown_keys(check: &Checker, text: &str) -> Result<(), ConfigError> {
    let keys: BTreeMap<String, serde::de::IgnoredAny> = parse_keys(check, text)?;
    let machines = Sections::keys();
    let known = |k: &str| CORE_KEYS.contains(&k) || machines.contains(&k);
    if let Some(unknown) = keys.keys().find(|k| !known(k)) {
        let mut all: Vec<&str> = CORE_KEYS.iter().chain(&machines).copied().collect();
        all.sort_unstable();
        let expected: Vec<String> = all.iter().map(|k| format!("`{k}`")).collect();
        return Err(ConfigError::Parse {
            origin: check.origin().clone(),
            key: unknown.clone(),
            msg: format!(
                "unknown field `{unknown}`, expected one of {}",
                expected.join(", ")
            ),
        });
    }
    Ok(())
}

impl RawConfig {
    fn apply(mut self, text: &str, check: Checker, o: &Overrides) -> Result<Config, ConfigError> {
        let node_flag = o.listen.is_some().then_some("--listen");
        if let Some(v) = &o.listen {
            self.node = Some(v.clone());
        }
        let Some(node) = &self.node else {
            return Err(check.err(
                "node",
                None,
                "missing: give this beacon's own ip:port in the file (`\"node\": \"10.0.0.1:16000\"`) or with --listen".into(),
            ));
        };
        let node = check.addr("node", node_flag, node)?;
        if node.ip().is_unspecified() {
            return Err(check.err(
                "node",
                node_flag,
                format!(
                    "`{node}`: the node address is this beacon's identity and must be one its peers can reach, not a wildcard"
                ),
            ));
        }

        let peers_flag = o.peers.is_some().then_some("--peers");
        if let Some(peers) = &o.peers {
            self.beacon = peers.clone();
        }
        let mut beacons = check.addrs("beacon", peers_flag, &self.beacon)?;
        let learners_flag = o.learners.is_some().then_some("--learners");
        if let Some(learners) = &o.learners {
            self.learners = learners.clone();
        }
        let learners = check.addrs("learners", learners_flag, &self.learners)?;
        for &addr in &learners {
            if beacons.contains(&addr) {
                return Err(check.err(
                    "learners",
                    learners_flag,
                    format!(
                        "`{addr}` is also a voter (key `beacon`): a beacon is one or the other"
                    ),
                ));
            }
        }
        if !learners.is_empty() && beacons.is_empty() {
            return Err(check.err(
                "learners",
                learners_flag,
                "learners follow voters, and key `beacon` lists none".into(),
            ));
        }
        if learners.contains(&node) {
            // A learner: the voters are the others.
        } else if peers_flag.is_some() {
            beacons.insert(node);
        } else if !beacons.is_empty() && !beacons.contains(&node) {
            return Err(check.err(
                "beacon",
                None,
                format!(
                    "the list does not contain this beacon's own address `{node}` (key `node`); list every beacon of the cluster, this one included"
                ),
            ));
        }
        if beacons.is_empty() {
            beacons.insert(node);
        }

        let tick_flag = o.tick_ms.is_some().then_some("--tick-ms");
        let tick_ms = o.tick_ms.unwrap_or(self.tick_ms);
        check.range(
            "tick_ms",
            tick_flag,
            tick_ms,
            *TICK_MS_RANGE.start(),
            *TICK_MS_RANGE.end(),
        )?;

        let cluster_flag = o.cluster.is_some().then_some("--cluster");
        let cluster = o.cluster.clone().unwrap_or(self.cluster);
        let valid_char = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
        if cluster.is_empty() || cluster.len() > 64 || !cluster.chars().all(valid_char) {
            return Err(check.err(
                "cluster",
                cluster_flag,
                format!("`{cluster}`: use 1 to 64 characters from A-Z a-z 0-9 . _ -"),
            ));
        }

        let data_flag = o.data_dir.is_some().then_some("--data-dir");
        let data_dir = o.data_dir.clone().unwrap_or(self.data_dir);
        if data_dir.trim().is_empty() {
            return Err(check.err("data_dir", data_flag, "must not be empty".into()));
        }
        let node_dir = format!("{}_{}", node.ip(), node.port());
        let data_dir = PathBuf::from(data_dir.replace("{node}", &node_dir));

        let admin_flag = o.admin.is_some().then_some("--admin");
        let admin = match o.admin.clone().or(self.admin) {
            None => default_admin(node),
            Some(v) if v == "off" => None,
            Some(v) => Some(check.addr("admin", admin_flag, &v)?),
        };
        if admin == Some(node) {
            return Err(check.err(
                "admin",
                admin_flag,
                format!("`{node}` is also the cluster address (key `node`); give the admin HTTP API its own port"),
            ));
        }
        let dns_flag = o.dns.is_some().then_some("--dns");
        let dns = match o.dns.clone().or(self.dns) {
            None => None,
            Some(v) if v == "off" => None,
            Some(v) => Some(check.addr("dns", dns_flag, &v)?),
        };
        if let Some(dns) = dns
            && (dns == node || Some(dns) == admin)
        {
            return Err(check.err(
                "dns",
                dns_flag,
                format!("`{dns}` is also the cluster or admin address; give DNS its own port (53 is DNS's own)"),
            ));
        }

        check.range(
            "max_frame_bytes",
            None,
            self.max_frame_bytes,
            *MAX_FRAME_RANGE.start(),
            *MAX_FRAME_RANGE.end(),
        )?;

        if self.log_keep == 0 {
            return Err(check.err("log_keep", None, "must be at least 1".into()));
        }
        let mut dial = BTreeMap::new();
        for (beacon, via) in &self.dial {
            let beacon = check.addr("dial", None, beacon)?;
            if beacon == node || !(beacons.contains(&beacon) || learners.contains(&beacon)) {
                return Err(check.err(
                    "dial",
                    None,
                    format!(
                        "`{beacon}` is not one of this beacon's peers (keys `beacon`, `learners`)"
                    ),
                ));
            }
            dial.insert(beacon, check.addr("dial", None, via)?);
        }

        let core = CoreFacts {
            tick_ms,
            max_frame_bytes: self.max_frame_bytes,
            beacons: beacons.len(),
        };
        let machines = Sections::parse(text, &check, &core, &o.keys)?;
        let members = beacons.len() + learners.len();
        let tls = self.tls.check(&check, o, members)?;
        let watch = self.watch.check(&check)?;
        let members_config = self.members.check(&check)?;
        let limits = self.limits.check(&check)?;
        let auth = self.auth.check(&check)?;
        let ip_allow =
            crate::allow::Allowlist::from_words(self.ip_allow.iter().map(String::as_str))
                .map_err(|e| check.err("ip_allow", None, e.to_string()))?;
        let tls_verifies_peers = tls.as_ref().is_some_and(|t| t.ca.is_some());
        if auth.enabled() && members > 1 && !tls_verifies_peers && auth.peer_token.is_none() {
            return Err(check.err(
                "auth.peer_token",
                None,
                "clients must authenticate, but a beacon could still join by saying it is one: verify beacons by TLS (`tls.ca`) or give every beacon the same `auth.peer_token`".into(),
            ));
        }
        if !auth.certs.is_empty() && tls.as_ref().is_none_or(|t| t.ca.is_none()) {
            return Err(check.err(
                "auth.certs",
                None,
                "client certificates are verified against `tls.ca`, which is not set".into(),
            ));
        }

        let mode_flag = o.mode.is_some().then_some("--mode");
        let mode = match o.mode.as_deref().or(self.mode.as_deref()) {
            None => Mode::default_for(beacons.len()),
            Some("classic") => Mode::Classic,
            Some("quorum") => Mode::Quorum,
            Some(other) => {
                return Err(check.err(
                    "mode",
                    mode_flag,
                    format!("`{other}` is not a mode: use \"classic\" or \"quorum\""),
                ));
            }
        };

        Ok(Config {
            mode,
            dial,
            cluster,
            node,
            beacons: beacons.into_iter().collect(),
            learners: learners.into_iter().collect(),
            members_index: 0,
            tick_ms,
            data_dir,
            admin,
            dns,
            dns_ttl_s: self.dns_ttl_s,
            max_frame_bytes: self.max_frame_bytes,
            log_keep: self.log_keep,
            watch,
            members: members_config,
            limits,
            machines,
            tls,
            auth,
            ip_allow,
            resolved: check.resolved(),
            source: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_json(Origin::File("t.json".into()), text, &Overrides::default())
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn defaults_follow_the_listen_address_and_the_tick() {
        let load = |o: Overrides| Config::load(None, &o);
        // Three beacons on one machine from flags: each gets its own admin port.
        for (port, admin) in [(16000, 16088), (17000, 17088), (18000, 18088)] {
            let c = load(Overrides {
                listen: Some(format!("127.0.0.1:{port}")),
                peers: Some(vec!["127.0.0.1:16000".into(), "127.0.0.1:17000".into()]),
                ..Overrides::default()
            })
            .unwrap();
            assert_eq!(c.admin, Some(format!("127.0.0.1:{admin}").parse().unwrap()));
        }
        // A long tick stretches the default lease instead of failing on it.
        let c = load(Overrides {
            tick_ms: Some(5000),
            ..Overrides::default()
        })
        .unwrap();
        assert_eq!(c.to_json()["lease_ms"], 50_000);
        // A lease given too short for the tick names the flag that gave it.
        let e = load(
            Overrides {
                tick_ms: Some(5000),
                ..Overrides::default()
            }
            .with_key("--lease-ms", "lease_ms", 10_000),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("flag --lease-ms: key `lease_ms`: 10000 is shorter than 3 ticks"),
            "{e}"
        );
        let c = load(Overrides::default().with_key("--id-range", "id_range", "5-100000")).unwrap();
        assert_eq!(c.to_json()["id_range"], serde_json::json!([5, 100_000]));
        let e = load(Overrides::default().with_key("--id-range", "id_range", "100"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "flag --id-range: key `id_range`: `100` is not FIRST-LAST (for example 1-1023)"
        );
    }

    #[test]
    fn host_names_are_resolved_and_said() {
        let c = Config::load(
            None,
            &Overrides {
                listen: Some("localhost:16500".into()),
                ..Overrides::default()
            },
        )
        .unwrap();
        assert!(c.node.ip().is_loopback(), "{}", c.node);
        assert_eq!(c.node.port(), 16500);
        assert_eq!(c.resolved.len(), 1, "{:?}", c.resolved);
        assert!(c.resolved[0].starts_with("`localhost:16500` (key `node`) resolved to "));
        let e = Config::load(
            None,
            &Overrides {
                listen: Some("banana".into()),
                ..Overrides::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("`banana` is not an ip:port or host:port address"),
            "{e}"
        );
    }

    #[test]
    fn the_effective_configuration_feeds_back_as_a_file() {
        let text = r#"{"node": "127.0.0.1:16000",
            "beacon": ["127.0.0.1:16000", "127.0.0.1:17000", "127.0.0.1:18000"],
            "tick_ms": 250, "id_range": [10, 500], "dial": {"127.0.0.1:17000": "127.0.0.1:27000"},
            "assign": {"auto_rebalance_spread": 3, "delay_ms": {"LOGIC": 500}},
            "auth": {"tokens": [{"name": "ops", "token": "s3cret", "role": "admin"}],
                     "peer_token": "between-beacons"},
            "node_type": [{"node_type": "LOGIC", "subscribe": ["LOGGER"]}]}"#;
        let c = parse(text).unwrap();
        let json = c.to_json();
        assert_eq!(json["admin"], "127.0.0.1:16088");
        assert_eq!(json["lease_ms"], 10_000);
        assert_eq!(json["mode"], "quorum");
        let hash = json["auth"]["tokens"][0]["token_sha256"].as_str().unwrap();
        assert_eq!(hash.len(), 64, "the token is printed as its hash only");
        assert!(!json.to_string().contains("s3cret"));
        let again = parse(&json.to_string()).unwrap();
        assert_eq!(again.to_json(), json);
        assert_eq!(again.tick_ms, 250);
        assert_eq!(again.dial, c.dial);
        assert_eq!(again.machines, c.machines);
    }

    #[test]
    fn learners_are_apart_from_the_voters_and_follow_some() {
        let voters = r#""beacon": ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]"#;
        let c = parse(&format!(
            r#"{{"node": "127.0.0.1:4", {voters}, "learners": ["127.0.0.1:4"]}}"#
        ))
        .unwrap();
        assert!(c.is_learner());
        assert_eq!(c.beacons.len(), 3, "the voters alone");
        assert_eq!(c.members().len(), 4);
        assert_eq!(c.mode, Mode::Quorum, "three voters");
        let again = parse(&c.to_json().to_string()).unwrap();
        assert_eq!(again.learners, c.learners);
        let e = err(&format!(
            r#"{{"node": "127.0.0.1:1", {voters}, "learners": ["127.0.0.1:2"]}}"#
        ));
        assert!(e.contains("learners") && e.contains("also a voter"), "{e}");
        let e = err(r#"{"node": "127.0.0.1:4", "learners": ["127.0.0.1:4"]}"#);
        assert!(e.contains("learners follow voters"), "{e}");
        let e = err(&format!(
            r#"{{"node": "127.0.0.1:5", {voters}, "learners": ["127.0.0.1:4"]}}"#
        ));
        assert!(
            e.contains("does not contain this beacon's own address"),
            "{e}"
        );
    }

    #[test]
    fn embedded_default_is_a_lone_beacon_on_16000() {
        let c = Config::load(None, &Overrides::default()).unwrap();
        assert_eq!(c.node, "127.0.0.1:16000".parse().unwrap());
        assert_eq!(c.beacons, vec![c.node]);
        assert_eq!(c.tick_ms, 100);
        assert_eq!(c.cluster, "default");
        assert_eq!(c.data_dir, PathBuf::from("data/127.0.0.1_16000"));
        assert_eq!(c.admin, Some("127.0.0.1:16088".parse().unwrap()));
        let json = c.to_json();
        assert_eq!(json["id_range"], serde_json::json!([1, 1023]));
        assert_eq!(
            (
                json["lease_ms"].as_u64(),
                json["id_reuse_delay_ms"].as_u64()
            ),
            (Some(10_000), Some(30_000))
        );
        assert_eq!(json["max_metadata_bytes"], 1024);
        assert_eq!(
            c.mode,
            Mode::Quorum,
            "the default for one beacon: it can grow"
        );
        assert_eq!(json["node_type"][0]["node_type"], "ACCESS");
    }

    #[test]
    fn shipped_cluster_examples_are_valid_and_agree() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/cluster");
        let mut lists = Vec::new();
        for port in [16000, 17000, 18000] {
            let c = Config::load(
                Some(&dir.join(format!("beacon-{port}.json"))),
                &Overrides::default(),
            )
            .unwrap();
            assert_eq!(c.node.port(), port);
            assert_eq!(c.beacons.len(), 3);
            assert_eq!(c.mode, Mode::Quorum, "the default for three beacons");
            lists.push((c.beacons, c.cluster));
        }
        assert!(lists.windows(2).all(|w| w[0] == w[1]));
    }

    #[test]
    fn tls_keys_are_checked_together_and_their_files_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, "x").unwrap();
            p.display().to_string()
        };
        let (cert, key, ca) = (file("c.pem"), file("k.pem"), file("ca.pem"));
        let with = |tls: serde_json::Value, beacons: &[&str]| {
            let text =
                serde_json::json!({"node": "127.0.0.1:16000", "beacon": beacons, "tls": tls});
            parse(&text.to_string())
        };
        let one = ["127.0.0.1:16000"];
        let three = ["127.0.0.1:16000", "127.0.0.1:17000", "127.0.0.1:18000"];
        let c = with(serde_json::json!({"cert": cert, "key": key}), &one).unwrap();
        assert_eq!(
            c.tls.unwrap().cert,
            PathBuf::from(&cert),
            "a lone beacon needs no CA"
        );
        let e = with(serde_json::json!({"cert": cert}), &one)
            .unwrap_err()
            .to_string();
        assert!(e.contains("key `tls.key`"), "{e}");
        let e = with(serde_json::json!({"ca": ca}), &one)
            .unwrap_err()
            .to_string();
        assert!(e.contains("key `tls.ca`"), "{e}");
        let e = with(serde_json::json!({"cert": cert, "key": key}), &three)
            .unwrap_err()
            .to_string();
        assert!(e.contains("key `tls.ca`") && e.contains("3 beacons"), "{e}");
        let missing = dir.path().join("nope.pem").display().to_string();
        let e = with(
            serde_json::json!({"cert": missing, "key": key, "ca": ca}),
            &three,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("key `tls.cert`") && e.contains("nope.pem"),
            "{e}"
        );
        let c = with(
            serde_json::json!({"cert": cert, "key": key, "ca": ca}),
            &three,
        )
        .unwrap();
        assert_eq!(c.tls.unwrap().ca, Some(PathBuf::from(&ca)));
        assert!(
            with(serde_json::json!({"crt": cert}), &one).is_err(),
            "unknown keys refused"
        );
    }

    #[test]
    fn auth_without_a_way_for_beacons_to_prove_themselves_is_refused() {
        let three = ["127.0.0.1:16000", "127.0.0.1:17000", "127.0.0.1:18000"];
        let with = |auth: serde_json::Value, beacons: &[&str]| {
            let text =
                serde_json::json!({"node": "127.0.0.1:16000", "beacon": beacons, "auth": auth});
            parse(&text.to_string())
        };
        let tokens = serde_json::json!([{"name": "ops", "token": "t", "role": "admin"}]);
        let e = with(serde_json::json!({"tokens": tokens}), &three)
            .unwrap_err()
            .to_string();
        assert!(e.contains("key `auth.peer_token`"), "{e}");
        assert!(
            with(serde_json::json!({"tokens": tokens}), &three[..1]).is_ok(),
            "a lone beacon has no peers"
        );
        let c = with(
            serde_json::json!({"tokens": tokens, "peer_token": "p"}),
            &three,
        )
        .unwrap();
        assert!(c.auth.peer_token.unwrap().accepts("p"));
        let e = with(serde_json::json!({"tokens": [{"name": "a", "token": "t", "token_sha256": "00", "role": "read"}]}), &three[..1])
            .unwrap_err()
            .to_string();
        assert!(e.contains("exactly one of"), "{e}");
        let e = with(
            serde_json::json!({"tokens": [{"name": "a", "token": "t", "role": "root"}]}),
            &three[..1],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("root"), "{e}");
        let e = with(
            serde_json::json!({"certs": [{"name": "dash", "role": "read"}]}),
            &three[..1],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("key `auth.certs`") && e.contains("tls.ca"),
            "{e}"
        );
    }

    #[test]
    fn flags_override_the_file() {
        let o = Overrides {
            listen: Some("127.0.0.1:17000".into()),
            peers: Some(vec!["127.0.0.1:16000".into(), "127.0.0.1:18000".into()]),
            tick_ms: Some(100),
            cluster: Some("prod".into()),
            data_dir: Some("/tmp/b/{node}".into()),
            admin: Some("off".into()),
            ..Overrides::default()
        };
        let c = Config::from_json(Origin::Embedded, EMBEDDED_DEFAULT, &o).unwrap();
        assert_eq!(c.node.port(), 17000);
        let ports: Vec<u16> = c.beacons.iter().map(|b| b.port()).collect();
        assert_eq!(ports, vec![16000, 17000, 18000], "own node added, sorted");
        assert_eq!(c.tick_ms, 100);
        assert_eq!(c.cluster, "prod");
        assert_eq!(c.data_dir, PathBuf::from("/tmp/b/127.0.0.1_17000"));
        assert_eq!(c.admin, None);
    }

    #[test]
    fn a_file_without_node_takes_listen_and_mode_takes_a_flag() {
        let file = |o: &Overrides| {
            Config::from_json(
                Origin::File("t.json".into()),
                r#"{"tick_ms": 50, "mode": "classic"}"#,
                o,
            )
        };
        let listen = Overrides {
            listen: Some("127.0.0.1:16500".into()),
            ..Overrides::default()
        };
        let c = file(&listen).unwrap();
        assert_eq!(c.node, "127.0.0.1:16500".parse().unwrap());
        assert_eq!(c.mode, Mode::Classic);
        let quorum = Overrides {
            mode: Some("quorum".into()),
            ..listen.clone()
        };
        assert_eq!(file(&quorum).unwrap().mode, Mode::Quorum);
        let bad = Overrides {
            mode: Some("strict".into()),
            ..listen
        };
        assert_eq!(
            file(&bad).unwrap_err().to_string(),
            "flag --mode: key `mode`: `strict` is not a mode: use \"classic\" or \"quorum\""
        );
        let two = Overrides {
            listen: Some("127.0.0.1:16500".into()),
            peers: Some(vec!["127.0.0.1:16600".into()]),
            ..Overrides::default()
        };
        let pair = Config::from_json(Origin::Embedded, "{}", &two).unwrap();
        assert_eq!(pair.mode, Mode::Classic, "the default for a pair");
    }

    #[test]
    fn errors_name_the_key() {
        assert_eq!(
            err(r#"{"node": "127.0.0.1:1", "tick_ms": "fast"}"#),
            "config t.json: key `tick_ms`: invalid type: string \"fast\", expected u64 at line 1 column 41"
        );
        assert!(
            err(r#"{"node": "127.0.0.1:1", "tikc_ms": 5}"#)
                .starts_with("config t.json: key `tikc_ms`: unknown field `tikc_ms`")
        );
        assert!(err(r#"{"beacon": []}"#).starts_with(
            "config t.json: key `node`: missing: give this beacon's own ip:port in the file"
        ));
        // A syntax error is one, not a key's.
        assert_eq!(
            err(r#"{"node": "127.0.0.1:1",}"#),
            "config t.json is not valid JSON: trailing comma at line 1 column 24"
        );
        assert_eq!(
            err(r#"{"node": "127.0.0.1:1""#),
            "config t.json is not valid JSON: EOF while parsing an object at line 1 column 22"
        );
        // A long value is cut, not echoed whole.
        let long = "A".repeat(5_000);
        let e = err(&format!(r#"{{"node": "127.0.0.1:1", "mode": "{long}"}}"#));
        assert!(
            e.len() < 300 && e.contains("... (5000 characters)` is not a mode"),
            "{e}"
        );
        assert_eq!(
            err(r#"{"node": "localhost"}"#),
            "config t.json: key `node`: `localhost` is not an ip:port or host:port address (for example 127.0.0.1:16000)"
        );
        assert!(
            err(r#"{"node": "127.0.0.1:1", "beacon": ["127.0.0.1:2", "x"]}"#)
                .starts_with("config t.json: key `beacon`: `x` is not")
        );
        assert!(
            err(r#"{"node": "127.0.0.1:1", "beacon": ["127.0.0.1:2"]}"#)
                .contains("key `beacon`: the list does not contain this beacon's own address")
        );
        assert!(
            err(r#"{"node": "127.0.0.1:1", "beacon": ["127.0.0.1:1", "127.0.0.1:1"]}"#)
                .contains("listed twice")
        );
        assert_eq!(
            err(r#"{"node": "127.0.0.1:1", "tick_ms": 1}"#),
            "config t.json: key `tick_ms`: 1 is out of range 10..=60000"
        );
        assert!(err(r#"{"node": "127.0.0.1:1", "cluster": "a b"}"#).contains("key `cluster`"));
        assert!(err(r#"{"node": "0.0.0.0:1"}"#).contains("key `node`"));
        assert!(err(r#"{"node": "127.0.0.1:1", "admin": "127.0.0.1:1"}"#).contains("key `admin`"));
        assert!(
            err(r#"{"node": "127.0.0.1:1", "max_frame_bytes": 10}"#)
                .contains("key `max_frame_bytes`")
        );
        assert!(err("{").contains("EOF while parsing"));
        assert!(err(r#"{"node": "127.0.0.1:1", "mode": "raft"}"#).contains("key `mode`"));
        let dial = |map: &str| {
            format!(
                r#"{{"node": "127.0.0.1:1", "beacon": ["127.0.0.1:1", "127.0.0.1:2"], "dial": {map}}}"#
            )
        };
        assert!(
            err(&dial(r#"{"127.0.0.1:3": "127.0.0.1:9"}"#))
                .contains("key `dial`: `127.0.0.1:3` is not one of this beacon's peers")
        );
        assert!(err(&dial(r#"{"127.0.0.1:1": "127.0.0.1:9"}"#)).contains("key `dial`"));
        assert!(err(&dial(r#"{"127.0.0.1:2": "nowhere"}"#)).contains("key `dial`"));
        let c = parse(&dial(r#"{"127.0.0.1:2": "127.0.0.1:9"}"#)).unwrap();
        assert_eq!(
            c.dial,
            BTreeMap::from([(
                "127.0.0.1:2".parse().unwrap(),
                "127.0.0.1:9".parse().unwrap()
            )])
        );
        // Each machine's section is checked in its folder (see machines/*/config.rs); the
        // composition keeps their errors as they are.
        assert!(err(r#"{"node": "127.0.0.1:1", "id_range": [5, 2]}"#).contains("key `id_range`"));
        assert!(
            err(r#"{"node": "127.0.0.1:1", "tick_ms": 1000, "lease_ms": 2000}"#)
                .contains("shorter than 3 ticks")
        );
        assert!(
            err(r#"{"node": "127.0.0.1:1", "sequence": {"step": 5}}"#)
                .contains("key `sequence.step`: unknown field `step`")
        );
        assert_eq!(
            err(r#"{"node": "127.0.0.1:1", "watch": {"progress_ms": 5}}"#),
            "config t.json: key `watch.progress_ms`: 5 is out of range 100..=3600000"
        );
        assert!(
            err(r#"{"node": "127.0.0.1:1", "watch": {"history": 2000000}}"#)
                .starts_with("config t.json: key `watch.history`: 2000000 is out of range")
        );
        assert!(
            err(r#"{"node": "127.0.0.1:1", "tasks": {"max_tasks": 0}}"#)
                .starts_with("config t.json: key `tasks.max_tasks`: 0 is out of range")
        );
    }

    #[test]
    fn flag_errors_name_the_flag() {
        let o = Overrides {
            tick_ms: Some(0),
            ..Overrides::default()
        };
        let e = Config::from_json(Origin::Embedded, EMBEDDED_DEFAULT, &o).unwrap_err();
        assert_eq!(
            e.to_string(),
            "flag --tick-ms: key `tick_ms`: 0 is out of range 10..=60000"
        );
    }

    #[test]
    fn unreadable_file_names_the_path() {
        let e = Config::load(
            Some(Path::new("/nonexistent/b.json")),
            &Overrides::default(),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot read config /nonexistent/b.json:")
        );
    }
}
