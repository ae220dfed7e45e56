//! Allocation throughput and latency: C clients, each with its own connection to the leader,
//! allocate IDs back to back for a fixed time; every ID is checked for uniqueness.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use super::clients::Allocator;
use super::systems::Kind;

/// What one run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Throughput {
    pub clients: usize,
    pub ok: usize,
    pub errors: usize,
    pub duplicates: usize,
    pub per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub first_error: Option<String>,
    /// How far the leader's term moved during the run (0: no election); `None` when it
    /// could not be read.
    pub term_moves: Option<u64>,
}

pub fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1000.0
}

/// Runs `clients` allocators against `endpoints` for `duration`.
pub async fn run(
    kind: Kind,
    via: super::systems::Via,
    endpoints: &[SocketAddr],
    beacon: &beacon::client::ConnectOptions,
    clients: usize,
    duration: Duration,
    next: &Arc<AtomicUsize>,
) -> anyhow::Result<Throughput> {
    let conns = connect(kind, via, endpoints, beacon, clients, next).await?;
    let mut calls = Calls::default();
    spell(conns, duration, &mut calls).await?;
    Ok(calls.throughput(clients))
}

/// `clients` allocators of `kind` through `via`, each with its own connection.
pub async fn connect(
    kind: Kind,
    via: super::systems::Via,
    endpoints: &[SocketAddr],
    beacon: &beacon::client::ConnectOptions,
    clients: usize,
    next: &Arc<AtomicUsize>,
) -> anyhow::Result<Vec<Allocator>> {
    let mut conns = Vec::new();
    for _ in 0..clients {
        conns.push(
            Allocator::connect(
                kind,
                via,
                endpoints,
                beacon,
                Duration::from_secs(5),
                next.clone(),
            )
            .await
            .with_context(|| format!("connect a {kind} client"))?,
        );
    }
    Ok(conns)
}

/// How long one set of clients calls before another takes its turn, where a part measures
/// several by turns (two APIs, four kinds of read): on this shared machine a load that
/// comes and goes then weighs on each alike, where measured one after the other it moved
/// their ratio by a third from one run to the next.
pub const TURN: Duration = Duration::from_millis(500);

/// How many rounds of turns give each set of clients at least `duration` (one at least).
pub fn rounds_of_turns(duration: Duration) -> usize {
    duration.as_millis().div_ceil(TURN.as_millis()).max(1) as usize
}

/// A client that makes one call at a time: an allocation, a renewal, a read.
pub trait Caller: Send + 'static {
    /// One call, and the ID it allocated (0 where a call allocates none).
    fn call(&mut self) -> impl Future<Output = anyhow::Result<u64>> + Send;
}

/// A call's `result` as a [`Caller`] gives it, once `pause` has passed where it failed: a
/// caller refused does not spin on its error.
pub async fn after_error(result: anyhow::Result<()>, pause: Duration) -> anyhow::Result<u64> {
    if result.is_err() {
        tokio::time::sleep(pause).await;
    }
    result.map(|()| 0)
}

impl Caller for Allocator {
    fn call(&mut self) -> impl Future<Output = anyhow::Result<u64>> + Send {
        self.allocate()
    }
}

/// What callers did over one spell of calls or several (a part that measures two APIs by
/// turns adds up each one's spells).
#[derive(Debug, Default)]
pub struct Calls {
    pub latencies: Vec<Duration>,
    pub ids: Vec<u64>,
    pub errors: Vec<String>,
    /// The spells' time, each from its start until its last call was answered.
    pub seconds: f64,
}

impl Calls {
    /// Calls answered per second of the spells.
    pub fn per_sec(&self) -> f64 {
        self.latencies.len() as f64 / self.seconds
    }

    /// What `clients` allocators did, as a run's figures.
    pub fn throughput(mut self, clients: usize) -> Throughput {
        self.latencies.sort_unstable();
        let unique: HashSet<u64> = self.ids.iter().copied().collect();
        Throughput {
            clients,
            ok: self.ids.len(),
            errors: self.errors.len(),
            duplicates: self.ids.len() - unique.len(),
            per_sec: self.per_sec(),
            p50_ms: percentile(&self.latencies, 0.50),
            p99_ms: percentile(&self.latencies, 0.99),
            max_ms: self
                .latencies
                .last()
                .map_or(0.0, |d| d.as_secs_f64() * 1000.0),
            first_error: self.errors.into_iter().next(),
            term_moves: None,
        }
    }
}

/// Every caller in `callers` calls back to back, each in a task of its own, until
/// `duration` is over; what they did is added to `calls`, and the callers come back for
/// the next spell.
pub async fn spell<C: Caller>(
    callers: Vec<C>,
    duration: Duration,
    calls: &mut Calls,
) -> anyhow::Result<Vec<C>> {
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = callers
        .into_iter()
        .map(|mut caller| {
            tokio::spawn(async move {
                let mut done = Vec::new();
                let mut errors = Vec::new();
                while Instant::now() < deadline {
                    let t = Instant::now();
                    match caller.call().await {
                        Ok(id) => done.push((t.elapsed(), id)),
                        Err(e) => errors.push(format!("{e:#}")),
                    }
                }
                (caller, done, errors)
            })
        })
        .collect();
    let mut back = Vec::with_capacity(tasks.len());
    for t in tasks {
        let (caller, done, errs) = t.await.context("a client panicked")?;
        for (lat, id) in done {
            calls.latencies.push(lat);
            calls.ids.push(id);
        }
        calls.errors.extend(errs);
        back.push(caller);
    }
    calls.seconds += started.elapsed().as_secs_f64();
    Ok(back)
}
