//! The counter's workload and invariants: clients add 1 and read. Every acknowledged add
//! returns a value no other acknowledged add returned (each applied add raises the counter
//! once, so two equal answers mean an add acknowledged twice or a value lost); a read never
//! shows less than an add acknowledged before it was sent; a leader that has taken over
//! holds every value acknowledged in its term or before.

use std::collections::BTreeMap;

use beacon::consensus::{Reply, ReplyError};
use beacon::machines::{Part, Routes};
use beacon::sim::{Answer, Checked, Context, InFlight, View, Workload};
use beacon::time::Millis;

use super::service::{CounterService, Request, Response};
use super::state::Counter;

/// A client's request in flight, and the highest value acknowledged when it was sent.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    read: bool,
    floor: u64,
}

#[derive(Debug, Default)]
pub struct Clients {
    clients: usize,
    /// The clients' requests, one each at most.
    in_flight: InFlight<Pending>,
    /// Acknowledged values, with the term of the leader that acknowledged each: every
    /// leader of that term or a later one holds it.
    acked: BTreeMap<u64, u64>,
    pub adds: u64,
    pub reads: u64,
}

impl Clients {
    pub fn new(clients: usize) -> Clients {
        Clients {
            clients,
            ..Clients::default()
        }
    }

    fn highest(&self) -> u64 {
        self.acked.keys().last().copied().unwrap_or(0)
    }
}

fn value<S: Part<Counter>, V: Routes<S, CounterService>>(reply: &Reply<S, V>) -> Option<u64> {
    match reply {
        Ok(r) => V::response(r.clone()).map(|Response::Value(v)| v),
        Err(_) => None,
    }
}

impl<S, V> Workload<S, V> for Clients
where
    S: Part<Counter>,
    V: Routes<S, CounterService>,
{
    type Sent = Pending;

    fn in_flight(&mut self) -> &mut InFlight<Pending> {
        &mut self.in_flight
    }

    fn act(&mut self, cx: &mut dyn Context<V::Request>) -> Checked {
        let now = cx.now();
        for client in 0..self.clients {
            if self.in_flight.waiting(client, now) {
                continue;
            }
            let read = cx.chance(0.3);
            let request = if read { Request::Read } else { Request::Add(1) };
            let floor = self.highest();
            // Unanswered after a second, it asks again.
            let request = <V as Routes<S, CounterService>>::request(request);
            let pending = Pending { read, floor };
            self.in_flight.send(cx, client, request, pending, 1_000);
        }
        Ok(())
    }

    fn answered(&mut self, cx: &mut dyn Context<V::Request>, a: Answer<S, V, Pending>) -> Checked {
        let (from, term, p, reply) = (a.from, a.term, a.sent, a.reply);
        let Some(v) = value::<S, V>(&reply) else {
            if let Err(ReplyError::Machine(e)) = &reply {
                return Err(format!("{from} refused a counter request: {e:?}"));
            }
            return Ok(());
        };
        if v < p.floor {
            return Err(format!(
                "{from} answered {v}, below {} which was acknowledged before the request was sent",
                p.floor
            ));
        }
        if p.read {
            self.reads += 1;
        } else {
            self.adds += 1;
            if self.acked.insert(v, term).is_some() {
                return Err(format!("{from} acknowledged value {v} to a second add"));
            }
            cx.note(format!("ADD acknowledged at {v} by {from}"));
        }
        Ok(())
    }

    fn check(&mut self, _now: Millis, replicas: &[View<'_, S, V>]) -> Checked {
        for v in replicas {
            let r = v.replica;
            if !r.is_leader() || !r.has_taken_over() {
                continue;
            }
            let term = r.election().term();
            // A leader of an older term that does not know yet it was deposed may lack
            // what a later one acknowledged.
            let owed = self
                .acked
                .iter()
                .filter(|(_, t)| **t <= term)
                .map(|(value, _)| *value)
                .max()
                .unwrap_or(0);
            if r.state().part().value < owed {
                return Err(format!(
                    "leader {} (term {term}) holds {} but {owed} was acknowledged",
                    v.addr,
                    r.state().part().value
                ));
            }
        }
        Ok(())
    }

    fn probe(&mut self) -> V::Request {
        <V as Routes<S, CounterService>>::request(Request::Add(1))
    }

    fn converged(&self, _now: Millis, replicas: &[View<'_, S, V>]) -> Checked {
        // Every beacon has caught up: all hold one value, at least every acknowledged one.
        let highest = self.highest();
        let first = replicas.first().map(|v| v.replica.state().part().value);
        for v in replicas {
            let value = v.replica.state().part().value;
            if Some(value) != first {
                return Err(format!(
                    "{} holds {value}, another beacon {first:?}",
                    v.addr
                ));
            }
            if value < highest {
                return Err(format!(
                    "{} holds {value}, below acknowledged {highest}",
                    v.addr
                ));
            }
        }
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("adds", self.adds), ("reads", self.reads)]
    }
}
