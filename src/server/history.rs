//! The committed changes a beacon keeps so that a watch can resume from a log index.
//!
//! Every replica records the changes its core releases as committed (a follower's too: the
//! core tells every replica the same change at the same index), so a watcher that reconnects
//! to a new leader after a failover resumes where it left off. The history holds every
//! change from [`History::first`] on; a watch from before that is refused `COMPACTED`, and
//! its client lists the state again and watches from there (etcd's list-then-watch).

use std::collections::VecDeque;
use std::sync::Arc;

use crate::machines::handle::{Replay, StartPoint, Told};

/// A bounded run of committed changes (`C`: every machine's change, in the daemon),
/// contiguous from [`History::first`].
pub(crate) struct History<C> {
    /// Each change with its log index and about how many bytes it holds.
    changes: VecDeque<(u64, Arc<C>, usize)>,
    /// The changes held from an index on (the earliest a resume asked), as resumes are
    /// handed them: made on the first resume after a change is recorded and shared by every
    /// resume from that index or later until the next (a herd that comes back at once
    /// shares one).
    snapshot: Option<(u64, Told<C>)>,
    /// Every committed change at or after this index is held (or still to come).
    first: u64,
    /// Changes kept at most (key `watch.history`).
    limit: usize,
    /// Bytes kept at most (key `watch.history_bytes`), and kept now.
    budget: usize,
    bytes: usize,
    /// About how many bytes a change holds.
    size: fn(&C) -> usize,
}

impl<C: Clone> History<C> {
    /// An empty history for a replica whose log (replayed at start) ends at `last`: changes
    /// of replayed entries were never told, so the history starts after them.
    pub(crate) fn new(limit: usize, budget: usize, size: fn(&C) -> usize, last: u64) -> History<C> {
        History {
            changes: VecDeque::new(),
            snapshot: None,
            first: last + 1,
            limit,
            budget,
            bytes: 0,
            size,
        }
    }

    /// How many changes are kept.
    pub(crate) fn len(&self) -> usize {
        self.changes.len()
    }

    /// The oldest index a watch may resume from.
    pub(crate) fn first(&self) -> u64 {
        self.first
    }

    /// Records the changes one carry-out released. `restored`: the state was replaced by a
    /// snapshot through that index first, so nothing held or released at or before it is
    /// contiguous with what follows.
    pub(crate) fn record(&mut self, committed: &[(u64, C)], restored: Option<u64>) {
        if committed.is_empty() && restored.is_none() {
            return;
        }
        self.snapshot = None;
        if let Some(at) = restored {
            // The log itself was reset to `at`: what follows is new, whatever this replica
            // held past it before (entries of a deposed leader's, never told).
            self.changes.clear();
            self.bytes = 0;
            self.first = at + 1;
        }
        for (index, change) in committed {
            if *index < self.first {
                continue;
            }
            let bytes = (self.size)(change);
            self.bytes += bytes;
            self.changes
                .push_back((*index, Arc::new(change.clone()), bytes));
        }
        while self.changes.len() > self.limit || self.bytes > self.budget {
            let (index, _, bytes) = self.changes.pop_front().expect("over a limit");
            self.bytes -= bytes;
            self.first = index + 1;
        }
    }

    /// Where a watch from `from` (0: from the current state) starts.
    pub(crate) fn since(&self, from: u64) -> StartPoint {
        if from == 0 {
            return StartPoint::Now;
        }
        if from < self.first {
            return StartPoint::Compacted {
                asked: from,
                oldest: self.first,
            };
        }
        StartPoint::Replay {
            from,
            count: self.changes.len() - self.start_of(from),
        }
    }

    /// The position of the first change at or after `from` (a binary search: a herd's
    /// resumes each ask it on the core's thread).
    fn start_of(&self, from: u64) -> usize {
        self.changes.partition_point(|(i, _, _)| *i < from)
    }

    /// The changes at or after `from`, handed to a resumed watch to walk on its own task:
    /// a slice of one snapshot shared by every resume until the next change is recorded.
    /// The snapshot holds the changes from the earliest index asked since then, not the
    /// whole history: a watch that caught up and subscribes again from near the end (see
    /// `machines/handle.rs`, `follow`) costs the core's thread what it is owed, not what
    /// the history holds.
    pub(crate) fn replay_from(&mut self, from: u64) -> Replay<C> {
        let covers = self
            .snapshot
            .as_ref()
            .is_some_and(|(made, _)| *made <= from);
        if !covers {
            let at = self.start_of(from);
            let held = self.changes.range(at..).map(|(i, c, _)| (*i, c.clone()));
            self.snapshot = Some((from, Arc::new(held.collect())));
        }
        let all = self.snapshot.as_ref().expect("made above").1.clone();
        let start = all.partition_point(|(i, _)| *i < from);
        Replay {
            changes: all,
            start,
        }
    }

    /// About how many bytes the changes kept hold.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Some change (which one does not matter to the history).
    fn change() -> &'static str {
        "a change"
    }

    fn indexes(h: &mut History<&str>, from: u64) -> Vec<u64> {
        h.replay_from(from).owed().iter().map(|(i, _)| *i).collect()
    }

    /// A history of `limit` changes, each counted as its length in bytes.
    fn history(limit: usize, budget: usize, last: u64) -> History<&'static str> {
        History::new(limit, budget, |c| c.len(), last)
    }

    #[test]
    fn resumes_at_one_point_in_the_log_share_one_snapshot_until_the_next_change() {
        let mut h = history(10, usize::MAX, 10);
        h.record(&[(11, change()), (12, change()), (13, change())], None);
        let b = h.replay_from(11);
        let a = h.replay_from(12);
        assert!(
            Arc::ptr_eq(&a.changes, &b.changes),
            "a herd is served one snapshot"
        );
        let owed = |r: &Replay<&str>| r.owed().iter().map(|(i, _)| *i).collect::<Vec<_>>();
        assert_eq!(owed(&a), vec![12, 13]);
        assert_eq!(owed(&b), vec![11, 12, 13]);
        h.record(&[(14, change())], None);
        let c = h.replay_from(12);
        assert!(
            !Arc::ptr_eq(&a.changes, &c.changes),
            "a new change, a new snapshot"
        );
        assert_eq!(owed(&c), vec![12, 13, 14]);
        assert_eq!(
            owed(&a),
            vec![12, 13],
            "what a resume was handed stays as it was"
        );
    }

    #[test]
    fn a_resume_replays_from_its_index_and_older_ones_are_compacted() {
        let mut h = history(3, usize::MAX, 10);
        assert_eq!(h.since(0), StartPoint::Now);
        assert_eq!(
            h.since(5),
            StartPoint::Compacted {
                asked: 5,
                oldest: 11
            },
            "replayed entries were never told"
        );
        h.record(&[(12, change()), (14, change())], None);
        assert_eq!(h.since(11), StartPoint::Replay { from: 11, count: 2 });
        assert_eq!(indexes(&mut h, 13), vec![14]);
        assert_eq!(h.since(20), StartPoint::Replay { from: 20, count: 0 });
        // Over the limit the oldest go, and the history starts after them.
        h.record(&[(15, change()), (17, change())], None);
        assert_eq!(indexes(&mut h, 0), vec![14, 15, 17]);
        assert_eq!(h.first(), 13);
        assert!(matches!(
            h.since(12),
            StartPoint::Compacted { oldest: 13, .. }
        ));
        assert_eq!(h.since(13), StartPoint::Replay { from: 13, count: 3 });
    }

    #[test]
    fn a_snapshot_breaks_the_history() {
        let mut h = history(100, usize::MAX, 0);
        h.record(&[(2, change()), (3, change())], None);
        // A snapshot through 9 replaced the state: changes 4..=9 were never told here.
        h.record(&[(3, change()), (11, change())], Some(9));
        assert_eq!(h.first(), 10);
        assert_eq!(indexes(&mut h, 0), vec![11]);
        assert!(matches!(
            h.since(3),
            StartPoint::Compacted { oldest: 10, .. }
        ));
    }

    #[test]
    fn the_byte_budget_drops_the_oldest_changes_too() {
        let mut h = history(100, 20, 0);
        h.record(&[(1, "0123456789"), (2, "0123456789")], None);
        assert_eq!((indexes(&mut h, 0), h.bytes()), (vec![1, 2], 20));
        h.record(&[(3, "x")], None);
        assert_eq!(
            (indexes(&mut h, 0), h.bytes(), h.first()),
            (vec![2, 3], 11, 2)
        );
    }

    #[test]
    fn no_history_kept_compacts_every_resume() {
        let mut h = history(0, usize::MAX, 0);
        h.record(&[(1, change()), (2, change())], None);
        assert!(matches!(
            h.since(1),
            StartPoint::Compacted { oldest: 3, .. }
        ));
        assert_eq!(h.since(3), StartPoint::Replay { from: 3, count: 0 });
    }
}
