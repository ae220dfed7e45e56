//! Quorum mode: a newly elected leader takes over the most advanced state of a majority that
//! promised its term before it serves. [`Phase`] is where a leader stands in that; the
//! replica's part below moves it on as promises and the fetched state arrive.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use super::log::Position;
use super::renewals::{Horizon, Knowledge, Take};
use super::{Event, Machine, Replica, Service};
use crate::time::Millis;

/// Where a leader stands in taking over.
#[derive(Debug, Clone, Default)]
pub(super) enum Phase {
    /// Serving.
    #[default]
    Ready,
    /// Quorum mode, just elected: collecting the positions of followers that promised to
    /// ignore older terms (their heartbeats carry our term). With a majority, the most
    /// advanced state among them (by last entry's term, then index) is taken over, fetched
    /// from its holder if it is not ours; only then does the leader serve.
    Collecting {
        /// Each voter that promised, with its position and how far it heard the renewals.
        promised: BTreeMap<SocketAddr, (Position, Option<Horizon>)>,
        /// What is being fetched, and from whom.
        fetching: Option<Fetch>,
    },
}

/// A new leader's fetch of the most advanced state of a majority from the follower that
/// holds it: the entries it lacks when the follower's log holds its last position (the
/// common case: a few entries the old leader sent one follower before it died), else the
/// whole state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fetch {
    pub(super) from: SocketAddr,
    /// The follower's position: what the leader takes over.
    pub(super) wanted: Position,
    /// Ask for the whole state, not the entries (they did not fit ours).
    pub(super) whole: bool,
}

impl Phase {
    /// Just elected in quorum mode: nothing collected yet.
    pub(super) fn collecting() -> Phase {
        Phase::Collecting {
            promised: BTreeMap::new(),
            fetching: None,
        }
    }

    pub(super) fn is_collecting(&self) -> bool {
        matches!(self, Phase::Collecting { .. })
    }

    /// What is being fetched, while collecting.
    pub(super) fn fetching(&self) -> Option<Fetch> {
        match self {
            Phase::Collecting { fetching, .. } => *fetching,
            Phase::Ready => None,
        }
    }

    /// Sets what is being fetched (a leader that has taken over fetches nothing).
    pub(super) fn set_fetch(&mut self, fetch: Option<Fetch>) {
        if let Phase::Collecting { fetching, .. } = self {
            *fetching = fetch;
        }
    }

    /// Voter `from` promised our term at `position`, having heard the renewals through
    /// `heard`.
    pub(super) fn promise(&mut self, from: SocketAddr, position: Position, heard: Option<Horizon>) {
        if let Phase::Collecting { promised, .. } = self {
            promised.insert(from, (position, heard));
        }
    }

    /// What a leader that heard the renewals through `mine` knows of them, against the
    /// voters that promised: every renewal a leader answered is held by a majority, one of
    /// which promised, so a leader that heard at least as far as each of them holds them
    /// all. One that promised without a horizon (just restarted) may have forgotten some:
    /// then nothing can be vouched for.
    /// Also says, for the operator, why.
    pub(super) fn knowledge(&self, mine: Option<Horizon>) -> (Knowledge, String) {
        let Phase::Collecting { promised, .. } = self else {
            return (Knowledge::Incomplete, "not taking over".into());
        };
        let Some(mine) = mine else {
            return (
                Knowledge::Incomplete,
                "leases start afresh: this beacon has heard no renewals since it started".into(),
            );
        };
        let ahead = promised.iter().find_map(|(peer, (_, heard))| match heard {
            Some(h) if h.term > 0 && *h <= mine => None,
            Some(h) if h.term > 0 => Some(format!("{peer} heard further ({}.{})", h.term, h.seq)),
            Some(_) => Some(format!("{peer} has heard no renewals since it started")),
            None => Some(format!(
                "{peer} does not tell what it heard (an older beacon)"
            )),
        });
        match ahead {
            None => (
                Knowledge::Complete,
                format!(
                    "leases keep their time (every renewal heard, through {}.{})",
                    mine.term, mine.seq
                ),
            ),
            Some(why) => (Knowledge::Incomplete, format!("leases start afresh: {why}")),
        }
    }

    /// With promises from a majority (`majority` counting ours, at `mine`) and nothing
    /// being fetched: the most advanced state among them, with its holder (`None`: ours;
    /// ties go to ours).
    pub(super) fn choose(
        &self,
        mine: Position,
        majority: usize,
    ) -> Option<(Position, Option<SocketAddr>)> {
        let Phase::Collecting { promised, fetching } = self else {
            return None;
        };
        if fetching.is_some() || promised.len() + 1 < majority {
            return None;
        }
        promised
            .iter()
            .map(|(p, (pos, _))| (*pos, Some(*p)))
            .chain(std::iter::once((mine, None)))
            .max_by_key(|(pos, _)| (pos.term, pos.index))
    }

    /// Keeps the promises of voters only (the membership changed): whether they still make
    /// a majority; if not, the fetch is dropped and collecting goes on.
    pub(super) fn keep_voters(
        &mut self,
        is_voter: impl Fn(SocketAddr) -> bool,
        majority: usize,
    ) -> bool {
        let Phase::Collecting { promised, fetching } = self else {
            return true;
        };
        promised.retain(|p, _| is_voter(*p));
        if promised.len() + 1 < majority {
            *fetching = None;
            return false;
        }
        true
    }
}

impl<S: Machine, V: Service<S>> Replica<S, V> {
    /// Collecting: with promises from a majority, takes over the most advanced state among
    /// them (asking its holder for it if it is not ours).
    pub(super) fn try_take_over(&mut self, now: Millis) {
        let majority = self.majority();
        let mine = self.journal.last();
        let Some(leading) = self.leading.as_mut() else {
            return;
        };
        let Some((best, holder)) = leading.phase.choose(mine, majority) else {
            return;
        };
        match holder {
            None => self.become_ready(now),
            Some(peer) => {
                leading.phase.set_fetch(Some(Fetch {
                    from: peer,
                    wanted: best,
                    whole: false,
                }));
                self.ready.events.push(Event::Notice(format!(
                    "taking over: follower {peer} holds the most advanced state ({best}, ours {mine}); fetching it"
                )));
                let msg = self.message_for(peer, now);
                self.send(peer, msg);
            }
        }
    }

    /// The leader has taken over: it serves from here, starting its term with an entry of
    /// its own (committing it commits everything before it), its service afresh.
    pub(super) fn become_ready(&mut self, now: Millis) {
        // The state taken over may change the membership: its voters must have promised a
        // majority too, or a leader could serve on the promises of a majority of voters
        // that no longer are the voters.
        self.sync_members(now);
        let majority = self.majority();
        let Some(leading) = self.leading.as_mut() else {
            return; // no voter in the membership taken over: stepped down
        };
        let election = &self.election;
        if !leading
            .phase
            .keep_voters(|p| election.is_voter(p), majority)
        {
            let members = self.membership.members().clone();
            self.notice(format!(
                "the state taken over has the members {members}: collecting the promises of a majority of them"
            ));
            return;
        }
        // A voter's promise that came in while it fetched may hold a more advanced state
        // than the one taken over (the majority it chose by was one of the membership
        // before): that state may hold entries a leader committed, so it is taken over too.
        let mine = self.journal.last();
        let leading = self.leading.as_mut().expect("leader");
        leading.phase.set_fetch(None);
        if let Some((best, Some(holder))) = leading.phase.choose(mine, majority)
            && (best.term, best.index) > (mine.term, mine.index)
        {
            self.notice(format!(
                "taking over: {holder} promised a more advanced state ({best}) than the one taken over ({mine})"
            ));
            self.try_take_over(now);
            return;
        }
        // It decides on the state of its whole log.
        if let Err(misfit) = self.journal.catch_up(now) {
            self.halt(misfit, "taking the lead");
            return;
        }
        let position = self.journal.last();
        let followers = self.fresh_followers();
        let heard = self.following.heard.horizon();
        let leading = self.leading.as_mut().expect("leader");
        let (knowledge, leases) = leading.phase.knowledge(heard);
        leading.phase = Phase::Ready;
        leading.followers = followers;
        // Followers that heard as far as this leader continue from it; the rest (all of
        // them, if it starts afresh) are sent its table.
        leading.notes.base = heard.filter(|_| knowledge == Knowledge::Complete);
        // No lease is judged before a majority confirmed this leadership.
        leading.rounds.confirm_before_judging();
        self.service.lead(self.journal.state(), now, knowledge);
        self.notice(format!(
            "took over the state of a majority at {position}: serving; {leases}"
        ));
        self.append_leader_start();
    }

    /// A follower's promise (and, when fetching from it, its state) while collecting.
    /// Returns whether the message was taken as such.
    pub(super) fn on_promise(
        &mut self,
        now: Millis,
        from: std::net::SocketAddr,
        mut msg: super::Message<S>,
    ) -> bool {
        let term = self.election.term();
        if !self.taking_over() {
            return false;
        }
        if msg.heartbeat.term != term || msg.heartbeat.leader != Some(self.election.me()) {
            // No promise of our term to us: it has not heard of our term yet, or follows
            // another beacon in it (two took the same term), or a later one.
            return true;
        }
        if !self.election.is_voter(from) {
            return true; // a learner's promise counts for no majority
        }
        // The renewals it heard that this leader lacks, sent with its promise.
        if let Some(batch) = msg.renewals.take() {
            let own = self.following.heard.horizon();
            if let Some(term) = own.map(|h| h.term)
                && let Take::Keys(keys) = self.following.heard.take(term, None, *batch)
            {
                self.service.hear_renewals(&keys, now);
            }
        }
        let leading = self.leading.as_mut().expect("taking over");
        leading.phase.promise(from, msg.position, msg.heard);
        let Some(fetch) = leading.phase.fetching() else {
            self.try_take_over(now);
            return true;
        };
        if fetch.from != from {
            return true;
        }
        // The entries were asked for after our applied state: a tail we never applied (it
        // may never have committed) gives way to the holder's log.
        let mine = self.applied();
        if let Some(snapshot) = msg.snapshot.filter(|s| s.position == fetch.wanted) {
            self.install(*snapshot, now);
            self.become_ready(now);
        } else if let Some(append) = msg.append.filter(|a| {
            a.prev == mine
                && a.entries
                    .last()
                    .is_some_and(|e| e.index <= fetch.wanted.index)
                && msg.position == fetch.wanted
        }) {
            // Our unapplied entries that the holder has too stay (they are applied now);
            // from the first that differs, ours never committed and give way.
            let mut entries = append.entries;
            let held = entries
                .iter()
                .take_while(|e| self.journal.log().contains(e.position()))
                .count();
            entries.drain(..held);
            if let Some(first) = entries.first()
                && first.index <= self.journal.last().index
            {
                self.cut_after(first.index - 1, from);
            }
            if let Err(misfit) = self.journal.catch_up(now) {
                self.halt(misfit, "taking over");
                return true;
            }
            if self.take_entries(now, from, entries) {
                if self.journal.last() == fetch.wanted {
                    self.become_ready(now);
                } else {
                    // A message's worth: ask for the next.
                    let msg = self.message_for(from, now);
                    self.send(from, msg);
                }
            } else {
                // They did not fit our state: ask for the whole of it.
                self.set_fetch(Some(Fetch {
                    whole: true,
                    ..fetch
                }));
                let msg = self.message_for(from, now);
                self.send(from, msg);
            }
        } else if msg.position != fetch.wanted {
            // It moved on meanwhile: choose again.
            self.set_fetch(None);
            self.try_take_over(now);
        }
        true
    }

    /// Sets what is being fetched while collecting (a leader that has taken over fetches
    /// nothing).
    fn set_fetch(&mut self, fetch: Option<Fetch>) {
        if let Some(l) = self.leading.as_mut() {
            l.phase.set_fetch(fetch);
        }
    }

    /// Appends and applies `entries`, fetched from follower `from` while taking over, after
    /// our last; whether they all fit (if not, the state must be fetched whole, which
    /// replaces whatever was applied here).
    fn take_entries(
        &mut self,
        now: Millis,
        from: std::net::SocketAddr,
        entries: Vec<super::Entry<S::Command>>,
    ) -> bool {
        for entry in entries {
            if entry.index != self.journal.last().index + 1 {
                return false;
            }
            let position = entry.position();
            if let Err(e) = self.apply_and_append(now, entry) {
                self.notice(format!(
                    "entry {position} from follower {from} does not fit this beacon's state ({e}): fetching its whole state"
                ));
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::{Append, Entry, Message, Mode, Payload, Position, Snapshot};

    /// A, just elected in quorum mode, after B promised holding two entries A never got:
    /// A's step, which asks B for them. B and C had seen term 1, so A takes term 4 (its
    /// first above 1: it takes 1, 4, 7, ...), and B's promise is its heartbeat following A
    /// in term 4.
    fn behind_b() -> (Node, Step) {
        let mut a = node(A, Mode::Quorum);
        for p in [B, C] {
            hear(&mut a, 1, p, follower(0, 1, Position::default(), 0));
        }
        tick(&mut a, 100);
        let step = hear(&mut a, 101, B, follower(A, 4, AHEAD, 0));
        (a, step)
    }

    const AHEAD: Position = Position { index: 2, term: 1 };

    /// B's answer to a fetch: `entries` (index, number) after `prev`.
    fn entries_from_b(prev: Position, entries: &[(u64, u64)]) -> Message<Numbers> {
        let mut answer = follower(A, 4, AHEAD, 0);
        answer.append = Some(Append {
            prev,
            entries: entries
                .iter()
                .map(|&(index, n)| Entry {
                    index,
                    term: 1,
                    payload: Payload::Command(n),
                })
                .collect(),
        });
        answer
    }

    #[test]
    fn a_new_leader_takes_the_entries_it_lacks_from_a_follower_that_holds_its_position() {
        let (mut a, step) = behind_b();
        let fetch: Vec<_> = step.early.iter().filter(|(_, m)| m.fetch).collect();
        assert_eq!(fetch.len(), 1);
        assert!(
            !fetch[0].1.need_snapshot,
            "entries first, not the whole state"
        );
        // B answers with the entries after A's last position, not its whole state.
        let answer = entries_from_b(Position::default(), &[(1, 10), (2, 20)]);
        let step = hear(&mut a, 102, B, answer);
        assert!(a.has_taken_over());
        assert_eq!(a.state().0, vec![10, 20]);
        assert!(step.store.snapshot.is_none());
        let stored: Vec<_> = step
            .store
            .entries
            .iter()
            .map(|e| (e.index, matches!(e.payload, Payload::LeaderStart)))
            .collect();
        assert_eq!(stored, vec![(1, false), (2, false), (3, true)]);
    }

    #[test]
    fn a_new_leader_further_behind_takes_the_entries_a_message_at_a_time() {
        let (mut a, _) = behind_b();
        // The first of two entries: A takes it and asks for the rest, still not serving.
        let step = hear(
            &mut a,
            102,
            B,
            entries_from_b(Position::default(), &[(1, 10)]),
        );
        assert!(!a.has_taken_over());
        let asked: Vec<_> = step.early.iter().filter(|(_, m)| m.fetch).collect();
        assert_eq!(asked.len(), 1);
        let first = Position { index: 1, term: 1 };
        assert_eq!(asked[0].1.position, first);
        hear(&mut a, 103, B, entries_from_b(first, &[(2, 20)]));
        assert!(a.has_taken_over());
        assert_eq!(a.state().0, vec![10, 20]);
    }

    #[test]
    fn a_new_leader_fetches_the_most_advanced_state_of_a_majority_before_it_serves() {
        let mut a = node(A, Mode::Quorum);
        let zero = Position::default();
        // B and C have seen term 2: A takes term 4.
        for p in [B, C] {
            hear(&mut a, 1, p, follower(0, 2, zero, 0));
        }
        tick(&mut a, 100);
        assert!(a.is_leader() && !a.has_taken_over());
        assert_eq!(a.election().term(), 4);
        // B promises, holding entries up to 3@2 that A lacks: A asks it for its state.
        let ahead = Position { index: 3, term: 2 };
        let step = hear(&mut a, 101, B, follower(A, 4, ahead, 0));
        let fetches: Vec<_> = step
            .early
            .iter()
            .filter(|(_, m)| m.fetch)
            .map(|(to, _)| to.port())
            .collect();
        assert_eq!(fetches, vec![B]);
        assert!(step.store.entries.is_empty(), "nothing of its own term yet");
        assert!(!a.has_taken_over(), "it serves nothing meanwhile");
        // B answers with its state: A installs it, then starts its term with an entry.
        let mut answer = follower(A, 4, ahead, 0);
        answer.snapshot = Some(Box::new(Snapshot {
            position: ahead,
            state: vec![1, 2, 3],
            members: None,
        }));
        let step = hear(&mut a, 102, B, answer);
        assert!(a.has_taken_over());
        assert_eq!(
            step.store.snapshot.as_ref().map(|s| s.position),
            Some(ahead)
        );
        let started: Vec<_> = step
            .store
            .entries
            .iter()
            .map(|e| (e.index, e.term, matches!(e.payload, Payload::LeaderStart)))
            .collect();
        assert_eq!(started, vec![(4, a.election().term(), true)]);
        assert_eq!(a.state().0, vec![1, 2, 3]);
    }

    #[test]
    fn only_a_heartbeat_that_follows_the_new_leader_in_its_term_is_a_promise() {
        let mut a = node(A, Mode::Quorum);
        let zero = Position::default();
        for p in [B, C] {
            hear(&mut a, 1, p, follower(0, 2, zero, 0));
        }
        tick(&mut a, 100);
        assert_eq!(a.election().term(), 4);
        // B announces A's term but follows C in it (two beacons took term 4), and C a later
        // term: neither promised A, which takes over nothing.
        hear(&mut a, 101, B, follower(C, 4, zero, 0));
        hear(&mut a, 101, C, follower(A, 5, zero, 0));
        assert!(a.is_leader() && !a.has_taken_over());
        // B following A in term 4 is a promise: with it, A and B are a majority.
        hear(&mut a, 102, B, follower(A, 4, zero, 0));
        assert!(a.has_taken_over());
    }

    #[test]
    fn a_phase_chooses_the_most_advanced_state_of_a_majority_ours_on_a_tie() {
        let at = |index, term| Position { index, term };
        let mut phase = super::Phase::collecting();
        let mine = at(5, 2);
        assert_eq!(phase.choose(mine, 2), None, "no promise yet");
        phase.promise(addr(B), at(5, 2), None);
        assert_eq!(
            phase.choose(mine, 2),
            Some((mine, None)),
            "a tie goes to ours"
        );
        phase.promise(addr(C), at(4, 3), None);
        assert_eq!(
            phase.choose(mine, 2),
            Some((at(4, 3), Some(addr(C)))),
            "a later term wins over a longer log"
        );
        let fetch = super::Fetch {
            from: addr(C),
            wanted: at(4, 3),
            whole: false,
        };
        phase.set_fetch(Some(fetch));
        assert_eq!(
            phase.choose(mine, 2),
            None,
            "nothing is chosen while fetching"
        );
        assert_eq!(phase.fetching(), Some(fetch));
        assert!(
            !phase.keep_voters(|p| p == addr(B), 3),
            "B alone and us make no majority of five"
        );
        assert_eq!(
            phase.fetching(),
            None,
            "the fetch is dropped with the majority"
        );
        assert!(phase.keep_voters(|p| p == addr(B), 2));
        let mut ready = super::Phase::Ready;
        ready.promise(addr(B), mine, None);
        assert_eq!(
            ready.choose(mine, 1),
            None,
            "a serving leader collects nothing"
        );
    }
}
