//! How much of this beacon's own log is on its disk.
//!
//! A driver that stores in the background ([`super::Config::stores_reported`]) goes on
//! stepping while a store is under way, so the log may run ahead of the disk. The replica
//! then counts its own copy of an entry only once the driver reported it stored
//! ([`super::Input::Stored`]): a leader commits nothing it has not stored itself (a commit
//! is on a majority of disks, the leader's among them), and a follower's early
//! acknowledgement of a round claims no entry still on its way to the disk. Everything a
//! follower acknowledges after a store it acknowledges once that store and every one
//! before it are done: the driver releases them in order.

use super::{Machine, Position, Replica, Service};

impl<S: Machine, V: Service<S>> Replica<S, V> {
    /// The last index of this beacon's log known to be on its disk (all of the log where
    /// every store is done before the next step).
    pub(super) fn own_durable(&self) -> u64 {
        let last = self.journal.last().index;
        if self.cfg.stores_reported {
            self.durable.min(last)
        } else {
            last
        }
    }

    /// The driver stored the log through `through`.
    pub(super) fn on_stored(&mut self, through: Position) {
        if self.journal.holds(through) {
            self.durable = self.durable.max(through.index);
        }
    }

    /// The log was cut after `after`: what was stored beyond it is not this log's.
    pub(super) fn cut_durable(&mut self, after: u64) {
        self.durable = self.durable.min(after);
    }

    /// Where this beacon's stored log ends, as a position of its log (`None` when the log
    /// no longer knows the term there): what an acknowledgement sent before a store may
    /// claim, the entries of the current step (from `first`) still waiting for theirs.
    pub(super) fn durable_position(&self, first: Option<u64>) -> Option<Position> {
        let mut index = self.own_durable();
        if let Some(first) = first {
            index = index.min(first - 1);
        }
        let term = self.journal.log().term_at(index)?;
        Some(Position { index, term })
    }
}

#[cfg(test)]
mod tests {
    use super::super::scenario::{elected_leader, quorum_leader};
    use super::super::testing::*;
    use super::super::{Input, Position, Token};

    /// `n`, told from now on that its driver stores in the background, with everything up
    /// to now stored.
    fn storing_beside(mut n: Node) -> Node {
        n.cfg.stores_reported = true;
        n.durable = n.position().index;
        n
    }

    fn tokens(step: &Step) -> Vec<Token> {
        step.replies.iter().map(|(t, _)| *t).collect()
    }

    /// B's acknowledgement alone is no majority of three while A's own store is under way:
    /// the write commits, and is answered, once A's driver reports it stored.
    #[test]
    fn a_leader_counts_its_own_entries_only_once_reported_stored() {
        let mut a = storing_beside(quorum_leader());
        let before = a.commit();
        add(&mut a, 300, 1, 7);
        let written = a.position();
        let beat = a.leading.as_ref().unwrap().rounds.beat();
        let step = hear(&mut a, 301, B, follower(A, 1, written, beat));
        assert_eq!(a.commit(), before, "B alone is no majority");
        assert!(step.replies.is_empty());
        // A report of a position the log does not hold counts for nothing.
        let elsewhere = Position {
            index: written.index,
            term: written.term + 1,
        };
        a.step(302, Input::Stored { through: elsewhere });
        assert_eq!(a.commit(), before);
        let step = a.step(303, Input::Stored { through: written });
        assert_eq!(a.commit(), written.index, "A and B make the majority");
        assert_eq!(tokens(&step), vec![1]);
    }

    /// Where every store is done before the next step, the leader's log is its own at
    /// once: B's acknowledgement commits.
    #[test]
    fn a_leader_whose_stores_finish_before_the_next_step_counts_its_whole_log() {
        let mut a = quorum_leader();
        add(&mut a, 300, 1, 7);
        let written = a.position();
        let beat = a.leading.as_ref().unwrap().rounds.beat();
        let step = hear(&mut a, 301, B, follower(A, 1, written, beat));
        assert_eq!(a.commit(), written.index);
        assert_eq!(tokens(&step), vec![1]);
    }

    /// A lone voter is its own majority: its write commits with its store's report.
    #[test]
    fn a_lone_leader_commits_when_its_store_is_reported() {
        let mut lone = storing_beside(elected_leader(1));
        let step = add(&mut lone, 300, 3, 9);
        assert!(step.replies.is_empty());
        assert!(lone.commit() < lone.position().index);
        let step = lone.step(
            301,
            Input::Stored {
                through: lone.position(),
            },
        );
        assert_eq!(lone.commit(), lone.position().index);
        assert_eq!(tokens(&step), vec![3]);
    }

    /// A greeting claims no entry whose store is under way, and a cut in the log takes
    /// back what was reported beyond it.
    #[test]
    fn a_greeting_claims_only_what_was_reported_stored() {
        let mut a = storing_beside(quorum_leader());
        let stored = a.position();
        add(&mut a, 300, 1, 7);
        assert!(a.position().index > stored.index);
        assert_eq!(a.stored_greeting().position, stored);
        assert_eq!(a.greeting().position, a.position());
        a.step(
            301,
            Input::Stored {
                through: a.position(),
            },
        );
        assert_eq!(a.stored_greeting().position, a.position());
        a.cut_durable(stored.index);
        assert_eq!(a.own_durable(), stored.index);
    }
}
