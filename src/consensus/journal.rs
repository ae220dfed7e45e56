//! The journal: the replicated log, the state it is applied to, how far it is committed and
//! applied, and the changes waiting for their commit. It owns the rule that ties them: the
//! state is the log's, through [`Journal::applied`].
//!
//! A leader applies each command as it appends it: it decides requests against the state
//! with everything it has appended. A follower in quorum mode applies an entry once it
//! knows the entry is committed. Why: a linearizable read at a follower answers from its
//! state, and a state holding entries not yet committed may answer only once they are.
//! Under a steady stream of writes a follower that applied at append always held the
//! newest batch uncommitted, and each read waited a replication round for it; applied at
//! commit, the state answers as soon as it reaches the read index.
//!
//! Entries appended but not applied yet (the deferred tail) are stored and acknowledged like
//! any other. A beacon that restarts keeps those after its stored commit deferred too
//! ([`Journal::load`]). It applies them all at once ([`Journal::catch_up`]) when it must hold
//! the state of its whole log: as it starts to serve as leader (once it has taken over),
//! before it hands its whole state to a new leader taking over, and before its log would
//! drop one of them. A state ahead of the commit is no danger: a read waits for what it saw
//! to be committed ([`Journal::committed`]).
//!
//! Entries not applied can also be taken back. A tail that differs from the leader's log
//! (or, for a leader taking over, from the most advanced log of a majority) came from a
//! leader whose entries did not commit: it is cut off ([`Journal::cut_after`]) and the other
//! log's entries taken, instead of the whole state.

use std::collections::VecDeque;

use super::app::{Leader, Machine};
use super::error::RestoreError;
use super::log::{Entry, Log, Payload, Position};
use super::message::Snapshot;
use crate::time::Millis;

/// An entry that did not fit the state it was applied to: the replicas diverged.
pub(super) type Misfit<S> = (Position, <S as Machine>::ApplyError);

/// The log, its state and their commit (see the module documentation).
pub(super) struct Journal<S: Machine> {
    log: Log<S::Command>,
    state: S,
    commit: u64,
    /// How many entries at the end of the log are not applied yet (a follower in quorum
    /// mode applies on commit); 0 on a leader.
    deferred: u64,
    /// Set when this beacon's own log does not fit its state.
    halted: Option<String>,
    /// Changes of applied entries not yet committed, in index order (a leader's and a
    /// follower's alike: every replica tells its watchers the same changes at the same
    /// indexes, so a watch can resume at any beacon that leads later).
    changes: VecDeque<(u64, S::Change)>,
    /// For each part of the state ([`Machine::part`]), the position of the last applied
    /// entry that changed it (of the snapshot the state was restored from, if none since).
    changed: Vec<Position>,
}

impl<S: Machine> Journal<S> {
    /// An empty log keeping `keep` entries, over `state`.
    pub(super) fn new(keep: usize, state: S) -> Self {
        Journal {
            log: Log::new(keep),
            state,
            commit: 0,
            deferred: 0,
            halted: None,
            changes: VecDeque::new(),
            changed: vec![Position::default(); S::PARTS],
        }
    }

    /// Loads stored state: `snapshot` (if any), then `entries` replayed; with `defer`, the
    /// entries after `commit` are appended but not applied (see [`super::Replica::restore`]),
    /// and `commit` is taken as known.
    pub(super) fn load(
        &mut self,
        snapshot: Option<Snapshot<S::Snapshot>>,
        entries: Vec<Entry<S::Command>>,
        commit: u64,
        defer: bool,
    ) -> Result<(), RestoreError> {
        if let Some(snapshot) = snapshot {
            self.state.restore(snapshot.state, 0);
            self.changed.fill(snapshot.position);
            self.log.reset(snapshot.position, snapshot.members);
        }
        let defer_after = if defer { commit } else { u64::MAX };
        for entry in entries {
            if entry.index != self.log.last().index + 1 {
                return Err(RestoreError::NotContiguous {
                    found: entry.position(),
                    last: self.log.last(),
                });
            }
            if entry.index > defer_after {
                self.log.append(entry);
                self.deferred += 1;
                continue;
            }
            if let Payload::Command(command) = &entry.payload {
                if let Err(cause) = self.state.apply(command, 0) {
                    return Err(RestoreError::DoesNotFit {
                        position: entry.position(),
                        cause: cause.to_string(),
                    });
                }
                self.changed[S::part(command)] = entry.position();
            }
            self.log.append(entry);
        }
        self.state.restored().map_err(RestoreError::Configuration)?;
        if defer {
            // Known committed: the leader learns from our messages where our log is surely
            // its own, and repairs a tail after it by entries instead of a snapshot.
            self.commit = commit.min(self.log.last().index);
        }
        Ok(())
    }

    // ---- what may be read ------------------------------------------------------------------

    pub(super) fn log(&self) -> &Log<S::Command> {
        &self.log
    }

    /// The state, as of [`Journal::applied`].
    pub(super) fn state(&self) -> &S {
        &self.state
    }

    pub(super) fn commit(&self) -> u64 {
        self.commit
    }

    /// The last position in the log.
    pub(super) fn last(&self) -> Position {
        self.log.last()
    }

    /// The position the state is applied through: the log's last on a leader, the commit
    /// (or further, after a catch-up) on a follower in quorum mode.
    pub(super) fn applied(&self) -> Position {
        let index = self.log.last().index - self.deferred;
        Position {
            index,
            term: self
                .log
                .term_at(index)
                .expect("the log keeps every entry it has not applied"),
        }
    }

    /// The position of the last applied entry that changed `part` of the state (see
    /// [`Machine::part`]; index 0 before any).
    pub(super) fn changed(&self, part: usize) -> Position {
        self.changed[part]
    }

    /// The entries stored but not applied, in log order.
    pub(super) fn unapplied(&self) -> Vec<Entry<S::Command>> {
        self.log
            .after(self.applied().index, usize::MAX)
            .unwrap_or_default()
    }

    /// Whether `position` is in this log's history: the log holds it, or an entry of the
    /// same term at or after it (one leader per term, and a follower only appends what
    /// continues its leader's log, so an entry of that term implies everything before it).
    pub(super) fn holds(&self, position: Position) -> bool {
        let last = self.log.last();
        self.log.contains(position) || (last.term == position.term && last.index >= position.index)
    }

    /// Whether the entry at `at` is committed: `Some(true)` once it is, `Some(false)` while
    /// it may yet be, `None` once this log no longer holds it.
    pub(super) fn committed(&self, at: Position) -> Option<bool> {
        if at.index == 0 {
            return Some(true);
        }
        self.holds(at).then_some(self.commit >= at.index)
    }

    /// Why this beacon must stop, if it must (see [`Journal::halt`]).
    pub(super) fn halted(&self) -> Option<&str> {
        self.halted.as_deref()
    }

    /// The whole state, as of the position it is applied through.
    pub(super) fn snapshot(&self, now: Millis) -> Snapshot<S::Snapshot> {
        let position = self.applied();
        Snapshot {
            position,
            state: self.state.snapshot(now),
            members: self.log.members_at(position.index).cloned(),
        }
    }

    /// The whole state as of the log's last entry (a leader's, which applies all it appends).
    pub(super) fn leader_snapshot(&self, now: Millis) -> Snapshot<S::Snapshot> {
        Snapshot {
            position: self.log.last(),
            state: self.state.snapshot(now),
            members: self.log.members().cloned(),
        }
    }

    /// Entries worth keeping: `log_keep`, or as many as the state has records when that is
    /// more (see [`super::Replica::entries_to_keep`]).
    pub(super) fn entries_to_keep(&self, log_keep: usize) -> usize {
        log_keep.max(self.state.records())
    }

    /// Keeps `keep` entries from now on.
    pub(super) fn set_keep(&mut self, keep: usize) {
        self.log.set_keep(keep);
    }

    /// Whether deferring one more entry would make the log drop one not applied yet.
    pub(super) fn defer_is_full(&self) -> bool {
        self.deferred + 1 >= self.log.keep() as u64
    }

    // ---- changes ---------------------------------------------------------------------------

    /// Applies `entry` and appends it; its change is kept for release once committed. An
    /// entry that does not fit the state is neither applied nor appended. An entry of the
    /// core's own (a leader's start, a change of membership) is appended as it is.
    pub(super) fn append(
        &mut self,
        now: Millis,
        entry: Entry<S::Command>,
    ) -> Result<(), S::ApplyError> {
        if let Payload::Command(command) = &entry.payload {
            if let Some(change) = self.state.apply(command, now)? {
                self.changes.push_back((entry.index, change));
            }
            self.changed[S::part(command)] = entry.position();
        }
        self.log.append(entry);
        Ok(())
    }

    /// Appends `entry` without applying it: it waits for its commit (or a catch-up).
    pub(super) fn defer(&mut self, entry: Entry<S::Command>) {
        self.log.append(entry);
        self.deferred += 1;
    }

    /// Cuts off the entries after `after`, none of them applied; returns the last position
    /// before the cut.
    pub(super) fn cut_after(&mut self, after: u64) -> Position {
        let applied = self.applied().index;
        assert!(after >= applied, "only entries not applied are cut");
        let last = self.log.last();
        self.log.truncate_after(after);
        self.deferred = after - applied;
        last
    }

    /// Applies the deferred entries through `through`, in order; stops at one that does
    /// not fit (it stays deferred).
    fn apply_through(&mut self, now: Millis, through: u64) -> Result<(), Misfit<S>> {
        while self.deferred > 0 {
            let next = self.log.last().index - self.deferred + 1;
            if next > through {
                break;
            }
            let entry = self
                .log
                .get(next)
                .expect("the log keeps every entry it has not applied");
            if let Payload::Command(command) = &entry.payload {
                match self.state.apply(command, now) {
                    Ok(Some(change)) => self.changes.push_back((next, change)),
                    Ok(None) => {}
                    Err(e) => return Err((entry.position(), e)),
                }
                self.changed[S::part(command)] = entry.position();
            }
            self.deferred -= 1;
        }
        Ok(())
    }

    /// Applies the deferred entries the commit index covers.
    pub(super) fn apply_committed(&mut self, now: Millis) -> Result<(), Misfit<S>> {
        self.apply_through(now, self.commit)
    }

    /// Applies every deferred entry: the state is then that of the whole log.
    pub(super) fn catch_up(&mut self, now: Millis) -> Result<(), Misfit<S>> {
        self.apply_through(now, u64::MAX)
    }

    /// Moves the commit index on to `commit` (never back); whether it moved.
    pub(super) fn commit_to(&mut self, commit: u64) -> bool {
        if commit <= self.commit {
            return false;
        }
        self.commit = commit;
        true
    }

    /// The changes of entries now committed, in log order, taken.
    pub(super) fn take_committed_changes(&mut self) -> Vec<(u64, S::Change)> {
        let due = self.changes.partition_point(|(i, _)| *i <= self.commit);
        self.changes.drain(..due).collect()
    }

    /// Replaces the whole state with `snapshot`. The changes of entries it did not apply
    /// are lost to its watchers.
    pub(super) fn install(&mut self, snapshot: &Snapshot<S::Snapshot>, now: Millis) {
        self.changes.clear();
        self.state.restore(snapshot.state.clone(), now);
        self.changed.fill(snapshot.position);
        self.log.reset(snapshot.position, snapshot.members.clone());
        self.deferred = 0;
    }

    /// The leader's state at `snapshot`'s position, which this log holds but has not
    /// applied: it replaces the state, and the entries after it stay, not applied. Returns
    /// those entries (to be stored again beside the snapshot).
    pub(super) fn install_under_tail(
        &mut self,
        snapshot: &Snapshot<S::Snapshot>,
        now: Millis,
    ) -> Vec<Entry<S::Command>> {
        let tail = self
            .log
            .after(snapshot.position.index, usize::MAX)
            .unwrap_or_default();
        self.install(snapshot, now);
        for entry in &tail {
            self.log.append(entry.clone());
        }
        self.deferred = tail.len() as u64;
        tail
    }

    /// Records why this beacon must stop (the first reason stays).
    pub(super) fn halt(&mut self, why: String) {
        self.halted.get_or_insert(why);
    }

    /// The context a leader's service acts through: it appends (and applies) commands to
    /// this journal, listing them in `unsaved` for the store.
    #[allow(clippy::too_many_arguments)] // each is a part of the replica the service may touch
    pub(super) fn leader<'a>(
        &'a mut self,
        unsaved: &'a mut Vec<Entry<S::Command>>,
        appended: &'a mut bool,
        notices: &'a mut Vec<String>,
        notes: &'a mut super::renewals::Notes,
        term: u64,
        now: Millis,
        wall_ms: u64,
    ) -> Leader<'a, S> {
        Leader {
            state: &mut self.state,
            log: &mut self.log,
            unsaved,
            changes: &mut self.changes,
            changed: &mut self.changed,
            appended,
            notices,
            notes,
            term,
            now,
            wall_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{MISFIT, Numbers};
    use super::*;

    fn entry(index: u64, term: u64, value: u64) -> Entry<u64> {
        Entry {
            index,
            term,
            payload: Payload::Command(value),
        }
    }

    fn journal() -> Journal<Numbers> {
        Journal::new(100, Numbers::default())
    }

    /// 10 applied at 1, then 20 and 30 deferred at 2 and 3, all of term 1.
    fn with_a_tail() -> Journal<Numbers> {
        let mut j = journal();
        j.append(0, entry(1, 1, 10)).unwrap();
        j.defer(entry(2, 1, 20));
        j.defer(entry(3, 1, 30));
        j
    }

    #[test]
    fn a_deferred_tail_is_applied_through_the_commit_and_no_further() {
        let mut j = with_a_tail();
        assert_eq!(j.applied(), Position { index: 1, term: 1 });
        assert_eq!(j.unapplied().len(), 2);
        assert!(j.commit_to(2));
        assert!(!j.commit_to(1), "the commit never goes back");
        j.apply_committed(0).unwrap();
        assert_eq!(j.applied().index, 2);
        assert_eq!(j.state().0, vec![10, 20]);
        let released: Vec<u64> = j
            .take_committed_changes()
            .into_iter()
            .map(|(i, _)| i)
            .collect();
        assert_eq!(released, vec![1, 2], "the change at 3 waits for its commit");
        j.catch_up(0).unwrap();
        assert_eq!(j.applied().index, 3);
        assert_eq!(j.state().0, vec![10, 20, 30]);
    }

    #[test]
    fn only_a_tail_not_applied_is_cut_and_a_misfit_stays_deferred() {
        let mut j = with_a_tail();
        assert_eq!(j.cut_after(2), Position { index: 3, term: 1 });
        assert_eq!(j.last().index, 2);
        assert_eq!(j.unapplied().len(), 1);
        j.defer(entry(3, 2, MISFIT));
        let (at, _) = j.catch_up(0).expect_err("a misfit");
        assert_eq!(at, Position { index: 3, term: 2 });
        assert_eq!(j.applied().index, 2, "the misfit stays deferred");
        j.halt("first".into());
        j.halt("second".into());
        assert_eq!(j.halted(), Some("first"));
    }

    #[test]
    fn a_snapshot_under_the_tail_keeps_the_entries_after_it() {
        let mut j = with_a_tail();
        let mut leader = journal();
        leader.append(0, entry(1, 1, 10)).unwrap();
        leader.append(0, entry(2, 1, 20)).unwrap();
        let tail = j.install_under_tail(&leader.snapshot(0), 0);
        assert_eq!(tail.iter().map(|e| e.index).collect::<Vec<_>>(), vec![3]);
        assert_eq!(j.applied().index, 2);
        assert_eq!(j.last().index, 3);
        assert!(j.holds(Position { index: 3, term: 1 }));
        assert_eq!(j.committed(Position { index: 3, term: 1 }), Some(false));
        assert!(j.commit_to(3));
        assert_eq!(j.committed(Position { index: 3, term: 1 }), Some(true));
        assert_eq!(j.committed(Position { index: 3, term: 9 }), None);
    }

    #[test]
    fn loading_refuses_a_gap_and_defers_what_follows_the_stored_commit() {
        let mut j = journal();
        let gap = j.load(None, vec![entry(1, 1, 10), entry(3, 1, 30)], 0, false);
        assert!(matches!(gap, Err(RestoreError::NotContiguous { .. })));
        let mut j = journal();
        j.load(None, vec![entry(1, 1, 10), entry(2, 1, 20)], 1, true)
            .unwrap();
        assert_eq!(j.commit(), 1);
        assert_eq!(j.applied().index, 1);
        assert_eq!(j.unapplied().len(), 1);
    }
}
