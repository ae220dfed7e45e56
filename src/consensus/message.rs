//! What one beacon sends another: the election heartbeat, plus replication.
//!
//! The leader sends each follower the entries after the last position they share; a follower
//! whose position the leader cannot find in its log (it diverged while two leaders ran, or it
//! is further behind than the leader's log reaches) gets a snapshot of the whole state
//! instead. Followers answer with their position.

use super::election::Heartbeat;
use super::log::{Entry, Position};

/// Entries following `prev`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Append<C> {
    pub prev: Position,
    pub entries: Vec<Entry<C>>,
}

/// The whole state as of `position`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot<S> {
    pub position: Position,
    pub state: S,
}

/// What one beacon sends another, over a replicated state whose commands are `C` and whose
/// snapshots are `S`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerMessage<C, S> {
    pub heartbeat: Heartbeat,
    /// The sender's last log position.
    pub position: Position,
    /// The sender's commit index.
    pub commit: u64,
    /// Leader to follower: entries to append.
    pub append: Option<Append<C>>,
    /// Leader to follower: state to install.
    pub snapshot: Option<Box<Snapshot<S>>>,
    /// Follower to leader: the last append did not follow this follower's log.
    pub reject: bool,
    /// Follower to leader: this follower's state diverged; only a snapshot can repair it.
    pub need_snapshot: bool,
    /// Leader to follower (quorum mode, while taking over): send your whole state.
    pub fetch: bool,
    /// Leader to follower: the leader's latest confirmation round (quorum mode).
    pub beat: u64,
    /// Follower to leader: the latest round of its leader's this follower has seen.
    pub ack_beat: u64,
    /// Leader to follower: take over the leadership now (a transfer; the follower has every
    /// entry the leader has, and the leader serves no write meanwhile).
    pub transfer: bool,
}

impl<C, S> PeerMessage<C, S> {
    /// A message that carries the heartbeat and position alone.
    pub fn bare(heartbeat: Heartbeat, position: Position, commit: u64) -> PeerMessage<C, S> {
        PeerMessage {
            heartbeat,
            position,
            commit,
            append: None,
            snapshot: None,
            reject: false,
            need_snapshot: false,
            fetch: false,
            beat: 0,
            ack_beat: 0,
            transfer: false,
        }
    }

    /// Whether this carries anything for the receiver's log (and so deserves an answer at once).
    pub fn replicates(&self) -> bool {
        self.append.is_some() || self.snapshot.is_some()
    }
}
