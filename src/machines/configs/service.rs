//! The config store's leader-side service: a write is checked whole against the state and
//! the limits (keys, sizes, JSON, how many documents, the compare-and-set checks), then
//! appended as one entry at the next log index, which becomes its revision; the answer
//! waits for the commit.

use crate::consensus::{Leader, Outcome, Service};
use crate::machines::Part;

use super::state::{ConfigStore, IP_WHITE, InvalidKey, Op, Write, check_key};
use crate::allow::Allowlist;

/// The store's limits (key `configs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigLimits {
    /// Largest value, in bytes.
    pub max_value_bytes: usize,
    /// Most documents the store holds.
    pub max_documents: usize,
    /// Earlier values each document keeps (`config history`).
    pub history: usize,
    /// Most changes one write carries.
    pub max_ops: usize,
}

impl Default for ConfigLimits {
    fn default() -> ConfigLimits {
        ConfigLimits {
            max_value_bytes: 64 * 1024,
            max_documents: 10_000,
            history: 10,
            max_ops: 64,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Checks, then changes, all or nothing.
    Write {
        checks: Vec<(String, u64)>,
        ops: Vec<Op>,
        wall_ms: u64,
    },
    /// A document's value and revision through the leader, answered once everything the
    /// leader applied is committed (the simulations' clients read this way; the servers read
    /// the replica, see `rpc`).
    Read { key: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// The write's revision, and how many existing documents it deleted.
    Written { revision: u64, deleted: u32 },
    /// The value and revision read (`None`, revision 0: no such document).
    Read {
        value: Option<Vec<u8>>,
        revision: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    InvalidKey(#[from] InvalidKey),
    #[error("a write changes at least one document")]
    Empty,
    #[error("a write changes at most {max} documents; this one {ops}")]
    TooManyOps { ops: usize, max: usize },
    #[error(
        "the value of `{key}` is {bytes} bytes, over the limit of {max} (key `configs.max_value_bytes`)"
    )]
    TooLarge {
        key: String,
        bytes: usize,
        max: usize,
    },
    #[error("the value of `{key}` is declared JSON but is not: {why}")]
    NotJson { key: String, why: String },
    #[error("`{key}` is a custom file: it needs a relative path (no `..`, not absolute)")]
    BadPath { key: String },
    #[error("`{key}` is the cluster's allowlist: {why}")]
    BadAllowlist { key: String, why: String },
    /// The state refused a write the leader had checked: a bug, and the leader's log says so.
    #[error("the leader refused its own write; see its log")]
    Refused,
    #[error(
        "the store holds {max} documents, as many as key `configs.max_documents` allows: delete some first"
    )]
    Full { max: usize },
    #[error(
        "`{key}` is at revision {actual}, not {expected}: nothing was written (read it again and retry)"
    )]
    RevisionMismatch {
        key: String,
        expected: u64,
        actual: u64,
    },
}

/// The leader's side of the config store.
#[derive(Debug, Clone)]
pub struct ConfigService {
    limits: ConfigLimits,
}

impl Default for ConfigService {
    fn default() -> ConfigService {
        ConfigService::new(ConfigLimits::default())
    }
}

impl ConfigService {
    pub fn new(limits: ConfigLimits) -> ConfigService {
        ConfigService { limits }
    }

    /// Everything about a write that does not depend on the state.
    fn check_ops(&self, checks: &[(String, u64)], ops: &[Op]) -> Result<(), ConfigError> {
        if ops.is_empty() {
            return Err(ConfigError::Empty);
        }
        if ops.len() > self.limits.max_ops {
            return Err(ConfigError::TooManyOps {
                ops: ops.len(),
                max: self.limits.max_ops,
            });
        }
        for (key, _) in checks {
            check_key(key)?;
        }
        for op in ops {
            check_key(op.key())?;
            let Op::Put {
                key,
                value,
                json,
                path,
            } = op
            else {
                continue;
            };
            if value.len() > self.limits.max_value_bytes {
                return Err(ConfigError::TooLarge {
                    key: key.clone(),
                    bytes: value.len(),
                    max: self.limits.max_value_bytes,
                });
            }
            if *json && let Err(e) = serde_json::from_slice::<serde_json::Value>(value) {
                return Err(ConfigError::NotJson {
                    key: key.clone(),
                    why: e.to_string(),
                });
            }
            let is_file = key.starts_with("file/");
            let bad_path = path.starts_with('/')
                || path.split('/').any(|p| p == "..")
                || (is_file && path.is_empty())
                || (!is_file && !path.is_empty());
            if bad_path {
                return Err(ConfigError::BadPath { key: key.clone() });
            }
            if key == IP_WHITE {
                let bad = |why: String| ConfigError::BadAllowlist {
                    key: key.clone(),
                    why,
                };
                let text = std::str::from_utf8(value).map_err(|_| bad("it is not text".into()))?;
                Allowlist::parse(text).map_err(|e| bad(e.to_string()))?;
            }
        }
        Ok(())
    }
}

/// What a request remembers until its entry (a read: every entry the leader applied)
/// commits.
#[derive(Debug, Clone)]
pub enum Waiting {
    Written {
        revision: u64,
        deleted: u32,
    },
    Read {
        value: Option<Vec<u8>>,
        revision: u64,
    },
}

impl<S: Part<ConfigStore>> Service<S> for ConfigService {
    type Request = Request;
    type Response = Response;
    type Error = ConfigError;
    type Waiting = Waiting;

    fn lead(
        &mut self,
        _state: &S,
        _now: crate::time::Millis,
        _renewals: crate::consensus::Knowledge,
    ) {
    }

    fn step_down(&mut self) {}

    fn request(
        &mut self,
        leader: &mut Leader<'_, S>,
        request: Request,
    ) -> Outcome<Response, ConfigError, Waiting> {
        let (checks, ops, wall_ms) = match request {
            Request::Write {
                checks,
                ops,
                wall_ms,
            } => (checks, ops, wall_ms),
            Request::Read { key } => {
                let doc = leader.state().part().get(&key);
                return Outcome::WhenCommitted {
                    index: leader.last_index(),
                    waiting: Waiting::Read {
                        value: doc.map(|d| d.value.clone()),
                        revision: doc.map_or(0, |d| d.revision),
                    },
                };
            }
        };
        if let Err(e) = self.check_ops(&checks, &ops) {
            return Outcome::Now(Err(e));
        }
        let store: &ConfigStore = leader.state().part();
        if let Some((key, expected, actual)) = store.failed_check(&checks) {
            return Outcome::Now(Err(ConfigError::RevisionMismatch {
                key: key.to_owned(),
                expected,
                actual,
            }));
        }
        // Documents after the write: the puts of new keys count, the deletes of existing
        // ones free room (each key once).
        let mut keys = std::collections::BTreeMap::new();
        for op in &ops {
            keys.insert(op.key(), matches!(op, Op::Put { .. }));
        }
        let (mut after, mut deleted) = (store.len(), 0u32);
        for (key, put) in keys {
            match (store.get(key).is_some(), put) {
                (false, true) => after += 1,
                (true, false) => {
                    after -= 1;
                    deleted += 1;
                }
                _ => {}
            }
        }
        if after > self.limits.max_documents && after > store.len() {
            return Outcome::Now(Err(ConfigError::Full {
                max: self.limits.max_documents,
            }));
        }
        let revision = leader.next_index();
        let write = Write {
            revision,
            wall_ms,
            checks,
            ops,
        };
        match leader.append(S::wrap(write)) {
            Some(index) => Outcome::WhenCommitted {
                index,
                waiting: Waiting::Written {
                    revision: index,
                    deleted,
                },
            },
            // Checked against the state just before: a bug, and the leader's notice says so.
            None => Outcome::Now(Err(ConfigError::Refused)),
        }
    }

    fn tick(&mut self, _leader: &mut Leader<'_, S>) {}

    fn answer(&self, _state: &S, w: Waiting) -> Result<Response, ConfigError> {
        Ok(match w {
            Waiting::Written { revision, deleted } => Response::Written { revision, deleted },
            Waiting::Read { value, revision } => Response::Read { value, revision },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, value: &str, json: bool, path: &str) -> Op {
        Op::Put {
            key: key.into(),
            value: value.as_bytes().to_vec(),
            json,
            path: path.into(),
        }
    }

    #[test]
    fn writes_are_checked_for_keys_sizes_json_and_paths() {
        let s = ConfigService::new(ConfigLimits {
            max_value_bytes: 8,
            max_ops: 2,
            ..ConfigLimits::default()
        });
        let check = |ops: Vec<Op>| s.check_ops(&[], &ops).map_err(|e| e.to_string());
        check(vec![put("cluster/a", "1", false, "")]).unwrap();
        check(vec![put("cluster/a", "{\"a\":1}", true, "")]).unwrap();
        check(vec![put("file/game", "x", false, "conf/game.ini")]).unwrap();
        let e = check(vec![]).unwrap_err();
        assert!(e.contains("at least one"), "{e}");
        let e = check(vec![put("cluster/a", "123456789", false, "")]).unwrap_err();
        assert!(e.contains("9 bytes, over the limit of 8"), "{e}");
        let e = check(vec![put("cluster/a", "{nope", true, "")]).unwrap_err();
        assert!(e.contains("declared JSON"), "{e}");
        let roomy = ConfigService::default();
        let check_roomy = |ops: Vec<Op>| roomy.check_ops(&[], &ops).map_err(|e| e.to_string());
        check_roomy(vec![put("beacon/ip_white", "10.0.0.0/8", false, "")]).unwrap();
        let e = check_roomy(vec![put("beacon/ip_white", "10.0.0.0/8 x", false, "")]).unwrap_err();
        assert!(e.contains("allowlist: `x` is not a network"), "{e}");
        let e = check_roomy(vec![put("beacon/other", "1", false, "")]).unwrap_err();
        assert!(e.contains("`beacon/ip_white` alone"), "{e}");
        for path in ["", "/etc/x", "../x"] {
            let e = check(vec![put("file/game", "x", false, path)]).unwrap_err();
            assert!(e.contains("relative path"), "{path}: {e}");
        }
        let e = check(vec![put("x", "1", false, "")]).unwrap_err();
        assert!(e.contains("not a config key"), "{e}");
        let three = vec![put("cluster/a", "1", false, ""); 3];
        assert!(check(three).unwrap_err().contains("at most 2"));
    }
}
