//! Task queues measured end to end: submitters submit no-op tasks and await each result
//! (submit -> started on a worker -> completed -> result received); then the same with the
//! leader SIGKILLed mid-run: the longest pause between two results, and whether any task
//! was lost. beacon's workers and submitters are the client library's (`Tasks`, `Worker`);
//! ZooKeeper's are seed 003's design ([`super::zk_tasks`]). The same loop drives both.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use beacon::client::{Cluster as Leader, ConnectOptions, RegisterOptions, Registration};
use beacon::client::{TaskOutcome, Tasks, Worker};
use serde::Serialize;

use super::alloc::percentile;
use super::systems::{Cluster, Kind};
use super::zk_tasks;

/// What the task part measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TaskResults {
    pub workers: usize,
    pub submitters: usize,
    pub secs: u64,
    /// Tasks whose result came back, per second.
    pub per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// With the leader killed mid-run: the longest gap between two results.
    pub failover_pause_ms: f64,
    /// Tasks acknowledged as submitted whose result never came (must be 0).
    pub lost: usize,
    /// What became of the first few of them.
    pub lost_how: Vec<String>,
}

fn opts() -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_secs(2),
        ..ConnectOptions::default()
    }
}

/// A client that submits a task and awaits its result, of either system.
enum Submitter {
    Beacon(Box<Tasks>),
    ZooKeeper(zk_tasks::Submitter),
}

impl Submitter {
    async fn connect(kind: Kind, at: &[SocketAddr]) -> anyhow::Result<Submitter> {
        Ok(match kind {
            Kind::ZooKeeper => Submitter::ZooKeeper(zk_tasks::Submitter::connect(at).await?),
            _ => Submitter::Beacon(Box::new(Tasks::new(
                at.iter().map(ToString::to_string).collect(),
                opts(),
                Duration::from_secs(20),
            ))),
        })
    }

    /// `Err`: the submit was not acknowledged; `Ok(Err(why))`: acknowledged, and no
    /// result within `within`.
    async fn run(&self, name: &str, within: Duration) -> anyhow::Result<Result<(), String>> {
        match self {
            Submitter::Beacon(tasks) => {
                let handle = tasks.submit("bench", name, b"").await?;
                Ok(match handle.result_within(within).await {
                    Ok(TaskOutcome::Completed(_)) => Ok(()),
                    Ok(other) => Err(format!("{name}: {other:?}")),
                    Err(e) => Err(format!("{name}: {e}")),
                })
            }
            Submitter::ZooKeeper(z) => Ok(match z.run(name, b"", within).await? {
                Some(_) => Ok(()),
                None => Err(format!("{name}: no result within {within:?}")),
            }),
        }
    }
}

/// One timed run: `submitters` loops of submit-and-await for `secs`; the leader is killed
/// at half time when `kill` is given. Returns the latencies, the result times, and what
/// became of each task lost.
async fn round(
    kind: Kind,
    at: &[SocketAddr],
    submitters: usize,
    secs: u64,
    tag: &str,
    mut kill: Option<&mut Cluster>,
) -> anyhow::Result<(Vec<Duration>, Vec<Instant>, Vec<String>)> {
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let done_at = Arc::new(Mutex::new(Vec::new()));
    let lost = Arc::new(Mutex::new(Vec::new()));
    let mut clients = Vec::new();
    for _ in 0..submitters {
        clients.push(Submitter::connect(kind, at).await?);
    }
    let end = Instant::now() + Duration::from_secs(secs);
    let mut loops = Vec::new();
    for (s, submitter) in clients.into_iter().enumerate() {
        let (latencies, done_at, lost) = (latencies.clone(), done_at.clone(), lost.clone());
        let tag = tag.to_owned();
        loops.push(tokio::spawn(async move {
            let mut i = 0u64;
            while Instant::now() < end {
                let name = format!("{tag}-{s}-{i}");
                i += 1;
                let began = Instant::now();
                match submitter.run(&name, Duration::from_secs(30)).await {
                    Ok(Ok(())) => {
                        latencies.lock().unwrap().push(began.elapsed());
                        done_at.lock().unwrap().push(Instant::now());
                    }
                    Ok(Err(why)) => lost.lock().unwrap().push(why),
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                }
            }
        }));
    }
    if let Some(cluster) = kill.as_mut() {
        tokio::time::sleep(Duration::from_secs(secs) / 2).await;
        let leader = cluster.ready(Duration::from_secs(10)).await?;
        cluster.members[leader].kill();
    }
    for l in loops {
        l.await?;
    }
    let latencies = std::mem::take(&mut *latencies.lock().unwrap());
    let done_at = std::mem::take(&mut *done_at.lock().unwrap());
    let lost = std::mem::take(&mut *lost.lock().unwrap());
    Ok((latencies, done_at, lost))
}

/// The workers of either system (and ZooKeeper's master); stopped when dropped.
#[derive(Default)]
struct Workers {
    _beacon: Vec<(Registration, Worker)>,
    _zookeeper: Vec<zk_tasks::Spawned>,
}

async fn start_workers(kind: Kind, at: &[SocketAddr], n: usize) -> anyhow::Result<Workers> {
    if kind == Kind::ZooKeeper {
        let mut spawned = vec![zk_tasks::start_master(at).await?];
        for i in 0..n {
            spawned.push(zk_tasks::start_worker(at, &format!("worker-{i}"), CAPACITY).await?);
        }
        return Ok(Workers {
            _zookeeper: spawned,
            ..Workers::default()
        });
    }
    let beacons: Vec<String> = at.iter().map(ToString::to_string).collect();
    let mut admin = Leader::new(beacons.clone(), opts(), Duration::from_secs(20));
    admin
        .create_queue("bench", 10_000, 10)
        .await
        .context("create the queue")?;
    let mut running = Vec::new();
    for i in 0..n {
        let options = RegisterOptions {
            connect: opts(),
            ..RegisterOptions::new("WORKER", SocketAddr::from(([10, 7, 1, i as u8], 7000)))
        };
        let reg = Registration::register(beacons.clone(), options).await?;
        let worker = Worker::start(
            &reg,
            vec!["bench".into()],
            CAPACITY as u32,
            |input| async move { Ok(input.payload) },
        )
        .await?;
        running.push((reg, worker));
    }
    Ok(Workers {
        _beacon: running,
        ..Workers::default()
    })
}

/// Tasks a worker runs at once, in either system.
const CAPACITY: usize = 4;

/// Measures `kind`'s task queue; `at` lists the members, beacon's leader first.
pub async fn run(
    kind: Kind,
    cluster: &mut Cluster,
    at: &[SocketAddr],
    workers: usize,
    submitters: usize,
    secs: u64,
) -> anyhow::Result<TaskResults> {
    let running = start_workers(kind, at, workers).await?;
    // Warm up, then measure.
    round(kind, at, submitters, 1, "warm", None).await?;
    let (mut latencies, _, lost) = round(kind, at, submitters, secs, "run", None).await?;
    latencies.sort();
    let per_sec = latencies.len() as f64 / secs as f64;
    let (_, mut done_at, mut lost_in_failover) =
        round(kind, at, submitters, secs.max(4), "kill", Some(cluster)).await?;
    done_at.sort();
    let pause = done_at
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default();
    drop(running);
    Ok(TaskResults {
        workers,
        submitters,
        secs,
        per_sec,
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        failover_pause_ms: pause.as_secs_f64() * 1000.0,
        lost: lost.len() + lost_in_failover.len(),
        lost_how: {
            lost_in_failover.extend(lost);
            lost_in_failover.truncate(5);
            lost_in_failover
        },
    })
}
