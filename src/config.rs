//! Daemon configuration: a JSON file (or the embedded default) plus command-line overrides.
//!
//! Every error names the key (or flag) at fault and where it came from, so a beacon with a bad
//! configuration stops at start with a line that says what to fix.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::auth::{AuthConfig, PeerToken, Role, TokenEntry, TokenHash};
use crate::consensus::Mode;
use crate::machines::assign::AssignLimits;
use crate::machines::registry::{self, IdRange};
use crate::machines::sequence::SequenceLimits;
use crate::machines::tasks::TaskLimits;
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Name shared by every beacon of one cluster; peers of another cluster are refused.
    pub cluster: String,
    /// This beacon's identity and cluster listen address.
    pub node: SocketAddr,
    /// Every beacon of the cluster, this one included, sorted.
    pub beacons: Vec<SocketAddr>,
    /// Heartbeat / check interval.
    pub tick_ms: u64,
    /// Where this beacon keeps its state.
    pub data_dir: PathBuf,
    /// Admin HTTP listen address; `None` disables it.
    pub admin: Option<SocketAddr>,
    /// Largest frame body accepted or sent.
    pub max_frame_bytes: usize,
    /// Node IDs handed out to services.
    pub id_range: IdRange,
    /// A service that does not report within this time loses its registration.
    pub lease_ms: u64,
    /// How long an expired registration's ID stays in quarantine before reuse.
    pub id_reuse_delay_ms: u64,
    /// Largest metadata a service may register with.
    pub max_metadata_bytes: usize,
    /// Node type -> the node types it subscribes to (key `node_type`).
    pub subscriptions: BTreeMap<String, Vec<String>>,
    /// Log entries kept for followers that fall behind.
    pub log_keep: usize,
    /// How writes are made safe; defaults to quorum with 3 or more beacons.
    pub mode: Mode,
    /// Beacon identity -> the address to connect to it at, where that differs (a NAT, a
    /// port forward, a proxy). Identities stay what the `beacon` list says.
    pub dial: BTreeMap<SocketAddr, SocketAddr>,
    /// The sequence issuer's limits (key `sequence`).
    pub sequence: SequenceLimits,
    /// Work assignment's limits (key `assign`).
    pub assign: AssignLimits,
    /// Task queues' limits and defaults (key `tasks`).
    pub tasks: TaskLimits,
    /// Key `tls`: TLS on the beacon port for peers and clients; `None`: plain TCP.
    pub tls: Option<TlsFiles>,
    /// Key `auth`: tokens and certificate names with their roles; empty: no authentication.
    pub auth: AuthConfig,
    /// Host names given where an address is configured, and what each resolved to at load
    /// (for the start-up log).
    pub resolved: Vec<String>,
}

/// Values given on the command line; each replaces the matching key.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--listen`: replaces `node`.
    pub listen: Option<String>,
    /// `--peers`: replaces `beacon`; this node is added if missing.
    pub peers: Option<Vec<String>>,
    /// `--tick-ms`.
    pub tick_ms: Option<u64>,
    /// `--cluster`.
    pub cluster: Option<String>,
    /// `--data-dir`.
    pub data_dir: Option<String>,
    /// `--admin`: an address, or `off`.
    pub admin: Option<String>,
    /// `--lease-ms`.
    pub lease_ms: Option<u64>,
    /// `--id-range FIRST-LAST`.
    pub id_range: Option<String>,
    /// `--tls-cert`, `--tls-key`, `--tls-ca`: replace `tls.cert`, `tls.key`, `tls.ca`.
    pub tls_cert: Option<String>,
    pub tls_key: Option<String>,
    pub tls_ca: Option<String>,
}

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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default = "default_cluster")]
    cluster: String,
    node: String,
    #[serde(default)]
    beacon: Vec<String>,
    #[serde(default = "default_tick_ms")]
    tick_ms: u64,
    #[serde(default = "default_data_dir")]
    data_dir: String,
    #[serde(default)]
    admin: Option<String>,
    #[serde(default = "default_max_frame")]
    max_frame_bytes: usize,
    #[serde(default = "default_id_range")]
    id_range: [u32; 2],
    #[serde(default)]
    lease_ms: Option<u64>,
    #[serde(default = "default_id_reuse_delay_ms")]
    id_reuse_delay_ms: u64,
    #[serde(default = "default_max_metadata_bytes")]
    max_metadata_bytes: usize,
    #[serde(default)]
    node_type: Vec<RawSubscription>,
    #[serde(default = "default_log_keep")]
    log_keep: usize,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    dial: BTreeMap<String, String>,
    #[serde(default)]
    sequence: RawSequence,
    #[serde(default)]
    assign: RawAssign,
    #[serde(default)]
    tasks: RawTasks,
    #[serde(default)]
    tls: RawTls,
    #[serde(default)]
    auth: RawAuth,
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

/// Key `tasks`: task queues' limits and defaults; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawTasks {
    max_payload_bytes: Option<usize>,
    max_tasks: Option<usize>,
    max_queues: Option<usize>,
    result_ttl_ms: Option<u64>,
    default_timeout_ms: Option<u64>,
    default_max_attempts: Option<u32>,
    backoff_base_ms: Option<u64>,
    backoff_max_ms: Option<u64>,
}

impl RawTasks {
    fn check(&self, check: &Checker, max_frame_bytes: usize) -> Result<TaskLimits, ConfigError> {
        let d = TaskLimits::default();
        let range = |key: &'static str, value: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&value) {
                Ok(value)
            } else {
                Err(check.err(key, None, format!("{value} is out of range {lo}..={hi}")))
            }
        };
        // A payload and its envelope fit one frame, with room to spare.
        let frame_room = (max_frame_bytes / 2) as u64;
        let limits = TaskLimits {
            max_payload_bytes: range(
                "tasks.max_payload_bytes",
                self.max_payload_bytes
                    .unwrap_or(d.max_payload_bytes.min(frame_room as usize)) as u64,
                1,
                frame_room,
            )? as usize,
            max_tasks: range(
                "tasks.max_tasks",
                self.max_tasks.unwrap_or(d.max_tasks) as u64,
                1,
                10_000_000,
            )? as usize,
            max_queues: range(
                "tasks.max_queues",
                self.max_queues.unwrap_or(d.max_queues) as u64,
                1,
                100_000,
            )? as usize,
            result_ttl_ms: range(
                "tasks.result_ttl_ms",
                self.result_ttl_ms.unwrap_or(d.result_ttl_ms),
                0,
                30 * 86_400_000,
            )?,
            default_timeout_ms: range(
                "tasks.default_timeout_ms",
                self.default_timeout_ms.unwrap_or(d.default_timeout_ms),
                1,
                crate::machines::tasks::service::MAX_TIMEOUT_MS,
            )?,
            default_max_attempts: range(
                "tasks.default_max_attempts",
                u64::from(self.default_max_attempts.unwrap_or(d.default_max_attempts)),
                1,
                1_000,
            )? as u32,
            backoff_base_ms: range(
                "tasks.backoff_base_ms",
                self.backoff_base_ms.unwrap_or(d.backoff_base_ms),
                0,
                3_600_000,
            )?,
            backoff_max_ms: range(
                "tasks.backoff_max_ms",
                self.backoff_max_ms.unwrap_or(d.backoff_max_ms),
                0,
                86_400_000,
            )?,
        };
        Ok(limits)
    }
}

/// Key `assign`: work assignment's limits; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawAssign {
    max_moves: Option<usize>,
    max_resources: Option<usize>,
    max_weight: Option<u32>,
    delay_ms: BTreeMap<String, u64>,
    auto_rebalance_spread: Option<u64>,
}

impl RawAssign {
    fn check(&self, check: &Checker) -> Result<AssignLimits, ConfigError> {
        let d = AssignLimits::default();
        let max_moves = self.max_moves.unwrap_or(d.max_moves);
        if !(1..=100_000).contains(&max_moves) {
            return Err(check.err(
                "assign.max_moves",
                None,
                format!("{max_moves} is out of range 1..=100000"),
            ));
        }
        let max_resources = self.max_resources.unwrap_or(d.max_resources);
        if !(1..=10_000_000).contains(&max_resources) {
            return Err(check.err(
                "assign.max_resources",
                None,
                format!("{max_resources} is out of range 1..=10000000"),
            ));
        }
        let max_weight = self.max_weight.unwrap_or(d.max_weight);
        if max_weight == 0 {
            return Err(check.err("assign.max_weight", None, "must be at least 1".into()));
        }
        for (node_type, ms) in &self.delay_ms {
            registry::check_type(node_type)
                .map_err(|e| check.err("assign.delay_ms", None, e.to_string()))?;
            if *ms > MAX_ID_REUSE_DELAY_MS {
                return Err(check.err(
                    "assign.delay_ms",
                    None,
                    format!("{ms} for {node_type} is over the limit of {MAX_ID_REUSE_DELAY_MS}"),
                ));
            }
        }
        Ok(AssignLimits {
            max_moves,
            max_resources,
            max_weight,
            delay_ms: self.delay_ms.clone(),
            auto_rebalance_spread: self.auto_rebalance_spread,
        })
    }
}

/// Key `sequence`: the sequence issuer's limits; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawSequence {
    /// Defaults to the built-in default step, or `max_step` when that is smaller.
    default_step: Option<u64>,
    max_step: Option<u64>,
    max_sequences: Option<usize>,
}

/// Upper limit on `sequence.max_step`: a segment is one log entry however large, but a
/// client holds two, and a lost one burns its numbers.
pub const MAX_SEQUENCE_STEP: u64 = 1 << 40;
/// Upper limit on `sequence.max_sequences`.
pub const MAX_SEQUENCES_LIMIT: usize = 1_000_000;

/// One entry of `node_type`, as in NebulaBeacon: services of `node_type` are told about
/// the nodes of the types in `subscribe`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSubscription {
    node_type: String,
    #[serde(default)]
    subscribe: Vec<String>,
}

/// Limits on `lease_ms`: below a second a service's report interval would be a storm; above
/// an hour a dead service would hold its ID for too long.
pub const LEASE_MS_RANGE: std::ops::RangeInclusive<u64> = 1_000..=3_600_000;
/// Upper limit on `id_reuse_delay_ms` (a day).
pub const MAX_ID_REUSE_DELAY_MS: u64 = 86_400_000;
/// Upper limit on `max_metadata_bytes`.
pub const MAX_METADATA_LIMIT: usize = 64 * 1024;

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
fn default_id_range() -> [u32; 2] {
    let r = IdRange::DEFAULT;
    [r.first, r.last]
}
/// The default lease: 10 s, or 10 ticks when that is longer, so that a lease always outlives
/// a leader's failover (four ticks) with room for a renewal or two.
fn default_lease_ms(tick_ms: u64) -> u64 {
    (tick_ms * 10).max(10_000)
}

/// The default admin address: the beacon's own IP, its port + 88 (16000 -> 16088, as
/// NebulaBeacon's), so that beacons on one machine do not collide; none past port 65535.
fn default_admin(node: SocketAddr) -> Option<SocketAddr> {
    let port = node.port().checked_add(88)?;
    Some(SocketAddr::new(node.ip(), port))
}
fn default_id_reuse_delay_ms() -> u64 {
    30_000
}
fn default_max_metadata_bytes() -> usize {
    1024
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
            "mode": self.mode.as_str(),
            "tick_ms": self.tick_ms,
            "data_dir": self.data_dir.display().to_string(),
            "admin": self.admin.map_or("off".to_owned(), |a| a.to_string()),
            "max_frame_bytes": self.max_frame_bytes,
            "id_range": [self.id_range.first, self.id_range.last],
            "lease_ms": self.lease_ms,
            "id_reuse_delay_ms": self.id_reuse_delay_ms,
            "max_metadata_bytes": self.max_metadata_bytes,
            "log_keep": self.log_keep,
            "node_type": self.subscriptions.iter().map(|(t, subscribe)| {
                json!({"node_type": t, "subscribe": subscribe})
            }).collect::<Vec<_>>(),
            "dial": self.dial.iter().map(|(b, via)| (b.to_string(), json!(via.to_string())))
                .collect::<serde_json::Map<_, _>>(),
            "sequence": {
                "default_step": self.sequence.default_step,
                "max_step": self.sequence.max_step,
                "max_sequences": self.sequence.max_sequences,
            },
            "assign": {
                "max_moves": self.assign.max_moves,
                "max_resources": self.assign.max_resources,
                "max_weight": self.assign.max_weight,
                "delay_ms": self.assign.delay_ms,
            },
            "tasks": {
                "max_payload_bytes": self.tasks.max_payload_bytes,
                "max_tasks": self.tasks.max_tasks,
                "max_queues": self.tasks.max_queues,
                "result_ttl_ms": self.tasks.result_ttl_ms,
                "default_timeout_ms": self.tasks.default_timeout_ms,
                "default_max_attempts": self.tasks.default_max_attempts,
                "backoff_base_ms": self.tasks.backoff_base_ms,
                "backoff_max_ms": self.tasks.backoff_max_ms,
            },
        });
        if let Some(spread) = self.assign.auto_rebalance_spread {
            v["assign"]["auto_rebalance_spread"] = json!(spread);
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
        let de = &mut serde_json::Deserializer::from_str(text);
        let raw: RawConfig = serde_path_to_error::deserialize(de).map_err(|e| {
            let key = match e.path().to_string() {
                p if p == "." => missing_field(e.inner()).unwrap_or_else(|| "(top level)".into()),
                p => p,
            };
            ConfigError::Parse {
                origin: origin.clone(),
                key,
                msg: e.inner().to_string(),
            }
        })?;
        raw.apply(origin, overrides)
    }
}

/// serde reports a missing field at the parent's path; pull the field's name out of the
/// message so the error still names the key.
fn missing_field(err: &serde_json::Error) -> Option<String> {
    let msg = err.to_string();
    let rest = msg.strip_prefix("missing field `")?;
    Some(rest[..rest.find('`')?].to_owned())
}

struct Checker {
    file: String,
    /// Host names resolved so far, for the start-up log.
    resolved: std::cell::RefCell<Vec<String>>,
}

impl Checker {
    fn err(&self, key: &'static str, from_flag: Option<&'static str>, msg: String) -> ConfigError {
        ConfigError::Invalid {
            origin: match from_flag {
                Some(flag) => format!("flag {flag}"),
                None => self.file.clone(),
            },
            key,
            msg,
        }
    }

    /// An `ip:port`, or a `host:port` resolved now (IPv4 preferred), as the address a beacon
    /// is known by.
    fn addr(
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

impl RawConfig {
    fn apply(mut self, origin: Origin, o: &Overrides) -> Result<Config, ConfigError> {
        let check = Checker {
            file: origin.to_string(),
            resolved: Default::default(),
        };
        let node_flag = o.listen.is_some().then_some("--listen");
        if let Some(v) = &o.listen {
            self.node = v.clone();
        }
        let node = check.addr("node", node_flag, &self.node)?;
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
        let mut beacons = BTreeSet::new();
        for item in &self.beacon {
            let addr = check.addr("beacon", peers_flag, item)?;
            if !beacons.insert(addr) {
                return Err(check.err("beacon", peers_flag, format!("`{addr}` is listed twice")));
            }
        }
        if peers_flag.is_some() {
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
        if !TICK_MS_RANGE.contains(&tick_ms) {
            return Err(check.err(
                "tick_ms",
                tick_flag,
                format!(
                    "{tick_ms} is out of range {}..={}",
                    TICK_MS_RANGE.start(),
                    TICK_MS_RANGE.end()
                ),
            ));
        }

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

        if !MAX_FRAME_RANGE.contains(&self.max_frame_bytes) {
            return Err(check.err(
                "max_frame_bytes",
                None,
                format!(
                    "{} is out of range {}..={}",
                    self.max_frame_bytes,
                    MAX_FRAME_RANGE.start(),
                    MAX_FRAME_RANGE.end()
                ),
            ));
        }

        let range_flag = o.id_range.is_some().then_some("--id-range");
        let [first, last] = match &o.id_range {
            None => self.id_range,
            Some(v) => {
                let parsed = v
                    .split_once('-')
                    .and_then(|(a, b)| Some([a.trim().parse().ok()?, b.trim().parse().ok()?]));
                parsed.ok_or_else(|| {
                    check.err(
                        "id_range",
                        range_flag,
                        format!("`{v}` is not FIRST-LAST (for example 1-1023)"),
                    )
                })?
            }
        };
        if first == 0 || first > last {
            return Err(check.err(
                "id_range",
                range_flag,
                format!("[{first}, {last}] is not a range [first, last] with 1 <= first <= last"),
            ));
        }
        let lease_flag = o.lease_ms.is_some().then_some("--lease-ms");
        let lease_ms = o
            .lease_ms
            .or(self.lease_ms)
            .unwrap_or_else(|| default_lease_ms(tick_ms));
        if !LEASE_MS_RANGE.contains(&lease_ms) {
            return Err(check.err(
                "lease_ms",
                lease_flag,
                format!(
                    "{lease_ms} is out of range {}..={}",
                    LEASE_MS_RANGE.start(),
                    LEASE_MS_RANGE.end()
                ),
            ));
        }
        if lease_ms < tick_ms * 3 {
            return Err(check.err(
                "lease_ms",
                lease_flag,
                format!(
                    "{lease_ms} is shorter than 3 ticks of {tick_ms} ms ({} ms): a lease must outlive a leader failover",
                    tick_ms * 3
                ),
            ));
        }
        if self.id_reuse_delay_ms > MAX_ID_REUSE_DELAY_MS {
            return Err(check.err(
                "id_reuse_delay_ms",
                None,
                format!(
                    "{} is over the limit of {MAX_ID_REUSE_DELAY_MS}",
                    self.id_reuse_delay_ms
                ),
            ));
        }
        if self.max_metadata_bytes > MAX_METADATA_LIMIT {
            return Err(check.err(
                "max_metadata_bytes",
                None,
                format!(
                    "{} is over the limit of {MAX_METADATA_LIMIT}",
                    self.max_metadata_bytes
                ),
            ));
        }
        if self.log_keep == 0 {
            return Err(check.err("log_keep", None, "must be at least 1".into()));
        }
        let mut subscriptions = BTreeMap::new();
        for sub in self.node_type {
            for t in std::iter::once(&sub.node_type).chain(&sub.subscribe) {
                registry::check_type(t).map_err(|e| check.err("node_type", None, e.to_string()))?;
            }
            if subscriptions
                .insert(sub.node_type.clone(), sub.subscribe)
                .is_some()
            {
                return Err(check.err(
                    "node_type",
                    None,
                    format!("node type `{}` is listed twice", sub.node_type),
                ));
            }
        }

        let mut dial = BTreeMap::new();
        for (beacon, via) in &self.dial {
            let beacon = check.addr("dial", None, beacon)?;
            if beacon == node || !beacons.contains(&beacon) {
                return Err(check.err(
                    "dial",
                    None,
                    format!("`{beacon}` is not one of this beacon's peers (key `beacon`)"),
                ));
            }
            dial.insert(beacon, check.addr("dial", None, via)?);
        }

        let sequence = self.sequence.check(&check)?;
        let assign = self.assign.check(&check)?;
        let tasks = self.tasks.check(&check, self.max_frame_bytes)?;
        let tls = self.tls.check(&check, o, beacons.len())?;
        let auth = self.auth.check(&check)?;
        let tls_verifies_peers = tls.as_ref().is_some_and(|t| t.ca.is_some());
        if auth.enabled() && beacons.len() > 1 && !tls_verifies_peers && auth.peer_token.is_none() {
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

        let mode = match self.mode.as_deref() {
            None => Mode::default_for(beacons.len()),
            Some("classic") => Mode::Classic,
            Some("quorum") => Mode::Quorum,
            Some(other) => {
                return Err(check.err(
                    "mode",
                    None,
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
            tick_ms,
            data_dir,
            admin,
            max_frame_bytes: self.max_frame_bytes,
            id_range: IdRange { first, last },
            lease_ms,
            id_reuse_delay_ms: self.id_reuse_delay_ms,
            max_metadata_bytes: self.max_metadata_bytes,
            subscriptions,
            log_keep: self.log_keep,
            sequence,
            assign,
            tasks,
            tls,
            auth,
            resolved: check.resolved.take(),
        })
    }
}

impl RawSequence {
    fn check(&self, check: &Checker) -> Result<SequenceLimits, ConfigError> {
        let d = SequenceLimits::default();
        let max_step = self.max_step.unwrap_or(d.max_step);
        if !(1..=MAX_SEQUENCE_STEP).contains(&max_step) {
            return Err(check.err(
                "sequence.max_step",
                None,
                format!("{max_step} is out of range 1..={MAX_SEQUENCE_STEP}"),
            ));
        }
        let default_step = self.default_step.unwrap_or(d.default_step.min(max_step));
        if !(1..=max_step).contains(&default_step) {
            return Err(check.err(
                "sequence.default_step",
                None,
                format!("{default_step} is out of range 1..={max_step} (key `sequence.max_step`)"),
            ));
        }
        let max_sequences = self.max_sequences.unwrap_or(d.max_sequences);
        if !(1..=MAX_SEQUENCES_LIMIT).contains(&max_sequences) {
            return Err(check.err(
                "sequence.max_sequences",
                None,
                format!("{max_sequences} is out of range 1..={MAX_SEQUENCES_LIMIT}"),
            ));
        }
        Ok(SequenceLimits {
            default_step,
            max_step,
            max_sequences,
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
        assert_eq!(c.lease_ms, 50_000);
        // A lease given too short for the tick names the flag that gave it.
        let e = load(Overrides {
            tick_ms: Some(5000),
            lease_ms: Some(10_000),
            ..Overrides::default()
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("flag --lease-ms: key `lease_ms`: 10000 is shorter than 3 ticks"),
            "{e}"
        );
        let c = load(Overrides {
            id_range: Some("5-100000".into()),
            ..Overrides::default()
        })
        .unwrap();
        assert_eq!((c.id_range.first, c.id_range.last), (5, 100_000));
        let e = load(Overrides {
            id_range: Some("100".into()),
            ..Overrides::default()
        })
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
        assert_eq!(again.assign.delay_ms, c.assign.delay_ms);
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
        assert_eq!(
            c.id_range,
            IdRange {
                first: 1,
                last: 1023
            }
        );
        assert_eq!((c.lease_ms, c.id_reuse_delay_ms), (10_000, 30_000));
        assert_eq!(c.max_metadata_bytes, 1024);
        assert_eq!(c.mode, Mode::Classic, "the default for one beacon");
        assert_eq!(c.subscriptions["ACCESS"], vec!["LOGIC", "LOGGER"]);
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
    fn errors_name_the_key() {
        assert_eq!(
            err(r#"{"node": "127.0.0.1:1", "tick_ms": "fast"}"#),
            "config t.json: key `tick_ms`: invalid type: string \"fast\", expected u64 at line 1 column 41"
        );
        assert!(
            err(r#"{"node": "127.0.0.1:1", "tikc_ms": 5}"#)
                .starts_with("config t.json: key `tikc_ms`: unknown field `tikc_ms`")
        );
        assert!(err(r#"{"beacon": []}"#).starts_with("config t.json: key `node`: missing field"));
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
        assert!(err(r#"{"node": "127.0.0.1:1", "id_range": [5, 2]}"#).contains("key `id_range`"));
        assert!(err(r#"{"node": "127.0.0.1:1", "id_range": [0, 2]}"#).contains("key `id_range`"));
        assert!(err(r#"{"node": "127.0.0.1:1", "lease_ms": 10}"#).contains("key `lease_ms`"));
        assert!(
            err(r#"{"node": "127.0.0.1:1", "tick_ms": 1000, "lease_ms": 2000}"#)
                .contains("shorter than 3 ticks")
        );
        assert!(
            err(r#"{"node": "127.0.0.1:1", "node_type": [{"node_type": ""}]}"#)
                .contains("key `node_type`: node_type is empty")
        );
        assert!(
            err(
                r#"{"node": "127.0.0.1:1", "node_type": [{"node_type": "A"}, {"node_type": "A"}]}"#
            )
            .contains("listed twice")
        );
        assert!(
            err(r#"{"node": "127.0.0.1:1", "node_type": [{"node_type": "A", "subscirbe": []}]}"#)
                .contains("unknown field `subscirbe`")
        );
        assert!(
            err(r#"{"node": "127.0.0.1:1", "sequence": {"max_step": 0}}"#)
                .contains("key `sequence.max_step`: 0 is out of range")
        );
        assert!(
            err(r#"{"node": "127.0.0.1:1", "sequence": {"max_step": 10, "default_step": 20}}"#)
                .contains("key `sequence.default_step`: 20 is out of range 1..=10")
        );
        assert!(
            err(r#"{"node": "127.0.0.1:1", "sequence": {"max_sequences": 0}}"#)
                .contains("key `sequence.max_sequences`")
        );
        assert!(
            err(r#"{"node": "127.0.0.1:1", "sequence": {"step": 5}}"#)
                .contains("key `sequence.step`: unknown field `step`")
        );
        assert!(
            err(r#"{"node": "127.0.0.1:1", "assign": {"max_moves": 0}}"#)
                .contains("key `assign.max_moves`")
        );
        assert!(
            err(r#"{"node": "127.0.0.1:1", "assign": {"moves": 3}}"#)
                .contains("unknown field `moves`")
        );
        assert!(
            err(r#"{"node": "127.0.0.1:1", "assign": {"delay_ms": {"a b": 5}}}"#)
                .contains("key `assign.delay_ms`")
        );
        let c = parse(
            r#"{"node": "127.0.0.1:1", "assign": {"delay_ms": {"CRAWLER": 5000}, "auto_rebalance_spread": 2}}"#,
        )
        .unwrap();
        assert_eq!(c.assign.delay_ms["CRAWLER"], 5000);
        assert_eq!(c.assign.auto_rebalance_spread, Some(2));
        let c = parse(r#"{"node": "127.0.0.1:1", "sequence": {"max_step": 50}}"#).unwrap();
        assert_eq!((c.sequence.default_step, c.sequence.max_step), (50, 50));
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
