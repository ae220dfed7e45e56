//! What one beacon sends another: the election heartbeat, plus replication.
//!
//! The leader sends each follower the entries after the last position they share; a follower
//! whose position the leader cannot find in its log (it diverged while two leaders ran, or it
//! is further behind than the leader's log reaches) gets a snapshot of the whole state
//! instead. Followers answer with their position.

use super::election::Heartbeat;
use super::log::{Entry, Position};
use super::members::Members;
use super::renewals::{Horizon, RenewalBatch};

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
    /// The membership as of `position`; `None`: the configured one, never changed.
    pub members: Option<Members>,
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
    /// Leader to follower: the latest committed change of membership, with its log index
    /// (none while the configured membership never changed). A follower whose log lacks
    /// it (it was cut off while beacons were added and removed) elects among these
    /// members until its log catches up: committed changes form one history, so the one
    /// of the highest index is the latest known anywhere.
    pub members: Option<Box<(u64, Members)>>,
    /// The sender's voters ([`Members::voters_digest`]; 0 from a beacon that predates
    /// membership changes): its `heartbeat.sees` numbers voters by their places among them.
    pub voters: u64,
    /// Leader to follower: renewal notes it lacks, or the whole table (see
    /// [`super::renewals`]); follower to a new leader taking over: notes it lacks.
    pub renewals: Option<Box<RenewalBatch>>,
    /// Leader to follower: the horizon its term's notes continue from.
    pub renewal_base: Option<Horizon>,
    /// Follower to leader (a promise too): how far it has heard its leaders' renewals
    /// (term 0: nothing it can vouch for); `None` from a beacon that does not tell.
    pub heard: Option<Horizon>,
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
            members: None,
            voters: 0,
            renewals: None,
            renewal_base: None,
            heard: None,
        }
    }

    /// Whether this carries anything for the receiver's log (and so deserves an answer at once).
    pub fn replicates(&self) -> bool {
        self.append.is_some() || self.snapshot.is_some()
    }
}
