//! Opening a beacon's stored state at start: the data directory (lock, identity), the
//! storage (term, snapshot, log), and the replica restored from them.
//!
//! Everything that can stop a start happens here, before a socket is served: another
//! process holding the directory, a corrupt file, state written under another cluster or
//! configuration, stored entries that do not load whole.

use std::path::PathBuf;

use crate::config::Config;
use crate::consensus::{self, Machine, Members, RestoreError};
use crate::data_dir::{DataDir, DataDirError, identity_of};
use crate::machines::{Configured, Replica, Services, State};
use crate::storage::{Files, Storage, StorageError};

/// What a start may be told beyond the configuration.
#[derive(Debug, Clone, Copy, Default)]
pub struct StartOptions {
    /// Carry stored state written under another configuration (cluster name, range, mode,
    /// beacon list) into this one, once it is checked to fit (`--adopt-config`).
    pub adopt_config: bool,
    /// Replace a stored term beyond [`consensus::MAX_TERM`] with the highest term of the
    /// stored log (`--reset-term`).
    pub reset_term: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error("data_dir {path}: {cause}")]
    Restore { path: PathBuf, cause: RestoreError },
    #[error(
        "data_dir {path}: the stored term {term} is beyond 2^48 ({max}), which no beacon reaches (a corrupt file, or a hostile term adopted by an older version); nothing was started. Stop every beacon of the cluster and start each once with --reset-term, which takes the highest term of its own log ({log_term} here)"
    )]
    TermBeyondBound {
        path: PathBuf,
        term: u64,
        max: u64,
        log_term: u64,
    },
    #[error(
        "data_dir {path}: the stored {what}; no beacon writes such values, so the data directory is damaged: move it aside and start this beacon with an empty one (it fetches the state from the others)"
    )]
    LogBeyondBound { path: PathBuf, what: String },
    #[error(
        "data_dir {path}: this beacon ({node}) is not a member of the cluster its state says: it was removed ({members} as of {from}). To bring it back, move the data directory aside and start it with --join {seeds}; to run it on its own, give it an empty data directory and another cluster name"
    )]
    NotAMember {
        path: PathBuf,
        node: std::net::SocketAddr,
        members: Box<Members>,
        from: &'static str,
        seeds: String,
    },
}

/// The stored state, loaded.
pub(crate) struct Loaded {
    pub(crate) data_dir: DataDir,
    pub(crate) stored_term: u64,
    pub(crate) storage: Storage<State>,
    pub(crate) core: Replica,
    /// Lines for the log, once it carries the beacon's identity: (is a warning, text).
    pub(crate) notices: Vec<(bool, String)>,
    /// The membership this beacon starts with: the stored one, whatever the configured
    /// lists say.
    pub(crate) members: Members,
}

/// The consensus core's share of the configuration.
pub(crate) fn consensus_config(config: &Config, stored: consensus::Promise) -> consensus::Config {
    consensus::Config {
        me: config.node,
        mode: config.mode,
        beacons: config.beacons.clone(),
        learners: config.learners.clone(),
        members_index: config.members_index,
        tick_ms: config.tick_ms,
        log_keep: config.log_keep,
        stored,
        deal_terms: true,
        promote_after_ms: config
            .members
            .auto_promote
            .then_some(config.members.promote_after_ms),
        // The driver stores beside its steps and reports each store.
        stores_reported: true,
        flush_per_batch: true,
    }
}

pub(crate) fn load(config: &Config, options: StartOptions) -> Result<Loaded, LoadError> {
    let data_dir = DataDir::open(&config.data_dir)?;
    let recorded = data_dir.load_identity()?;
    let configured = identity_of(config);
    let (mut storage, restored) = Storage::open(Files::new(data_dir.path()))?;
    // Once a data directory holds a membership, it wins: the log's, else the one the state
    // started with (recorded with its identity); the configured lists are contact points.
    let first = match &recorded {
        Some(r) => first_members(r, config, &configured)?,
        None => Members::new(
            config.beacons.iter().copied(),
            config.learners.iter().copied(),
        ),
    };
    let in_log = consensus::stored_members(restored.snapshot.as_ref(), &restored.entries);
    let (members, source) = match in_log {
        Some(m) => (m, "its log"),
        None if recorded.is_some() => (first.clone(), "identity.json"),
        None => (first.clone(), "the configuration"),
    };
    if !members.contains(config.node) {
        return Err(LoadError::NotAMember {
            path: config.data_dir.clone(),
            node: config.node,
            seeds: members
                .voters
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(","),
            members: Box::new(members),
            from: source,
        });
    }
    let lone = members.voters.len() == 1 && members.all().count() == 1;
    let mut notices: Vec<(bool, String)> = data_dir
        .check_identity(recorded.as_ref(), &configured, options.adopt_config, lone)?
        .into_iter()
        .map(|n| (true, n))
        .collect();
    let configured_members = Members::new(
        config.beacons.iter().copied(),
        config.learners.iter().copied(),
    );
    if recorded.is_some()
        && (members.voters != configured_members.voters
            || members.learners != configured_members.learners)
    {
        notices.push((
            false,
            format!(
                "starting with the stored membership ({members}, from {source}), not the configured lists ({configured_members}): once a data directory holds a membership the configured lists are only contact points (change the membership with `nebcli member` or `beacon --join`)"
            ),
        ));
    }
    let identity = match &recorded {
        Some(r) => r.adopting(&configured),
        None => configured.clone(),
    };
    let positions = restored
        .snapshot
        .iter()
        .map(|s| ("snapshot", s.position))
        .chain(restored.entries.iter().map(|e| ("log entry", e.position())));
    let mut log_term = 0;
    for (what, position) in positions {
        if let Some(why) = consensus::bounds::position_beyond(what, position) {
            return Err(LoadError::LogBeyondBound {
                path: config.data_dir.clone(),
                what: why,
            });
        }
        log_term = log_term.max(position.term);
    }
    let mut stored = restored.promise;
    let mut stored_term = stored.term;
    if stored_term > consensus::MAX_TERM {
        if !options.reset_term {
            return Err(LoadError::TermBeyondBound {
                path: config.data_dir.clone(),
                term: stored_term,
                max: consensus::MAX_TERM,
                log_term,
            });
        }
        storage.reset_term(log_term)?;
        notices.push((
            true,
            format!(
                "--reset-term: the stored term {stored_term} (beyond 2^48) replaced by {log_term}, the highest term of the stored log"
            ),
        ));
        stored_term = log_term;
        stored = consensus::Promise::at(log_term);
    }
    if let Some(t) = &restored.truncated {
        notices.push((
            true,
            format!(
                "the stored log ends in {} at byte {} ({} bytes): cut off from there (those entries were never acknowledged; they are fetched from the leader)",
                t.why, t.offset, t.bytes
            ),
        ));
    }
    if let Some(from) = restored.upgraded_from {
        notices.push((
            true,
            format!(
                "data_dir was in format {from}: its files are rewritten in format {} now (a beacon of an earlier version can no longer read them)",
                crate::storage::format::FORMAT
            ),
        ));
    }
    let has_state = stored_term > 0 || restored.snapshot.is_some() || !restored.entries.is_empty();
    let (snapshot_at, entries) = (
        restored.snapshot.as_ref().map(|s| s.position),
        restored.entries.len(),
    );
    let mut consensus = consensus_config(config, stored);
    consensus.beacons = first.voters.iter().copied().collect();
    consensus.learners = first.learners.iter().copied().collect();
    consensus.members_index = match &recorded {
        Some(r) => r.members_index.unwrap_or(0),
        None => config.members_index,
    };
    let (core, restore_notices) = Replica::restore(
        consensus,
        State::configured(&config.machines),
        Services::configured(&config.machines),
        restored.snapshot,
        restored.entries,
        restored.commit,
    )
    .map_err(|cause| LoadError::Restore {
        path: config.data_dir.clone(),
        cause,
    })?;
    notices.extend(restore_notices.into_iter().map(|n| (false, n)));
    if has_state {
        notices.push((
            false,
            format!(
                "state restored from data_dir: snapshot {}, {entries} entries after it, at {}, {}",
                snapshot_at.map_or("none".to_string(), |p| p.to_string()),
                core.position(),
                core.state().summary()
            ),
        ));
    }
    if recorded.as_ref() != Some(&identity) {
        if recorded.is_none() && has_state {
            notices.push((
                true,
                format!(
                    "data_dir holds state but no record of its cluster (written by an earlier version): recorded as cluster `{}` now",
                    identity.cluster
                ),
            ));
        }
        data_dir.store_identity(&identity)?;
    }
    Ok(Loaded {
        data_dir,
        stored_term,
        storage,
        core,
        notices,
        members,
    })
}

/// The first membership `recorded` names, as addresses (its learners the configured ones
/// when it predates their record).
fn first_members(
    recorded: &crate::data_dir::Identity,
    config: &Config,
    configured: &crate::data_dir::Identity,
) -> Result<Members, LoadError> {
    let parse = |names: &[String]| {
        names
            .iter()
            .map(|n| {
                n.parse::<std::net::SocketAddr>().map_err(|_| {
                    LoadError::DataDir(DataDirError::CorruptIdentity {
                        path: config.data_dir.clone(),
                        why: format!("`{n}` in its membership is not an ip:port address"),
                    })
                })
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let learners = recorded
        .learners
        .as_ref()
        .or(configured.learners.as_ref())
        .map_or(&[][..], Vec::as_slice);
    Ok(Members::new(parse(&recorded.beacons)?, parse(learners)?))
}
