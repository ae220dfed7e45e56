//! The beacon's data directory: an exclusive lock, and the identity of the cluster whose
//! state it holds (the state itself, term included, is [`crate::storage`]'s).
//!
//! The identity (cluster name, mode, the membership the state started with, and what each
//! machine records of its settings, such as the registry's node-ID range) is recorded with
//! the state, so a beacon started on a directory written under another configuration
//! refuses to load it instead of serving another cluster's registrations or dropping the
//! ones its range no longer covers.
//!
//! The membership is not compared: once a directory holds one, it wins over the configured
//! lists, which are contact points from then on (see [`crate::server::load`]).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

const LOCK_FILE: &str = "LOCK";
const IDENTITY_FILE: &str = "identity.json";

/// What a data directory's state was written under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The format of the directory's files ([`crate::storage::format`]); absent, format 1.
    #[serde(default = "format_1")]
    pub format: u32,
    pub cluster: String,
    pub mode: String,
    /// The voters of the membership the state started with, sorted: a new cluster's
    /// configured list, or what the cluster answered a beacon that joined it. Changes of
    /// membership in the log supersede it; it is kept as it was first recorded.
    pub beacons: Vec<String>,
    /// The learners of that first membership, sorted; `None` in an identity written before
    /// learners were recorded (the configured ones were the first then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learners: Option<Vec<String>>,
    /// The log index of the change that first membership is: for a beacon that joined, the
    /// change that added it (no older change replaces it); absent for a new cluster's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members_index: Option<u64>,
    /// What each machine records of its settings, by key (`id_range`).
    #[serde(flatten)]
    pub machines: std::collections::BTreeMap<String, serde_json::Value>,
}

/// The identity `config` gives the state a beacon writes.
pub fn identity_of(config: &crate::config::Config) -> Identity {
    Identity {
        format: crate::storage::format::FORMAT,
        cluster: config.cluster.clone(),
        machines: config.machines.identity(),
        mode: config.mode.to_string(),
        beacons: config.beacon_names(),
        learners: Some(config.learners.iter().map(|l| l.to_string()).collect()),
        members_index: (config.members_index > 0).then_some(config.members_index),
    }
}

fn format_1() -> u32 {
    1
}

impl Identity {
    /// The keys on which `self` (stored) and `configured` differ, described for an operator;
    /// the membership is not among them (the stored one wins), nor is the mode when
    /// `mode_free` (a lone voter may switch: it has no majority to lose).
    pub fn differences(&self, configured: &Identity, mode_free: bool) -> Vec<String> {
        let mut out = Vec::new();
        if self.cluster != configured.cluster {
            out.push(format!(
                "it holds the state of cluster `{}`, this beacon is configured for `{}` (key `cluster`)",
                self.cluster, configured.cluster
            ));
        }
        let keys: std::collections::BTreeSet<&String> = self
            .machines
            .keys()
            .chain(configured.machines.keys())
            .collect();
        for key in keys {
            let (was, now) = (self.machines.get(key), configured.machines.get(key));
            if was != now {
                let shown = |v: Option<&serde_json::Value>| {
                    v.map_or("nothing".to_owned(), |v| v.to_string().replace(',', ", "))
                };
                out.push(format!(
                    "it was written with {}, this beacon is configured with {} (key `{key}`)",
                    shown(was),
                    shown(now)
                ));
            }
        }
        if self.mode != configured.mode && !mode_free {
            out.push(format!(
                "it was written in mode `{}`, this beacon is configured for `{}` (key `mode`, flag --mode; only a lone beacon switches mode on its own, a cluster of several needs every beacon to switch together)",
                self.mode, configured.mode
            ));
        }
        out
    }

    /// `self` with `configured`'s cluster, mode and machines' settings, and its own first
    /// membership: what is recorded once `configured` is adopted.
    pub fn adopting(&self, configured: &Identity) -> Identity {
        Identity {
            format: configured.format,
            beacons: self.beacons.clone(),
            learners: self
                .learners
                .clone()
                .or_else(|| configured.learners.clone()),
            members_index: self.members_index,
            ..configured.clone()
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    #[error("data_dir {path}: {what}: {cause}")]
    Io {
        path: PathBuf,
        what: &'static str,
        cause: std::io::Error,
    },
    #[error("data_dir {0} is in use by another beacon process (its LOCK file is held)")]
    Locked(PathBuf),
    #[error(
        "data_dir {path}: file `{IDENTITY_FILE}` is corrupt ({why}); refusing to guess whose state this is"
    )]
    CorruptIdentity { path: PathBuf, why: String },
    #[error(
        "data_dir {path}: file `{IDENTITY_FILE}` is in format {found}, newer than this beacon (version {}) reads (formats {} to {}): run the beacon version that wrote it, or a newer one",
        crate::VERSION,
        crate::storage::format::OLDEST,
        crate::storage::format::FORMAT
    )]
    NewerFormat { path: PathBuf, found: u32 },
    #[error(
        "data_dir {path} was written under another configuration: {}. Start this beacon with the configuration the directory was written under, give it another data_dir, or, to carry this state into the new configuration (every beacon of the cluster must change together), start it once with --adopt-config",
        differences.join("; ")
    )]
    IdentityMismatch {
        path: PathBuf,
        differences: Vec<String>,
    },
}

/// An opened, locked data directory. The lock is held until this is dropped.
#[derive(Debug)]
pub struct DataDir {
    path: PathBuf,
    _lock: File,
}

impl DataDir {
    /// Creates `path` if needed and takes its lock.
    pub fn open(path: &Path) -> Result<DataDir, DataDirError> {
        let io = |what| {
            move |cause| DataDirError::Io {
                path: path.to_owned(),
                what,
                cause,
            }
        };
        fs::create_dir_all(path).map_err(io("cannot create"))?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path.join(LOCK_FILE))
            .map_err(io("cannot open LOCK"))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => return Err(DataDirError::Locked(path.into())),
            Err(fs::TryLockError::Error(e)) => return Err(io("cannot lock LOCK")(e)),
        }
        Ok(DataDir {
            path: path.to_owned(),
            _lock: lock,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The identity the directory's state was written under, if recorded.
    pub fn load_identity(&self) -> Result<Option<Identity>, DataDirError> {
        match fs::read_to_string(self.path.join(IDENTITY_FILE)) {
            Ok(text) => {
                let identity: Identity =
                    serde_json::from_str(&text).map_err(|e| DataDirError::CorruptIdentity {
                        path: self.path.clone(),
                        why: e.to_string(),
                    })?;
                if identity.format > crate::storage::format::FORMAT {
                    return Err(DataDirError::NewerFormat {
                        path: self.path.clone(),
                        found: identity.format,
                    });
                }
                Ok(Some(identity))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(cause) => Err(DataDirError::Io {
                path: self.path.clone(),
                what: "cannot read identity.json",
                cause,
            }),
        }
    }

    /// Checks the recorded identity `stored` against the configured one. A mismatch is an
    /// error unless `adopt` (the operator carries the state into the new configuration; the
    /// caller then checks that the state fits it and records the new identity). `lone`:
    /// the stored membership is this beacon alone, which may switch mode. Returns what an
    /// operator should read in the log.
    pub fn check_identity(
        &self,
        stored: Option<&Identity>,
        configured: &Identity,
        adopt: bool,
        lone: bool,
    ) -> Result<Vec<String>, DataDirError> {
        let Some(stored) = stored else {
            return Ok(Vec::new());
        };
        let mut notices = Vec::new();
        if lone && stored.mode != configured.mode {
            notices.push(format!(
                "mode `{}` now (the state was written in mode `{}`): a lone beacon switches mode safely, having no majority to lose",
                configured.mode, stored.mode
            ));
        }
        let differences = stored.differences(configured, lone);
        if differences.is_empty() {
            return Ok(notices);
        }
        if !adopt {
            return Err(DataDirError::IdentityMismatch {
                path: self.path.clone(),
                differences,
            });
        }
        notices.extend(
            differences
                .into_iter()
                .map(|d| format!("--adopt-config: the stored state is carried over although {d}")),
        );
        Ok(notices)
    }

    /// Durably records the identity the state is now written under.
    pub fn store_identity(&self, identity: &Identity) -> Result<(), DataDirError> {
        let text = serde_json::to_string_pretty(identity).expect("an identity serialises");
        self.replace(IDENTITY_FILE, format!("{text}\n").as_bytes())
    }

    /// Durably replaces file `name`: write a temporary file, fsync, rename over, fsync the
    /// directory.
    fn replace(&self, name: &str, contents: &[u8]) -> Result<(), DataDirError> {
        let io = |what| {
            move |cause| DataDirError::Io {
                path: self.path.clone(),
                what,
                cause,
            }
        };
        let tmp = self.path.join(format!("{name}.tmp"));
        let mut f = File::create(&tmp).map_err(io("cannot create a temporary file"))?;
        f.write_all(contents)
            .map_err(io("cannot write a temporary file"))?;
        f.sync_all().map_err(io("cannot fsync a temporary file"))?;
        fs::rename(&tmp, self.path.join(name)).map_err(io("cannot rename a temporary file"))?;
        File::open(&self.path)
            .and_then(|d| d.sync_all())
            .map_err(io("cannot fsync the directory"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_opener_is_refused_while_the_first_holds_the_lock() {
        let tmp = tempfile::tempdir().unwrap();
        let _held = DataDir::open(tmp.path()).unwrap();
        let err = DataDir::open(tmp.path()).unwrap_err();
        assert!(matches!(err, DataDirError::Locked(_)), "{err}");
    }

    fn identity(cluster: &str, last: u32) -> Identity {
        Identity {
            format: crate::storage::format::FORMAT,
            cluster: cluster.into(),
            machines: [("id_range".to_owned(), serde_json::json!([1, last]))].into(),
            mode: "quorum".into(),
            beacons: vec![
                "127.0.0.1:1".into(),
                "127.0.0.1:2".into(),
                "127.0.0.1:3".into(),
            ],
            learners: Some(Vec::new()),
            members_index: None,
        }
    }

    #[test]
    fn a_recorded_identity_must_match_unless_adopted() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::open(tmp.path()).unwrap();
        let check = |configured: &Identity, adopt: bool, lone: bool| {
            dir.check_identity(
                dir.load_identity().unwrap().as_ref(),
                configured,
                adopt,
                lone,
            )
        };
        // Nothing recorded yet: anything goes.
        assert_eq!(
            check(&identity("alpha", 9), false, false).unwrap(),
            Vec::<String>::new()
        );
        dir.store_identity(&identity("alpha", 9)).unwrap();
        assert!(
            check(&identity("alpha", 9), false, false)
                .unwrap()
                .is_empty()
        );
        let err = check(&identity("beta", 7), false, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cluster `alpha`") && err.contains("(key `cluster`)"),
            "{err}"
        );
        assert!(
            err.contains("[1, 9]") && err.contains("(key `id_range`)"),
            "{err}"
        );
        assert!(err.contains("--adopt-config"), "{err}");
        // Another beacon list is no difference: the stored membership wins.
        let mut moved = identity("alpha", 9);
        moved.beacons.push("127.0.0.1:4".into());
        assert!(check(&moved, false, false).unwrap().is_empty());
        // Another mode is one, but for a lone beacon.
        let mut classic = identity("alpha", 9);
        classic.mode = "classic".into();
        let err = check(&classic, false, false).unwrap_err().to_string();
        assert!(err.contains("(key `mode`, flag --mode"), "{err}");
        let notices = check(&classic, false, true).unwrap();
        assert!(
            notices.len() == 1 && notices[0].contains("a lone beacon switches mode safely"),
            "{notices:?}"
        );
        let notices = check(&identity("beta", 7), true, false).unwrap();
        assert_eq!(notices.len(), 2, "{notices:?}");
        // Checking changes nothing on disk; the caller records the new identity.
        assert_eq!(dir.load_identity().unwrap(), Some(identity("alpha", 9)));
        fs::write(tmp.path().join(IDENTITY_FILE), "{").unwrap();
        assert!(matches!(
            dir.load_identity(),
            Err(DataDirError::CorruptIdentity { .. })
        ));
    }

    #[test]
    fn adopting_a_configuration_keeps_the_first_membership() {
        let stored = identity("alpha", 9);
        let mut configured = identity("beta", 7);
        configured.beacons = vec!["127.0.0.1:9".into()];
        configured.learners = Some(vec!["127.0.0.1:8".into()]);
        let adopted = stored.adopting(&configured);
        assert_eq!(adopted.cluster, "beta");
        assert_eq!(adopted.machines, configured.machines);
        assert_eq!(
            (adopted.beacons, adopted.learners),
            (stored.beacons, stored.learners)
        );
        // An identity written before learners were recorded takes the configured ones.
        let old = Identity {
            learners: None,
            ..identity("alpha", 9)
        };
        assert_eq!(old.adopting(&configured).learners, configured.learners);
    }

    #[test]
    fn an_identity_of_a_newer_format_is_refused_and_one_without_a_format_is_format_1() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::open(tmp.path()).unwrap();
        let path = tmp.path().join(IDENTITY_FILE);
        std::fs::write(
            &path,
            r#"{"cluster":"alpha","mode":"quorum","beacons":[],"id_range":[1,9]}"#,
        )
        .unwrap();
        let old = dir.load_identity().unwrap().unwrap();
        assert_eq!(old.format, 1);
        assert_eq!(old.machines.len(), 1, "format is not a machine's key");
        let (format, newer) = (
            crate::storage::format::FORMAT,
            crate::storage::format::FORMAT + 1,
        );
        std::fs::write(
            &path,
            format!(
                r#"{{"format":{newer},"cluster":"alpha","mode":"quorum","beacons":[],"id_range":[1,9]}}"#
            ),
        )
        .unwrap();
        let err = dir.load_identity().unwrap_err().to_string();
        assert!(
            err.contains(&format!("`identity.json` is in format {newer}")),
            "{err}"
        );
        assert!(
            err.contains(&format!("reads (formats 1 to {format})")),
            "{err}"
        );
    }
}
