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
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|mut conn| {
            tokio::spawn(async move {
                let mut done = Vec::new();
                let mut errors = Vec::new();
                while Instant::now() < deadline {
                    let t = Instant::now();
                    match conn.allocate().await {
                        Ok(id) => done.push((t.elapsed(), id)),
                        Err(e) => errors.push(format!("{e:#}")),
                    }
                }
                (done, errors)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut ids = Vec::new();
    let mut errors = Vec::new();
    for t in tasks {
        let (done, errs) = t.await.context("allocation client panicked")?;
        for (lat, id) in done {
            latencies.push(lat);
            ids.push(id);
        }
        errors.extend(errs);
    }
    let seconds = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let unique: HashSet<u64> = ids.iter().copied().collect();
    Ok(Throughput {
        clients,
        ok: ids.len(),
        errors: errors.len(),
        duplicates: ids.len() - unique.len(),
        per_sec: ids.len() as f64 / seconds,
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        max_ms: latencies.last().map_or(0.0, |d| d.as_secs_f64() * 1000.0),
        first_error: errors.into_iter().next(),
        term_moves: None,
    })
}
