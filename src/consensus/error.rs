//! The consensus core's own errors: why a request cannot be served now, and why stored state
//! cannot be loaded. A machine's refusals are its own type, carried beside these.

use std::net::SocketAddr;

use super::log::Position;

/// Why this beacon cannot serve a request now; each is worth retrying (at the leader, a
/// moment later).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsensusError {
    #[error("this beacon is not the leader{}", leader.map(|l| format!("; the leader is {l}")).unwrap_or_else(|| "; no leader is known yet".into()))]
    NotLeader { leader: Option<SocketAddr> },
    #[error(
        "leadership changed before the write was acknowledged; its outcome is unknown, so retry it (registering the same address again is safe)"
    )]
    LeaderChanged,
    #[error(
        "no quorum: this beacon sees {sees} of {of} voting beacons and needs {needs}; writes wait until a majority is reachable"
    )]
    NoQuorum {
        sees: usize,
        needs: usize,
        of: usize,
    },
    #[error("the new leader is still taking over the state of a majority; retry in a moment")]
    NotReady,
    #[error("this leader is handing its leadership over to {to}; retry in a moment (at {to})")]
    HandingOver { to: SocketAddr },
    /// This beacon is out of the membership it holds (removed, and still running): it knows
    /// no leader, so it sends the caller on to a member, which knows one.
    #[error(
        "this beacon was removed from the cluster and knows no leader; ask its members, such as {ask}"
    )]
    Removed { ask: SocketAddr },
}

/// Why a leader transfer did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    #[error(transparent)]
    Consensus(#[from] ConsensusError),
    #[error("{0} is not another beacon of this cluster")]
    NotAPeer(SocketAddr),
    #[error("{0} is a learner: only a voter can lead")]
    Learner(SocketAddr),
    #[error("{0} is offline: leadership goes only to a beacon this leader hears")]
    Offline(SocketAddr),
    #[error("no other beacon is online to take the leadership")]
    NoTarget,
    #[error("a transfer to {0} is already under way")]
    InProgress(SocketAddr),
    #[error(
        "{to} did not take the leadership within {ms} ms (it may be behind or cut off); this beacon leads on"
    )]
    TimedOut { to: SocketAddr, ms: u64 },
    #[error("leadership went to {leader:?} instead of {to}")]
    WentElsewhere {
        to: SocketAddr,
        leader: Option<SocketAddr>,
    },
}

/// Why a change of membership was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChangeError {
    #[error(transparent)]
    Consensus(#[from] ConsensusError),
    #[error(transparent)]
    Members(#[from] super::MembersError),
    #[error(
        "membership changes need quorum mode, and this cluster runs in classic mode, which has no majority to keep them safe: restart a lone beacon with `--mode quorum` (or `\"mode\": \"quorum\"` in its config file), which it switches to on its own; beacons of a classic pair switch together, each restarted once with --mode quorum --adopt-config"
    )]
    ClassicMode,
    #[error(
        "a change of membership is under way (log entry {0} is not committed yet); one change at a time: retry in a moment"
    )]
    InProgress(u64),
    #[error("this leader's first entry of its term is not committed yet; retry in a moment")]
    NotYet,
    #[error(
        "{0} leads: a leader does not remove itself; hand the leadership to another voter first"
    )]
    RemovesLeader(SocketAddr),
}

/// Why a request was refused: by the consensus core, or by the machine it addressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError<E> {
    #[error(transparent)]
    Consensus(#[from] ConsensusError),
    #[error(transparent)]
    Machine(E),
}

/// Stored state that cannot be loaded: the beacon refuses to start rather than serve from
/// part of what it acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    #[error(
        "the stored log does not follow on: entry {found} comes after {last}; refusing to start from part of the acknowledged state (restore the data directory, or remove it to fetch the state from the other beacons)"
    )]
    NotContiguous { found: Position, last: Position },
    #[error(
        "stored entry {position} does not fit the stored state ({cause}); refusing to start from part of the acknowledged state (restore the data directory, or remove it to fetch the state from the other beacons)"
    )]
    DoesNotFit { position: Position, cause: String },
    #[error("{0}")]
    Configuration(String),
}
