//! The sequence issuer's workload and invariants for the simulations.
//!
//! Clients create two sequences, then take segments of random sizes from them, now and then
//! hand back the unused tail of the last one they took, and change a step. Checked:
//!
//! * segments never overlap: no number of an acknowledged segment is in another
//!   acknowledged segment, unless the first one's holder handed it back before;
//! * `max` never goes back under an acknowledged segment: a leader that has taken over
//!   holds, for each sequence, a `max` at least the end of every segment acknowledged in
//!   its term or before (minus tails handed back);
//! * once healed, every beacon holds the same sequences.

use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;
use std::net::SocketAddr;

use super::service::{Request, Response, SequenceError, SequenceService};
use super::state::{Segment, Sequences};
use crate::consensus::{ReplyError, Service};
use crate::machines::{Part, Routes};
use crate::sim::{Answer, Checked, Context, InFlight, View, Workload};
use crate::time::Millis;

/// The sequences the clients use.
pub const NAMES: [&str; 2] = ["orders", "invoices"];

/// What a client sent a request for.
#[derive(Debug, Clone)]
pub enum Sent {
    Create(String),
    Next,
    GiveBack,
    Change,
}

/// Numbers a client holds: an acknowledged segment, maybe cut short by a give-back.
#[derive(Debug, Clone, Copy)]
struct Held {
    end: u64,
    /// The term of the leader that acknowledged it.
    term: u64,
}

/// The clients, of the sequence issuer's service `X` (the real one, or one a test breaks on
/// purpose to see the invariants catch it).
#[derive(Debug)]
pub struct Clients<X = SequenceService> {
    clients: usize,
    /// Each client has at most one request out, until this time.
    in_flight: InFlight<Sent>,
    /// Sequences known to exist; segments are asked for once all of [`NAMES`] do.
    created: BTreeSet<String>,
    /// Held numbers per sequence: start -> end and term.
    held: BTreeMap<String, BTreeMap<u64, Held>>,
    /// Each client's last segment, whose tail it may hand back.
    last: BTreeMap<usize, Segment>,
    pub segments: u64,
    pub numbers: u64,
    pub given_back: u64,
    service: PhantomData<X>,
}

impl<X> Clients<X> {
    pub fn new(clients: usize) -> Clients<X> {
        Clients {
            clients,
            in_flight: InFlight::default(),
            created: BTreeSet::new(),
            held: BTreeMap::new(),
            last: BTreeMap::new(),
            segments: 0,
            numbers: 0,
            given_back: 0,
            service: PhantomData,
        }
    }

    /// The highest held number of `name` acknowledged in `term` or before.
    fn owed(&self, name: &str, term: u64) -> u64 {
        self.held.get(name).map_or(0, |h| {
            h.values()
                .filter(|held| held.term <= term)
                .map(|held| held.end)
                .max()
                .unwrap_or(0)
        })
    }

    /// Records an acknowledged segment; an overlap with a held one is the bug this hunts.
    fn hold(&mut self, from: SocketAddr, term: u64, s: &Segment) -> Checked {
        let held = self.held.entry(s.name.clone()).or_default();
        let before = held.range(..=s.end).next_back();
        if let Some((start, h)) = before
            && h.end >= s.start
        {
            return Err(format!(
                "{from} (term {term}) handed out {s}, overlapping the held segment [{start}, {}] acknowledged in term {}",
                h.end, h.term
            ));
        }
        held.insert(s.start, Held { end: s.end, term });
        Ok(())
    }

    /// Client `client` stops using the tail of its last segment from `from` on.
    fn release(&mut self, segment: &Segment, from: u64) {
        if let Some(h) = self
            .held
            .get_mut(&segment.name)
            .and_then(|h| h.get_mut(&segment.start))
        {
            if from == segment.start {
                self.held
                    .get_mut(&segment.name)
                    .map(|h| h.remove(&segment.start));
            } else {
                h.end = from - 1;
            }
        }
    }
}

impl<S, V, X> Workload<S, V> for Clients<X>
where
    S: Part<Sequences>,
    X: Service<S, Request = Request, Response = Response, Error = SequenceError>,
    V: Routes<S, X>,
{
    type Sent = Sent;

    fn in_flight(&mut self) -> &mut InFlight<Sent> {
        &mut self.in_flight
    }

    fn act(&mut self, cx: &mut dyn Context<V::Request>) -> Checked {
        let now = cx.now();
        for client in 0..self.clients {
            if self.in_flight.waiting(client, now) {
                continue;
            }
            let missing = NAMES.iter().find(|n| !self.created.contains(**n));
            let (request, sent) = if let Some(name) = missing {
                let create = Request::Create {
                    name: (*name).to_owned(),
                    start: None,
                    step: Some(10),
                    wall_ms: now,
                };
                (create, Sent::Create((*name).to_owned()))
            } else if let Some(last) = self.last.get(&client).cloned()
                && cx.chance(0.1)
            {
                // Uses part of its last segment and hands the rest back.
                self.last.remove(&client);
                let from = last.start + cx.below(last.count());
                self.release(&last, from);
                let tail = Segment {
                    start: from,
                    ..last
                };
                (Request::GiveBack(tail), Sent::GiveBack)
            } else if cx.chance(0.02) {
                let name = NAMES[cx.below(NAMES.len() as u64) as usize].to_owned();
                let step = Some(1 + cx.below(30));
                (
                    Request::Change {
                        name,
                        step,
                        start: None,
                    },
                    Sent::Change,
                )
            } else {
                let name = NAMES[cx.below(NAMES.len() as u64) as usize].to_owned();
                let count = cx.below(25);
                let next = Request::Next {
                    name,
                    count,
                    wall_ms: now,
                };
                (next, Sent::Next)
            };
            // Unanswered after a second, it asks again (a segment whose answer was
            // lost is burned, never handed out again).
            let request = <V as Routes<S, X>>::request(request);
            self.in_flight.send(cx, client, request, sent, 1_000);
        }
        Ok(())
    }

    fn answered(&mut self, cx: &mut dyn Context<V::Request>, a: Answer<S, V, Sent>) -> Checked {
        let (from, term, client, sent, reply) = (a.from, a.term, a.client, a.sent, a.reply);
        let all_created = self.created.len() == NAMES.len();
        let reply = match reply {
            Ok(r) => <V as Routes<S, X>>::response(r)
                .ok_or("a sequence request got another machine's answer")?,
            Err(ReplyError::Consensus(_)) => return Ok(()),
            Err(ReplyError::Machine(e)) => {
                return match (sent, <V as Routes<S, X>>::error(e)) {
                    // Created by a request whose answer was lost.
                    (Sent::Create(name), Some(SequenceError::Exists { .. })) => {
                        self.created.insert(name);
                        Ok(())
                    }
                    // A tail that is no longer the last segment's: it stays burned.
                    (Sent::GiveBack, Some(SequenceError::NotLast { .. })) => Ok(()),
                    (_, Some(SequenceError::Unknown(_))) if !all_created => Ok(()),
                    (_, e) => Err(format!("{from} refused a sequence request: {e:?}")),
                };
            }
        };
        match (sent, reply) {
            (Sent::Create(name), Response::Sequence(_)) => {
                self.created.insert(name);
                Ok(())
            }
            (Sent::Next, Response::Segment { segment, .. }) => {
                self.hold(from, term, &segment)?;
                self.segments += 1;
                self.numbers += segment.count();
                cx.note(format!(
                    "SEGMENT {segment} acknowledged by {from} in term {term}"
                ));
                self.last.insert(client, segment);
                Ok(())
            }
            (Sent::GiveBack, Response::GaveBack(_)) => {
                self.given_back += 1;
                Ok(())
            }
            (Sent::Change, Response::Sequence(_)) => Ok(()),
            (sent, reply) => Err(format!("{from} answered {sent:?} with {reply:?}")),
        }
    }

    fn check(&mut self, _now: Millis, replicas: &[View<'_, S, V>]) -> Checked {
        for v in replicas {
            let r = v.replica;
            if !r.is_leader() || !r.has_taken_over() {
                continue;
            }
            let term = r.election().term();
            for name in NAMES {
                let owed = self.owed(name, term);
                let max = r.state().part().get(name).map_or(0, |s| s.max);
                if max < owed {
                    return Err(format!(
                        "leader {} (term {term}) holds max {max} of `{name}`, below {owed} which was handed out and acknowledged",
                        v.addr
                    ));
                }
            }
        }
        Ok(())
    }

    fn probe(&mut self) -> V::Request {
        // Creating what exists untouched is answered with it: a retried probe is served too.
        <V as Routes<S, X>>::request(Request::Create {
            name: "probe".into(),
            start: None,
            step: None,
            wall_ms: 0,
        })
    }

    fn converged(&self, _now: Millis, replicas: &[View<'_, S, V>]) -> Checked {
        let first = replicas.first().map(|v| v.replica.state().part());
        for v in replicas {
            let sequences = v.replica.state().part();
            if Some(sequences) != first {
                return Err(format!(
                    "{} holds {sequences:?}, another beacon {first:?}",
                    v.addr
                ));
            }
            for name in NAMES {
                let owed = self.owed(name, u64::MAX);
                let max = sequences.get(name).map_or(0, |s| s.max);
                if max < owed {
                    return Err(format!(
                        "{} holds max {max} of `{name}`, below acknowledged {owed}",
                        v.addr
                    ));
                }
            }
        }
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("segments", self.segments),
            ("numbers", self.numbers),
            ("given_back", self.given_back),
        ]
    }
}
