//! The leader's view of each follower: how far it has stored the log, what to send it next,
//! whether commits wait for it, and which confirmation round it acknowledged.

use super::log::{Log, Position};
use crate::time::Millis;

/// How far a follower is known to have stored the log.
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

    /// Takes in the follower's reported position, and (quorum mode) its commit index.
    /// Returns whether the follower needs a snapshot: its position is not in our history,
    /// and neither is its commit. A follower whose log leaves ours after its commit holds a
    /// tail that never committed (the entries through its commit are ours: a leader's log
    /// holds every committed entry); it is sent our entries from there and cuts the tail
    /// (`Replica::cut_after`).
    pub fn observe<C: Clone>(
        &mut self,
        log: &Log<C>,
        reported: Position,
        commit: Option<u64>,
        reject: bool,
    ) -> bool {
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
        } else if let Some(c) =
            commit.filter(|c| *c > 0 && *c < reported.index && log.term_at(*c).is_some())
        {
            self.matched = Some(c);
            self.snapshot_sent = None;
            self.next = c + 1;
            false
        } else {
            self.matched = None;
            true
        }
    }
}

/// Everything a leader tracks of one follower.
#[derive(Debug, Clone)]
pub(crate) struct Follower {
    pub(crate) progress: Progress,
    /// The follower reported a position outside our history: it gets a snapshot.
    pub(crate) wants_snapshot: bool,
    /// Since when it has lacked entries the leader has (unknown position counts as lacking).
    pub(crate) behind_since: Option<Millis>,
    /// Whether commits wait for it (classic mode, while online). A follower that makes no
    /// progress for two ticks (at least 2 s, [`super::Config::patience_ms`]) is left out until it has caught up again, so one stuck beacon
    /// cannot stall every write.
    pub(crate) in_sync: bool,
    /// A learner to promote: since when it has kept up, as of the leader's ticks.
    pub(crate) kept_up_since: Option<Millis>,
    /// The latest confirmation round of ours it acknowledged.
    pub(crate) acked_beat: u64,
}

/// The highest value a majority of the voters has reached: `reached` of each voter among
/// `followers`, and `own`, the leader's (a learner's counts for nothing). What a commit
/// index is to stored entries, a confirmed round is to acknowledged ones.
pub(super) fn majority_reached(
    election: &super::Election,
    followers: &std::collections::BTreeMap<std::net::SocketAddr, Follower>,
    own: u64,
    majority: usize,
    reached: impl Fn(&Follower) -> u64,
) -> u64 {
    let mut values: Vec<u64> = followers
        .iter()
        .filter(|(peer, _)| election.is_voter(**peer))
        .map(|(_, f)| reached(f))
        .collect();
    values.push(own);
    values.sort_unstable_by(|a, b| b.cmp(a));
    values[majority - 1]
}

impl Follower {
    pub(crate) fn new(next: u64) -> Follower {
        Follower {
            progress: Progress::new(next),
            wants_snapshot: false,
            behind_since: None,
            in_sync: true,
            acked_beat: 0,
            kept_up_since: None,
        }
    }
}

/// A follower's replication progress, as its leader knows it (for `show beacon`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowerView {
    pub peer: std::net::SocketAddr,
    /// The last index it is known to store, if known.
    pub matched: Option<u64>,
    /// The next index to send.
    pub next: u64,
    /// It is outside the leader's log and gets a snapshot.
    pub wants_snapshot: bool,
    /// Classic mode: commits wait for it.
    pub in_sync: bool,
}

#[cfg(test)]
mod tests {
    use super::super::log::{Entry, Payload};
    use super::*;

    fn pos(index: u64, term: u64) -> Position {
        Position { index, term }
    }

    #[test]
    fn progress_follows_reports_and_asks_for_a_snapshot_when_lost() {
        let mut log = Log::new(100);
        for i in 1..=5 {
            log.append(Entry {
                index: i,
                term: 1,
                payload: Payload::Command(i),
            });
        }
        let mut p = Progress::new(6);
        // Unknown follower reports 3@1: matched, resend from 4.
        assert!(!p.observe(&log, pos(3, 1), None, false));
        assert_eq!((p.matched, p.next), (Some(3), 4));
        // It catches up.
        assert!(!p.observe(&log, pos(5, 1), None, false));
        assert_eq!((p.matched, p.next), (Some(5), 6));
        // A delayed older report changes nothing.
        assert!(!p.observe(&log, pos(4, 1), None, false));
        assert_eq!((p.matched, p.next), (Some(5), 6));
        // A position from another history: snapshot.
        assert!(p.observe(&log, pos(7, 2), None, false));
        assert_eq!(p.matched, None);
        // Unless the follower's commit is in our log: its tail after it never committed,
        // and it is sent our entries from there.
        assert!(!p.observe(&log, pos(7, 2), Some(2), false));
        assert_eq!((p.matched, p.next), (Some(2), 3));
        // A commit our log no longer holds (compacted away) or none: snapshot.
        assert!(p.observe(&log, pos(7, 2), Some(9), false));
        assert!(p.observe(&log, pos(7, 2), Some(0), false));
    }
}
