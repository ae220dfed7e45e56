//! A harness for the core's unit tests: a tiny machine (a list of numbers), its service (an
//! append answered once committed, a read answered once a majority confirmed the
//! leadership), and beacons driven by hand, so a test can assert the exact [`Ready`] one step
//! returns, as openraft's engine tests assert each handler's commands.

use std::net::SocketAddr;

use super::election::Heartbeat;
use super::{
    Config, Entry, Input, Leader, Machine, Message, Mode, Outcome, PeerMessage, Position, Ready,
    Replica, Service,
};
use crate::time::Millis;

/// The replicated state: numbers in log order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Numbers(pub Vec<u64>);

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("never")]
pub struct Never;

/// The one number that does not fit the state: a test's misfit entry.
pub const MISFIT: u64 = u64::MAX;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{MISFIT} does not fit")]
pub struct Misfit;

impl Machine for Numbers {
    type Command = u64;
    type Change = u64;
    type Snapshot = Vec<u64>;
    type ApplyError = Misfit;

    /// Even and odd numbers are parts of their own (reads by part are tested on them).
    const PARTS: usize = 2;

    fn part(n: &u64) -> usize {
        (n % 2) as usize
    }

    fn apply(&mut self, n: &u64, _now: Millis) -> Result<Option<u64>, Misfit> {
        if *n == MISFIT {
            return Err(Misfit);
        }
        self.0.push(*n);
        Ok(Some(*n))
    }
    fn snapshot(&self, _now: Millis) -> Vec<u64> {
        self.0.clone()
    }
    fn restore(&mut self, s: Vec<u64>, _now: Millis) {
        self.0 = s;
    }
    fn records(&self) -> usize {
        self.0.len()
    }
    fn summary(&self) -> String {
        format!("{} numbers", self.0.len())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Append a number: answered with its index once committed.
    Add(u64),
    /// Read how many numbers there are, on the leader's word: once confirmed.
    Count,
    /// The same, confirmed by a round that may wait for the next heartbeat.
    CountWithBeat,
}

#[derive(Debug, Clone, Default)]
pub struct Append;

impl Service<Numbers> for Append {
    type Request = Request;
    type Response = u64;
    type Error = Never;
    type Waiting = u64;

    fn lead(&mut self, _state: &Numbers, _now: Millis, _renewals: super::Knowledge) {}
    fn step_down(&mut self) {}
    fn request(
        &mut self,
        leader: &mut Leader<'_, Numbers>,
        request: Request,
    ) -> Outcome<u64, Never, u64> {
        match request {
            Request::Add(n) => {
                let index = leader.append(n).expect("applies");
                Outcome::WhenCommitted {
                    index,
                    waiting: index,
                }
            }
            Request::Count => Outcome::WhenConfirmed(Ok(leader.state().0.len() as u64)),
            Request::CountWithBeat => Outcome::WithNextBeat(Ok(leader.state().0.len() as u64)),
        }
    }
    fn tick(&mut self, _leader: &mut Leader<'_, Numbers>) {}
    fn answer(&self, _state: &Numbers, index: u64) -> Result<u64, Never> {
        Ok(index)
    }
}

pub type Node = Replica<Numbers, Append>;
pub type Step = Ready<Numbers, Append>;

pub fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

pub const A: u16 = 7001;
pub const B: u16 = 7002;
pub const C: u16 = 7003;

/// Beacon `me` of A, B, C in `mode`.
pub fn node(me: u16, mode: Mode) -> Node {
    node_of(me, mode, &[A, B, C])
}

/// Beacon `me` of `beacons` in `mode`.
pub fn node_of(me: u16, mode: Mode, beacons: &[u16]) -> Node {
    Replica::new(config_of(me, mode, beacons), Numbers::default(), Append)
}

/// Beacon `me` of A, B, C in `mode`, restarted from `entries` stored with the log known
/// committed through `commit`.
pub fn restarted(me: u16, mode: Mode, entries: Vec<Entry<u64>>, commit: u64) -> Node {
    let cfg = config_of(me, mode, &[A, B, C]);
    Replica::restore(cfg, Numbers::default(), Append, None, entries, commit)
        .expect("the entries load")
        .0
}

pub fn config_of(me: u16, mode: Mode, beacons: &[u16]) -> Config {
    Config {
        me: addr(me),
        mode,
        beacons: beacons.iter().map(|p| addr(*p)).collect(),
        learners: Vec::new(),
        members_index: 0,
        tick_ms: 100,
        log_keep: 100,
        stored: super::Promise::default(),
        deal_terms: true,
        promote_after_ms: None,
        stores_reported: false,
        flush_per_batch: false,
    }
}

/// A follower's heartbeat: it follows `leader` (0: nobody) in `term`, sees everyone, is at
/// `position`, and acknowledges round `ack_beat`.
pub fn follower(leader: u16, term: u64, position: Position, ack_beat: u64) -> Message<Numbers> {
    let hb = Heartbeat {
        is_leader: false,
        term,
        leader: (leader != 0).then(|| addr(leader)),
        sees: 0b111,
        eligible: true,
    };
    let mut msg = PeerMessage::bare(hb, position, 0);
    msg.ack_beat = ack_beat;
    msg
}

/// A's step for `from`'s message.
pub fn hear(n: &mut Node, now: Millis, from: u16, msg: Message<Numbers>) -> Step {
    n.step(
        now,
        Input::Peer {
            from: addr(from),
            msg,
        },
    )
}

/// `n`'s step for request `token`: add `value`.
pub fn add(n: &mut Node, now: Millis, token: super::Token, value: u64) -> Step {
    n.step(
        now,
        Input::Request {
            token,
            request: Request::Add(value),
        },
    )
}

pub fn tick(n: &mut Node, now: Millis) -> Step {
    n.step(now, Input::Tick { wall_ms: now })
}
