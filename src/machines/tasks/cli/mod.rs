//! Task queues' nebcli commands: `show queues`, `show tasks`, `queue create|delete`,
//! `task submit|get|cancel|requeue|purge`, and `task work`, a worker that runs a shell
//! command (or echoes) for each task.
//!
//! Keywords are case-insensitive; queue and task names are kept as typed.

use std::net::SocketAddr;
use std::time::Duration;

use crate::cli::table::{or_dash, render, stale_warning};
use crate::cli::{Commands, Failure, Session, UsageError, flags, none, number, usage};
use crate::machines::registry::{RegisterOptions, Registration};
use crate::machines::tasks::client::worker::WorkerEvent;
use crate::machines::tasks::client::{
    SubmitOptions, TaskFailure, TaskInput, TaskOutcome, Tasks, Worker,
};
use crate::pb::tasks as pb;

/// One parsed task-queue command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `show queues [--limit N] [--from QUEUE]`
    Queues(crate::cli::Page),
    /// `show tasks QUEUE [--state S] [--limit N]`
    Tasks {
        queue: String,
        state: String,
        limit: u32,
    },
    /// `queue create NAME [--timeout-ms N] [--max-attempts N]`
    CreateQueue {
        name: String,
        timeout_ms: u64,
        max_attempts: u32,
    },
    /// `queue delete NAME`
    DeleteQueue(String),
    /// `task submit QUEUE NAME [--payload TEXT] [--priority N] [--delay-ms N] ... [--wait]`
    Submit {
        queue: String,
        name: String,
        payload: String,
        options: SubmitOptions,
        wait: bool,
    },
    /// `task get QUEUE NAME`
    Get { queue: String, name: String },
    /// `task cancel QUEUE NAME`
    Cancel { queue: String, name: String },
    /// `task requeue QUEUE [NAME...]`
    Requeue { queue: String, names: Vec<String> },
    /// `task purge QUEUE [NAME...]`
    Purge { queue: String, names: Vec<String> },
    /// `watch tasks QUEUE [--from INDEX]`: finished tasks as lines until stopped.
    Watch { queue: String, from: u64 },
    /// `task work QUEUE[,QUEUE...] [--capacity N] [--exec CMD] [--sleep-ms N] [--addr A]`
    Work {
        queues: Vec<String>,
        capacity: u32,
        exec: Option<String>,
        sleep_ms: u64,
        addr: Option<SocketAddr>,
    },
}

const USAGE: &str = "usage: `task submit QUEUE NAME [--payload TEXT]`, `task get|cancel QUEUE NAME`, `task requeue|purge QUEUE [NAME...]`, `task work QUEUE [--capacity N] [--exec CMD]`";

/// QUEUE NAME, then flags.
fn queue_and_name<'a>(
    cmd: &str,
    args: &'a [&'a str],
) -> Result<(String, String, &'a [&'a str]), UsageError> {
    match args {
        [queue, name, rest @ ..] if !queue.starts_with("--") && !name.starts_with("--") => {
            Ok(((*queue).to_owned(), (*name).to_owned(), rest))
        }
        _ => Err(usage(format!("`{cmd}` needs a queue and a task name"))),
    }
}

fn parse_task(words: &[&str]) -> Result<Command, UsageError> {
    let Some(sub) = words.first() else {
        return Err(usage(USAGE));
    };
    let args = &words[1..];
    match sub.to_ascii_lowercase().as_str() {
        "submit" => {
            // --wait takes no value: taken out before the flag pairs.
            let wait = args.iter().any(|a| a.eq_ignore_ascii_case("--wait"));
            let args: Vec<&str> = args
                .iter()
                .copied()
                .filter(|a| !a.eq_ignore_ascii_case("--wait"))
                .collect();
            let (queue, name, rest) = queue_and_name("task submit", &args)?;
            let (mut payload, mut options) = (String::new(), SubmitOptions::default());
            for (flag, value) in flags("task submit", rest)? {
                match flag.as_str() {
                    "payload" => payload = value.to_owned(),
                    "priority" => options.priority = number("task submit", "priority", value)?,
                    "delay-ms" => options.delay_ms = number("task submit", "delay-ms", value)?,
                    "attempt-timeout-ms" => {
                        options.timeout_ms = number("task submit", "attempt-timeout-ms", value)?
                    }
                    "max-attempts" => {
                        options.max_attempts = number("task submit", "max-attempts", value)?
                    }
                    other => return Err(usage(format!("`task submit`: unknown flag --{other}"))),
                }
            }
            Ok(Command::Submit {
                queue,
                name,
                payload,
                options,
                wait,
            })
        }
        "get" | "cancel" => {
            let (queue, name, rest) = queue_and_name(&format!("task {sub}"), args)?;
            none(&format!("task {sub} QUEUE NAME"), rest)?;
            Ok(if sub.eq_ignore_ascii_case("get") {
                Command::Get { queue, name }
            } else {
                Command::Cancel { queue, name }
            })
        }
        "requeue" | "purge" => {
            let Some((queue, names)) = args.split_first() else {
                return Err(usage(format!("`task {sub}` needs a queue")));
            };
            let (queue, names) = (
                (*queue).to_owned(),
                names.iter().map(|n| (*n).to_owned()).collect(),
            );
            Ok(if sub.eq_ignore_ascii_case("requeue") {
                Command::Requeue { queue, names }
            } else {
                Command::Purge { queue, names }
            })
        }
        "work" => {
            let Some((queues, rest)) = args.split_first().filter(|(q, _)| !q.starts_with("--"))
            else {
                return Err(usage(
                    "`task work` needs the queues to serve (QUEUE[,QUEUE...])",
                ));
            };
            let (mut capacity, mut exec, mut sleep_ms, mut addr) = (1u32, None, 0u64, None);
            for (flag, value) in flags("task work", rest)? {
                match flag.as_str() {
                    "capacity" => capacity = number("task work", "capacity", value)?,
                    "exec" => exec = Some(value.to_owned()),
                    "sleep-ms" => sleep_ms = number("task work", "sleep-ms", value)?,
                    "addr" => {
                        addr = Some(value.parse().map_err(|_| {
                            usage(format!("`task work`: --addr `{value}` is not ip:port"))
                        })?)
                    }
                    other => return Err(usage(format!("`task work`: unknown flag --{other}"))),
                }
            }
            if capacity == 0 {
                return Err(usage("`task work`: --capacity must be at least 1"));
            }
            Ok(Command::Work {
                queues: queues.split(',').map(str::to_owned).collect(),
                capacity,
                exec,
                sleep_ms,
                addr,
            })
        }
        _ => Err(usage(USAGE)),
    }
}

fn parse_queue(words: &[&str]) -> Result<Command, UsageError> {
    const QUEUE_USAGE: &str = "usage: `queue create NAME [--attempt-timeout-ms N] [--max-attempts N]`, `queue delete NAME`";
    let Some(sub) = words.first() else {
        return Err(usage(QUEUE_USAGE));
    };
    let args = &words[1..];
    match sub.to_ascii_lowercase().as_str() {
        "create" => {
            let Some((name, rest)) = args.split_first().filter(|(n, _)| !n.starts_with("--"))
            else {
                return Err(usage("`queue create` needs a queue name"));
            };
            let (mut timeout_ms, mut max_attempts) = (0, 0);
            for (flag, value) in flags("queue create", rest)? {
                match flag.as_str() {
                    "attempt-timeout-ms" => {
                        timeout_ms = number("queue create", "attempt-timeout-ms", value)?
                    }
                    "max-attempts" => max_attempts = number("queue create", "max-attempts", value)?,
                    other => return Err(usage(format!("`queue create`: unknown flag --{other}"))),
                }
            }
            Ok(Command::CreateQueue {
                name: (*name).to_owned(),
                timeout_ms,
                max_attempts,
            })
        }
        "delete" => match args {
            [name] => Ok(Command::DeleteQueue((*name).to_owned())),
            _ => Err(usage("usage: `queue delete NAME`")),
        },
        _ => Err(usage(QUEUE_USAGE)),
    }
}

fn parse_show_tasks(args: &[&str]) -> Result<Command, UsageError> {
    let Some((queue, rest)) = args.split_first().filter(|(q, _)| !q.starts_with("--")) else {
        return Err(usage("`show tasks` needs a queue"));
    };
    let (mut state, mut limit) = (String::new(), 100);
    for (flag, value) in flags("show tasks", rest)? {
        match flag.as_str() {
            "state" => state = value.to_ascii_lowercase(),
            "limit" => limit = number("show tasks", "limit", value)?,
            other => return Err(usage(format!("`show tasks`: unknown flag --{other}"))),
        }
    }
    Ok(Command::Tasks {
        queue: (*queue).to_owned(),
        state,
        limit,
    })
}

/// Bytes as text where they are UTF-8, else as hex.
fn text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => bytes.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

/// A task as nebcli's JSON shows it: payload and result as text.
fn task_json(t: &pb::TaskInfo) -> serde_json::Value {
    serde_json::json!({
        "queue": t.queue,
        "name": t.name,
        "state": t.state,
        "payload": text(&t.payload),
        "result": text(&t.result),
        "error": t.error,
        "priority": t.priority,
        "attempt": t.attempt,
        "max_attempts": t.max_attempts,
        "timeout_ms": t.timeout_ms,
        "submitted_ms": t.submitted_ms,
        "not_before_ms": t.not_before_ms,
        "finished_ms": t.finished_ms,
        "seq": t.seq,
        "worker": t.run.as_ref().and_then(|r| r.worker.as_ref()).map(|w| w.node_id),
        "token": t.run.as_ref().map(|r| format!("{}.{}", r.term, r.index)),
    })
}

fn task_line(what: &str, t: &pb::TaskInfo) -> String {
    let mut line = format!(
        "{what} task {} of {}: {} (attempt {} of {})",
        t.name, t.queue, t.state, t.attempt, t.max_attempts
    );
    if let Some(run) = &t.run {
        let node = run.worker.as_ref().map_or(0, |w| w.node_id);
        line.push_str(&format!(
            " on node {node}, token {}.{}",
            run.term, run.index
        ));
    }
    if t.state == "completed" {
        line.push_str(&format!("; result: {}", text(&t.result)));
    }
    if !t.error.is_empty() {
        line.push_str(&format!("; last error: {}", t.error));
    }
    line.push('\n');
    line
}

/// `watch tasks QUEUE [--from INDEX]`.
fn parse_watch(args: &[&str]) -> Result<Command, UsageError> {
    const CMD: &str = "watch tasks";
    let [queue, rest @ ..] = args else {
        return Err(usage("usage: `watch tasks QUEUE [--from INDEX]`"));
    };
    let mut from = 0;
    for (flag, value) in flags(CMD, rest)? {
        match flag.as_str() {
            "from" => from = number(CMD, "from", value)?,
            other => {
                return Err(usage(format!(
                    "`{CMD}`: unknown flag --{other}; usage: `watch tasks QUEUE [--from INDEX]`"
                )));
            }
        }
    }
    Ok(Command::Watch {
        queue: (*queue).to_owned(),
        from,
    })
}

/// A queue's finished tasks, followed (`watch tasks`).
struct QueueWatch {
    queue: String,
}

impl crate::cli::follow::Followed for QueueWatch {
    type Request = pb::WatchQueue;
    type Reply = pb::WatchQueueReply;
    type Notice = pb::QueueNotice;
    const WHAT: &'static str = "the queue watch";

    fn commands(&self) -> (u32, u32) {
        use crate::machines::tasks::TasksCmd;
        use crate::wire::Code;
        (TasksCmd::WatchQueue.code(), TasksCmd::QueueNotice.code())
    }

    fn request(&self, from: u64) -> pb::WatchQueue {
        pb::WatchQueue {
            queue: self.queue.clone(),
            names: Vec::new(),
            start_index: from,
        }
    }

    fn reply_index(reply: &pb::WatchQueueReply) -> (u64, bool) {
        (reply.index, reply.resumed)
    }

    fn notice_index(notice: &pb::QueueNotice) -> u64 {
        notice.index
    }

    fn reply_lines(&self, _: &pb::WatchQueueReply, _: bool) -> String {
        // No names asked about: nothing listed, the tasks that finish from now on follow.
        String::new()
    }

    fn notice_lines(&self, notice: &pb::QueueNotice, json: bool) -> String {
        notice
            .finished
            .iter()
            .map(|t| {
                if json {
                    let line = serde_json::json!({"event": "finished", "index": notice.index, "task": task_json(t)});
                    format!("{line}\n")
                } else {
                    format!("{} index={}\n", task_line("finished", t).trim_end(), notice.index)
                }
            })
            .collect()
    }
}

fn queues_table(reply: &pb::QueuesReply) -> String {
    let rows: Vec<Vec<String>> = reply
        .queues
        .iter()
        .map(|v| {
            let q = v.queue.clone().unwrap_or_default();
            let oldest = if v.oldest_pending_ms == 0 {
                "-".to_owned()
            } else {
                reply.now_ms.saturating_sub(v.oldest_pending_ms).to_string()
            };
            vec![
                q.name,
                v.pending.to_string(),
                v.running.to_string(),
                v.completed.to_string(),
                v.failed.to_string(),
                v.dead.to_string(),
                v.cancelled.to_string(),
                oldest,
                format!("{} ({} slots)", v.workers, v.capacity),
                q.timeout_ms.to_string(),
                q.max_attempts.to_string(),
            ]
        })
        .collect();
    let mut out = stale_warning(reply.stale.as_deref(), Some(reply.index));
    out.push_str(&render(
        &[
            "queue",
            "pending",
            "running",
            "completed",
            "failed",
            "dead",
            "cancelled",
            "oldest_pending_ms",
            "workers",
            "timeout_ms",
            "max_attempts",
        ],
        &rows,
    ));
    out.push_str(&crate::cli::page_note(
        reply.queues.len(),
        reply.total,
        &reply.next,
    ));
    out
}

fn tasks_table(reply: &pb::TasksReply) -> String {
    let rows: Vec<Vec<String>> = reply
        .tasks
        .iter()
        .map(|t| {
            let (node, token) = match &t.run {
                Some(r) => (
                    r.worker.as_ref().map_or(0, |w| w.node_id).to_string(),
                    format!("{}.{}", r.term, r.index),
                ),
                None => ("-".into(), "-".into()),
            };
            let mut result = text(&t.result);
            if result.len() > 40 {
                result.truncate(37);
                result.push_str("...");
            }
            vec![
                t.name.clone(),
                t.state.clone(),
                t.priority.to_string(),
                format!("{}/{}", t.attempt, t.max_attempts),
                node,
                token,
                reply.now_ms.saturating_sub(t.submitted_ms).to_string(),
                if t.state == "pending" && t.not_before_ms > reply.now_ms {
                    (t.not_before_ms - reply.now_ms).to_string()
                } else {
                    "-".into()
                },
                or_dash(&result),
                or_dash(&t.error),
            ]
        })
        .collect();
    let mut out = stale_warning(reply.stale.as_deref(), Some(reply.index));
    out.push_str(&render(
        &[
            "name",
            "state",
            "priority",
            "attempt",
            "worker",
            "token",
            "age_ms",
            "starts_in_ms",
            "result",
            "error",
        ],
        &rows,
    ));
    if reply.total > reply.tasks.len() as u64 {
        out.push_str(&format!(
            "({} of {} shown; --limit N for more)\n",
            reply.tasks.len(),
            reply.total
        ));
    }
    out
}

/// The worker's own address: one of 127.0.0.0/8 named after its process, so two workers on
/// one machine never share a registration.
fn worker_addr() -> SocketAddr {
    let pid = std::process::id();
    SocketAddr::from(([127, (pid >> 16) as u8, (pid >> 8) as u8, pid as u8], 7))
}

/// Runs `exec` through `sh -c` with the payload on its stdin: its stdout is the result; a
/// failed exit is a failure worth retrying, with the end of its stderr as the error.
async fn run_exec(exec: String, input: TaskInput) -> Result<Vec<u8>, TaskFailure> {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&exec)
        .env("BEACON_TASK_QUEUE", &input.queue)
        .env("BEACON_TASK_NAME", &input.name)
        .env("BEACON_TASK_ATTEMPT", input.attempt.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| TaskFailure::retry(format!("cannot run `{exec}`: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(&input.payload).await;
    }
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| TaskFailure::retry(format!("`{exec}`: {e}")))?;
    if out.status.success() {
        return Ok(out.stdout);
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let tail: String = err
        .chars()
        .rev()
        .take(500)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    Err(TaskFailure::retry(format!(
        "`{exec}` {}: {}",
        out.status,
        tail.trim()
    )))
}

/// `task submit --wait`: submits, then waits for the task's outcome at most `--timeout-ms`,
/// so a script can rely on it: exit 0 when it completed, 1 when it failed, went to the dead
/// letters or was cancelled (its line printed either way), 3 when it had not finished in
/// time. A queue no live worker serves is said at once on stderr, not waited on in silence.
async fn submit_and_wait(
    session: &mut Session,
    queue: &str,
    name: &str,
    payload: &str,
    options: &SubmitOptions,
) -> Result<String, Failure> {
    let limit = session.opts.timeout;
    let tasks = Tasks::new(session.servers.clone(), session.opts.clone(), limit);
    let handle = tasks
        .submit_with(queue, name, payload.as_bytes(), options)
        .await?;
    let served = session
        .with_client(async |c| c.queues().await)
        .await
        .ok()
        .and_then(|r| {
            r.queues
                .into_iter()
                .find(|v| v.queue.as_ref().is_some_and(|q| q.name == queue))
        })
        .map(|v| v.workers);
    if served == Some(0) {
        eprintln!(
            "nebcli: no live worker serves queue `{queue}`: the task waits for one (at most {} ms, --timeout-ms)",
            limit.as_millis()
        );
    }
    let outcome = handle.result_within(limit).await;
    let t = tasks.cluster().await.task(queue, name).await?;
    let out = if session.json {
        crate::cli::json(&task_json(&t))
    } else {
        task_line("finished", &t)
    };
    match outcome {
        Ok(TaskOutcome::Completed(_)) => Ok(out),
        Ok(ended) => Err(Failure::Found {
            why: format!("task `{name}` of `{queue}` {}", ended_how(&ended, &t)),
            out,
        }),
        Err(_) if TaskOutcome::of(&t).is_none() => Err(Failure::Unfinished {
            why: format!(
                "task `{name}` of `{queue}` is still {} after {} ms (--timeout-ms); it goes on: `task get {queue} {name}` shows it, `task cancel` stops it",
                t.state,
                limit.as_millis()
            ),
            out: if session.json {
                out
            } else {
                task_line("waiting", &t)
            },
        }),
        Err(e) => Err(e.into()),
    }
}

/// How a task that did not complete ended, in words.
fn ended_how(outcome: &TaskOutcome, t: &pb::TaskInfo) -> String {
    match outcome {
        TaskOutcome::Completed(_) => "completed".into(),
        TaskOutcome::Failed(e) => format!("failed: {e}"),
        TaskOutcome::Dead(e) => {
            format!("went to the dead letters after {} attempts: {e}", t.attempt)
        }
        TaskOutcome::Cancelled(e) if e.is_empty() => "was cancelled".into(),
        TaskOutcome::Cancelled(e) => format!("was cancelled: {e}"),
    }
}

/// A pause before registering again after a lost lease, so that a cluster that keeps
/// ending the registration (a machine too starved to renew) is not asked in a tight loop.
const REGISTER_AGAIN_AFTER: Duration = Duration::from_millis(500);

/// Serves `queues` until a signal: a lost lease (the process was paused, or the cluster
/// could not hear its renewals) ends that registration's attempts, which go back to pending
/// at the leader, and the worker registers again and serves on as a new registration, as a
/// supervisor restarting it would. Any other stop ends the command with its reason.
async fn work(
    session: &Session,
    queues: &[String],
    capacity: u32,
    exec: Option<String>,
    sleep_ms: u64,
    addr: Option<SocketAddr>,
) -> Result<String, Failure> {
    let mut options = RegisterOptions::new("WORKER", addr.unwrap_or_else(worker_addr));
    options.connect = session.opts.clone();
    options.worker_num = capacity;
    // Installed before the first line, and made once: a signal that arrives right after the
    // first line, or between two turns of the loop, is not lost (see cli::stop_signal).
    let stop = crate::cli::stop_signal();
    tokio::pin!(stop);
    let mut first = true;
    loop {
        let registration = tokio::select! {
            registered = Registration::register(session.servers.clone(), options.clone()) => registered?,
            signal = &mut stop => return Ok(format!("{signal}: stopped\n")),
        };
        let exec = exec.clone();
        let mut worker = Worker::start(&registration, queues.to_vec(), capacity, move |input| {
            let exec = exec.clone();
            async move {
                if sleep_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(sleep_ms)).await;
                }
                match exec {
                    Some(exec) => run_exec(exec, input).await,
                    None => Ok(input.payload),
                }
            }
        })
        .await?;
        crate::cli::emit(&format!(
            "node {} serves {} (up to {capacity} at once){}\n",
            registration.node_id(),
            queues.join(","),
            if first {
                "; Ctrl-C or SIGTERM to stop"
            } else {
                ""
            }
        ));
        first = false;
        let mut events = worker.events();
        let why = loop {
            tokio::select! {
                event = events.recv() => {
                    let line = match event {
                        Ok(WorkerEvent::Completed(t)) => format!("completed {} {} attempt {} token {}.{}", t.queue, t.name, t.attempt, t.token.0, t.token.1),
                        Ok(WorkerEvent::Failed(t, e)) => format!("failed {} {} attempt {}: {e}", t.queue, t.name, t.attempt),
                        Ok(WorkerEvent::Lost(t)) => format!("lost {} {} token {}.{}: taken away, stopped", t.queue, t.name, t.token.0, t.token.1),
                        Ok(WorkerEvent::Refused(t, e)) => format!("refused {} {} token {}.{}: {e}", t.queue, t.name, t.token.0, t.token.1),
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => format!("({n} events not shown)"),
                        Err(_) => continue,
                    };
                    crate::cli::emit(&format!("{line}\n"));
                }
                why = worker.stopped() => break why,
                signal = &mut stop => {
                    drop(worker);
                    registration.unregister().await?;
                    return Ok(format!("{signal}: stopped; unregistered: running tasks went back to pending\n"));
                }
            }
        };
        // A worker stream refused because the registration ended stops the worker before
        // the keepalive hears of it: the lease's loss is waited for a lease period.
        let lease = Duration::from_millis(registration.reply().lease_ms);
        let lost = tokio::select! {
            lost = tokio::time::timeout(lease, registration.lost()) => lost,
            signal = &mut stop => return Ok(format!("{signal}: stopped\n")),
        };
        let Ok(lost) = lost else {
            return Err(Failure::Check(format!("the worker stopped: {why}")));
        };
        crate::cli::emit(&format!(
            "node {}: {lost}; its running tasks were stopped (they go back to pending); registering again\n",
            registration.node_id()
        ));
        drop(worker);
        tokio::select! {
            _ = tokio::time::sleep(REGISTER_AGAIN_AFTER) => {}
            signal = &mut stop => return Ok(format!("{signal}: stopped\n")),
        }
    }
}

impl Commands for Command {
    const HELP: &'static [(&'static str, &'static str)] = &[
        (
            "show queues [--limit N] [--from QUEUE]",
            "task queues: pending, running, completed, failed, dead, cancelled, oldest pending age, workers",
        ),
        (
            "show tasks QUEUE [--state S] [--limit N]",
            "a queue's tasks, pending ones first in the order they start in (due ones by priority, highest first, then submission; then delayed ones by when they are due): state, priority, attempt, worker, token, starts_in_ms, result, error",
        ),
        (
            "queue create NAME [--attempt-timeout-ms N] [--max-attempts N]",
            "create a task queue (attempt timeout and attempts before the dead letters; defaults from key `tasks`)",
        ),
        (
            "queue delete NAME",
            "delete a queue and its finished tasks (refused while tasks are pending or running)",
        ),
        (
            "task submit QUEUE NAME [--payload TEXT] [--priority N] [--delay-ms N] [--attempt-timeout-ms N] [--max-attempts N] [--wait]",
            "submit a task; a task of that name pending or running is returned instead of a second one; --wait waits for its outcome, at most --timeout-ms (exit 0 completed, 1 failed, dead or cancelled, 3 not finished in time)",
        ),
        (
            "task get QUEUE NAME",
            "one task, with its result or last error",
        ),
        (
            "task cancel QUEUE NAME",
            "cancel a pending or running task (its worker is told to stop)",
        ),
        (
            "task requeue QUEUE [NAME...]",
            "finished tasks back to pending, attempts reset (none named: every dead letter)",
        ),
        (
            "task purge QUEUE [NAME...]",
            "forget finished tasks (none named: every dead letter)",
        ),
        (
            "watch tasks QUEUE [--from INDEX]",
            "each task of the queue that finishes (completed, failed, dead, cancelled) as a line with its log index (JSON lines with -w json) until Ctrl-C or SIGTERM; follows leader changes, each once; `--from` starts at that log index (refused COMPACTED when the beacons keep no changes that old)",
        ),
        (
            "task work QUEUE[,QUEUE...] [--capacity N] [--exec CMD] [--sleep-ms N]",
            "serve queues as a worker: run CMD through sh with the payload on stdin (stdout is the result), or echo the payload; prints each outcome; registers again when its lease is lost",
        ),
    ];
    const SUBJECTS: &'static [&'static str] = &["queues", "tasks"];

    fn parse(head: &[&str], words: &[&str]) -> Option<Result<Self, UsageError>> {
        Some(match head {
            ["show", "queues"] => {
                crate::cli::list_args("show queues", words.get(2..).unwrap_or_default(), false)
                    .map(|(_, page)| Command::Queues(page))
            }
            ["show", "tasks"] => parse_show_tasks(words.get(2..).unwrap_or_default()),
            ["queue", ..] => parse_queue(&words[1..]),
            ["task", ..] => parse_task(&words[1..]),
            ["watch", "tasks"] => parse_watch(words.get(2..).unwrap_or_default()),
            _ => return None,
        })
    }

    async fn run(&self, session: &mut Session) -> Result<String, Failure> {
        let out = match self {
            Command::Queues(page) => {
                let req = pb::QueuesRequest {
                    limit: page.limit,
                    from: page.from.clone(),
                };
                session
                    .show(async |c| c.queues_matching(&req).await, queues_table)
                    .await?
            }
            Command::Tasks {
                queue,
                state,
                limit,
            } => {
                let reply = session
                    .with_client(async |c| c.tasks(queue, state, *limit, false).await)
                    .await?;
                if session.json {
                    let tasks: Vec<_> = reply.tasks.iter().map(task_json).collect();
                    crate::cli::json(&serde_json::json!({
                        "node": reply.node,
                        "is_leader": reply.is_leader,
                        "total": reply.total,
                        "tasks": tasks,
                    }))
                } else {
                    tasks_table(&reply)
                }
            }
            Command::CreateQueue {
                name,
                timeout_ms,
                max_attempts,
            } => {
                let q = session
                    .cluster()
                    .create_queue(name, *timeout_ms, *max_attempts)
                    .await?;
                session.print(&q, |q| {
                    format!(
                        "queue {}: attempts time out after {} ms; {} attempts before the dead letters\n",
                        q.name, q.timeout_ms, q.max_attempts
                    )
                })
            }
            Command::DeleteQueue(name) => match session.cluster().delete_queue(name).await? {
                Some(q) => session.print(&q, |q| format!("deleted queue {}\n", q.name)),
                None => session.print(&serde_json::Value::Null, |_| {
                    format!("no queue named {name}: nothing to delete\n")
                }),
            },
            Command::Submit {
                queue,
                name,
                payload,
                options,
                wait,
            } => {
                if *wait {
                    submit_and_wait(session, queue, name, payload, options).await?
                } else {
                    let t = session
                        .cluster()
                        .submit_task(queue, name, payload.as_bytes(), options)
                        .await?;
                    if session.json {
                        crate::cli::json(&task_json(&t))
                    } else {
                        task_line("submitted", &t)
                    }
                }
            }
            Command::Watch { queue, from } => {
                let watch = QueueWatch {
                    queue: queue.clone(),
                };
                crate::cli::follow::follow(session, watch, *from).await?
            }
            Command::Get { queue, name } => {
                let t = session
                    .with_client(async |c| c.task(queue, name).await)
                    .await?;
                if session.json {
                    crate::cli::json(&task_json(&t))
                } else {
                    task_line("", &t).trim_start().to_owned()
                }
            }
            Command::Cancel { queue, name } => {
                let t = session.cluster().cancel_task(queue, name).await?;
                if session.json {
                    crate::cli::json(&task_json(&t))
                } else {
                    task_line("cancelled", &t)
                }
            }
            Command::Requeue { queue, names } | Command::Purge { queue, names } => {
                let requeue = matches!(self, Command::Requeue { .. });
                let mut cluster = session.cluster();
                let done = if requeue {
                    cluster.requeue_tasks(queue, names).await?
                } else {
                    cluster.purge_tasks(queue, names).await?
                };
                if session.json {
                    crate::cli::json(&done.iter().map(task_json).collect::<Vec<_>>())
                } else {
                    let what = if requeue { "requeued" } else { "purged" };
                    let listed: Vec<&str> = done.iter().map(|t| t.name.as_str()).collect();
                    format!(
                        "{what} {} tasks of {queue}{}{}\n",
                        done.len(),
                        if listed.is_empty() { "" } else { ": " },
                        listed.join(" ")
                    )
                }
            }
            Command::Work {
                queues,
                capacity,
                exec,
                sleep_ms,
                addr,
            } => work(session, queues, *capacity, exec.clone(), *sleep_ms, *addr).await?,
        };
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
