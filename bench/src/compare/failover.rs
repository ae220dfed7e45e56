//! Failover: writers allocate IDs without pause through the survivors-to-be; the leader is
//! faulted; the time is from the fault until the first allocation that was sent after it
//! succeeds. Then the member is brought back and the cluster settles before the next round.
//! Every ID acknowledged in any round is checked for uniqueness at the end.
//!
//! Three faults: SIGKILL (the kernel closes the leader's sockets: peers may notice at once),
//! SIGSTOP (the leader hangs with its sockets open, as a stuck process or a machine that
//! lost power looks) and a network cut (the leader's link goes down: nothing is closed or
//! refused, as a pulled cable or a failed switch looks). Only elapsed silence reveals the
//! last two.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use tokio::sync::Mutex;

use super::clients::Allocator;
use super::systems::Cluster;

/// Writers per round.
const WRITERS: usize = 4;
/// Per-request limit of the writers; a request that hangs longer is abandoned and resent.
/// Short, so that a request stuck at a member with no leader does not hide the moment a
/// new leader serves: with four writers the time is known to within about 25 ms.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(100);
/// How long a round may wait for the first write after the kill.
const ROUND_LIMIT: Duration = Duration::from_secs(60);

/// What happens to the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
pub enum Fault {
    /// SIGKILL.
    Kill,
    /// SIGSTOP (resumed with SIGCONT after the round).
    Stop,
    /// Its network link taken down (brought up after the round); needs namespaces.
    Cut,
}

impl Fault {
    /// How the comparison page's table says it (docs/comparison.md).
    pub fn label(self) -> &'static str {
        match self {
            Fault::Kill => "leader SIGKILLed",
            Fault::Stop => "leader SIGSTOPped",
            Fault::Cut => "leader cut off",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Failover {
    pub fault: Fault,
    pub rounds: Vec<f64>,
    pub median_ms: f64,
    pub max_ms: f64,
    pub ids: usize,
    pub duplicates: usize,
}

#[derive(Default)]
struct Shared {
    ids: Vec<u64>,
    /// Completion of the first write sent at or after the kill.
    recovered: Option<Instant>,
    faulted: Option<Instant>,
}

pub async fn run(cluster: &mut Cluster, rounds: usize, fault: Fault) -> anyhow::Result<Failover> {
    let next = Arc::new(AtomicUsize::new(50_000_000));
    let mut times = Vec::new();
    let mut all_ids = Vec::new();
    for round in 1..=rounds {
        let leader = cluster.ready(Duration::from_secs(120)).await?;
        let survivors: Vec<usize> = (0..cluster.members.len())
            .filter(|i| *i != leader)
            .collect();
        let endpoints = cluster.endpoints(&survivors);
        super::clients::prepare(cluster.kind, &endpoints).await?;

        let shared = Arc::new(Mutex::new(Shared::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut writers = Vec::new();
        for _ in 0..WRITERS {
            let mut conn = Allocator::connect(
                cluster.kind,
                cluster.via,
                &endpoints,
                &cluster.beacon_client,
                REQUEST_TIMEOUT,
                next.clone(),
            )
            .await?;
            let (shared, stop) = (shared.clone(), stop.clone());
            writers.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let sent = Instant::now();
                    let r = tokio::time::timeout(REQUEST_TIMEOUT, conn.allocate()).await;
                    let done = Instant::now();
                    let mut s = shared.lock().await;
                    match r {
                        Ok(Ok(id)) => {
                            s.ids.push(id);
                            if s.faulted.is_some_and(|k| sent >= k) && s.recovered.is_none() {
                                s.recovered = Some(done);
                            }
                        }
                        _ => {
                            drop(s);
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                    }
                }
            }));
        }
        // Writers warm (each has succeeded) before the kill.
        let warm = Instant::now();
        while shared.lock().await.ids.len() < WRITERS * 10 {
            if warm.elapsed() > Duration::from_secs(30) {
                bail!(
                    "{} writers did not get going through the followers",
                    cluster.kind
                );
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }

        // The clock starts once the fault is complete (the process reaped, every thread
        // stopped, the link down): a write sent while `ip` or the signal was still on its
        // way could be answered by the old leader and pass for a failover.
        match fault {
            Fault::Kill => cluster.members[leader].kill(),
            Fault::Stop => cluster.members[leader].pause(),
            Fault::Cut => cluster.cut(leader)?,
        }
        let faulted = Instant::now();
        shared.lock().await.faulted = Some(faulted);
        let recovered = loop {
            if let Some(r) = shared.lock().await.recovered {
                break r;
            }
            if faulted.elapsed() > ROUND_LIMIT {
                bail!(
                    "{} did not accept a write within {ROUND_LIMIT:?} after the {}",
                    cluster.kind,
                    fault.label()
                );
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        // Let the writers run on a little through the new leader, then stop them.
        tokio::time::sleep(Duration::from_millis(200)).await;
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.await.context("writer panicked")?;
        }
        let took = (recovered - faulted).as_secs_f64() * 1e3;
        let ids = std::mem::take(&mut shared.lock().await.ids);
        println!(
            "  {} round {round}: {} (member {leader}), a write succeeded after {took:.1} ms ({} IDs this round)",
            cluster.kind,
            fault.label(),
            ids.len()
        );
        times.push(took);
        all_ids.extend(ids);
        match fault {
            Fault::Kill => cluster.members[leader].restart(),
            Fault::Stop => cluster.members[leader].resume(),
            Fault::Cut => cluster.heal(leader)?,
        }
    }
    cluster.ready(Duration::from_secs(120)).await?;
    let unique: HashSet<u64> = all_ids.iter().copied().collect();
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    let median_ms = if sorted.len() % 2 == 0 {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    };
    Ok(Failover {
        fault,
        median_ms,
        max_ms: sorted[sorted.len() - 1],
        rounds: times,
        ids: all_ids.len(),
        duplicates: all_ids.len() - unique.len(),
    })
}
