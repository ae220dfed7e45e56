//! When a write is committed, and what follows from it: the answers that waited for it and
//! the changes watchers are told about.

use super::{Machine, Mode, Replica, ReplyError, Service};
use crate::time::Millis;

impl<S: Machine, V: Service<S>> Replica<S, V> {
    /// Classic mode: what every online, in-sync follower has stored. An online follower whose
    /// position is not known yet (just after an election, or after it reconnected) counts as
    /// having nothing: a write is never acknowledged on the hope that a beacon has it.
    fn classic_commit(&mut self, now: Millis) -> Option<u64> {
        let leading = self.leading.as_mut()?;
        let last = self.journal.last().index;
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
    /// included; a learner's copy counts for nothing), once the
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
            self.reply(token, answer.map_err(ReplyError::Machine));
        }
        for (token, result) in due.held {
            self.reply(token, result.map_err(ReplyError::Machine));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::{Input, Mode, Position};

    fn add(n: &mut Node, token: u64, value: u64) -> Step {
        n.step(
            200,
            Input::Request {
                token,
                request: Request::Add(value),
            },
        )
    }

    #[test]
    fn quorum_mode_answers_once_a_majority_stored_the_entry() {
        let mut a = quorum_leader();
        add(&mut a, 9, 7);
        let last = a.position();
        // One follower's acknowledgement makes a majority with the leader.
        let step = hear(&mut a, 210, B, follower(A, 1, last, 0));
        assert_eq!(step.replies.len(), 1);
        assert_eq!(step.replies[0].0, 9);
        assert_eq!(step.replies[0].1, Ok(last.index));
        assert_eq!(step.committed, vec![(last.index, 7)], "watchers are told");
        assert_eq!(a.commit(), last.index);
        // The other's changes nothing more.
        let step = hear(&mut a, 220, C, follower(A, 1, last, 0));
        assert!(step.replies.is_empty() && step.committed.is_empty());
    }

    #[test]
    fn a_read_at_an_uncommitted_entry_waits_and_the_followers_hear_the_commit_at_once() {
        let mut a = quorum_leader();
        add(&mut a, 9, 7);
        let last = a.position();
        assert_eq!(a.committed(last), Some(false), "stored by the leader alone");
        let step = hear(&mut a, 210, B, follower(A, 1, last, 0));
        assert_eq!(a.committed(last), Some(true));
        // The commit goes to both followers in this step, though nothing else does.
        let told: Vec<_> = step
            .after
            .iter()
            .chain(step.early.iter())
            .filter(|(_, m)| m.commit == last.index)
            .map(|(to, _)| *to)
            .collect();
        assert!(
            told.contains(&addr(B)) && told.contains(&addr(C)),
            "{told:?}"
        );
        // A position this replica does not hold (another leader's entry there) is not
        // committed here, and never will be.
        let other = Position {
            term: last.term + 1,
            index: last.index,
        };
        assert_eq!(a.committed(other), None);
    }

    #[test]
    fn classic_mode_waits_for_every_online_follower_that_keeps_up() {
        let mut a = node(A, Mode::Classic);
        let zero = Position::default();
        for p in [B, C] {
            hear(&mut a, 1, p, follower(0, 0, zero, 0));
        }
        tick(&mut a, 100);
        assert!(a.is_leader());
        for p in [B, C] {
            hear(&mut a, 101, p, follower(A, 1, zero, 0));
        }
        add(&mut a, 9, 7);
        let last = a.position();
        let step = hear(&mut a, 210, B, follower(A, 1, last, 0));
        assert!(
            step.replies.is_empty(),
            "C is online and in sync: it must store it too"
        );
        let step = hear(&mut a, 220, C, follower(A, 1, last, 0));
        assert_eq!(step.replies.len(), 1);
        assert_eq!(step.committed, vec![(last.index, 7)]);
    }
}
