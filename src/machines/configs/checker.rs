//! The config store's workload and invariants for the simulations.
//!
//! Clients increment counters kept in documents, by compare-and-set: read a counter's value
//! and revision through the leader, then write value + 1 if the document is still at that
//! revision, and start over when it is not. Checked:
//!
//! * a compare-and-set on an old revision changes nothing: no two acknowledged increments of
//!   a counter wrote the same value (two clients that read the same revision cannot both
//!   succeed);
//! * revisions only grow: a counter's acknowledged values and their revisions rise together;
//! * no acknowledged write is lost: a leader that has taken over holds each counter at a
//!   value at least every increment acknowledged in its term or before;
//! * once healed, every beacon holds the same documents.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::net::SocketAddr;

use super::service::{ConfigError, ConfigService, Request, Response};
use super::state::{ConfigStore, Op};
use crate::consensus::{ReplyError, Service};
use crate::machines::{Part, Routes};
use crate::sim::{Answer, Checked, Context, InFlight, View, Workload};
use crate::time::Millis;

/// The effective configuration of the service of type `node_type` at `addr`, as `store`
/// would list it to that service's watch.
fn effective_of(store: &ConfigStore, node_type: &str, addr: &str) -> super::client::Effective {
    let docs: Vec<_> = store
        .with_prefix("")
        .map(|d| super::wire::document_to_pb(d, false))
        .collect();
    let service = crate::pb::configs::ServiceScope {
        node_type: node_type.to_owned(),
        addr: addr.to_owned(),
        node_id: 0,
    };
    super::client::Effective::of(&docs, &service)
}

/// The counters the clients increment.
pub const KEYS: [&str; 2] = ["cluster/counter-a", "type/LOGIC/counter-b"];

/// What a client sent a request for.
#[derive(Debug, Clone)]
pub enum Sent {
    Read(&'static str),
    /// An increment of the key to this value.
    Write(&'static str, u64),
}

/// An acknowledged increment: its revision and the term of the leader that acknowledged it.
#[derive(Debug, Clone, Copy)]
struct Acked {
    revision: u64,
    term: u64,
}

/// The clients, of the config store's service `X` (the real one, or one a test breaks on
/// purpose to see the invariants catch it).
#[derive(Debug)]
pub struct Clients<X = ConfigService> {
    clients: usize,
    in_flight: InFlight<Sent>,
    /// What each client read last: key, value, revision; it writes on that.
    read: BTreeMap<usize, (&'static str, u64, u64)>,
    /// Acknowledged increments per key: value -> revision and term.
    acked: BTreeMap<&'static str, BTreeMap<u64, Acked>>,
    pub increments: u64,
    pub conflicts: u64,
    service: PhantomData<X>,
}

impl<X> Clients<X> {
    pub fn new(clients: usize) -> Clients<X> {
        Clients {
            clients,
            in_flight: InFlight::default(),
            read: BTreeMap::new(),
            acked: BTreeMap::new(),
            increments: 0,
            conflicts: 0,
            service: PhantomData,
        }
    }

    /// The highest value of `key` acknowledged in `term` or before.
    fn owed(&self, key: &str, term: u64) -> u64 {
        self.acked.get(key).map_or(0, |a| {
            a.iter()
                .filter(|(_, acked)| acked.term <= term)
                .map(|(v, _)| *v)
                .max()
                .unwrap_or(0)
        })
    }

    /// Records an acknowledged increment; the same value twice, or values and revisions
    /// that do not rise together, is what this hunts.
    fn ack(&mut self, from: SocketAddr, key: &'static str, value: u64, a: Acked) -> Checked {
        let acked = self.acked.entry(key).or_default();
        if let Some(other) = acked.get(&value) {
            return Err(format!(
                "{from} (term {}) acknowledged `{key}` = {value} at revision {}, a value already acknowledged at revision {} in term {}: an increment was lost",
                a.term, a.revision, other.revision, other.term
            ));
        }
        let below = acked.range(..value).next_back();
        let above = acked.range(value + 1..).next();
        if below.is_some_and(|(_, b)| b.revision >= a.revision)
            || above.is_some_and(|(_, b)| b.revision <= a.revision)
        {
            return Err(format!(
                "{from} acknowledged `{key}` = {value} at revision {}, out of order with the values around it: {below:?}, {above:?}",
                a.revision
            ));
        }
        acked.insert(value, a);
        Ok(())
    }
}

/// A counter's value as the document holds it.
fn value_of(bytes: Option<&[u8]>) -> Result<u64, String> {
    match bytes {
        None => Ok(0),
        Some(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| format!("a counter holds {b:?}, not a number")),
    }
}

impl<S, V, X> Workload<S, V> for Clients<X>
where
    S: Part<ConfigStore>,
    X: Service<S, Request = Request, Response = Response, Error = ConfigError>,
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
            let (request, sent) = match self.read.remove(&client) {
                Some((key, value, revision)) => (
                    Request::Write {
                        checks: vec![(key.to_owned(), revision)],
                        ops: vec![Op::Put {
                            key: key.to_owned(),
                            value: (value + 1).to_string().into_bytes(),
                            json: false,
                            path: String::new(),
                        }],
                        wall_ms: now,
                    },
                    Sent::Write(key, value + 1),
                ),
                None => {
                    let key = KEYS[cx.below(KEYS.len() as u64) as usize];
                    (
                        Request::Read {
                            key: key.to_owned(),
                        },
                        Sent::Read(key),
                    )
                }
            };
            // Unanswered after a second, it reads again (a write whose answer was lost
            // may have applied: its retry would then fail its check, never apply twice).
            let request = <V as Routes<S, X>>::request(request);
            self.in_flight.send(cx, client, request, sent, 1_000);
        }
        Ok(())
    }

    fn answered(&mut self, _cx: &mut dyn Context<V::Request>, a: Answer<S, V, Sent>) -> Checked {
        let (from, term, client, sent, reply) = (a.from, a.term, a.client, a.sent, a.reply);
        let reply = match reply {
            Ok(r) => <V as Routes<S, X>>::response(r)
                .ok_or("a config request got another machine's answer")?,
            Err(ReplyError::Consensus(_)) => return Ok(()),
            Err(ReplyError::Machine(e)) => {
                return match (sent, <V as Routes<S, X>>::error(e)) {
                    (Sent::Write(..), Some(ConfigError::RevisionMismatch { .. })) => {
                        self.conflicts += 1;
                        Ok(())
                    }
                    (_, e) => Err(format!("{from} refused a config request: {e:?}")),
                };
            }
        };
        match (sent, reply) {
            (Sent::Read(key), Response::Read { value, revision }) => {
                let value = value_of(value.as_deref())?;
                self.read.insert(client, (key, value, revision));
                Ok(())
            }
            (Sent::Write(key, value), Response::Written { revision, .. }) => {
                self.increments += 1;
                self.ack(from, key, value, Acked { revision, term })
            }
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
            let store: &ConfigStore = r.state().part();
            for key in KEYS {
                let owed = self.owed(key, term);
                let held = value_of(store.get(key).map(|d| d.value.as_slice()))?;
                if held < owed {
                    return Err(format!(
                        "leader {} (term {term}) holds `{key}` = {held}, below {owed} which was acknowledged",
                        v.addr
                    ));
                }
            }
        }
        Ok(())
    }

    fn probe(&mut self) -> V::Request {
        <V as Routes<S, X>>::request(Request::Write {
            checks: Vec::new(),
            ops: vec![Op::Put {
                key: "cluster/probe".into(),
                value: b"1".to_vec(),
                json: false,
                path: String::new(),
            }],
            wall_ms: 0,
        })
    }

    fn converged(&self, _now: Millis, replicas: &[View<'_, S, V>]) -> Checked {
        let first: Option<&ConfigStore> = replicas.first().map(|v| v.replica.state().part());
        let docs = |s: &ConfigStore| crate::consensus::Machine::snapshot(s, 0);
        for v in replicas {
            let store: &ConfigStore = v.replica.state().part();
            if first.map(docs) != Some(docs(store)) {
                return Err(format!(
                    "{} holds {:?}, another beacon {:?}",
                    v.addr,
                    docs(store),
                    first.map(docs)
                ));
            }
            for key in KEYS {
                let owed = self.owed(key, u64::MAX);
                let held = value_of(store.get(key).map(|d| d.value.as_slice()))?;
                if held < owed {
                    return Err(format!(
                        "{} holds `{key}` = {held}, below acknowledged {owed}",
                        v.addr
                    ));
                }
            }
            // A LOGIC service that reads its configuration at this beacon gets every
            // counter at its latest acknowledged value or later (the cluster's and its type's).
            let effective = effective_of(store, "LOGIC", "10.0.0.1:80");
            for (key, name) in KEYS.iter().zip(["counter-a", "counter-b"]) {
                let owed = self.owed(key, u64::MAX);
                let held = value_of(effective.get(name))?;
                if held < owed {
                    return Err(format!(
                        "a LOGIC service reading at {} is configured with {name} = {held}, below acknowledged {owed}",
                        v.addr
                    ));
                }
            }
        }
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("increments", self.increments),
            ("conflicts", self.conflicts),
        ]
    }
}
