//! Task queues measured end to end: submitters submit no-op tasks and await each result
//! (submit -> started on a worker -> completed -> result received), with workers running
//! them through the client library (`Tasks`, `Worker`); then the same with the leader
//! SIGKILLed mid-run: the longest pause between two results, and whether any task was lost.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use beacon::client::{Cluster as Leader, ConnectOptions, RegisterOptions, Registration};
use beacon::machines::tasks::client::{TaskOutcome, Tasks, Worker};
use serde::Serialize;

use super::alloc::percentile;
use super::systems::Cluster;

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
}

fn opts() -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_secs(2),
        ..ConnectOptions::default()
    }
}

/// One timed run: `submitters` loops of submit-and-await for `secs`; the leader is killed
/// at half time when `kill` is given. Returns the latencies, the result times, and the
/// tasks lost.
async fn round(
    at: &[String],
    submitters: usize,
    secs: u64,
    tag: &str,
    mut kill: Option<&mut Cluster>,
) -> anyhow::Result<(Vec<Duration>, Vec<Instant>, usize)> {
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let done_at = Arc::new(Mutex::new(Vec::new()));
    let lost = Arc::new(Mutex::new(0usize));
    let end = Instant::now() + Duration::from_secs(secs);
    let mut loops = Vec::new();
    for s in 0..submitters {
        let (latencies, done_at, lost) = (latencies.clone(), done_at.clone(), lost.clone());
        let tasks = Tasks::new(at.to_vec(), opts(), Duration::from_secs(20));
        let tag = tag.to_owned();
        loops.push(tokio::spawn(async move {
            let mut i = 0u64;
            while Instant::now() < end {
                let name = format!("{tag}-{s}-{i}");
                i += 1;
                let began = Instant::now();
                let Ok(handle) = tasks.submit("bench", &name, b"").await else {
                    continue;
                };
                match handle.result_within(Duration::from_secs(30)).await {
                    Ok(TaskOutcome::Completed(_)) => {
                        latencies.lock().unwrap().push(began.elapsed());
                        done_at.lock().unwrap().push(Instant::now());
                    }
                    _ => *lost.lock().unwrap() += 1,
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
    let lost = *lost.lock().unwrap();
    Ok((latencies, done_at, lost))
}

pub async fn run(
    cluster: &mut Cluster,
    at: &[String],
    workers: usize,
    submitters: usize,
    secs: u64,
) -> anyhow::Result<TaskResults> {
    let mut admin = Leader::new(at.to_vec(), opts(), Duration::from_secs(20));
    admin
        .create_queue("bench", 10_000, 10)
        .await
        .context("create the queue")?;
    let mut running = Vec::new();
    for i in 0..workers {
        let options = RegisterOptions {
            connect: opts(),
            ..RegisterOptions::new("WORKER", SocketAddr::from(([10, 7, 1, i as u8], 7000)))
        };
        let reg = Registration::register(at.to_vec(), options).await?;
        let worker = Worker::start(&reg, vec!["bench".into()], 4, |input| async move {
            Ok(input.payload)
        })
        .await?;
        running.push((reg, worker));
    }
    // Warm up, then measure.
    round(at, submitters, 1, "warm", None).await?;
    let (mut latencies, _, lost) = round(at, submitters, secs, "run", None).await?;
    latencies.sort();
    let per_sec = latencies.len() as f64 / secs as f64;
    let (_, mut done_at, lost_in_failover) =
        round(at, submitters, secs.max(4), "kill", Some(cluster)).await?;
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
        lost: lost + lost_in_failover,
    })
}
