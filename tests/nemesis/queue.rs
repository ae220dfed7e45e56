//! The task queue's part of the nemesis: submitters that submit tasks through `Tasks`,
//! submit again (the same name) whatever answer they miss and await each result over the
//! queue's watch, and workers that run them, registering again whenever their lease is
//! lost. Every attempt a handler runs is recorded from its start to
//! its end (or its stop), no later than the worker's lease was confirmed.
//!
//! Checked afterwards: no task runs on two workers at once, attempt tokens rise, every
//! acknowledged task ends completed with the result of one attempt that ran to its end
//! under the token the beacon recorded, its submitter was told that very result, and no
//! task has more accepted completions than submits.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use beacon::client::Cluster as Leader;
use beacon::client::{TaskInput, TaskOutcome, Tasks, Worker, WorkerEvent};
use beacon::machines::registry::{RegisterOptions, Registration};
use tokio::task::JoinHandle;

use super::opts;

pub const QUEUE: &str = "jobs";

/// One attempt as its handler ran it.
#[derive(Debug, Clone)]
struct Ran {
    worker: usize,
    task: String,
    token: (u64, u64),
    from: Instant,
    until: Instant,
    /// The handler ran to its end (it was not stopped).
    finished: bool,
}

#[derive(Default)]
pub struct TaskLog {
    ran: Vec<Ran>,
    /// Completions the beacons accepted, as the workers heard: (task, token).
    accepted: Vec<(String, (u64, u64))>,
    /// Submit calls per task.
    submits: BTreeMap<String, usize>,
    acknowledged: BTreeSet<String>,
    /// What each acknowledged submit's handle was told.
    told: BTreeMap<String, Result<TaskOutcome, String>>,
    /// The handles' waits.
    waits: Vec<JoinHandle<()>>,
}

/// The result an attempt produces: its task and token, so the stored result names it.
fn result_of(task: &str, token: (u64, u64)) -> Vec<u8> {
    format!("{task}@{}.{}", token.0, token.1).into_bytes()
}

/// Records an attempt when its handler ends or is stopped (dropped).
struct Attempt {
    log: Arc<Mutex<TaskLog>>,
    confirmed: Arc<Mutex<Instant>>,
    worker: usize,
    input: TaskInput,
    from: Instant,
    finished: bool,
}

impl Drop for Attempt {
    fn drop(&mut self) {
        let until = Instant::now().min(*self.confirmed.lock().unwrap());
        self.log.lock().unwrap().ran.push(Ran {
            worker: self.worker,
            task: self.input.name.clone(),
            token: self.input.token,
            from: self.from,
            until,
            finished: self.finished,
        });
    }
}

/// Creates the queue: attempts time out well after a lease (so a lost worker's tasks go
/// back by its lease's end), and enough attempts that faults do not bury a task.
pub async fn create_queue(leader: &mut Leader) {
    leader
        .create_queue(QUEUE, 20_000, 100)
        .await
        .expect("create the task queue");
}

/// Submits a task every 100 ms; an unanswered submit is sent again under the same name.
/// Each acknowledged task's result is awaited over the queue's watch.
pub async fn submitter(
    s: usize,
    beacons: Vec<String>,
    log: Arc<Mutex<TaskLog>>,
    stop: Arc<AtomicBool>,
) {
    let tasks = Arc::new(Tasks::new(beacons, opts(500), Duration::from_millis(500)));
    let mut k = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let name = format!("t-{s}-{k}");
        k += 1;
        while !stop.load(Ordering::Relaxed) {
            *log.lock().unwrap().submits.entry(name.clone()).or_default() += 1;
            let sent =
                tokio::time::timeout(Duration::from_secs(1), tasks.submit(QUEUE, &name, b"x"))
                    .await;
            if let Ok(Ok(handle)) = sent {
                let (waiting, log2, name2) = (tasks.clone(), log.clone(), name.clone());
                let wait = tokio::spawn(async move {
                    let told = handle.result_within(Duration::from_secs(90)).await;
                    log2.lock()
                        .unwrap()
                        .told
                        .insert(name2, told.map_err(|e| e.to_string()));
                    drop(waiting);
                });
                let mut l = log.lock().unwrap();
                l.acknowledged.insert(name.clone());
                l.waits.push(wait);
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A worker running two tasks at once (20-120 ms each) for a few seconds per
/// registration, registering again when its lease is lost.
pub async fn worker(
    i: usize,
    beacons: Vec<String>,
    log: Arc<Mutex<TaskLog>>,
    stop: Arc<AtomicBool>,
) {
    let mut n: u32 = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let addr = SocketAddr::from(([10, 13, i as u8, (n % 250) as u8], 7000));
        let mut options = RegisterOptions::new("TASKER", addr);
        options.connect = opts(500);
        options.retry_for = Duration::from_secs(3);
        let Ok(reg) = Registration::register(beacons.clone(), options).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let confirmed = Arc::new(Mutex::new(reg.confirmed_until()));
        let handler = {
            let (log, confirmed) = (log.clone(), confirmed.clone());
            move |input: TaskInput| {
                let mut attempt = Attempt {
                    log: log.clone(),
                    confirmed: confirmed.clone(),
                    worker: i,
                    from: Instant::now(),
                    finished: false,
                    input,
                };
                async move {
                    let ms = 20 + (attempt.input.token.1 % 100);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    attempt.finished = true;
                    Ok(result_of(&attempt.input.name, attempt.input.token))
                }
            }
        };
        let Ok(mut worker) = Worker::start(&reg, vec![QUEUE.into()], 2, handler).await else {
            continue;
        };
        let mut events = worker.events();
        let until = Instant::now() + Duration::from_millis(4_000 + 1_000 * u64::from(n % 4));
        loop {
            tokio::select! {
                e = events.recv() => {
                    if let Ok(WorkerEvent::Completed(input)) = e {
                        log.lock().unwrap().accepted.push((input.name, input.token));
                    }
                }
                _ = worker.stopped() => break,
                _ = tokio::time::sleep(Duration::from_millis(20)) => {
                    *confirmed.lock().unwrap() = reg.confirmed_until();
                }
                _ = tokio::time::sleep_until(until.into()) => break,
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
        }
        *confirmed.lock().unwrap() = reg.confirmed_until();
        drop(worker);
        if n.is_multiple_of(2) {
            let _ = reg.unregister().await;
        }
    }
}

/// Waits (at most `limit`) until every acknowledged task has completed; then checks
/// what the beacons hold against what the workers ran. Returns a summary line.
pub async fn check_completed(
    beacons: Vec<String>,
    log: &Mutex<TaskLog>,
    limit: Duration,
) -> String {
    let mut leader = Leader::new(beacons, opts(1_000), Duration::from_secs(5));
    let names: Vec<String> = log.lock().unwrap().acknowledged.iter().cloned().collect();
    let deadline = Instant::now() + limit;
    let mut results = BTreeMap::new();
    for name in &names {
        loop {
            let task = leader.task(QUEUE, name).await;
            match task {
                Ok(t) if t.state == "completed" => {
                    results.insert(name.clone(), (t.result, (t.ended_term, t.ended_index)));
                    break;
                }
                Ok(t) if Instant::now() > deadline => {
                    panic!(
                        "task {name} acknowledged, {} after the nemesis: {t:?}",
                        t.state
                    )
                }
                Err(e) if Instant::now() > deadline => panic!("task {name}: {e}"),
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
    let waits = std::mem::take(&mut log.lock().unwrap().waits);
    for w in waits {
        let _ = tokio::time::timeout(Duration::from_secs(90), w).await;
    }
    let log = log.lock().unwrap();
    for (name, (result, _)) in &results {
        let told = log.told.get(name);
        assert_eq!(
            told,
            Some(&Ok(TaskOutcome::Completed(result.clone()))),
            "task {name}: its submitter was told {told:?}, the beacons hold {:?}",
            String::from_utf8_lossy(result)
        );
    }
    let finished: BTreeSet<(&str, (u64, u64))> = log
        .ran
        .iter()
        .filter(|r| r.finished)
        .map(|r| (r.task.as_str(), r.token))
        .collect();
    for (name, (result, token)) in &results {
        assert_eq!(
            result,
            &result_of(name, *token),
            "task {name}: the stored result is not the one of its recorded attempt {token:?}"
        );
        assert!(
            finished.contains(&(name.as_str(), *token)),
            "task {name}: completed under {token:?}, an attempt no worker ran to its end"
        );
    }
    let mut accepted: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    for (name, token) in &log.accepted {
        accepted.entry(name).or_default().push(*token);
    }
    for (name, tokens) in &accepted {
        let submits = log.submits.get(*name).copied().unwrap_or(0);
        let runs: Vec<_> = log.ran.iter().filter(|r| r.task == *name).collect();
        assert!(
            tokens.len() <= submits,
            "task {name}: {} accepted completions from {submits} submits, of attempts {tokens:?}; its runs (worker, token, finished): {:?}",
            tokens.len(),
            runs.iter()
                .map(|r| (r.worker, r.token, r.finished))
                .collect::<Vec<_>>()
        );
    }
    format!(
        "tasks: {} acknowledged, all completed with the result of one attempt, each submitter told that result; {} attempts run, {} completions accepted",
        names.len(),
        log.ran.len(),
        log.accepted.len()
    )
}

/// No task ran on two workers at once; attempt tokens rise.
pub fn check_attempts(log: &Mutex<TaskLog>) {
    let log = log.lock().unwrap();
    let mut by_task: BTreeMap<&str, Vec<&Ran>> = BTreeMap::new();
    for r in &log.ran {
        by_task.entry(r.task.as_str()).or_default().push(r);
    }
    for (task, list) in &mut by_task {
        list.sort_by_key(|r| r.from);
        for pair in list.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if a.token == b.token {
                continue;
            }
            assert!(
                b.from >= a.until,
                "task {task}: worker {} ran attempt {:?} {:?} past worker {} starting attempt {:?}",
                a.worker,
                a.token,
                a.until - b.from,
                b.worker,
                b.token
            );
            assert!(
                b.token > a.token,
                "task {task}: attempt {:?} after {:?}",
                b.token,
                a.token
            );
        }
    }
}
