//! Task queues' workload and invariants for the simulations.
//!
//! A submitter submits tasks by a few names (so the dedupe is exercised), some delayed,
//! and now and then cancels one or requeues the dead letters; workers register, serve the
//! queue, report to keep their leases, complete (or fail) the tasks started on them, and
//! now and then die and come back as new registrations. A worker learns of its tasks from
//! the committed state of the beacon it last heard from (the real worker hears of them
//! over its stream, pushed from the same commits). Checked on every replica after every
//! step, in its committed states:
//!
//! * a task's running attempts follow one another with rising tokens: a new attempt never
//!   starts while another runs, and a token never goes back;
//! * a completed task's result never changes;
//! * every completion the cluster acknowledged is the only one of its task's submission
//!   (exactly-once completion), and every acknowledged submit is still there, once healed,
//!   unless a later submit of its name replaced it after it finished;
//! * once healed and quiet, every beacon holds the same tasks, and no task runs on a
//!   registration that has ended.

use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;
use std::net::SocketAddr;

use super::service::{Request as TaskRequest, Response as TaskResponse, TaskError};
use super::state::{Task, TaskState, Tasks};
use crate::consensus::{ReplyError, Service};
use crate::machines::registry::{
    FencingToken, NodeId, Registry, RegistryService,
    lives::{Lives, Turn, Worker},
};
use crate::machines::{Part, Routes};
use crate::sim::{Answer, Checked, Committed, Context, InFlight, View, Workload};
use crate::time::Millis;

/// Task names the submitter uses.
const NAMES: u64 = 12;
/// Client index of the submitter; workers are the others.
const SUBMITTER: usize = 0;
const QUEUE: &str = "q";

/// What a replica showed of a task: its submission, running attempt and result.
type TaskSeen = (u64, Option<FencingToken>, Option<Vec<u8>>);

/// What a client sent a request for.
#[derive(Debug, Clone)]
pub enum Sent {
    Register(SocketAddr),
    Report,
    Serve,
    Submit,
    Admin,
    /// A completion of (name, attempt token).
    Complete(String, FencingToken),
    Fail,
}

/// The clients of the task service `X` (the real one, or one a test breaks on purpose).
#[derive(Debug)]
pub struct Clients<X = super::TaskService> {
    clients: usize,
    lives: Lives,
    /// The workers whose current life serves the queue.
    served: BTreeSet<usize>,
    in_flight: InFlight<Sent>,
    /// Attempts each registration runs, as the last committed state a worker heard of showed
    /// them: (name, token) -> when it was first seen.
    running: BTreeMap<(NodeId, FencingToken), BTreeMap<(String, FencingToken), Millis>>,
    /// Reported attempts (not reported again).
    reported: BTreeMap<(String, FencingToken), ()>,
    /// Per replica, per task: (submission, running token, result).
    seen: Committed<BTreeMap<String, TaskSeen>>,
    /// Acknowledged submits: name -> the submission (its seq) acknowledged last.
    submitted: BTreeMap<String, u64>,
    /// Acknowledged completions: (name, submission) -> the attempt.
    completions: BTreeMap<(String, u64), FencingToken>,
    pub starts: u64,
    pub completed: u64,
    pub registrations: u64,
    pub submits: u64,
    service: PhantomData<X>,
}

impl<X> Clients<X> {
    pub fn new(clients: usize) -> Clients<X> {
        Clients {
            clients: clients.max(2),
            lives: Lives::new("WORKER", 8),
            served: BTreeSet::new(),
            in_flight: InFlight::default(),
            running: BTreeMap::new(),
            reported: BTreeMap::new(),
            seen: Committed::default(),
            submitted: BTreeMap::new(),
            completions: BTreeMap::new(),
            starts: 0,
            completed: 0,
            registrations: 0,
            submits: 0,
            service: PhantomData,
        }
    }

    /// The clients this workload uses (the submitter and at least one worker).
    pub fn clients(&self) -> usize {
        self.clients
    }
}

fn result_of(task: &Task) -> Option<Vec<u8>> {
    match &task.state {
        TaskState::Completed(r) => Some(r.clone()),
        _ => None,
    }
}

impl<S, V, X> Workload<S, V> for Clients<X>
where
    S: Part<Registry> + Part<Tasks>,
    X: Service<S, Request = TaskRequest, Response = TaskResponse, Error = TaskError>,
    V: Routes<S, RegistryService> + Routes<S, X>,
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
            let (request, sent) = if client == SUBMITTER {
                let name = format!("t{}", cx.below(NAMES));
                let request = if cx.chance(0.03) {
                    TaskRequest::CreateQueue {
                        name: QUEUE.into(),
                        timeout_ms: Some(1_500),
                        max_attempts: Some(4),
                        wall_ms: now,
                    }
                } else if cx.chance(0.03) {
                    TaskRequest::Cancel {
                        queue: QUEUE.into(),
                        name,
                        wall_ms: now,
                    }
                } else if cx.chance(0.03) {
                    TaskRequest::Requeue {
                        queue: QUEUE.into(),
                        names: Vec::new(),
                    }
                } else {
                    TaskRequest::Submit {
                        queue: QUEUE.into(),
                        payload: name.clone().into_bytes(),
                        name,
                        priority: cx.below(3) as i32,
                        timeout_ms: None,
                        max_attempts: None,
                        delay_ms: if cx.chance(0.2) { cx.below(1_000) } else { 0 },
                        submit_id: 0,
                        wall_ms: now,
                    }
                };
                let sent = match request {
                    TaskRequest::Submit { .. } => Sent::Submit,
                    _ => Sent::Admin,
                };
                (<V as Routes<S, X>>::request(request), sent)
            } else {
                match self.lives.turn(client, cx) {
                    Turn::Register(addr, request) => (
                        <V as Routes<S, RegistryService>>::request(request),
                        Sent::Register(addr),
                    ),
                    Turn::Up(worker) => {
                        let Worker { id, token, .. } = worker;
                        // Report first when due, then serve, then finish what has run a while.
                        let due = self.running.get(&(id, token)).and_then(|m| {
                            m.iter()
                                .find(|(k, since)| {
                                    now >= **since + 100 && !self.reported.contains_key(*k)
                                })
                                .map(|(k, _)| k.clone())
                        });
                        if worker.report_due(now) {
                            let request = self.lives.report(client, worker, now);
                            (
                                <V as Routes<S, RegistryService>>::request(request),
                                Sent::Report,
                            )
                        } else if !self.served.contains(&client) {
                            let request = TaskRequest::Serve {
                                worker: (id, token),
                                queues: vec![QUEUE.into()],
                                capacity: 2,
                                wall_ms: now,
                            };
                            (<V as Routes<S, X>>::request(request), Sent::Serve)
                        } else if let Some((name, attempt)) = due {
                            self.reported.insert((name.clone(), attempt), ());
                            if cx.chance(0.1) {
                                let request = TaskRequest::Fail {
                                    queue: QUEUE.into(),
                                    name,
                                    token: attempt,
                                    error: "drawn".into(),
                                    retry: true,
                                    wall_ms: now,
                                };
                                (<V as Routes<S, X>>::request(request), Sent::Fail)
                            } else {
                                let request = TaskRequest::Complete {
                                    queue: QUEUE.into(),
                                    result: format!("{name}@{attempt}").into_bytes(),
                                    name: name.clone(),
                                    token: attempt,
                                    wall_ms: now,
                                };
                                (
                                    <V as Routes<S, X>>::request(request),
                                    Sent::Complete(name, attempt),
                                )
                            }
                        } else {
                            continue;
                        }
                    }
                    Turn::Idle => continue,
                }
            };
            self.in_flight.send(cx, client, request, sent, 300);
        }
        Ok(())
    }

    fn answered(&mut self, cx: &mut dyn Context<V::Request>, a: Answer<S, V, Sent>) -> Checked {
        let (client, sent, reply) = (a.client, a.sent, a.reply);
        let now = cx.now();
        // A refusal of the core (not the leader, leadership lost) says nothing of the
        // request: it may or may not take effect.
        let answer = match reply {
            Ok(r) => Ok(r),
            Err(ReplyError::Consensus(_)) => Err(None),
            Err(ReplyError::Machine(e)) => Err(Some(e)),
        };
        match sent {
            Sent::Register(addr) => {
                let registered = answer
                    .ok()
                    .and_then(<V as Routes<S, RegistryService>>::response);
                if self.lives.registered(client, addr, registered, now) {
                    self.registrations += 1;
                    self.served.remove(&client);
                }
            }
            Sent::Report => {
                if matches!(answer, Err(Some(_))) {
                    self.lives.lost(client, now);
                }
            }
            Sent::Serve => {
                if answer.is_ok() && self.lives.is_up(client) {
                    self.served.insert(client);
                }
            }
            Sent::Submit => {
                if let Some(TaskResponse::Task(t)) =
                    answer.ok().and_then(<V as Routes<S, X>>::response)
                {
                    self.submits += 1;
                    let last = self.submitted.entry(t.name.clone()).or_insert(0);
                    *last = (*last).max(t.seq);
                }
            }
            Sent::Complete(name, attempt) => {
                if let Ok(r) = answer
                    && let Some(TaskResponse::Task(t)) = <V as Routes<S, X>>::response(r)
                {
                    self.completed += 1;
                    if let Some(other) = self.completions.insert((name.clone(), t.seq), attempt)
                        && other != attempt
                    {
                        return Err(format!(
                            "task {name} (submission {}) had completions of attempts {other} and {attempt} acknowledged",
                            t.seq
                        ));
                    }
                }
            }
            Sent::Fail | Sent::Admin => {}
        }
        Ok(())
    }

    fn check(&mut self, now: Millis, replicas: &[View<'_, S, V>]) -> Checked {
        for v in replicas {
            let Some(seen) = self.seen.of(v) else {
                continue;
            };
            let state = v.replica.state();
            let tasks: &Tasks = state.part();
            let Some(q) = tasks.queue(QUEUE) else {
                continue;
            };
            let mut now_seen = BTreeMap::new();
            for t in q.tasks() {
                let running = t.running().map(|r| r.token);
                let result = result_of(t);
                if let Some((seq, old_running, old_result)) = seen.get(&t.name)
                    && *seq == t.seq
                {
                    if let (Some(a), Some(b)) = (old_running, running)
                        && b < *a
                    {
                        return Err(format!(
                            "{}: task {} runs under token {b}, below the {a} it ran under",
                            v.addr, t.name
                        ));
                    }
                    if old_result.is_some() && *old_result != result {
                        return Err(format!(
                            "{}: task {} had result {:?}, now {:?}",
                            v.addr, t.name, old_result, result
                        ));
                    }
                }
                if let Some(run) = t.running() {
                    let m = self.running.entry(run.worker).or_default();
                    if let std::collections::btree_map::Entry::Vacant(e) =
                        m.entry((t.name.clone(), run.token))
                    {
                        e.insert(now);
                        self.starts += 1;
                    }
                }
                now_seen.insert(t.name.clone(), (t.seq, running, result));
            }
            *seen = now_seen;
        }
        Ok(())
    }

    fn probe(&mut self) -> V::Request {
        <V as Routes<S, X>>::request(TaskRequest::CreateQueue {
            name: "probe".into(),
            timeout_ms: None,
            max_attempts: None,
            wall_ms: 0,
        })
    }

    fn converged(&self, _now: Millis, replicas: &[View<'_, S, V>]) -> Checked {
        let first = replicas.first().map(|v| {
            let t: &Tasks = v.replica.state().part();
            t
        });
        for v in replicas {
            let tasks: &Tasks = v.replica.state().part();
            if Some(tasks) != first {
                return Err(format!(
                    "{} holds {}, another beacon {}",
                    v.addr,
                    crate::consensus::Machine::summary(tasks),
                    first
                        .map(crate::consensus::Machine::summary)
                        .unwrap_or_default()
                ));
            }
            if !v.replica.is_leader() {
                continue;
            }
            let registry: &Registry = v.replica.state().part();
            for q in tasks.queues() {
                for t in q.tasks() {
                    if let Some(run) = t.running()
                        && !registry.is_live(run.worker.0, run.worker.1)
                    {
                        return Err(format!(
                            "leader {}: task {} runs on node {} whose registration has ended",
                            v.addr, t.name, run.worker.0
                        ));
                    }
                }
            }
            for (name, seq) in &self.submitted {
                let kept = tasks.task(QUEUE, name).is_some_and(|t| t.seq >= *seq);
                if !kept {
                    return Err(format!(
                        "leader {}: the acknowledged submit of task {name} (submission {seq}) is lost",
                        v.addr
                    ));
                }
            }
        }
        Ok(())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("starts", self.starts),
            ("completed", self.completed),
            ("registrations", self.registrations),
            ("submits", self.submits),
        ]
    }
}
