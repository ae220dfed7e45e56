//! A leader acts on its own clock only while it knows it still leads.
//!
//! Confirmation rounds (quorum mode): a leader numbers rounds (*beats*); every message to a
//! follower carries the latest, and a follower acknowledges a new one at once. An answer read
//! from the leader's clock (a lease renewal) waits for a round started after the request
//! arrived to be acknowledged by a majority: a leader deposed meanwhile (stopped, cut off)
//! cannot get that, so it cannot confirm a lease its successor does not know about. One
//! round is in flight at a time: requests arriving meanwhile share the next, which starts
//! in the step that confirms the one in flight. An answer waits about one round trip between
//! beacons while the leader is quiet, and under load each round carries more: rounds never
//! outnumber round trips. Except when the leader sends its followers entries or a commit
//! anyway: a round wanted then starts at once on those messages, though another is under
//! way. It costs no message of its own, and a linearizable read at a leader taking writes
//! waits one round trip instead of up to two (p50 2.1 ms to 1.5 ms under the reads part's
//! 24 writers). (Rounds used to be spaced at least a millisecond of the core's
//! clock apart besides: a lone renewer then waited 1-2 ms for each answer instead of 0.1,
//! and 64 renewers were held near 30,000 renewals a second where they now reach
//! 75,000-100,000. The price is more rounds under a steady load: with renewals spread evenly
//! over each second the leader spent 1-8 points of a core more (47% of a core at 150,000
//! live registrations against 40%); the renewals one leader core sustains under saturation
//! did not move, 560k a second against 548k.)
//!
//! An answer nobody is in a hurry for ([`super::Outcome::WithNextBeat`]: a routine renewal,
//! its lease more than half left) starts no round: it waits for the round the next tick's
//! heartbeat carries, or for one another request starts sooner. A cluster at rest then sends
//! no round per renewal, only its heartbeats and their acknowledgements: up to a tick of
//! waiting, against each round's messages and the wakes they cost every beacon.
//!
//! Gaps: ticks come every `tick_ms`, so a step more than two ticks after the previous one
//! means the process was stopped or starved. The peers may have taken it for gone and
//! elected another leader: the election ages its view by the ticks missed (a leader without
//! a majority steps down at once), and the service judges nothing on its clock until a
//! majority has confirmed the leadership again.

use std::collections::VecDeque;

use super::{Machine, Mode, Replica, Service, Token, intake};
use crate::time::Millis;

/// Takes from the front of `queue` (kept in order of the round or index each waits for)
/// those whose round or index is at most `upto`.
pub(super) fn take_due<T>(queue: &mut VecDeque<(u64, Token, T)>, upto: u64) -> Vec<(Token, T)> {
    let due = queue.iter().take_while(|(at, _, _)| *at <= upto).count();
    queue.drain(..due).map(|(_, token, t)| (token, t)).collect()
}

/// What a beacon's confirmation rounds came to over its life, as its leader: what its
/// metrics show (`beacon_server_confirmation_rounds_total` and
/// `beacon_server_confirmed_with_heartbeat_total`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Rounds started.
    pub started: u64,
    /// Answers that waited for a heartbeat's round ([`super::Outcome::WithNextBeat`]).
    pub with_heartbeat: u64,
}

/// A leader's confirmation rounds.
pub(super) struct Rounds<R> {
    /// The latest round started.
    beat: u64,
    /// The latest round a majority (this leader included) acknowledged.
    confirmed: u64,
    /// A round is wanted: answers wait for one, or the service waits to judge.
    wanted: bool,
    /// A round is wanted with the next heartbeat (answers that may wait up to a tick).
    with_heartbeat: bool,
    /// A round was started in this step: tell every follower.
    pub(super) due: bool,
    /// The service judges on its clock only once this round is confirmed: one started
    /// after the leadership was taken up or after the last gap in this beacon's steps.
    judge_after: u64,
    /// Answers, each waiting for the round it names to be confirmed.
    waiting: VecDeque<(u64, Token, R)>,
    /// Reads, each with the commit index taken when it arrived, waiting for the round it
    /// names to be confirmed.
    reads: VecDeque<(u64, Token, u64)>,
}

impl<R> Default for Rounds<R> {
    fn default() -> Self {
        Rounds {
            beat: 0,
            confirmed: 0,
            wanted: false,
            with_heartbeat: false,
            due: false,
            judge_after: 0,
            waiting: VecDeque::new(),
            reads: VecDeque::new(),
        }
    }
}

impl<R> Rounds<R> {
    /// From now on, judge nothing before a new round is confirmed.
    pub(super) fn confirm_before_judging(&mut self) {
        self.judge_after = self.beat + 1;
        self.wanted = true;
    }

    /// A round is wanted (answers wait for what one carries).
    pub(super) fn want(&mut self) {
        self.wanted = true;
    }

    /// The latest round started, which every message to a follower carries.
    pub(super) fn beat(&self) -> u64 {
        self.beat
    }

    /// The tokens of the answers and of the reads still waiting.
    pub(super) fn tokens(self) -> (Vec<Token>, Vec<Token>) {
        (
            self.waiting
                .into_iter()
                .map(|(_, token, _)| token)
                .collect(),
            self.reads.into_iter().map(|(_, token, _)| token).collect(),
        )
    }

    /// Read `token` gets `index` once a round started after now is confirmed.
    pub(super) fn read_after_round(&mut self, token: Token, index: u64) {
        self.reads.push_back((self.beat + 1, token, index));
        self.wanted = true;
    }

    fn in_flight(&self) -> bool {
        self.confirmed < self.beat
    }
}

impl<S: Machine, V: Service<S>> Replica<S, V> {
    /// The confirmation rounds this beacon started and the answers that waited for a
    /// heartbeat's, over its life.
    pub fn round_counts(&self) -> Counts {
        self.round_counts
    }

    /// Notices a gap in this beacon's steps (see the module documentation).
    pub(super) fn notice_gap(&mut self, now: Millis) {
        let Some(intake::Gap { ms: gap, missed }) = self.intake.step(now, self.cfg.tick_ms) else {
            return;
        };
        self.notice(format!(
            "no step for {gap} ms (the process was stopped or starved): peers' heartbeats aged by {missed} ticks; leases are judged again once a majority confirms this leadership"
        ));
        if let Some(l) = self.leading.as_mut() {
            l.rounds.confirm_before_judging();
        }
        let actions = self.election.catch_up(missed);
        self.on_election(now, actions);
    }

    /// Whether the service may act on its clock now (quorum mode: a majority confirmed this
    /// leadership since it began or since the last gap).
    pub(super) fn may_judge(&mut self) -> bool {
        if self.cfg.mode != Mode::Quorum {
            return true;
        }
        let Some(l) = self.leading.as_mut() else {
            return false;
        };
        if l.rounds.confirmed >= l.rounds.judge_after {
            return true;
        }
        l.rounds.wanted = true;
        false
    }

    /// Answers `token` with `response` once a round started after now is confirmed (at once
    /// in classic mode): a round that starts `at_once` (or rides on the next one wanted),
    /// otherwise one that rides on the leader's next heartbeat at the latest.
    pub(super) fn when_confirmed(
        &mut self,
        token: Token,
        (decided, note, response): (u64, u64, Result<V::Response, V::Error>),
        at_once: bool,
    ) {
        if self.cfg.mode != Mode::Quorum {
            self.answer_from_state(decided, note, token, response);
            return;
        }
        let rounds = &mut self.leading.as_mut().expect("leader").rounds;
        rounds
            .waiting
            .push_back((rounds.beat + 1, token, (decided, note, response)));
        if at_once {
            rounds.wanted = true;
        } else {
            rounds.with_heartbeat = true;
            self.round_counts.with_heartbeat += 1;
        }
    }

    /// Before a tick's heartbeat: starts the round wanted with it, so that the heartbeat
    /// carries it and it costs no message of its own (quorum mode, serving).
    pub(super) fn start_round_on_heartbeat(&mut self) {
        if self.cfg.mode != Mode::Quorum || self.taking_over() {
            return;
        }
        let Some(l) = self.leading.as_mut() else {
            return;
        };
        let r = &mut l.rounds;
        if !std::mem::take(&mut r.with_heartbeat) {
            return;
        }
        if r.beat >= r.waiting.back().map_or(0, |(at, _, _)| *at)
            && r.beat >= r.reads.back().map_or(0, |(at, _, _)| *at)
        {
            return; // a round started since has everything waiting
        }
        r.beat += 1;
        r.wanted = false;
        r.due = true;
        self.round_counts.started += 1;
        self.advance_confirmed();
    }

    /// Starts a round when one is wanted and none is under way (quorum mode, serving).
    pub(super) fn start_round(&mut self) {
        if self.cfg.mode != Mode::Quorum || self.taking_over() {
            return;
        }
        let Some(l) = self.leading.as_mut() else {
            return;
        };
        // A round under way holds the next back, unless the next rides on messages this
        // step sends anyway (entries or a commit to every follower): then it costs no
        // message, and what waits for it waits one round trip, not up to two.
        let rides = l.news.appended || l.news.committed;
        let r = &mut l.rounds;
        if !r.wanted || (r.in_flight() && !rides) {
            return;
        }
        r.beat += 1;
        r.wanted = false;
        r.due = true;
        self.round_counts.started += 1;
        // A lone beacon confirms its own round.
        self.advance_confirmed();
    }

    /// A follower acknowledged round `beat` of ours.
    pub(super) fn on_ack(&mut self, from: std::net::SocketAddr, beat: u64) {
        let Some(f) = self
            .leading
            .as_mut()
            .and_then(|l| l.followers.get_mut(from))
        else {
            return;
        };
        if beat > f.acked_beat {
            f.acked_beat = beat;
            self.advance_confirmed();
        }
    }

    /// The latest round a majority of the voters acknowledged (this leader acknowledges its
    /// own at once; a learner's acknowledgement confirms nothing); answers what waited for it.
    fn advance_confirmed(&mut self) {
        let majority = self.majority();
        let Some(l) = self.leading.as_mut() else {
            return;
        };
        let confirmed =
            l.followers
                .majority_reached(&self.election, l.rounds.beat, majority, |f| f.acked_beat);
        if confirmed <= l.rounds.confirmed {
            return;
        }
        l.rounds.confirmed = confirmed;
        let answers = take_due(&mut l.rounds.waiting, confirmed);
        let reads = take_due(&mut l.rounds.reads, confirmed);
        for (token, (decided, note, response)) in answers {
            self.answer_from_state(decided, note, token, response);
        }
        for (token, index) in reads {
            self.read_indexed(token, Ok(index));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::scenario::{quorum_follower, quorum_leader};
    use super::super::testing::*;
    use super::super::{Asker, ConsensusError, Event, Input, Token};

    type ReadIndex = Option<(Token, Result<u64, ConsensusError>)>;

    /// The read index answered among `events`, if any.
    fn read_in(events: &[Event]) -> ReadIndex {
        events.iter().find_map(|e| match e {
            Event::ReadIndex { token, result } => Some((*token, result.clone())),
            _ => None,
        })
    }

    /// The read index answered in `step`, if any.
    fn read(mut step: Step) -> ReadIndex {
        read_in(&step.take_events())
    }

    /// `n`'s answer at `now` to read index `token`, asked by `asker` (or for `n`'s own
    /// reads), if it answers at once.
    fn ask(n: &mut Node, now: u64, token: Token, asker: Option<Asker>) -> ReadIndex {
        read(n.step(now, Input::ReadIndex { token, asker }))
    }

    /// Requests stepped together get the answers, in the order, that they get stepped one
    /// by one: a write, a count that saw it, another write, all once a follower holds them
    /// (the count, which waited for its round too, after the writes).
    #[test]
    fn requests_stepped_together_are_answered_as_one_by_one() {
        let run = |together: bool| {
            let mut a = quorum_leader();
            let requests = vec![
                (1, Request::Add(7)),
                (2, Request::Count),
                (3, Request::Add(8)),
            ];
            let mut steps = Vec::new();
            if together {
                steps.push(a.step(300, Input::Requests { requests }));
            } else {
                for (token, request) in requests {
                    steps.push(a.step(300, Input::Request { token, request }));
                }
            }
            let (last, beat) = (a.position(), a.leading.as_ref().unwrap().rounds.beat());
            let entries: usize = steps.iter().map(|s| s.store.entries.len()).sum();
            steps.push(hear(&mut a, 302, B, follower(A, 1, last, beat)));
            let replies: Vec<_> = steps.into_iter().flat_map(|s| s.replies).collect();
            (entries, last, replies)
        };
        let (entries, last, replies) = run(true);
        assert_eq!(entries, 2);
        let mut tokens: Vec<Token> = replies.iter().map(|(t, _)| *t).collect();
        tokens.sort();
        assert_eq!(tokens, vec![1, 2, 3], "{replies:?}");
        assert_eq!(run(false), (entries, last, replies));
    }

    #[test]
    fn a_read_on_the_leaders_word_waits_for_a_majority_to_confirm_a_later_round() {
        let mut a = quorum_leader();
        let step = a.step(
            300,
            Input::Request {
                token: 5,
                request: Request::Count,
            },
        );
        assert!(step.replies.is_empty(), "not on its own word alone");
        // A round starts, carried to both followers at once.
        let beats: Vec<_> = step
            .early
            .iter()
            .map(|(to, m)| (to.port(), m.beat))
            .collect();
        let beat = a.leading.as_ref().unwrap().rounds.beat();
        assert!(beat > 0);
        assert_eq!(beats, vec![(B, beat), (C, beat)]);
        let last = a.position();
        // An acknowledgement of an earlier round confirms nothing.
        let step = hear(&mut a, 301, B, follower(A, 1, last, beat - 1));
        assert!(step.replies.is_empty());
        // One of this round makes a majority with the leader: the answer goes.
        let step = hear(&mut a, 302, B, follower(A, 1, last, beat));
        assert_eq!(step.replies, vec![(5, Ok(0))]);
    }

    /// An answer that may wait for the next heartbeat starts no round of its own: the next
    /// tick's heartbeat carries the round, one message to each follower, and a majority's
    /// acknowledgement of it answers. A round another request starts meanwhile answers it
    /// too, and the tick then starts none.
    #[test]
    fn an_answer_that_may_wait_rides_on_the_next_heartbeat() {
        let count =
            |a: &mut Node, now, token, request| a.step(now, Input::Request { token, request });
        let beat = |a: &Node| a.leading.as_ref().unwrap().rounds.beat();
        let mut a = quorum_leader();
        let before = beat(&a);
        let counted = a.round_counts();
        let step = count(&mut a, 300, 6, Request::CountWithBeat);
        assert!(step.replies.is_empty(), "not on its own word alone");
        assert!(step.early.is_empty(), "no message of its own");
        assert_eq!(beat(&a), before, "no round yet");
        let step = tick(&mut a, 350);
        let round = beat(&a);
        assert_eq!(round, before + 1);
        let sent: Vec<_> = step
            .early
            .iter()
            .map(|(to, m)| (to.port(), m.beat))
            .collect();
        assert_eq!(
            sent,
            vec![(B, round), (C, round)],
            "the heartbeats carry it"
        );
        let last = a.position();
        let step = hear(&mut a, 351, C, follower(A, 1, last, round));
        assert_eq!(step.replies, vec![(6, Ok(0))]);

        // A prompt request's round answers both; the tick after starts none.
        count(&mut a, 400, 7, Request::CountWithBeat);
        let step = count(&mut a, 401, 8, Request::Count);
        let round = beat(&a);
        assert_eq!(round, before + 2);
        assert_eq!(step.early.len(), 2);
        let step = hear(&mut a, 402, B, follower(A, 1, last, round));
        assert_eq!(step.replies, vec![(7, Ok(0)), (8, Ok(0))]);
        tick(&mut a, 450);
        assert_eq!(beat(&a), round, "nothing waits for a round");
        let counts = a.round_counts();
        assert_eq!(counts.started - counted.started, 2);
        assert_eq!(counts.with_heartbeat - counted.with_heartbeat, 2);
    }

    /// A read of one part of the leader's state waits for the writes to that part it saw
    /// to commit, not for those to another part: an odd number in flight holds a read of
    /// the odd numbers and of the whole state, not one of the even numbers, which reads
    /// through the commit index, as a watch of them would resume.
    #[test]
    fn a_read_of_one_part_waits_for_that_parts_writes_alone() {
        use super::super::Position;
        let mut a = quorum_leader();
        let before = a.position();
        assert_eq!(a.read_waits_for(Some(0)), Position::default());
        a.step(
            300,
            Input::Request {
                token: 4,
                request: Request::Add(7),
            },
        );
        let odd = a.position();
        assert_eq!(odd.index, before.index + 1);
        assert_eq!(a.read_waits_for(Some(1)), odd, "the odd part holds 7");
        assert_eq!(a.read_waits_for(None), odd, "so does the whole state");
        assert_eq!(
            a.read_waits_for(Some(0)),
            Position::default(),
            "no even number"
        );
        assert_eq!(a.read_through(1), odd.index);
        assert_eq!(a.read_through(0), a.commit());
        assert!(a.commit() < odd.index);
        a.check_parts().unwrap();
        // An even number after it: the odd part still waits for 7 alone.
        a.step(
            301,
            Input::Request {
                token: 5,
                request: Request::Add(8),
            },
        );
        let even = a.position();
        assert_eq!(a.read_waits_for(Some(1)), odd);
        assert_eq!(a.read_waits_for(Some(0)), even);
        assert_eq!(a.read_through(1), odd.index);
        a.check_parts().unwrap();
        // B stores both: nothing waits.
        let beat = a.leading.as_ref().unwrap().rounds.beat();
        hear(&mut a, 302, B, follower(A, 1, even, beat));
        assert_eq!(a.commit(), even.index);
        for part in [Some(0), Some(1), None] {
            assert_eq!(a.read_waits_for(part), Position::default(), "{part:?}");
        }
        assert_eq!(a.read_through(1), even.index, "the commit, past 7");
        a.check_parts().unwrap();
    }

    /// An answer read off the leader's state waits, past its round, for the entries that
    /// state holds to commit: else it could tell of a write a failover then loses.
    #[test]
    fn an_answer_on_the_leaders_state_waits_for_what_that_state_holds_to_commit() {
        let mut a = quorum_leader();
        let before = a.position();
        let step = a.step(
            300,
            Input::Request {
                token: 4,
                request: Request::Add(7),
            },
        );
        assert!(step.replies.is_empty(), "the write waits for its commit");
        let step = a.step(
            301,
            Input::Request {
                token: 5,
                request: Request::Count,
            },
        );
        assert!(step.replies.is_empty());
        let beat = a.leading.as_ref().unwrap().rounds.beat();
        // The round is confirmed, but B holds nothing new: the count, which saw the write,
        // waits.
        let step = hear(&mut a, 302, B, follower(A, 1, before, beat));
        assert!(step.replies.is_empty(), "{:?}", step.replies);
        // B stores the write: it commits, and both answers go.
        let last = a.position();
        let step = hear(&mut a, 303, B, follower(A, 1, last, beat));
        let mut replies = step.replies.clone();
        replies.sort_by_key(|(token, _)| *token);
        assert_eq!(replies, vec![(4, Ok(before.index + 1)), (5, Ok(1))]);
        // Once the state holds nothing uncommitted, the answer needs only its round.
        a.step(
            400,
            Input::Request {
                token: 6,
                request: Request::Count,
            },
        );
        let beat = a.leading.as_ref().unwrap().rounds.beat();
        let last = a.position();
        let step = hear(&mut a, 401, C, follower(A, 1, last, beat));
        assert_eq!(step.replies, vec![(6, Ok(1))]);
    }

    #[test]
    fn a_read_index_is_the_commit_index_once_a_later_round_is_confirmed() {
        let mut a = quorum_leader();
        let commit = a.commit();
        assert_eq!(ask(&mut a, 300, 7, None), None, "not on its own word alone");
        let beat = a.leading.as_ref().unwrap().rounds.beat();
        let last = a.position();
        // An acknowledgement of an earlier round confirms nothing.
        assert_eq!(
            read(hear(&mut a, 301, B, follower(A, 1, last, beat - 1))),
            None
        );
        assert_eq!(
            read(hear(&mut a, 302, B, follower(A, 1, last, beat))),
            Some((7, Ok(commit)))
        );
        // A beacon that does not lead gives no read index, at once.
        let mut b = node(B, super::super::Mode::Quorum);
        let (_, result) = ask(&mut b, 303, 8, None).expect("answered at once");
        assert!(
            matches!(
                result,
                Err(ConsensusError::NotLeader { .. } | ConsensusError::NoQuorum { .. })
            ),
            "{result:?}"
        );
        // A leader that loses its leadership fails the reads still waiting, and gives no
        // read index on a follower's word any more.
        assert_eq!(ask(&mut a, 400, 9, None), None);
        let b_asks = Asker {
            from: addr(B),
            term: a.election.term(),
        };
        assert!(a.read_index_confirmed(b_asks).is_some());
        a.step_down();
        assert_eq!(a.read_index_confirmed(b_asks), None);
        assert_eq!(
            read_in(&a.ready.take_events()),
            Some((9, Err(ConsensusError::LeaderChanged)))
        );
    }

    /// A read that arrives while a round is under way waits for a later one. That round
    /// starts at once when the step sends followers entries anyway: the read waits one
    /// round trip, not the rest of the one under way and then another. Without entries to
    /// carry it, it waits for the one under way (no message of its own).
    #[test]
    fn a_round_rides_on_entries_sent_while_another_is_under_way() {
        let mut a = quorum_leader();
        let commit = a.commit();
        let beat = |a: &Node| a.leading.as_ref().unwrap().rounds.beat();
        assert_eq!(ask(&mut a, 300, 7, None), None);
        let first = beat(&a);
        // Nothing else to send: the second read waits for the round under way to end.
        let step = a.step(
            301,
            Input::ReadIndex {
                token: 8,
                asker: None,
            },
        );
        assert!(step.early.is_empty(), "no message of its own");
        assert_eq!(beat(&a), first);
        // A write goes to both followers: the next round rides on it.
        let step = a.step(
            302,
            Input::Request {
                token: 9,
                request: Request::Add(1),
            },
        );
        let second = beat(&a);
        assert_eq!(second, first + 1, "a round rides on the entries");
        let beats: Vec<_> = step
            .early
            .iter()
            .map(|(to, m)| (to.port(), m.beat))
            .collect();
        assert_eq!(beats, vec![(B, second), (C, second)]);
        // B's answer to that message confirms both reads in one round trip.
        let last = a.position();
        let mut step = hear(&mut a, 303, B, follower(A, 1, last, second));
        let mut reads: Vec<_> = step
            .take_events()
            .into_iter()
            .filter_map(|e| match e {
                Event::ReadIndex { token, result } => Some((token, result)),
                _ => None,
            })
            .collect();
        reads.sort_by_key(|(token, _)| *token);
        assert_eq!(reads, vec![(7, Ok(commit)), (8, Ok(commit))]);
    }

    #[test]
    fn a_followers_request_in_this_term_confirms_the_leadership_with_the_leader() {
        let mut a = quorum_leader();
        let commit = a.commit();
        let asker = |port, term| {
            Some(Asker {
                from: addr(port),
                term,
            })
        };
        // B follows A in A's term: A and B are a majority of three, so no round, and a
        // connection task may answer it without a step.
        assert_eq!(a.read_index_confirmed(asker(B, 1).unwrap()), Some(commit));
        assert_eq!(ask(&mut a, 300, 7, asker(B, 1)), Some((7, Ok(commit))));
        // Of five beacons, A and B are no majority: a round, answered once two more confirm.
        let mut five = super::super::scenario::elected_leader(5);
        let commit5 = five.commit();
        assert_eq!(five.read_index_confirmed(asker(B, 1).unwrap()), None);
        assert_eq!(
            ask(&mut five, 300, 6, asker(B, 1)),
            None,
            "not on A's and B's word alone"
        );
        let beat = five.leading.as_ref().unwrap().rounds.beat();
        let last = five.position();
        assert_eq!(
            read(hear(&mut five, 301, C, follower(A, 1, last, beat))),
            None,
            "A and C are no majority either"
        );
        assert_eq!(
            read(hear(&mut five, 302, 7004, follower(A, 1, last, beat))),
            Some((6, Ok(commit5)))
        );
        // Asked in another term (B had moved on, or not caught up), or by a beacon that is
        // not a follower: a round, as for any read.
        let mut now = 301;
        for (token, who) in [(8, asker(B, 2)), (9, asker(B, 0)), (10, asker(9999, 1))] {
            assert_eq!(a.read_index_confirmed(who.unwrap()), None, "read {token}");
            assert_eq!(
                ask(&mut a, now, token, who),
                None,
                "read {token} waits for a round"
            );
            let beat = a.leading.as_ref().unwrap().rounds.beat();
            let last = a.position();
            assert_eq!(
                read(hear(&mut a, now + 1, C, follower(A, 1, last, beat))),
                Some((token, Ok(commit)))
            );
            now += 10;
        }
    }

    /// A leader of three voters asks its followers to vouch for its term instead of running
    /// a round; a follower vouches only for the leader it follows, in the term it follows it.
    #[test]
    fn a_follower_vouches_for_its_leader_in_its_term_and_three_voters_need_one_word() {
        let mut a = quorum_leader();
        let term = a.election.term();
        let wanted = a
            .vouch_wanted()
            .expect("one follower's word makes a majority of three");
        assert_eq!(wanted.term, term);
        assert_eq!(wanted.index, a.commit());
        assert_eq!(wanted.voters, vec![addr(B), addr(C)]);
        // Of five beacons one follower's word and the leader's are no majority: a round.
        let five = super::super::scenario::elected_leader(5);
        assert_eq!(five.vouch_wanted(), None);
        // B follows A in A's term: it vouches for that, and nothing else.
        let b = quorum_follower();
        assert!(b.vouches_for(addr(A), term));
        assert!(!b.vouches_for(addr(A), term + 1), "another term");
        assert!(!b.vouches_for(addr(A), term - 1), "an earlier term");
        assert!(!b.vouches_for(addr(C), term), "another leader");
        // A leader vouches for no one, itself included; one that stepped down wants none.
        assert!(!a.vouches_for(addr(A), term));
        a.step_down();
        assert_eq!(a.vouch_wanted(), None);
    }
}
