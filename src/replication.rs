//! The replicated log, the messages that carry it, and the leader's view of each follower.
//!
//! Every beacon keeps a log of [`Entry`]s (typed commands at positions) and applies each entry
//! as it appends it, so its [`crate::state::State`] always reflects its whole log. The leader sends each
//! follower the entries after the last position they share; a follower whose position the
//! leader cannot find in its log (it diverged while two leaders ran, or it is further behind
//! than the leader's log reaches) gets a snapshot of the whole state instead.
//!
//! Positions are `(index, term)`. Terms are unique to the beacon that took them (see
//! [`crate::election`]), so one position names one entry cluster-wide: two logs that share a
//! position share everything up to it.

use std::collections::VecDeque;

use crate::election::{Heartbeat, Millis};
use crate::registry::NodeId;
use crate::state::{Command, StateSnapshot};

/// A place in the log: the entry at `index`, appended in `term`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Position {
    pub index: u64,
    pub term: u64,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.index, self.term)
    }
}

/// One command at its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub index: u64,
    pub term: u64,
    pub command: Command,
}

impl Entry {
    pub fn position(&self) -> Position {
        Position {
            index: self.index,
            term: self.term,
        }
    }
}

/// Entries following `prev`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Append {
    pub prev: Position,
    pub entries: Vec<Entry>,
}

/// The whole state as of `position`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub position: Position,
    pub state: StateSnapshot,
}

/// What one beacon sends another: the election heartbeat plus replication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerMessage {
    pub heartbeat: Heartbeat,
    /// The sender's last log position.
    pub position: Position,
    /// The sender's commit index.
    pub commit: u64,
    /// The sender's allocator position (the seed's `last_node_id`).
    pub last_node_id: NodeId,
    /// Leader to follower: entries to append.
    pub append: Option<Append>,
    /// Leader to follower: state to install.
    pub snapshot: Option<Box<Snapshot>>,
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
}

impl PeerMessage {
    /// Whether this carries anything for the receiver's log (and so deserves an answer at once).
    pub fn replicates(&self) -> bool {
        self.append.is_some() || self.snapshot.is_some()
    }
}

/// The log, with everything before `base` compacted away.
#[derive(Debug, Clone)]
pub struct Log {
    /// Position of the state the first entry follows (0@0 for an empty history, or the
    /// position of the last snapshot installed or entry compacted).
    base: Position,
    entries: VecDeque<Entry>,
    /// How many entries to keep; older ones are dropped (a follower that needs them gets a
    /// snapshot).
    keep: usize,
}

impl Log {
    pub fn new(keep: usize) -> Log {
        Log {
            base: Position::default(),
            entries: VecDeque::new(),
            keep: keep.max(1),
        }
    }

    /// The last position (the base when empty).
    pub fn last(&self) -> Position {
        self.entries.back().map_or(self.base, Entry::position)
    }

    /// Where the retained history starts.
    pub fn base(&self) -> Position {
        self.base
    }

    /// The term of the entry at `index`, if this log still knows it.
    pub fn term_at(&self, index: u64) -> Option<u64> {
        if index == self.base.index {
            return Some(self.base.term);
        }
        let offset = index.checked_sub(self.base.index + 1)?;
        self.entries.get(offset as usize).map(|e| e.term)
    }

    /// Whether this log's history includes `pos`.
    pub fn contains(&self, pos: Position) -> bool {
        self.term_at(pos.index) == Some(pos.term)
    }

    /// Changes how many entries are kept (at least one); the excess goes with the next append.
    pub fn set_keep(&mut self, keep: usize) {
        self.keep = keep.max(1);
    }

    /// Appends the entry that follows the last one; older entries beyond `keep` are dropped.
    pub fn append(&mut self, entry: Entry) {
        debug_assert_eq!(
            entry.index,
            self.last().index + 1,
            "log entries are contiguous"
        );
        self.entries.push_back(entry);
        while self.entries.len() > self.keep {
            let dropped = self.entries.pop_front().expect("non-empty");
            self.base = dropped.position();
        }
    }

    /// Up to `max` entries after `index`; `None` when they were compacted away.
    pub fn after(&self, index: u64, max: usize) -> Option<Vec<Entry>> {
        let offset = index.checked_sub(self.base.index)? as usize;
        Some(
            self.entries
                .iter()
                .skip(offset)
                .take(max)
                .cloned()
                .collect(),
        )
    }

    /// Forgets every entry: the state is now the snapshot at `base`.
    pub fn reset(&mut self, base: Position) {
        self.base = base;
        self.entries.clear();
    }
}

/// The leader's view of one follower.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Highest index known to be in the follower's log (and ours); `None` until the follower
    /// reports a position this log contains.
    pub matched: Option<u64>,
    /// The next index to send.
    pub next: u64,
    /// When a snapshot was last sent, while the follower has not reported installing it.
    pub snapshot_sent: Option<Millis>,
}

impl Progress {
    pub fn new(next: u64) -> Progress {
        Progress {
            matched: None,
            next,
            snapshot_sent: None,
        }
    }

    /// Takes in the follower's reported position. Returns whether the follower needs a
    /// snapshot (its position is not in our history).
    pub fn observe(&mut self, log: &Log, reported: Position, reject: bool) -> bool {
        if log.contains(reported) {
            let first = self.matched.is_none();
            let matched = self
                .matched
                .map_or(reported.index, |m| m.max(reported.index));
            self.matched = Some(matched);
            self.snapshot_sent = None;
            if first || reject || self.next <= matched {
                self.next = matched + 1;
            }
            false
        } else if self.matched.is_some_and(|m| reported.index < m) {
            // An older report overtaken by a later one: nothing new.
            false
        } else {
            self.matched = None;
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64) -> Entry {
        Entry {
            index,
            term,
            command: crate::registry::Command::Release(index as NodeId).into(),
        }
    }

    fn pos(index: u64, term: u64) -> Position {
        Position { index, term }
    }

    #[test]
    fn log_knows_its_positions_and_compacts() {
        let mut log = Log::new(3);
        assert_eq!(log.last(), pos(0, 0));
        assert!(log.contains(pos(0, 0)));
        for i in 1..=4 {
            log.append(entry(i, 1 + i / 3));
        }
        // Entry 1 was dropped: the base moved to it.
        assert_eq!(log.base(), pos(1, 1));
        assert_eq!(log.last(), pos(4, 2));
        assert!(log.contains(pos(3, 2)) && log.contains(pos(1, 1)));
        assert!(!log.contains(pos(3, 1)) && !log.contains(pos(0, 0)) && !log.contains(pos(5, 2)));
        assert_eq!(log.after(0, 10), None, "compacted");
        let after1: Vec<u64> = log.after(1, 10).unwrap().iter().map(|e| e.index).collect();
        assert_eq!(after1, vec![2, 3, 4]);
        assert_eq!(log.after(2, 1).unwrap()[0].index, 3);
        assert!(log.after(4, 10).unwrap().is_empty());
        log.reset(pos(9, 5));
        assert_eq!(log.last(), pos(9, 5));
        assert!(log.after(9, 10).unwrap().is_empty());
    }

    #[test]
    fn progress_follows_reports_and_asks_for_a_snapshot_when_lost() {
        let mut log = Log::new(100);
        for i in 1..=5 {
            log.append(entry(i, 1));
        }
        let mut p = Progress::new(6);
        // Unknown follower reports 3@1: matched, resend from 4.
        assert!(!p.observe(&log, pos(3, 1), false));
        assert_eq!((p.matched, p.next), (Some(3), 4));
        // It catches up.
        assert!(!p.observe(&log, pos(5, 1), false));
        assert_eq!((p.matched, p.next), (Some(5), 6));
        // A delayed older report changes nothing.
        assert!(!p.observe(&log, pos(4, 1), false));
        assert_eq!((p.matched, p.next), (Some(5), 6));
        // A position from another history: snapshot.
        assert!(p.observe(&log, pos(7, 2), false));
        assert_eq!(p.matched, None);
    }
}
