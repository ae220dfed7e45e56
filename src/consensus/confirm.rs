//! A leader acts on its own clock only while it knows it still leads.
//!
//! Confirmation rounds (quorum mode): a leader numbers rounds (*beats*); every message to a
//! follower carries the latest, and a follower acknowledges a new one at once. An answer read
//! from the leader's clock (a lease renewal) waits for a round started after the request
//! arrived to be acknowledged by a majority: a leader deposed meanwhile (stopped, cut off)
//! cannot get that, so it cannot confirm a lease its successor does not know about. Rounds
//! start at most every [`ROUND_GAP_MS`]; requests arriving meanwhile share the next one.
//!
//! Gaps: ticks come every `tick_ms`, so a step more than two ticks after the previous one
//! means the process was stopped or starved. The peers may have taken it for gone and
//! elected another leader: the election ages its view by the ticks missed (a leader without
//! a majority steps down at once), and the service judges nothing on its clock until a
//! majority has confirmed the leadership again.

use std::collections::VecDeque;

use super::{Machine, Mode, Replica, Service, Token};
use crate::time::Millis;

/// Least time between the starts of two confirmation rounds. Requests that arrive meanwhile
/// share the next round: at 100,000 renewals a second, a round per round trip would cost
/// more than the renewals themselves; this adds at most this much to an answer.
pub const ROUND_GAP_MS: Millis = 5;

/// A leader's confirmation rounds.
pub(super) struct Rounds<R> {
    /// The latest round started.
    beat: u64,
    /// The latest round a majority (this leader included) acknowledged.
    confirmed: u64,
    /// A round is wanted: answers wait for one, or the service waits to judge.
    wanted: bool,
    /// A round was started in this step: tell every follower.
    pub(super) due: bool,
    /// When the latest round started.
    started: Option<Millis>,
    /// The service judges on its clock only once this round is confirmed: one started
    /// after the leadership was taken up or after the last gap in this beacon's steps.
    judge_after: u64,
    /// Answers, each waiting for the round it names to be confirmed.
    waiting: VecDeque<(u64, Token, R)>,
}

impl<R> Default for Rounds<R> {
    fn default() -> Self {
        Rounds {
            beat: 0,
            confirmed: 0,
            wanted: false,
            due: false,
            started: None,
            judge_after: 0,
            waiting: VecDeque::new(),
        }
    }
}

impl<R> Rounds<R> {
    /// From now on, judge nothing before a new round is confirmed.
    pub(super) fn confirm_before_judging(&mut self) {
        self.judge_after = self.beat + 1;
        self.wanted = true;
    }

    /// The latest round started, which every message to a follower carries.
    pub(super) fn beat(&self) -> u64 {
        self.beat
    }

    /// The tokens of the answers still waiting.
    pub(super) fn tokens(self) -> impl Iterator<Item = Token> {
        self.waiting.into_iter().map(|(_, token, _)| token)
    }

    fn in_flight(&self) -> bool {
        self.confirmed < self.beat
    }
}

impl<S: Machine, V: Service<S>> Replica<S, V> {
    /// Notices a gap in this beacon's steps (see the module documentation).
    pub(super) fn notice_gap(&mut self, now: Millis) {
        let last = self.last_step.replace(now);
        let tick = self.cfg.tick_ms.max(1);
        let Some(gap) = last
            .map(|l| now.saturating_sub(l))
            .filter(|g| *g > 2 * tick)
        else {
            return;
        };
        let missed = (gap / tick).saturating_sub(1).min(u64::from(u32::MAX)) as u32;
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
    /// in classic mode).
    pub(super) fn when_confirmed(&mut self, token: Token, response: V::Response) {
        if self.cfg.mode != Mode::Quorum {
            self.reply(token, Ok(response));
            return;
        }
        let rounds = &mut self.leading.as_mut().expect("leader").rounds;
        rounds.waiting.push_back((rounds.beat + 1, token, response));
        rounds.wanted = true;
    }

    /// Starts a round when one is wanted, none is under way and the last started at least
    /// [`ROUND_GAP_MS`] ago (quorum mode, serving).
    pub(super) fn start_round(&mut self, now: Millis) {
        if self.cfg.mode != Mode::Quorum || self.taking_over() {
            return;
        }
        let Some(l) = self.leading.as_mut() else {
            return;
        };
        let r = &mut l.rounds;
        if !r.wanted || r.in_flight() {
            return;
        }
        if r.started.is_some_and(|at| now < at + ROUND_GAP_MS) {
            return; // see wake_at
        }
        r.started = Some(now);
        r.beat += 1;
        r.wanted = false;
        r.due = true;
        // A lone beacon confirms its own round.
        self.advance_confirmed();
    }

    /// When this beacon wants a step ([`super::Input::Wake`]) even if nothing else happens:
    /// a confirmation round is wanted but waits for `ROUND_GAP_MS` to pass.
    pub fn wake_at(&self) -> Option<Millis> {
        let r = &self.leading.as_ref()?.rounds;
        (r.wanted && !r.in_flight()).then(|| r.started.map_or(0, |at| at + ROUND_GAP_MS))
    }

    /// A follower acknowledged round `beat` of ours.
    pub(super) fn on_ack(&mut self, from: std::net::SocketAddr, beat: u64) {
        let Some(f) = self
            .leading
            .as_mut()
            .and_then(|l| l.followers.get_mut(&from))
        else {
            return;
        };
        if beat > f.acked_beat {
            f.acked_beat = beat;
            self.advance_confirmed();
        }
    }

    /// The latest round a majority acknowledged (this leader acknowledges its own at once);
    /// answers what waited for it.
    fn advance_confirmed(&mut self) {
        let majority = self.majority();
        let Some(l) = self.leading.as_mut() else {
            return;
        };
        let mut acked: Vec<u64> = l.followers.values().map(|f| f.acked_beat).collect();
        acked.push(l.rounds.beat);
        acked.sort_unstable_by(|a, b| b.cmp(a));
        let confirmed = acked[majority - 1];
        if confirmed <= l.rounds.confirmed {
            return;
        }
        l.rounds.confirmed = confirmed;
        let mut answers = Vec::new();
        while l
            .rounds
            .waiting
            .front()
            .is_some_and(|(b, _, _)| *b <= confirmed)
        {
            let (_, token, response) = l.rounds.waiting.pop_front().expect("non-empty");
            answers.push((token, response));
        }
        for (token, response) in answers {
            self.reply(token, Ok(response));
        }
    }
}
