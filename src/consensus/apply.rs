//! When a replica applies what its log holds: the journal's rules (see [`super::journal`])
//! as the replica uses them, with what the store and the operator are told.

use super::journal::Misfit;
use super::log::Entry;
use super::{Machine, Position, Replica, Service, Snapshot};
use crate::time::Millis;

impl<S: Machine, V: Service<S>> Replica<S, V> {
    /// The position the state is applied through: the log's last on a leader, the commit
    /// (or further, after a catch-up) on a follower in quorum mode.
    pub fn applied(&self) -> Position {
        self.journal.applied()
    }

    /// The position of the last applied entry that changed `part` of the state
    /// ([`Machine::part`]; index 0 before any).
    pub fn changed(&self, part: usize) -> Position {
        self.journal.changed(part)
    }

    /// What a read of the state as applied now must see committed before it is answered:
    /// of `part` alone ([`Machine::part`]) or, with `None`, of the whole state. The last
    /// applied entry that changed it, while that is not committed; else nothing (index 0).
    pub fn read_waits_for(&self, part: Option<usize>) -> Position {
        let at = match part {
            Some(part) => self.journal.changed(part),
            None => self.journal.applied(),
        };
        if at.index <= self.journal.commit() {
            Position::default()
        } else {
            at
        }
    }

    /// Checks that each part's last change (what [`Replica::read_waits_for`] reads) is the
    /// last applied entry of that part the log holds, or, where the log holds none, at or
    /// before the log's base: run by the simulations after every step.
    pub fn check_parts(&self) -> Result<(), String> {
        let log = self.journal.log();
        let base = log.base();
        let mut found: Vec<Option<Position>> = vec![None; S::PARTS];
        let mut index = self.journal.applied().index;
        while index > base.index && found.iter().any(Option::is_none) {
            let entry = log
                .get(index)
                .ok_or_else(|| format!("the log lacks applied entry {index}"))?;
            if let Some(command) = entry.command() {
                found[S::part(command)].get_or_insert(entry.position());
            }
            index -= 1;
        }
        for (part, found) in found.into_iter().enumerate() {
            let changed = self.journal.changed(part);
            match found {
                Some(at) if at != changed => {
                    return Err(format!(
                        "part {part} last changed at {at:?}, but the journal says {changed:?}"
                    ));
                }
                None if changed.index > base.index => {
                    return Err(format!(
                        "part {part} changed at {changed:?} says the journal, but no applied entry after the log's base {base:?} changed it"
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The log index a read of `part` ([`Machine::part`]) reflects the log through, once
    /// what it waits for ([`Replica::read_waits_for`]) is committed: committed itself, and
    /// no later than the state is applied, so a watch of that part from it misses nothing
    /// and repeats nothing the read showed.
    pub fn read_through(&self, part: usize) -> u64 {
        let applied = self.journal.applied().index;
        let commit = self.journal.commit().min(applied);
        self.journal.changed(part).index.max(commit)
    }

    /// The entries stored but not applied, in log order (kept beside a snapshot of the
    /// applied state when the stored log is compacted).
    pub fn unapplied(&self) -> Vec<Entry<S::Command>> {
        self.journal.unapplied()
    }

    /// Whether entries taken from a leader wait for their commit to be applied.
    fn defers(&self) -> bool {
        self.cfg.mode == super::Mode::Quorum && self.leading.is_none()
    }

    /// Follower: stores and appends `entry` from its leader, applied now (classic mode) or
    /// once committed. A misfit entry is neither applied nor appended.
    pub(super) fn take_from_leader(
        &mut self,
        now: Millis,
        entry: Entry<S::Command>,
    ) -> Result<(), Misfit<S>> {
        if !self.defers() {
            let position = entry.position();
            return self.apply_and_append(now, entry).map_err(|e| (position, e));
        }
        if self.journal.defer_is_full() {
            // The log would drop an entry not applied yet.
            self.journal.catch_up(now)?;
        }
        self.ready.store.entries.push(entry.clone());
        self.journal.defer(entry);
        Ok(())
    }

    /// Cuts off the entries after `after`, none of them applied, where `from` (our leader,
    /// or the follower whose state a new leader takes over) holds others. The stored log is
    /// rewritten with the next store ([`super::Ready::rewrites_log`]).
    pub(super) fn cut_after(&mut self, after: u64, from: std::net::SocketAddr) {
        let last = self.journal.cut_after(after);
        self.cut_durable(after);
        self.ready.store.entries.retain(|e| e.index <= after);
        self.ready.rewrite = true;
        self.notice(format!(
            "entries {}..={} (to {last}) were never committed: cut off, {from}'s taken instead",
            after + 1,
            last.index
        ));
    }

    /// The leader's state at `snapshot`'s position, which this log holds but has not
    /// applied (an entry there did not fit): it replaces the state, and the entries after
    /// it stay (they were stored and acknowledged), stored again beside the snapshot.
    pub(super) fn install_under_tail(&mut self, snapshot: Snapshot<S::Snapshot>, now: Millis) {
        let entries = self.journal.install_under_tail(&snapshot, now);
        self.cut_durable(0);
        self.ready.store = super::Store {
            snapshot: Some(snapshot),
            entries,
            ..super::Store::default()
        };
    }

    /// Stops this beacon: its own log does not fit its state, so it can neither lead nor
    /// hand its state on (the driver stops the process; a restart refuses the data
    /// directory with the same finding, and the others serve on).
    pub(super) fn halt(&mut self, (position, cause): Misfit<S>, doing: &str) {
        let why = format!(
            "stored entry {position} does not fit this beacon's state ({cause}) while {doing}: stopping; restore the data directory, or remove it to fetch the state from the other beacons"
        );
        self.notice(why.clone());
        self.journal.halt(why);
    }

    /// Why this beacon must stop, if it must (see [`Replica::halt`]).
    pub fn halted(&self) -> Option<&str> {
        self.journal.halted()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::{Append, Entry, Input, Message, Mode, Payload, Position};

    fn entry(index: u64) -> Entry<u64> {
        Entry {
            index,
            term: 1,
            payload: Payload::Command(index * 10),
        }
    }

    /// Leader A's message in term 1: `entries` after `prev`, its log ending with the last,
    /// committed through `commit`.
    fn from_a(prev: u64, entries: &[u64], commit: u64) -> Message<Numbers> {
        let last = entries.last().copied().unwrap_or(prev);
        let mut msg = follower(
            A,
            1,
            Position {
                index: last,
                term: 1,
            },
            0,
        );
        msg.heartbeat.is_leader = true;
        msg.heartbeat.leader = Some(addr(A));
        msg.commit = commit;
        msg.append = Some(Append {
            prev: Position {
                index: prev,
                term: u64::from(prev > 0),
            },
            entries: entries.iter().map(|i| entry(*i)).collect(),
        });
        msg
    }

    #[test]
    fn a_follower_stores_at_once_and_applies_once_committed() {
        let mut b = node(B, Mode::Quorum);
        let step = hear(&mut b, 10, A, from_a(0, &[1, 2], 0));
        assert_eq!(step.store.entries.len(), 2, "stored at once");
        assert_eq!(b.position().index, 2);
        assert_eq!(b.applied().index, 0, "applied only once committed");
        assert!(b.state().0.is_empty());
        let step = hear(&mut b, 20, A, from_a(2, &[3], 1));
        assert_eq!(b.applied(), Position { index: 1, term: 1 });
        assert_eq!(b.state().0, vec![10]);
        assert_eq!(
            step.committed,
            vec![(1, 10)],
            "its change told as it is applied"
        );
        // Its snapshot is of the applied state, the rest kept beside it.
        assert_eq!(b.snapshot(30).position.index, 1);
        let kept: Vec<u64> = b.unapplied().iter().map(|e| e.index).collect();
        assert_eq!(kept, vec![2, 3]);
        hear(&mut b, 40, A, from_a(3, &[], 3));
        assert_eq!(b.applied().index, 3);
        assert_eq!(b.state().0, vec![10, 20, 30]);
        assert!(b.unapplied().is_empty());
    }

    #[test]
    fn classic_mode_applies_at_append() {
        let mut b = node(B, Mode::Classic);
        hear(&mut b, 10, A, from_a(0, &[1, 2], 0));
        assert_eq!(b.applied().index, 2);
        assert_eq!(b.state().0, vec![10, 20]);
    }

    #[test]
    fn a_follower_that_takes_the_lead_applies_its_whole_log_first() {
        let mut b = node(B, Mode::Quorum);
        hear(&mut b, 10, A, from_a(0, &[1, 2], 1));
        assert_eq!(b.applied().index, 1);
        b.step(20, Input::PeerDown { peer: addr(A) });
        // Its log is the most advanced of a majority (C promises, holding nothing): it
        // applies all of it as it takes over.
        leads_with_c(&mut b, 20, 1, Position::default());
        assert!(b.has_taken_over());
        assert_eq!(b.applied(), b.position());
        assert_eq!(b.state().0, vec![10, 20]);
    }

    #[test]
    fn a_new_leader_gives_its_unapplied_tail_for_a_more_advanced_followers_log() {
        // B restarted holding 1-3 of term 1, knowing 1 committed; C holds 1 and C's own 2-3
        // of term 2; A is down. B leads: C's log is the more advanced, and B asks for what
        // C has after B's applied state, cuts its 2-3 off, and takes C's.
        let mut b = restarted(B, Mode::Quorum, (1..=3).map(entry).collect(), 1);
        let c_at = at(3, 2);
        let (now, step) = leads_with_c(&mut b, 0, 2, c_at);
        let term = b.election().term();
        let fetch: Vec<_> = step.early.iter().filter(|(_, m)| m.fetch).collect();
        assert_eq!(fetch.len(), 1);
        assert_eq!(
            fetch[0].1.position,
            at(1, 1),
            "asked after its applied state"
        );
        assert!(!fetch[0].1.need_snapshot);
        let mut answer = from_c(2, at(1, 1), &[2, 3]);
        answer.heartbeat = follower(B, term, c_at, 0).heartbeat;
        let step = hear(&mut b, now + 1, C, answer);
        assert!(b.has_taken_over());
        assert!(step.rewrite, "its stored log is rewritten");
        assert_eq!(b.state().0, vec![10, 200, 300]);
        assert_eq!(b.position().index, 4, "then its term's first entry");
    }

    #[test]
    fn the_log_never_drops_an_entry_not_applied() {
        let mut b = node(B, Mode::Quorum);
        // The log keeps 100 entries (see `node_of`): 150 arrive uncommitted.
        let entries: Vec<u64> = (1..=150).collect();
        hear(&mut b, 10, A, from_a(0, &entries, 0));
        assert_eq!(b.position().index, 150);
        assert!(b.applied().index >= 50, "caught up before dropping any");
        assert_eq!(b.state().0.len() as u64, b.applied().index);
    }

    /// `b` ticks from `now`, hearing C (at `c_at`, having seen `c_term`) and no one else,
    /// until it leads; then C promises it its term. Returns the time and step of the promise.
    fn leads_with_c(b: &mut Node, now: u64, c_term: u64, c_at: Position) -> (u64, Step) {
        let mut now = now;
        while !b.is_leader() && now < 5_000 {
            now += 100;
            hear(b, now, C, follower(0, c_term, c_at, 0));
            tick(b, now);
        }
        assert!(b.is_leader(), "B leads with C alone online");
        let term = b.election().term();
        (now + 1, hear(b, now + 1, C, follower(B, term, c_at, 0)))
    }

    /// C's message as leader in `term`: entries `indexes` of that term after `prev`.
    fn from_c(term: u64, prev: Position, indexes: &[u64]) -> Message<Numbers> {
        let last = indexes
            .last()
            .map_or(prev, |i| Position { index: *i, term });
        let mut msg = follower(C, term, last, 0);
        msg.heartbeat.is_leader = true;
        msg.heartbeat.leader = Some(addr(C));
        msg.append = (!indexes.is_empty()).then(|| Append {
            prev,
            entries: indexes
                .iter()
                .map(|&index| Entry {
                    index,
                    term,
                    payload: Payload::Command(index * 100),
                })
                .collect(),
        });
        msg
    }

    fn at(index: u64, term: u64) -> Position {
        Position { index, term }
    }

    /// `b`'s tail after 1@1 gives way to C's entries 2 and 3 of term 2: cut off, the stored
    /// log rewritten, no snapshot asked for.
    fn gives_way_to_c(b: &mut Node, now: u64) {
        hear(b, now, C, from_c(2, at(1, 1), &[]));
        assert_eq!(b.election().leader(), Some(addr(C)));
        let step = hear(b, now + 10, C, from_c(2, at(1, 1), &[2, 3]));
        assert!(step.rewrite, "the stored log is rewritten");
        assert!(
            step.after
                .iter()
                .all(|(_, m)| !m.need_snapshot && !m.reject)
        );
        assert_eq!(b.position(), at(3, 2));
        let kept: Vec<Position> = b.unapplied().iter().map(|e| e.position()).collect();
        assert_eq!(kept, vec![at(2, 2), at(3, 2)]);
        assert_eq!(b.state().0, vec![10]);
    }

    #[test]
    fn a_tail_never_applied_gives_way_to_the_new_leaders_entries() {
        let mut b = node(B, Mode::Quorum);
        // From A in term 1: entries 1-3, committed through 1. C leads in term 2 without 2
        // and 3 (they never committed) and sends its own from 2 on.
        hear(&mut b, 10, A, from_a(0, &[1, 2, 3], 1));
        assert_eq!((b.applied().index, b.position().index), (1, 3));
        gives_way_to_c(&mut b, 20);
        // An applied entry is never cut: a conflict at or under the applied index (here
        // from C leading again, in term 5) asks for the whole state.
        hear(&mut b, 35, C, from_c(5, at(1, 5), &[]));
        let step = hear(&mut b, 40, C, from_c(5, at(0, 0), &[1]));
        assert!(!step.rewrite);
        assert!(step.after.iter().any(|(_, m)| m.need_snapshot));
        assert_eq!(b.applied(), at(1, 1));
    }

    #[test]
    fn a_restarted_beacon_applies_through_its_stored_commit_and_can_give_back_the_rest() {
        // B stored entries 1-3 of term 1 knowing 1 committed (a leader killed just after
        // storing 2 and 3, which nobody else got), and restarts: it applies 1 only.
        let stored: Vec<Entry<u64>> = (1..=3).map(entry).collect();
        let mut b = restarted(B, Mode::Quorum, stored.clone(), 1);
        assert_eq!((b.applied().index, b.position().index), (1, 3));
        assert_eq!(b.state().0, vec![10]);
        gives_way_to_c(&mut b, 10);
        // Classic mode, or a tail as long as the log keeps, is applied at start.
        let b = restarted(B, Mode::Classic, stored.clone(), 1);
        assert_eq!(b.applied().index, 3);
        let long: Vec<Entry<u64>> = (1..=150).map(entry).collect();
        let b = restarted(B, Mode::Quorum, long, 1);
        assert_eq!(b.applied().index, 150);
    }

    #[test]
    fn a_new_leader_keeps_the_unapplied_entries_the_holder_has_too() {
        // As above, but C holds B's 2-3 (they had committed; B's stored commit lagged) and
        // 4 of term 2 after them: B keeps its 2-3, takes 4, and rewrites nothing.
        let mut b = restarted(B, Mode::Quorum, (1..=3).map(entry).collect(), 1);
        let c_at = at(4, 2);
        let (now, _) = leads_with_c(&mut b, 0, 2, c_at);
        let term = b.election().term();
        let mut answer = from_c(2, at(1, 1), &[4]);
        let append = answer.append.as_mut().unwrap();
        append.entries.splice(0..0, (2..=3).map(entry));
        answer.heartbeat = follower(B, term, c_at, 0).heartbeat;
        let step = hear(&mut b, now + 1, C, answer);
        assert!(b.has_taken_over());
        assert!(!step.rewrite, "nothing of its log was cut");
        assert_eq!(b.state().0, vec![10, 20, 30, 400]);
    }
}
