//! Work assignment measured: how long until every resource of a worker that died (its
//! keepalive stopped) or unregistered is running again, acknowledged by its new holder
//! through the client library (`Assignments`); the spread of load after adds, a death and a
//! join with a rebalance; and the leader's CPU at steady state with many resources.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use beacon::client::{
    AssignmentEvent, Assignments, Cluster as Leader, ConnectOptions, RegisterOptions, Registration,
};
use serde::Serialize;

use super::proc;

/// What the assignment part measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AssignResults {
    pub workers: usize,
    pub resources: usize,
    pub tick_ms: u64,
    pub lease_ms: u64,
    /// From a worker's keepalive stopping to the last of its resources acknowledged by a
    /// new holder (includes the lease).
    pub after_death_ms: Vec<f64>,
    /// From an unregister being sent to the same.
    pub after_unregister_ms: Vec<f64>,
    /// Resources moved per death.
    pub moved: Vec<usize>,
    /// Spread of load (max - min) after the adds, after a death, after a join and a rebalance.
    pub spread_after_adds: u64,
    pub spread_after_death: u64,
    pub spread_after_join: u64,
    pub max_weight: u32,
    /// Leader CPU (share of a core) with `steady_resources` on `steady_workers`.
    pub steady_resources: usize,
    pub steady_workers: usize,
    pub steady_cpu: Option<f64>,
    /// Leader CPU (share of a core) of the same cluster at rest, before any worker
    /// registered: its heartbeats and ticks alone.
    pub rest_cpu: Option<f64>,
    /// Reports (lease renewals) the leader answered per second over the steady window.
    pub steady_reports_per_sec: Option<f64>,
}

impl AssignResults {
    /// The leader's CPU per report at steady state beyond its CPU at rest, in µs.
    pub fn cpu_per_report_us(&self) -> Option<f64> {
        let (steady, rest, rate) = (
            self.steady_cpu?,
            self.rest_cpu?,
            self.steady_reports_per_sec?,
        );
        (rate > 0.0).then(|| (steady - rest).max(0.0) / rate * 1e6)
    }
}

fn opts() -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_secs(5),
        ..ConnectOptions::default()
    }
}

/// The time each resource was last acknowledged, by holder node ID.
type Acks = Arc<Mutex<BTreeMap<String, (u32, Instant)>>>;

/// One worker: its registration and a task that records what it is told to run.
struct Worker {
    reg: Option<Registration>,
    task: tokio::task::JoinHandle<()>,
}

async fn worker(beacons: &[String], i: usize, acks: Acks) -> anyhow::Result<Worker> {
    let addr = SocketAddr::from(([10, 77, (i / 250) as u8, (i % 250) as u8 + 1], 9000));
    let options = RegisterOptions {
        connect: opts(),
        ..RegisterOptions::new("BENCH_WORKER", addr)
    };
    let reg = Registration::register(beacons.to_vec(), options).await?;
    let id = reg.node_id();
    let mut mine = Assignments::start(&reg).await?;
    let task = tokio::spawn(async move {
        while let Ok(event) = mine.next().await {
            if let AssignmentEvent::Added(r) = event {
                acks.lock().unwrap().insert(r.name, (id, Instant::now()));
            }
        }
    });
    Ok(Worker {
        reg: Some(reg),
        task,
    })
}

/// Waits until each of `names` is acknowledged by a holder other than `from`; returns when
/// the last one was.
async fn reacquired(acks: &Acks, names: &[String], from: u32, limit: Duration) -> Option<Instant> {
    let deadline = Instant::now() + limit;
    loop {
        {
            let acks = acks.lock().unwrap();
            let done: Option<Vec<Instant>> = names
                .iter()
                .map(|n| acks.get(n).filter(|(id, _)| *id != from).map(|(_, t)| *t))
                .collect();
            if let Some(times) = done {
                return times.into_iter().max();
            }
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn held_by(leader_addr: &str) -> anyhow::Result<BTreeMap<u32, Vec<(String, u32)>>> {
    let mut c = beacon::client::Client::connect(leader_addr, &opts()).await?;
    let mut by: BTreeMap<u32, Vec<(String, u32)>> = BTreeMap::new();
    for r in c.resources("BENCH_WORKER").await?.resources {
        if let Some(h) = r.holder {
            by.entry(h.node_id).or_default().push((r.name, r.weight));
        }
    }
    Ok(by)
}

/// The reports (lease renewals) the leader at `admin` answered so far, from its `/metrics`.
async fn reports(admin: Option<SocketAddr>) -> Option<u64> {
    let m = super::scrape::Metrics::scrape(admin).await?;
    Some(
        m.histogram(
            "beacon_request_duration_seconds",
            &["command=\"NodeReport\""],
        )
        .count,
    )
}

/// The names of what worker `id` holds.
async fn names_of(leader_addr: &str, id: u32) -> anyhow::Result<Vec<String>> {
    Ok(held_by(leader_addr)
        .await?
        .remove(&id)
        .unwrap_or_default()
        .into_iter()
        .map(|(n, _)| n)
        .collect())
}

fn spread(by: &BTreeMap<u32, Vec<(String, u32)>>, workers: &[u32]) -> u64 {
    let loads: Vec<u64> = workers
        .iter()
        .map(|w| {
            by.get(w)
                .map_or(0, |rs| rs.iter().map(|(_, wt)| u64::from(*wt)).sum())
        })
        .collect();
    loads.iter().max().unwrap_or(&0) - loads.iter().min().unwrap_or(&0)
}

/// Runs the measurements against the beacons at `endpoints` (the leader first; `leader_pid`
/// its process), configured with `tick_ms` and `lease_ms`.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    endpoints: &[SocketAddr],
    leader_pid: Option<u32>,
    leader_admin: Option<SocketAddr>,
    tick_ms: u64,
    lease_ms: u64,
    workers: usize,
    resources: usize,
    rounds: usize,
    window: Duration,
) -> anyhow::Result<AssignResults> {
    let beacons: Vec<String> = endpoints.iter().map(|a| a.to_string()).collect();
    let leader_addr = beacons[0].clone();
    let mut leader = Leader::new(beacons.clone(), opts(), Duration::from_secs(10));
    let acks: Acks = Arc::default();
    // The leader at rest first: what the workers cost is what the steady state adds to it.
    let rest_cpu = match leader_pid {
        Some(pid) => {
            let (since, cpu) = (Instant::now(), proc::cpu_seconds(pid).unwrap_or(0.0));
            tokio::time::sleep(window.min(Duration::from_secs(5))).await;
            proc::core_share(pid, since, cpu)
        }
        None => None,
    };
    let mut pool = Vec::new();
    for i in 0..workers {
        pool.push(worker(&beacons, i, acks.clone()).await?);
    }
    let max_weight = 4;
    for i in 0..resources {
        leader
            .add_resource(
                &format!("res-{i:05}"),
                "BENCH_WORKER",
                1 + (i % max_weight as usize) as u32,
                BTreeMap::new(),
            )
            .await
            .with_context(|| format!("add resource {i}"))?;
    }
    let mut results = AssignResults {
        rest_cpu,
        workers,
        resources,
        tick_ms,
        lease_ms,
        max_weight,
        ..AssignResults::default()
    };
    let ids = |pool: &[Worker]| -> Vec<u32> {
        pool.iter()
            .filter_map(|w| w.reg.as_ref().map(|r| r.node_id()))
            .collect()
    };
    results.spread_after_adds = spread(&held_by(&leader_addr).await?, &ids(&pool));

    let mut next = workers;
    for round in 0..rounds {
        // A death: the victim's keepalive stops (as a SIGKILLed worker's would).
        let victim = round % pool.len();
        let reg = pool[victim].reg.take().expect("a live worker");
        let id = reg.node_id();
        let names = names_of(&leader_addr, id).await?;
        let died = Instant::now();
        drop(reg);
        pool[victim].task.abort();
        let limit = Duration::from_millis(lease_ms * 3 + 5_000);
        let Some(done) = reacquired(&acks, &names, id, limit).await else {
            bail!("the resources of worker {id} were not all reacquired within {limit:?}");
        };
        results
            .after_death_ms
            .push(done.duration_since(died).as_secs_f64() * 1000.0);
        results.moved.push(names.len());
        if round == 0 {
            let alive: Vec<u32> = ids(&pool);
            results.spread_after_death = spread(&held_by(&leader_addr).await?, &alive);
        }
        pool[victim] = worker(&beacons, next, acks.clone()).await?;
        next += 1;

        // An unregister: handed over at the leader's next tick.
        let victim = (round + 1) % pool.len();
        let reg = pool[victim].reg.take().expect("a live worker");
        let id = reg.node_id();
        let names = names_of(&leader_addr, id).await?;
        let sent = Instant::now();
        reg.unregister().await?;
        pool[victim].task.abort();
        let Some(done) = reacquired(&acks, &names, id, limit).await else {
            bail!("the resources of worker {id} were not all reacquired after its unregister");
        };
        results
            .after_unregister_ms
            .push(done.duration_since(sent).as_secs_f64() * 1000.0);
        pool[victim] = worker(&beacons, next, acks.clone()).await?;
        next += 1;
        // The newcomers get their share by rebalancing (each holder lets go first: the
        // bench releases for the holders, as their Assignments would).
        for _ in 0..64 {
            let moves = leader.rebalance("BENCH_WORKER").await?;
            if moves.is_empty() {
                break;
            }
            let mut c = beacon::client::Client::connect(&leader_addr, &opts()).await?;
            let all = c.resources("BENCH_WORKER").await?.resources;
            for m in moves {
                if let Some(h) = all
                    .iter()
                    .find(|r| r.name == m.name)
                    .and_then(|r| r.holder.clone())
                {
                    leader.release_resource(&m.name, h.term, h.index).await?;
                }
            }
        }
    }
    results.spread_after_join = spread(&held_by(&leader_addr).await?, &ids(&pool));

    // The leader at steady state: every worker reporting, nothing moving.
    if let Some(pid) = leader_pid {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let reports_before = reports(leader_admin).await;
        let (since, cpu) = (Instant::now(), proc::cpu_seconds(pid).unwrap_or(0.0));
        tokio::time::sleep(window).await;
        results.steady_cpu = proc::core_share(pid, since, cpu);
        let elapsed = since.elapsed().as_secs_f64();
        results.steady_reports_per_sec = match (reports_before, reports(leader_admin).await) {
            (Some(before), Some(after)) => Some(after.saturating_sub(before) as f64 / elapsed),
            _ => None,
        };
    }
    results.steady_resources = resources;
    results.steady_workers = workers;
    for w in pool {
        w.task.abort();
        if let Some(reg) = w.reg {
            let _ = reg.unregister().await;
        }
    }
    Ok(results)
}

/// The median and max of `values`.
pub fn median_max(values: &[f64]) -> (f64, f64) {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => (0.0, 0.0),
        n => (v[n / 2], v[n - 1]),
    }
}
