//! A worker's side of task queues: a registration that serves queues and runs the tasks
//! the leader starts on it.
//!
//! The leader pushes each task started on this worker over one stream; the worker runs it
//! with the handler, sends heartbeats while it runs (so a long task is not taken for a hung
//! one), and reports the result or the failure under the attempt's fencing token. When an
//! attempt is taken away (timed out, cancelled) or the lease is lost, its handler is
//! stopped: a task this worker no longer owns does not run on here.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::task::{AbortHandle, JoinHandle};

use super::attempt_of;
use crate::machines::registry::Registration;
use crate::machines::tasks::wire::{TasksCmd, TasksErrorCode};
use crate::net::{Client, ClientError, Cluster};
use crate::pb::tasks as pb;
use crate::wire::Code;

/// A task as the handler gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInput {
    pub queue: String,
    pub name: String,
    pub payload: Vec<u8>,
    /// Which attempt this is (1 for the first).
    pub attempt: u32,
    /// The attempt's fencing token: it rises with each attempt of the task.
    pub token: (u64, u64),
}

/// Why a handler did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFailure {
    pub error: String,
    /// Worth another attempt (while attempts are left).
    pub retry: bool,
}

impl TaskFailure {
    /// A failure worth another attempt.
    pub fn retry(error: impl Into<String>) -> TaskFailure {
        TaskFailure {
            error: error.into(),
            retry: true,
        }
    }

    /// A failure no attempt will fix: the task fails for good.
    pub fn fatal(error: impl Into<String>) -> TaskFailure {
        TaskFailure {
            error: error.into(),
            retry: false,
        }
    }
}

/// What happened to one attempt on this worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerEvent {
    /// The result was accepted: this attempt is the task's one completion.
    Completed(TaskInput),
    /// The failure was recorded.
    Failed(TaskInput, String),
    /// The attempt was taken away (timed out, cancelled, lease lost); its handler stopped.
    Lost(TaskInput),
    /// The report was refused: the attempt had been taken away meanwhile.
    Refused(TaskInput, String),
}

/// Counts of what the worker did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WorkerStats {
    pub started: u64,
    pub completed: u64,
    pub failed: u64,
    pub lost: u64,
    pub refused: u64,
}

#[derive(Default)]
struct Counters {
    started: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    lost: AtomicU64,
    refused: AtomicU64,
}

type Handler = Arc<
    dyn Fn(
            TaskInput,
        ) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<u8>, TaskFailure>> + Send>>
        + Send
        + Sync,
>;

/// Attempts running here, by task: their token and their runner.
type Active = Arc<Mutex<HashMap<(String, String), ((u64, u64), AbortHandle)>>>;

/// A task's attempt: its queue and name, and its token.
type AttemptKey = ((String, String), (u64, u64));

/// How many attempts that ended here a worker remembers.
const FINISHED_KEPT: usize = 4096;

/// Attempts whose handler ran to its end here, the latest [`FINISHED_KEPT`]: the leader may list
/// one as running here again while its report is on its way (a new leader answering the
/// worker stream before the report reached it), and running it twice would report twice.
#[derive(Debug, Default)]
struct FinishedAttempts {
    order: std::collections::VecDeque<AttemptKey>,
    kept: std::collections::HashSet<AttemptKey>,
}

impl FinishedAttempts {
    fn insert(&mut self, attempt: AttemptKey) {
        if !self.kept.insert(attempt.clone()) {
            return;
        }
        self.order.push_back(attempt);
        if self.order.len() > FINISHED_KEPT
            && let Some(oldest) = self.order.pop_front()
        {
            self.kept.remove(&oldest);
        }
    }

    fn contains(&self, attempt: &AttemptKey) -> bool {
        self.kept.contains(attempt)
    }
}

/// Reports go over a few connections, so one slow report does not hold up the others.
struct Reporters {
    pool: Vec<tokio::sync::Mutex<Cluster>>,
    next: AtomicU64,
}

impl Reporters {
    async fn get(&self) -> tokio::sync::MutexGuard<'_, Cluster> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) as usize % self.pool.len();
        self.pool[i].lock().await
    }
}

struct Context {
    handler: Handler,
    reporters: Reporters,
    active: Active,
    /// Locked inside `active`'s lock, never the other way round.
    ended: Mutex<FinishedAttempts>,
    counters: Counters,
    events: broadcast::Sender<WorkerEvent>,
    /// The longest pause between heartbeats (a third of the timeout when that is shorter).
    heartbeat: Duration,
}

/// A registration serving task queues.
pub struct Worker {
    ctx: Arc<Context>,
    follow: JoinHandle<String>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.follow.abort();
        stop_all(&self.ctx.active);
    }
}

fn stop_all(active: &Active) {
    for (_, (_, runner)) in active.lock().expect("active").drain() {
        runner.abort();
    }
}

impl Worker {
    /// Serves `queues` as `registration`, running up to `capacity` tasks at once with
    /// `handler`. Fails at once if a queue does not exist or the registration is not live.
    pub async fn start<F, Fut>(
        registration: &Registration,
        queues: Vec<String>,
        capacity: u32,
        handler: F,
    ) -> Result<Worker, ClientError>
    where
        F: Fn(TaskInput) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<u8>, TaskFailure>> + Send + 'static,
    {
        let cluster = || {
            Cluster::new(
                registration.reply().beacons.clone(),
                registration.connect_options().clone(),
                registration.retry_for(),
            )
        };
        let (term, index) = registration.fencing_token();
        let req = pb::Work {
            node_id: registration.node_id(),
            term,
            index,
            queues,
            capacity,
        };
        let mut stream = cluster();
        let (conn, first): (Client, pb::WorkReply) = stream
            .open_stream(TasksCmd::Work, &req, "the worker stream")
            .await?;
        let ctx = Arc::new(Context {
            handler: Arc::new(move |input| Box::pin(handler(input))),
            reporters: Reporters {
                pool: (0..capacity.clamp(1, 8))
                    .map(|_| tokio::sync::Mutex::new(cluster()))
                    .collect(),
                next: AtomicU64::new(0),
            },
            active: Arc::new(Mutex::new(HashMap::new())),
            ended: Mutex::new(FinishedAttempts::default()),
            counters: Counters::default(),
            events: broadcast::channel(4096).0,
            heartbeat: Duration::from_secs(10),
        });
        let lost = registration.lease_lost();
        let follow = tokio::spawn(follow(ctx.clone(), stream, req, conn, first, lost));
        Ok(Worker { ctx, follow })
    }

    /// What the worker did so far.
    pub fn stats(&self) -> WorkerStats {
        let c = &self.ctx.counters;
        WorkerStats {
            started: c.started.load(Ordering::Relaxed),
            completed: c.completed.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            lost: c.lost.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
        }
    }

    /// Every attempt's end from now on (a lagging receiver loses the oldest).
    pub fn events(&self) -> broadcast::Receiver<WorkerEvent> {
        self.ctx.events.subscribe()
    }

    /// Tasks running here now.
    pub fn running(&self) -> usize {
        self.ctx.active.lock().expect("active").len()
    }

    /// Waits until the worker stops (its lease lost, or an error no retry fixes): why.
    pub async fn stopped(&mut self) -> String {
        (&mut self.follow)
            .await
            .unwrap_or_else(|e| format!("the worker's task ended: {e}"))
    }

    /// Stops serving: running handlers are stopped, unreported.
    pub fn stop(self) {}
}

fn input_of(task: &pb::TaskInfo) -> Option<TaskInput> {
    Some(TaskInput {
        queue: task.queue.clone(),
        name: task.name.clone(),
        payload: task.payload.clone(),
        attempt: task.attempt,
        token: attempt_of(task)?,
    })
}

/// Runs `task` unless this very attempt runs here already, or ran here to its end.
fn begin(ctx: &Arc<Context>, task: &pb::TaskInfo) {
    let Some(input) = input_of(task) else {
        return;
    };
    let key = (input.queue.clone(), input.name.clone());
    let mut active = ctx.active.lock().expect("active");
    if ctx
        .ended
        .lock()
        .expect("ended")
        .contains(&(key.clone(), input.token))
    {
        return;
    }
    if let Some((token, runner)) = active.get(&key) {
        if *token == input.token {
            return;
        }
        // A newer attempt of the task is ours: the old one was lost.
        runner.abort();
    }
    ctx.counters.started.fetch_add(1, Ordering::Relaxed);
    // Three heartbeats per timeout, so one lost beat does not cost the attempt.
    let beat = Duration::from_millis((task.timeout_ms / 3).max(50)).min(ctx.heartbeat);
    let runner = tokio::spawn(run(ctx.clone(), input.clone(), beat));
    active.insert(key, (input.token, runner.abort_handle()));
}

/// Stops the attempt `token` of a task if it runs here.
fn lose(ctx: &Context, queue: &str, name: &str, token: (u64, u64)) {
    let key = (queue.to_owned(), name.to_owned());
    let mut active = ctx.active.lock().expect("active");
    if active.get(&key).is_some_and(|(t, _)| *t == token)
        && let Some((_, runner)) = active.remove(&key)
    {
        runner.abort();
        ctx.counters.lost.fetch_add(1, Ordering::Relaxed);
        let _ = ctx.events.send(WorkerEvent::Lost(TaskInput {
            queue: queue.to_owned(),
            name: name.to_owned(),
            payload: Vec::new(),
            attempt: 0,
            token,
        }));
    }
}

/// Runs one attempt: the handler, heartbeats meanwhile, then the report.
async fn run(ctx: Arc<Context>, input: TaskInput, beat: Duration) {
    let work = (ctx.handler)(input.clone());
    let beats = async {
        loop {
            tokio::time::sleep(beat).await;
            let beat = ctx
                .reporters
                .get()
                .await
                .heartbeat_task(&input.queue, &input.name, input.token)
                .await;
            if let Err(e) = beat
                && e.is(TasksErrorCode::NotTaskHolder)
            {
                return e.to_string();
            }
        }
    };
    let outcome = tokio::select! {
        outcome = work => Ok(outcome),
        why = beats => Err(why),
    };
    // From here on a lost notice no longer stops this runner: it only reports.
    {
        let mut active = ctx.active.lock().expect("active");
        let key = (input.queue.clone(), input.name.clone());
        if outcome.is_ok() {
            ctx.ended
                .lock()
                .expect("ended")
                .insert((key.clone(), input.token));
        }
        if active.get(&key).is_some_and(|(t, _)| *t == input.token) {
            active.remove(&key);
        }
    }
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(_) => {
            ctx.counters.lost.fetch_add(1, Ordering::Relaxed);
            let _ = ctx.events.send(WorkerEvent::Lost(input));
            return;
        }
    };
    let reported = {
        let mut cluster = ctx.reporters.get().await;
        match &outcome {
            Ok(result) => {
                cluster
                    .complete_task(&input.queue, &input.name, input.token, result)
                    .await
            }
            Err(f) => {
                cluster
                    .fail_task(&input.queue, &input.name, input.token, &f.error, f.retry)
                    .await
            }
        }
    };
    let event = match (reported, outcome) {
        (Ok(_), Ok(_)) => {
            ctx.counters.completed.fetch_add(1, Ordering::Relaxed);
            WorkerEvent::Completed(input)
        }
        (Ok(_), Err(f)) => {
            ctx.counters.failed.fetch_add(1, Ordering::Relaxed);
            WorkerEvent::Failed(input, f.error)
        }
        (Err(e), _) => {
            ctx.counters.refused.fetch_add(1, Ordering::Relaxed);
            WorkerEvent::Refused(input, e.to_string())
        }
    };
    let _ = ctx.events.send(event);
}

/// Follows what the leader starts on this worker, across failovers, until the lease is lost.
async fn follow(
    ctx: Arc<Context>,
    mut cluster: Cluster,
    req: pb::Work,
    conn: Client,
    first: pb::WorkReply,
    mut lost: tokio::sync::watch::Receiver<Option<crate::machines::registry::LeaseLost>>,
) -> String {
    let mut conn = Some(conn);
    resync(&ctx, first);
    loop {
        let Some(c) = conn.as_mut() else {
            // Serve again at the next leader, unless the lease is lost meanwhile.
            let opened = tokio::select! {
                opened = cluster.open_stream(TasksCmd::Work, &req, "the worker stream") => opened,
                _ = lost.wait_for(Option::is_some) => break,
            };
            match opened {
                Ok((c, reply)) => {
                    conn = Some(c);
                    resync(&ctx, reply);
                }
                // Refused for good (the registration ended, a queue was deleted).
                Err(e @ ClientError::Refused { .. }) if !e.is_retryable() => {
                    stop_all(&ctx.active);
                    return e.to_string();
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
            continue;
        };
        let frame = tokio::select! {
            frame = c.next_pushed("the worker stream") => frame,
            _ = lost.wait_for(Option::is_some) => break,
        };
        let notice = frame.ok().filter(|f| f.cmd == TasksCmd::WorkNotice.code());
        match notice.and_then(|f| f.decode::<pb::WorkNotice>().ok()) {
            Some(notice) => {
                for t in &notice.lost {
                    if let Some(token) = attempt_of(t) {
                        lose(&ctx, &t.queue, &t.name, token);
                    }
                }
                for t in &notice.started {
                    begin(&ctx, t);
                }
            }
            None => conn = None,
        }
    }
    stop_all(&ctx.active);
    lost.borrow()
        .clone()
        .map_or("the worker stream ended".to_owned(), |l| l.to_string())
}

/// A fresh start of the stream: what runs here but the leader does not list was taken away
/// meanwhile; what it lists and does not run here starts.
fn resync(ctx: &Arc<Context>, reply: pb::WorkReply) {
    let listed: Vec<((String, String), (u64, u64))> = reply
        .running
        .iter()
        .filter_map(|t| Some(((t.queue.clone(), t.name.clone()), attempt_of(t)?)))
        .collect();
    let gone: Vec<((String, String), (u64, u64))> = ctx
        .active
        .lock()
        .expect("active")
        .iter()
        .filter(|(k, (t, _))| !listed.contains(&((*k).clone(), *t)))
        .map(|(k, (t, _))| (k.clone(), *t))
        .collect();
    for ((queue, name), token) in gone {
        lose(ctx, &queue, &name, token);
    }
    for task in &reply.running {
        begin(ctx, task);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_that_ended_here_is_remembered_until_many_later_ones_ended() {
        let attempt = |n: u64| (("q".to_owned(), format!("t{n}")), (1, n));
        let mut ended = FinishedAttempts::default();
        ended.insert(attempt(0));
        ended.insert(attempt(0));
        assert!(ended.contains(&attempt(0)));
        assert!(
            !ended.contains(&(("q".to_owned(), "t0".to_owned()), (2, 0))),
            "another attempt of it runs"
        );
        for n in 1..=FINISHED_KEPT as u64 {
            ended.insert(attempt(n));
        }
        assert!(!ended.contains(&attempt(0)), "the oldest is forgotten");
        assert!(ended.contains(&attempt(1)));
        assert_eq!(ended.order.len(), FINISHED_KEPT);
        assert_eq!(ended.kept.len(), FINISHED_KEPT);
    }
}
