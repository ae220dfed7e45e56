//! Changing the membership (quorum mode): a leader appends one change at a time as a core
//! entry, which takes effect where it is appended (see [`super::members`]); learners added
//! to be promoted become voters once they have kept up.

use super::members::{Change, Members};
use super::{ChangeError, Entry, Event, Machine, Mode, Payload, Replica, Service, Token};
use crate::time::Millis;

impl<S: Machine, V: Service<S>> Replica<S, V> {
    /// The membership in effect: the log's last change, else the configured one.
    pub fn members(&self) -> &Members {
        self.membership.members()
    }

    /// Whether the membership in effect leaves this beacon out: it was removed, and runs on
    /// until it is stopped.
    pub(super) fn removed(&self) -> bool {
        !self.members().contains(self.cfg.me)
    }

    /// The log index of the change of membership in effect (0: the configured membership,
    /// never changed; a change a leader told us of while our log lacks it counts).
    pub fn members_index(&self) -> u64 {
        self.membership.index(self.journal.log())
    }

    /// The membership as of log index `index`, as far as this beacon's log knows it.
    pub fn members_at(&self, index: u64) -> Members {
        self.membership.at(self.journal.log(), index)
    }

    /// Brings the election and the leader's followers in line with the log's membership,
    /// and answers the changes now committed. Runs after every input and every commit.
    pub(super) fn sync_members(&mut self, now: Millis) {
        let actions = self.synced_members();
        self.on_election(now, actions);
    }

    /// [`Replica::sync_members`] without acting on what the election says: the election's
    /// actions, for the caller to act on (or, restoring, to leave to the first step).
    pub(super) fn synced_members(&mut self) -> Vec<super::election::Action> {
        let synced = self
            .membership
            .sync(self.journal.log(), self.journal.commit(), self.cfg.me);
        self.answer_committed_changes();
        let Some(synced) = synced else {
            return Vec::new();
        };
        for notice in synced.notices {
            self.notice(notice);
        }
        if !synced.electorate {
            return Vec::new();
        }
        let given = self.membership.electorate();
        let mut learners = given.members.learners.clone();
        if !given.members.contains(self.cfg.me) {
            learners.insert(self.cfg.me);
        }
        let actions = self.election.set_members(
            given.members.voters.iter().copied(),
            learners,
            given.former_voters.iter().copied(),
        );
        let me = self.cfg.me;
        let next = self.journal.last().index + 1;
        if let Some(l) = self.leading.as_mut() {
            l.followers.follow(&given.members, me, next);
        }
        actions
    }

    /// A leader told us its latest committed change of membership: in effect here until
    /// our log catches up, when it is later than our log's.
    pub(super) fn hear_members(&mut self, now: Millis, heard: &(u64, Members)) {
        if self.membership.hear(self.journal.log(), heard) {
            self.sync_members(now);
        }
    }

    /// Answers the changes of membership now committed.
    fn answer_committed_changes(&mut self) {
        let commit = self.journal.commit();
        let Some(l) = self.leading.as_mut() else {
            return;
        };
        for (index, token) in l.pending.changes_due(commit) {
            let Some(token) = token else { continue };
            let members = self.members_at(index);
            self.ready.events.push(Event::MembersChanged {
                token,
                result: Ok(super::Changed { index, members }),
            });
        }
    }

    /// Why a change of membership cannot be made now, if it cannot.
    fn change_blocked(&self) -> Option<ChangeError> {
        if self.cfg.mode == Mode::Classic {
            return Some(ChangeError::ClassicMode);
        }
        if let Some(e) = self.serving_blocked() {
            return Some(e.into());
        }
        let leading = self.leading.as_ref()?;
        // A change of an earlier leader that never committed must not meet one of ours:
        // ours waits until our term's first entry (and so all before it) is committed.
        if leading.start == 0 || self.journal.commit() < leading.start {
            return Some(ChangeError::NotYet);
        }
        let last = self.journal.log().last_change();
        (last > self.journal.commit()).then_some(ChangeError::InProgress(last))
    }

    pub(super) fn on_change_members(&mut self, now: Millis, token: Token, change: Change) {
        if let Err(e) = self.propose_change(now, change, Some(token)) {
            self.ready.events.push(Event::MembersChanged {
                token,
                result: Err(e),
            });
        }
    }

    /// Appends `change` (leader only), in effect at once; `token` is answered once it is
    /// committed.
    fn propose_change(
        &mut self,
        now: Millis,
        change: Change,
        token: Option<Token>,
    ) -> Result<(), ChangeError> {
        if let Some(e) = self.change_blocked() {
            return Err(e);
        }
        if change == Change::Remove(self.cfg.me) {
            return Err(ChangeError::RemovesLeader(self.cfg.me));
        }
        let next = self.membership.members().with(change)?;
        self.notice(format!("membership change: {change}"));
        let entry = Entry {
            index: self.journal.last().index + 1,
            term: self.election.term(),
            payload: Payload::Members(Box::new(next)),
        };
        let index = entry.index;
        self.append_core(entry);
        let leading = self.leading.as_mut().expect("serving, so leading");
        leading.news.appended = true;
        leading.pending.change(index, token);
        self.sync_members(now);
        Ok(())
    }

    /// Leader, on a tick: promotes a learner added to be promoted once it has kept up
    /// (following this leader, holding what was committed a tick before) for
    /// [`super::Config::promote_after_ms`].
    pub(super) fn promote_kept_up(&mut self, now: Millis) {
        let Some(after) = self.cfg.promote_after_ms else {
            return;
        };
        if self.membership.members().promoting.is_empty() || self.change_blocked().is_some() {
            return;
        }
        let Some(leading) = self.leading.as_mut() else {
            return;
        };
        // Kept up: it holds what was committed a tick ago (what a live follower has long
        // acknowledged, however fast writes come).
        let mark = leading.followers.mark_tick(self.journal.commit());
        let mut due = None;
        for node in &self.membership.members().promoting {
            let Some(f) = leading.followers.get_mut(*node) else {
                continue;
            };
            let kept_up = self.election.follows_me(*node)
                && !f.wants_snapshot
                && f.progress.matched.is_some_and(|m| m >= mark);
            if !kept_up {
                f.kept_up_since = None;
                continue;
            }
            let since = *f.kept_up_since.get_or_insert(now);
            if due.is_none() && now.saturating_sub(since) >= after {
                due = Some(*node);
            }
        }
        if let Some(node) = due {
            self.notice(format!(
                "promoting {node} to voter: it has kept up for {after} ms"
            ));
            if let Err(e) = self.propose_change(now, Change::Promote(node), None) {
                self.notice(format!("could not promote {node}: {e}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::scenario::quorum_leader;
    use super::super::testing::*;
    use super::super::{ChangeError, Event, Input, MembersError, Mode, Payload};
    use super::*;

    const D: u16 = 7004;

    /// A beacon whose stored log leaves it the lone voter (the others were removed) leads
    /// once it restarts. Its leadership's first entry is appended at its first step and
    /// stored with it: the log on disk must not skip an index. (Restoring used to append
    /// that entry, outside any step, and it was never stored.)
    #[test]
    fn a_beacon_restored_as_the_lone_voter_stores_its_first_entry() {
        let alone = Members::new([addr(A)], []);
        let entries = vec![
            super::super::Entry {
                index: 1,
                term: 1,
                payload: Payload::LeaderStart,
            },
            super::super::Entry {
                index: 2,
                term: 1,
                payload: Payload::Members(Box::new(alone)),
            },
        ];
        let mut a = restarted(A, Mode::Quorum, entries, 2);
        assert_eq!(a.position().index, 2, "restoring appends nothing");
        let step = tick(&mut a, 100);
        assert!(a.is_leader());
        let stored: Vec<u64> = step.store.entries.iter().map(|e| e.index).collect();
        assert_eq!(
            stored,
            vec![3],
            "its first entry is stored with its first step"
        );
        assert_eq!(a.position().index, 3);
    }

    fn change(n: &mut Node, now: Millis, token: Token, change: Change) -> Vec<Event> {
        n.step(now, Input::ChangeMembers { token, change })
            .take_events()
    }

    fn answer(events: &[Event], token: Token) -> Option<Result<Members, ChangeError>> {
        events.iter().find_map(|e| match e {
            Event::MembersChanged { token: t, result } if *t == token => {
                Some(result.clone().map(|c| c.members))
            }
            _ => None,
        })
    }

    fn acked(n: &mut Node, now: Millis, from: u16) -> Vec<Event> {
        let (position, term) = (n.position(), n.election().term());
        let mut msg = follower(A, term, position, 0);
        msg.heartbeat.sees = 0b111;
        hear(n, now, from, msg).take_events()
    }

    #[test]
    fn a_change_takes_effect_on_append_and_is_answered_once_committed() {
        let mut a = quorum_leader();
        let events = change(
            &mut a,
            200,
            1,
            Change::AddLearner {
                node: addr(D),
                promote: false,
            },
        );
        assert_eq!(answer(&events, 1), None, "not committed yet");
        let last = a.position();
        assert!(matches!(
            a.journal.log().get(last.index).map(|e| &e.payload),
            Some(Payload::Members(m)) if m.learners.contains(&addr(D))
        ));
        // In effect at once: D is a learner in the map and a follower the leader sends to.
        assert!(a.members().learners.contains(&addr(D)));
        assert!(a.election().peers().any(|p| p == addr(D)));
        assert!(!a.election().is_voter(addr(D)));
        assert!(a.follower_progress().iter().any(|f| f.peer == addr(D)));
        // One change at a time.
        let busy = change(&mut a, 201, 2, Change::Promote(addr(D)));
        assert_eq!(
            answer(&busy, 2),
            Some(Err(ChangeError::InProgress(last.index)))
        );
        // B's acknowledgement makes a majority of A, B, C (D counts for nothing).
        let events = acked(&mut a, 202, B);
        let members = answer(&events, 1).expect("answered").expect("made");
        assert_eq!(members.voters.len(), 3);
        // Promoted, D is a voter: four voters, a majority is three.
        change(&mut a, 203, 3, Change::Promote(addr(D)));
        assert!(a.election().is_voter(addr(D)));
        assert_eq!(a.election().majority(), 3);
        let events = acked(&mut a, 204, B);
        assert_eq!(answer(&events, 3), None, "A and B are no majority of four");
        let events = acked(&mut a, 205, C);
        assert!(matches!(answer(&events, 3), Some(Ok(m)) if m.voters.contains(&addr(D))));
    }

    #[test]
    fn changes_that_would_be_unsafe_or_make_no_sense_are_refused() {
        let mut a = quorum_leader();
        let remove_self = change(&mut a, 200, 1, Change::Remove(addr(A)));
        assert_eq!(
            answer(&remove_self, 1),
            Some(Err(ChangeError::RemovesLeader(addr(A))))
        );
        let twice = change(
            &mut a,
            200,
            2,
            Change::AddLearner {
                node: addr(B),
                promote: true,
            },
        );
        assert_eq!(
            answer(&twice, 2),
            Some(Err(ChangeError::Members(MembersError::AlreadyMember(
                addr(B)
            ))))
        );
        // A follower sends it to the leader.
        let mut b = node(B, Mode::Quorum);
        let not_leader = change(&mut b, 200, 3, Change::Remove(addr(C)));
        assert!(matches!(
            answer(&not_leader, 3),
            Some(Err(ChangeError::Consensus(_)))
        ));
        // Classic mode has no majority to keep a change safe.
        let mut lone = node_of(A, Mode::Classic, &[A]);
        let classic = change(&mut lone, 200, 4, Change::Remove(addr(B)));
        assert_eq!(answer(&classic, 4), Some(Err(ChangeError::ClassicMode)));
    }

    #[test]
    fn a_new_leader_changes_nothing_before_its_first_entry_of_its_term_commits() {
        let mut a = node(A, Mode::Quorum);
        let zero = Default::default();
        for p in [B, C] {
            let mut msg = follower(0, 0, zero, 0);
            msg.heartbeat.sees = 0b111;
            hear(&mut a, 1, p, msg);
        }
        tick(&mut a, 100);
        for p in [B, C] {
            let mut msg = follower(A, 1, zero, 0);
            msg.heartbeat.sees = 0b111;
            hear(&mut a, 101, p, msg);
        }
        assert!(a.has_taken_over() && a.commit() == 0);
        let early = change(&mut a, 102, 1, Change::Remove(addr(C)));
        assert_eq!(answer(&early, 1), Some(Err(ChangeError::NotYet)));
        acked(&mut a, 103, B);
        let made = change(&mut a, 104, 2, Change::Remove(addr(C)));
        assert_eq!(answer(&made, 2), None, "appended, waiting to commit");
        assert_eq!(a.members().voters.len(), 2);
    }

    #[test]
    fn a_learner_added_to_be_promoted_is_once_it_has_kept_up() {
        let mut a = quorum_leader();
        a.cfg.promote_after_ms = Some(1_000);
        change(
            &mut a,
            200,
            1,
            Change::AddLearner {
                node: addr(D),
                promote: true,
            },
        );
        acked(&mut a, 201, B);
        assert!(a.members().promoting.contains(&addr(D)));
        let behind = |n: &Node| {
            let mut msg = follower(A, n.election().term(), Default::default(), 0);
            msg.heartbeat.sees = 0b111;
            msg
        };
        // D follows A but holds nothing (while B and C keep up): it has not kept up.
        let mut now = 300;
        while now < 2_000 {
            acked(&mut a, now, B);
            acked(&mut a, now, C);
            let msg = behind(&a);
            hear(&mut a, now, D, msg);
            tick(&mut a, now + 1);
            now += 100;
        }
        assert!(a.is_leader());
        assert!(!a.election().is_voter(addr(D)), "not kept up");
        // Caught up, for a second of ticks: promoted.
        while !a.election().is_voter(addr(D)) && now < 5_000 {
            for p in [B, C, D] {
                acked(&mut a, now, p);
            }
            tick(&mut a, now + 1);
            now += 100;
        }
        assert!(a.election().is_voter(addr(D)), "promoted");
        assert!(
            (3_000..=3_300).contains(&now),
            "after a second of keeping up: {now}"
        );
    }

    #[test]
    fn a_follower_behind_on_membership_elects_among_the_members_its_leader_committed() {
        // C's log knows A, B, C; A leads a membership that (committed) added D and removed
        // B: C takes D's claims as a voter's until its log catches up.
        let mut c = node(C, Mode::Quorum);
        let later = Members::new([addr(A), addr(C), addr(D)], []);
        let hb = super::super::election::Heartbeat {
            is_leader: true,
            term: 5,
            leader: Some(addr(D)),
            sees: 0b111,
            eligible: true,
        };
        let mut msg = super::super::PeerMessage::bare(hb, Default::default(), 0);
        msg.members = Some(Box::new((9, later.clone())));
        hear(&mut c, 10, D, msg);
        assert_eq!(c.members(), &later);
        assert!(c.election().is_voter(addr(D)) && !c.election().is_voter(addr(B)));
        assert_eq!(c.election().leader(), Some(addr(D)), "follows D");
        // An older one told later changes nothing.
        c.hear_members(11, &(3, Members::new([addr(A), addr(B), addr(C)], [])));
        assert_eq!(c.members(), &later);
    }
}
