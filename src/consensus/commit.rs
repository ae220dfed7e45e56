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
        let last = self.log.last().index;
        let stall_after = self.cfg.patience_ms();
        let mut commit = last;
        let mut notices = Vec::new();
        for (peer, f) in leading.followers.iter_mut() {
            let matched = f.progress.matched.unwrap_or(0);
            if matched >= last {
                f.behind_since = None;
                if !f.in_sync {
                    f.in_sync = true;
                    notices.push(format!("follower {peer} caught up"));
                }
                continue;
            }
            if !self.election.is_online(*peer) || !f.in_sync {
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

    /// Quorum mode: the highest index stored by a majority (the leader included), once the
    /// entry there is of the leader's own term. An older entry on a majority is not yet safe:
    /// a leader that took over a more advanced state could still replace it; an entry of the
    /// current term on a majority is in the state any later leader takes over.
    fn quorum_commit(&self) -> Option<u64> {
        if self.taking_over() {
            return None;
        }
        let leading = self.leading.as_ref()?;
        let mut stored: Vec<u64> = leading
            .followers
            .values()
            .map(|f| f.progress.matched.unwrap_or(0))
            .collect();
        stored.push(self.log.last().index);
        stored.sort_unstable_by(|a, b| b.cmp(a));
        let candidate = stored[self.majority() - 1];
        (self.log.term_at(candidate) == Some(self.election.term())).then_some(candidate)
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
        if commit <= self.commit {
            return;
        }
        self.commit = commit;
        let mut ready = Vec::new();
        while leading
            .waiting
            .front()
            .is_some_and(|(i, _, _)| *i <= commit)
        {
            ready.push(leading.waiting.pop_front().expect("non-empty"));
        }
        while leading.changes.front().is_some_and(|(i, _)| *i <= commit) {
            let change = leading.changes.pop_front().expect("non-empty");
            self.ready.committed.push(change);
        }
        for (_, token, waiting) in ready {
            let answer = self.service.answer(&self.state, waiting);
            self.reply(token, answer.map_err(ReplyError::Machine));
        }
    }
}
