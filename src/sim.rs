//! What a machine brings to the simulations: a [`Workload`] of clients that send it requests,
//! judge every answer against what they were told before, and check invariants over every
//! replica after every step.
//!
//! The harness that runs a workload (a simulated network with loss, delay, one-way cuts,
//! rings and bridges; the real storage code on an in-memory disk that tears writes; crashes,
//! restarts and pauses) lives in the testkit and names no machine, as the consensus core
//! names none. Each machine keeps its workload in its own folder (`checker.rs`), beside the
//! state it checks.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::consensus::{Leader, Machine, Outcome, Replica, Reply, ReplyError, Service, Token};
use crate::time::Millis;

/// The outcome of a check: `Err` says what broke, for the failing seed's report.
pub type Checked = Result<(), String>;

/// What the harness offers a workload while it acts: the time, the seeded random source,
/// the network to the beacons, and the trace.
pub trait Context<R> {
    fn now(&self) -> Millis;
    /// Uniform in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: u64) -> u64;
    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool;
    /// Sends `request` from client `client` to the beacon it last found leading (or to any
    /// running one). Its token, or `None` when no beacon runs. The request may be lost, late,
    /// or held back for seconds; its answer comes to [`Workload::answered`].
    fn send(&mut self, client: usize, request: R) -> Option<Token>;
    /// A line for the trace of a failing seed.
    fn note(&mut self, what: String);
}

/// A workload's requests in flight: each with its client and what it was sent for, and until
/// when each client waits for its answer before it acts again (an answer may be lost).
#[derive(Debug)]
pub struct InFlight<T> {
    pending: BTreeMap<Token, (usize, T)>,
    busy: BTreeMap<usize, Millis>,
}

impl<T> Default for InFlight<T> {
    fn default() -> Self {
        InFlight {
            pending: BTreeMap::new(),
            busy: BTreeMap::new(),
        }
    }
}

impl<T> InFlight<T> {
    /// Whether `client` still waits for an answer at `now`.
    pub fn waiting(&self, client: usize, now: Millis) -> bool {
        self.busy.get(&client).is_some_and(|until| now < *until)
    }

    /// Sends `request` from `client`, sent for `what`; the client waits for its answer
    /// `wait_ms` at most. Its token, if it went (no beacon runs: it did not).
    pub fn send<R>(
        &mut self,
        cx: &mut dyn Context<R>,
        client: usize,
        request: R,
        what: T,
        wait_ms: u64,
    ) -> Option<Token> {
        let token = cx.send(client, request)?;
        self.pending.insert(token, (client, what));
        self.busy.insert(client, cx.now() + wait_ms);
        Some(token)
    }

    /// The answer to `token` came: its client and what it was sent for (`None`: another
    /// workload's, or answered already). The client acts again.
    pub fn answered(&mut self, token: Token) -> Option<(usize, T)> {
        let (client, what) = self.pending.remove(&token)?;
        self.busy.remove(&client);
        Some((client, what))
    }
}

/// What a workload last saw on each replica, kept only from committed states: a replica's
/// state may hold entries a later leader overwrites, while its committed states are prefixes
/// of one history, so only those are compared over time. A replica that went back
/// (restarted, or its unstored tail cut) starts over from `T::default()`.
#[derive(Debug)]
pub struct Committed<T> {
    /// Per replica: the applied index it was seen at, and what was seen.
    seen: BTreeMap<SocketAddr, (u64, T)>,
}

impl<T> Default for Committed<T> {
    fn default() -> Self {
        Committed {
            seen: BTreeMap::new(),
        }
    }
}

impl<T: Default> Committed<T> {
    /// What was seen on `v` before, to compare its state now with and to update; `None`
    /// while `v`'s state holds entries not yet committed.
    pub fn of<S: Machine, V: Service<S>>(&mut self, v: &View<'_, S, V>) -> Option<&mut T> {
        let index = v.replica.applied().index;
        if v.replica.commit() < index {
            return None;
        }
        let (floor, seen) = self
            .seen
            .entry(v.addr)
            .or_insert_with(|| (index, T::default()));
        if index < *floor {
            *seen = T::default();
        }
        *floor = index;
        Some(seen)
    }
}

/// An answer to one of a workload's requests: who gave it and in which term, and which
/// client had sent the request, for what.
pub struct Answer<S: Machine, V: Service<S>, T> {
    pub from: SocketAddr,
    pub term: u64,
    pub token: Token,
    pub client: usize,
    pub sent: T,
    pub reply: Reply<S, V>,
}

/// One running replica, as a workload checks it.
pub struct View<'a, S: Machine, V: Service<S>> {
    pub addr: SocketAddr,
    pub replica: &'a Replica<S, V>,
}

/// How a settled leader answered the probe after the faults healed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// Served: the cluster works again.
    Served,
    /// A refusal a client rides out by asking again (the core's refusals always are).
    Retry,
    /// A refusal that must not happen once the faults are gone.
    Refused,
}

/// A machine's clients and invariants, for the simulations.
pub trait Workload<S: Machine, V: Service<S>> {
    /// What a client sent a request for, kept with it until its answer comes.
    type Sent;
    /// The requests its clients wait on: sent with [`InFlight::send`], each answer is given
    /// to [`Workload::answered`] with what it was sent for.
    fn in_flight(&mut self) -> &mut InFlight<Self::Sent>;
    /// The clients act at `cx.now()`: start requests, retry them, give up.
    fn act(&mut self, cx: &mut dyn Context<V::Request>) -> Checked;
    /// A beacon answered one of the clients' requests.
    fn answered(
        &mut self,
        cx: &mut dyn Context<V::Request>,
        a: Answer<S, V, Self::Sent>,
    ) -> Checked;
    /// Beacon `from`, in `term`, answered request `token`: to [`Workload::answered`] if it is
    /// one the clients wait on (not one answered already).
    fn deliver(
        &mut self,
        cx: &mut dyn Context<V::Request>,
        from: SocketAddr,
        term: u64,
        token: Token,
        reply: Reply<S, V>,
    ) -> Checked {
        let Some((client, sent)) = self.in_flight().answered(token) else {
            return Ok(());
        };
        let answer = Answer {
            from,
            term,
            token,
            client,
            sent,
            reply,
        };
        self.answered(cx, answer)
    }
    /// The invariants over every running replica, after every step.
    fn check(&mut self, now: Millis, replicas: &[View<'_, S, V>]) -> Checked;
    /// A request the one settled leader must serve once the faults heal.
    fn probe(&mut self) -> V::Request;
    /// Whether `reply` to the probe is service, or a refusal to retry or to fail on. By
    /// default: any answer is service, the core's refusals are retried, the machine's fail.
    fn probe_answer(&self, reply: &Reply<S, V>) -> Probe {
        match reply {
            Ok(_) => Probe::Served,
            Err(ReplyError::Consensus(_)) => Probe::Retry,
            Err(ReplyError::Machine(_)) => Probe::Refused,
        }
    }
    /// Once settled and probed: every replica agrees with what the clients rightly believe.
    fn converged(&self, now: Millis, replicas: &[View<'_, S, V>]) -> Checked;
    /// Counters for the summary line, and for asserting that the clients got through.
    fn counters(&self) -> Vec<(&'static str, u64)>;
}

/// What service `V` answers a request with.
pub type OutcomeOf<S, V> =
    Outcome<<V as Service<S>>::Response, <V as Service<S>>::Error, <V as Service<S>>::Waiting>;

/// How a broken service differs from the real service `V` it wraps (see [`Broken`]): by
/// default in nothing.
pub trait Fault<S: Machine, V: Service<S>> {
    /// A request: by default `service`'s own answer.
    fn request(
        &mut self,
        service: &mut V,
        leader: &mut Leader<'_, S>,
        request: V::Request,
    ) -> OutcomeOf<S, V> {
        service.request(leader, request)
    }

    /// A tick: by default `service`'s own.
    fn tick(&mut self, service: &mut V, leader: &mut Leader<'_, S>) {
        service.tick(leader)
    }
}

/// Service `V` broken in one place by fault `F`, and itself everywhere else: the
/// simulations show their invariants catch a machine's fault by composing one of these in
/// its service's place.
#[derive(Debug, Clone, Default)]
pub struct Broken<V, F> {
    pub service: V,
    pub fault: F,
}

impl<S: Machine, V: Service<S>, F: Fault<S, V>> Service<S> for Broken<V, F> {
    type Request = V::Request;
    type Response = V::Response;
    type Error = V::Error;
    type Waiting = V::Waiting;

    fn lead(&mut self, state: &S, now: Millis, renewals: crate::consensus::Knowledge) {
        self.service.lead(state, now, renewals)
    }
    fn step_down(&mut self) {
        self.service.step_down()
    }
    fn hear_renewals(&mut self, keys: &[u64], now: Millis) {
        self.service.hear_renewals(keys, now)
    }
    fn install_renewals(&mut self, table: &crate::consensus::RenewalTable, now: Millis) {
        self.service.install_renewals(table, now)
    }
    fn follow_tick(&mut self, now: Millis) {
        self.service.follow_tick(now)
    }
    fn renewal_table(&self, state: &S, now: Millis) -> crate::consensus::RenewalTable {
        self.service.renewal_table(state, now)
    }
    fn request(
        &mut self,
        leader: &mut Leader<'_, S>,
        request: V::Request,
    ) -> Outcome<V::Response, V::Error, V::Waiting> {
        self.fault.request(&mut self.service, leader, request)
    }
    fn tick(&mut self, leader: &mut Leader<'_, S>) {
        self.fault.tick(&mut self.service, leader)
    }
    fn answer(&self, state: &S, waiting: V::Waiting) -> Result<V::Response, V::Error> {
        self.service.answer(state, waiting)
    }
}
