//! When a write is committed, and what follows from it: the answers that waited for it and
//! the changes watchers are told about. Its behaviour is in the scenario transcripts
//! (`scenarios/02_classic_election.txt`, `04_write_committed_by_majority.txt`).

use super::{Machine, Mode, Replica, Service};
use crate::time::Millis;

impl<S: Machine, V: Service<S>> Replica<S, V> {
    /// Classic mode: what every online, in-sync follower has stored. An online follower whose
    /// position is not known yet (just after an election, or after it reconnected) counts as
    /// having nothing: a write is never acknowledged on the hope that a beacon has it.
    fn classic_commit(&mut self, now: Millis) -> Option<u64> {
        // What every in-sync follower stored, and this leader too.
        let last = self.own_durable();
        let leading = self.leading.as_mut()?;
        let stall_after = self.cfg.patience_ms();
        let mut commit = last;
        let mut notices = Vec::new();
        for (peer, f) in leading.followers.iter_mut() {
            if !self.election.is_voter(peer) {
                continue; // a learner holds no write back
            }
            let matched = f.progress.matched.unwrap_or(0);
            if matched >= last {
                f.behind_since = None;
                if !f.in_sync {
                    f.in_sync = true;
                    notices.push(format!("follower {peer} caught up"));
                }
                continue;
            }
            if !self.election.is_online(peer) || !f.in_sync {
                continue;
            }
            let since = *f.behind_since.get_or_insert(now);
            if now.saturating_sub(since) > stall_after {
                f.in_sync = false;
                notices.push(format!(
                    "follower {peer} has made no progress for {} ms (at {matched}, leader at {last}): writes no longer wait for it",
                    now - since
                ));
                continue;
            }
            commit = commit.min(matched);
        }
        for n in notices {
            self.notice(n);
        }
        Some(commit)
    }

    /// Quorum mode: the highest index stored by a majority of the voters (the leader
    /// included, through what it stored itself: [`super::durable`]; a learner's copy
    /// counts for nothing), once the
    /// entry there is of the leader's own term. An older entry on a majority is not yet safe:
    /// a leader that took over a more advanced state could still replace it; an entry of the
    /// current term on a majority is in the state any later leader takes over.
    fn quorum_commit(&self) -> Option<u64> {
        if self.taking_over() {
            return None;
        }
        let leading = self.leading.as_ref()?;
        let candidate = leading.followers.majority_reached(
            &self.election,
            self.journal.last().index,
            self.majority(),
            |f| f.progress.matched.unwrap_or(0),
        );
        // Never beyond what this leader stored itself: its own disk is in every majority
        // it counts (the same as a count with its stored log, then the lower of the two).
        let candidate = candidate.min(self.own_durable());
        (self.journal.log().term_at(candidate) == Some(self.election.term())).then_some(candidate)
    }

    /// Hands the changes of entries now committed to the watchers, in log order.
    pub(super) fn release_changes(&mut self) {
        let committed = self.journal.take_committed_changes();
        self.ready.committed.extend(committed);
    }

    /// Commits what the mode's rule allows, answers the requests that were waiting for it,
    /// and publishes the committed changes.
    pub(super) fn advance_commit(&mut self, now: Millis) {
        let commit = match self.cfg.mode {
            Mode::Classic => self.classic_commit(now),
            Mode::Quorum => self.quorum_commit(),
        };
        let Some(commit) = commit else {
            return;
        };
        let Some(leading) = self.leading.as_mut() else {
            return;
        };
        if !self.journal.commit_to(commit) {
            return;
        }
        leading.news.committed = true;
        let due = leading.pending.due(commit);
        self.release_changes();
        for (token, waiting) in due.waiting {
            let answer = self.service.answer(self.journal.state(), waiting);
            self.give(token, answer);
        }
        for (token, result) in due.held {
            self.give(token, result);
        }
    }
}
