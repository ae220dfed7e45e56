//! Task queues against real processes: 3 beacons, 8 workers (`nebcli task work`), 5,000
//! tasks; workers SIGKILLed mid-task and the leader SIGKILLed twice while tasks run. Every
//! task ends completed with its own result, none is lost, none has two accepted
//! completions, and the dedupe by name holds. Then bad input: each refusal clear, nothing
//! changed.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use beacon::client::{Client, ClientError, Cluster as Leader, ConnectOptions};
use beacon::client::{SubmitOptions, TaskOutcome, Tasks};
use beacon::machines::tasks::TasksErrorCode;
use beacon::wire::ErrorCode;
use beacon_testkit::*;

const BEACON: &str = env!("CARGO_BIN_EXE_beacon");
const CLUSTER: &str = "tasks";
const TASKS: usize = 5_000;
const WORKERS: usize = 8;

fn opts() -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_secs(2),
        ..ConnectOptions::default()
    }
}

fn worker(nebcli: &Path, dir: &Path, beacon: &str, i: usize, life: usize) -> Process {
    Process::start(
        nebcli,
        [
            "-s",
            beacon,
            "--cluster",
            CLUSTER,
            "task",
            "work",
            "work",
            "--capacity",
            "4",
            "--sleep-ms",
            "20",
        ]
        .map(String::from)
        .to_vec(),
        Vec::new(),
        dir.join(format!("worker-{i}-{life}.log")),
    )
}

async fn leader_index(c: &Cluster) -> usize {
    let addrs: Vec<_> = c.beacons.iter().map(|b| b.addr).collect();
    let leader = eventually(Duration::from_secs(15), || agreed_leader(&addrs))
        .await
        .unwrap_or_else(|| panic!("no leader\n{}", c.logs()));
    c.beacons
        .iter()
        .position(|b| b.addr.to_string() == leader)
        .expect("a beacon of the cluster")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_task_completes_once_across_killed_workers_and_leaders() {
    let nebcli = beacon_testkit::nebcli(BEACON.as_ref());
    let mut c = Cluster::start_with(
        BEACON.as_ref(),
        &free_ports(3),
        100,
        CLUSTER,
        r#"{"lease_ms": 1000, "tasks": {"backoff_base_ms": 100, "backoff_max_ms": 1000}}"#,
    );
    leader_index(&c).await;
    let beacons: Vec<String> = c.beacons.iter().map(|b| b.addr.to_string()).collect();
    let mut admin = Leader::new(beacons.clone(), opts(), Duration::from_secs(20));
    admin.create_queue("work", 3_000, 50).await.unwrap();

    // The dedupe: a name pending is returned, not submitted twice.
    let later = SubmitOptions {
        delay_ms: 600_000,
        ..SubmitOptions::default()
    };
    let first = admin
        .submit_task("work", "dup", b"a", &later)
        .await
        .unwrap();
    let again = admin
        .submit_task("work", "dup", b"b", &later)
        .await
        .unwrap();
    assert_eq!(
        (first.seq, again.payload.len()),
        (again.seq, 0),
        "{again:?}"
    );
    assert_eq!(again.state, "pending");
    admin.cancel_task("work", "dup").await.unwrap();

    // A submit retried with its ID (its answer lost in a failover) finds the task it made
    // finished, and is answered with it as it is; a new submit of the name runs it again.
    let retried = SubmitOptions {
        submit_id: 0x5eed,
        ..later.clone()
    };
    let made = admin
        .submit_task("work", "once", b"a", &retried)
        .await
        .unwrap();
    admin.cancel_task("work", "once").await.unwrap();
    let retry = admin
        .submit_task("work", "once", b"a", &retried)
        .await
        .unwrap();
    assert_eq!(
        (retry.state.as_str(), retry.seq, retry.submit_id),
        ("cancelled", made.seq, 0x5eed),
        "{retry:?}"
    );
    let anew = admin
        .submit_task("work", "once", b"a", &later)
        .await
        .unwrap();
    assert_eq!(anew.state, "pending", "{anew:?}");
    assert!(anew.seq > made.seq && anew.submit_id != 0, "{anew:?}");
    admin.cancel_task("work", "once").await.unwrap();

    let logs = tempfile::tempdir().unwrap();
    let mut workers: Vec<Process> = (0..WORKERS)
        .map(|i| worker(&nebcli, logs.path(), &beacons[i % 3], i, 0))
        .collect();

    // Four submitters, each awaiting its tasks' results, all by one deadline: a result
    // that never comes fails the test within it (each awaited in turn with a limit of its
    // own, a lost delivery would cost that limit once per task left).
    let tasks = Arc::new(Tasks::new(beacons.clone(), opts(), Duration::from_secs(20)));
    let results_by = Instant::now() + Duration::from_secs(300);
    let mut submitters = Vec::new();
    for s in 0..4 {
        let tasks = tasks.clone();
        submitters.push(tokio::spawn(async move {
            let mut handles = Vec::new();
            for i in (s..TASKS).step_by(4) {
                let name = format!("t{i}");
                let handle = tasks
                    .submit("work", &name, name.as_bytes())
                    .await
                    .unwrap_or_else(|e| panic!("submit {name}: {e}"));
                handles.push((name, handle));
            }
            let mut outcomes = Vec::new();
            for (name, handle) in handles {
                let left = results_by.saturating_duration_since(Instant::now());
                let outcome = handle.result_within(left).await;
                outcomes.push((name, outcome));
            }
            outcomes
        }));
    }

    // Faults while tasks run: two workers killed mid-task (and started again as new
    // registrations), the leader killed and restarted, then again with another worker.
    let mut killed_workers = 0;
    let started = Instant::now();
    for round in 0..2 {
        let wait_for = 1_500 * (round + 1);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut client = Client::connect(&beacons[0], &opts()).await;
            let done = match client.as_mut() {
                Ok(c) => c
                    .tasks("work", "completed", 1, true)
                    .await
                    .map(|r| r.total)
                    .unwrap_or(0),
                Err(_) => 0,
            };
            if done as usize >= wait_for || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        for w in [round * 3, round * 3 + 1] {
            workers[w].kill();
            killed_workers += 1;
        }
        let leader = leader_index(&c).await;
        c.beacons[leader].kill();
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        c.beacons[leader].restart();
        for w in [round * 3, round * 3 + 1] {
            workers[w] = worker(&nebcli, logs.path(), &beacons[(w + 1) % 3], w, round + 1);
        }
    }

    let mut outcomes = BTreeMap::new();
    for s in submitters {
        for (name, outcome) in s.await.unwrap() {
            outcomes.insert(name, outcome);
        }
    }
    println!(
        "{TASKS} tasks through {WORKERS} workers, {killed_workers} workers and 2 leaders killed: {:?}",
        started.elapsed()
    );
    let unfinished: Vec<&String> = outcomes
        .iter()
        .filter(|(_, o)| !matches!(o, Ok(TaskOutcome::Completed(_))))
        .map(|(name, _)| name)
        .collect();
    if !unfinished.is_empty() {
        // What the beacons hold of the first few, to tell a task stuck in the cluster from
        // a result the submitter's watch never delivered.
        let mut held = String::new();
        for name in unfinished.iter().take(5) {
            for b in &beacons {
                let got = match Client::connect(b, &opts()).await {
                    Ok(mut c) => format!("{:?}", c.task("work", name).await),
                    Err(e) => format!("{e}"),
                };
                held += &format!("{name} at {b}: {got}\n");
            }
        }
        panic!(
            "{} of {TASKS} tasks without a completed outcome, first {}: {:?}\n{held}{}",
            unfinished.len(),
            unfinished[0],
            outcomes[unfinished[0]],
            c.logs()
        );
    }
    for (name, outcome) in &outcomes {
        if let Ok(TaskOutcome::Completed(result)) = outcome {
            assert_eq!(result, name.as_bytes(), "task {name}'s result")
        }
    }
    assert_eq!(outcomes.len(), TASKS);

    // Every beacon holds them all completed; none pending, running or dead.
    let mut client = Client::connect(&beacons[0], &opts()).await.unwrap();
    let reply = eventually(Duration::from_secs(10), || async {
        let mut client = Client::connect(&beacons[0], &opts()).await.ok()?;
        let r = client.tasks("work", "completed", 1, true).await.ok()?;
        (r.total as usize == TASKS).then_some(r)
    })
    .await;
    assert!(reply.is_some(), "all {TASKS} completed on every beacon");
    for state in ["pending", "running", "dead", "failed"] {
        let r = client.tasks("work", state, 10, true).await.unwrap();
        assert_eq!(r.total, 0, "{state}: {:?}", r.tasks);
    }

    // No task has two accepted completions: each worker printed every completion it had
    // accepted (a worker killed between the acceptance and the line may miss some).
    drop(workers);
    let mut accepted: BTreeMap<String, usize> = BTreeMap::new();
    for entry in std::fs::read_dir(logs.path()).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("completed work ") {
                let name = rest.split_whitespace().next().unwrap().to_owned();
                *accepted.entry(name).or_default() += 1;
            }
        }
    }
    let twice: Vec<_> = accepted.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "accepted twice: {twice:?}");
    let missing = TASKS - accepted.len();
    assert!(
        missing <= killed_workers * 4,
        "{missing} completions printed by no worker"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_clearly_and_changes_nothing() {
    let c = Cluster::start_with(
        BEACON.as_ref(),
        &free_ports(1),
        100,
        CLUSTER,
        r#"{"tasks": {"max_payload_bytes": 1024}}"#,
    );
    leader_index(&c).await;
    let beacons = vec![c.beacons[0].addr.to_string()];
    let mut admin = Leader::new(beacons.clone(), opts(), Duration::from_secs(5));
    fn refused<T: std::fmt::Debug>(r: Result<T, ClientError>, code: u32, says: &str) {
        let e = r.expect_err("refused");
        assert!(e.is(code), "{e}");
        assert!(e.to_string().contains(says), "{e}");
    }
    refused(
        admin
            .submit_task("nope", "t", b"", &SubmitOptions::default())
            .await,
        TasksErrorCode::UnknownQueue.into(),
        "no queue named `nope`",
    );
    admin.create_queue("q", 0, 0).await.unwrap();
    refused(
        admin.create_queue("q", 5, 0).await,
        TasksErrorCode::QueueConflict.into(),
        "exists with timeout",
    );
    refused(
        admin
            .submit_task("q", "big", &[7; 2000], &SubmitOptions::default())
            .await,
        TasksErrorCode::TooLarge.into(),
        "tasks.max_payload_bytes",
    );
    refused(
        admin
            .submit_task("q", "a b", b"", &SubmitOptions::default())
            .await,
        ErrorCode::InvalidRequest.into(),
        "task name `a b` is invalid",
    );
    let t = admin
        .submit_task("q", "t", b"p", &SubmitOptions::default())
        .await
        .unwrap();
    refused(
        admin.complete_task("q", "t", (1, 999), b"r").await,
        TasksErrorCode::NotTaskHolder.into(),
        "is not running under token 1.999",
    );
    refused(
        admin.complete_task("q", "zz", (1, 1), b"r").await,
        TasksErrorCode::UnknownTask.into(),
        "no task named `zz`",
    );
    refused(
        admin.heartbeat_task("q", "t", (1, 1)).await,
        TasksErrorCode::NotTaskHolder.into(),
        "it is pending",
    );
    refused(
        admin.delete_queue("q").await,
        TasksErrorCode::QueueInUse.into(),
        "1 pending or running",
    );
    // Nothing changed: the task is as it was submitted.
    let mut client = Client::connect(&beacons[0], &opts()).await.unwrap();
    let now = client.task("q", "t").await.unwrap();
    assert_eq!(
        (now.state.as_str(), now.seq, now.attempt),
        ("pending", t.seq, 0)
    );
    assert_eq!(client.tasks("q", "", 10, true).await.unwrap().total, 1);
    admin.cancel_task("q", "t").await.unwrap();
    // Cancelling again answers as it is; deleting the queue now works.
    let again = admin.cancel_task("q", "t").await.unwrap();
    assert_eq!(again.state, "cancelled");
    assert!(admin.delete_queue("q").await.unwrap().is_some());
}

/// Runs nebcli to its end (bounded by `limit`, then killed), with its output.
fn run_nebcli(nebcli: &Path, args: &[&str], limit: Duration) -> (Option<i32>, String, String) {
    let mut child = std::process::Command::new(nebcli)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run nebcli");
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().ok();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// One beacon configured by `config`, its address, and a client of it that made queue
/// `jobs` (attempts time out after 5 s; `attempts` before the dead letters).
async fn one_beacon_with_jobs(config: &str, attempts: u32) -> (Cluster, String, Leader) {
    let c = Cluster::start_with(BEACON.as_ref(), &free_ports(1), 100, CLUSTER, config);
    let s = c.beacons[0].addr.to_string();
    let mut admin = Leader::new(vec![s.clone()], opts(), Duration::from_secs(10));
    admin.create_queue("jobs", 5_000, attempts).await.unwrap();
    (c, s, admin)
}

/// Waits (bounded by 10 s) until the leader counts `n` workers serving `queue`; whether
/// it did.
async fn workers_become(c: &mut Client, queue: &str, n: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while workers_of(c, queue).await != n {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// Workers serving `queue`, as the leader counts them.
async fn workers_of(c: &mut Client, queue: &str) -> u32 {
    let reply = c.queues().await.unwrap();
    reply
        .queues
        .iter()
        .find(|v| v.queue.as_ref().is_some_and(|q| q.name == queue))
        .map_or(0, |v| v.workers)
}

/// What a script needs of the task commands: `task submit --wait` bounded by --timeout-ms
/// (written after the command too) with exit 3 and a word on stderr when no worker serves
/// the queue; exit 1 for a dead letter; and a worker that SIGTERM stops unregisters first,
/// so the next task does not go to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_commands_are_safe_in_scripts() {
    let nebcli = beacon_testkit::nebcli(BEACON.as_ref());
    let (_cluster, s, mut admin) = one_beacon_with_jobs(r#"{"lease_ms": 30000}"#, 1).await;

    // No worker: said at once, and the wait ends with --timeout-ms, exit 3.
    let started = Instant::now();
    let (code, out, err) = run_nebcli(
        &nebcli,
        &[
            "-s",
            &s,
            "task",
            "submit",
            "jobs",
            "t1",
            "--wait",
            "--timeout-ms",
            "1500",
        ],
        Duration::from_secs(20),
    );
    let took = started.elapsed();
    assert_eq!(code, Some(3), "stdout {out}\nstderr {err}");
    assert!(
        took < Duration::from_secs(15),
        "bounded by --timeout-ms: {took:?}"
    );
    assert!(err.contains("no live worker serves queue `jobs`"), "{err}");
    assert!(err.contains("still pending"), "{err}");
    assert!(out.contains("t1") && out.contains("pending"), "{out}");
    admin.cancel_task("jobs", "t1").await.unwrap();

    // A worker whose command fails: one attempt, then the dead letters: exit 1.
    let logs = tempfile::tempdir().unwrap();
    let mut failing = Process::start(
        &nebcli,
        [
            "-s",
            &s,
            "task",
            "work",
            "jobs",
            "--exec",
            "echo broken >&2; exit 7",
        ]
        .map(String::from)
        .to_vec(),
        Vec::new(),
        logs.path().join("failing.log"),
    );
    let mut client = Client::connect(&s, &opts()).await.unwrap();
    assert!(
        workers_become(&mut client, "jobs", 1).await,
        "{}",
        failing.log()
    );
    let (code, out, err) = run_nebcli(
        &nebcli,
        &[
            "-s",
            &s,
            "--timeout-ms",
            "10000",
            "task",
            "submit",
            "jobs",
            "t2",
            "--wait",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(
        code,
        Some(1),
        "a dead letter fails the command: {out}\n{err}"
    );
    assert!(out.contains("dead"), "{out}");
    assert!(
        err.contains("dead letters") && err.contains("broken"),
        "{err}"
    );

    // SIGTERM: the worker unregisters before it exits (its lease is 30 s).
    let status = failing
        .signal_and_wait(libc::SIGTERM, Duration::from_secs(10))
        .expect("the worker exits on SIGTERM");
    assert!(status.success(), "{status:?}: {}", failing.log());
    assert!(
        failing.log().contains("SIGTERM: stopped; unregistered"),
        "{}",
        failing.log()
    );
    assert_eq!(
        workers_of(&mut client, "jobs").await,
        0,
        "a worker stopped by SIGTERM is gone at once, not after its lease"
    );
}

/// A worker that loses its lease (SIGSTOPped past it, as a paused VM or a starved machine
/// is) registers again and serves on: its old attempts went back to pending at the leader,
/// and a task submitted after it wakes completes. A worker that exits instead leaves every
/// pending task waiting for a worker that never comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_lost_its_lease_registers_again_and_serves_on() {
    let nebcli = beacon_testkit::nebcli(BEACON.as_ref());
    let (_cluster, s, _admin) = one_beacon_with_jobs(r#"{"lease_ms": 1000}"#, 5).await;
    let logs = tempfile::tempdir().unwrap();
    let worker = Process::start(
        &nebcli,
        ["-s", &s, "task", "work", "jobs"]
            .map(String::from)
            .to_vec(),
        Vec::new(),
        logs.path().join("worker.log"),
    );
    logged(&worker, "serves jobs", 1).await;
    let mut client = Client::connect(&s, &opts()).await.unwrap();
    assert!(
        workers_become(&mut client, "jobs", 1).await,
        "{}",
        worker.log()
    );

    // Stopped past its lease, until the leader has ended the registration, and a lease more.
    worker.pause();
    let ended = workers_become(&mut client, "jobs", 0).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    worker.signal(libc::SIGCONT);
    assert!(ended, "the registration outlived its lease");

    logged(&worker, "registering again", 1).await;
    logged(&worker, "serves jobs", 2).await;
    let tasks = Tasks::new(vec![s.clone()], opts(), Duration::from_secs(10));
    let handle = tasks.submit("jobs", "after", b"woke").await.unwrap();
    let outcome = handle.result_within(Duration::from_secs(20)).await;
    assert_eq!(
        outcome.unwrap(),
        TaskOutcome::Completed(b"woke".to_vec()),
        "{}",
        worker.log()
    );
}

/// Waits (bounded) until `process` has logged `what` `times` times.
async fn logged(process: &Process, what: &str, times: usize) {
    let found = eventually(Duration::from_secs(20), || async {
        (process.log().matches(what).count() >= times).then_some(())
    })
    .await;
    assert!(
        found.is_some(),
        "`{what}` not logged {times} times:\n{}",
        process.log()
    );
}
