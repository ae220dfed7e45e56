//! The task-queue machine's leader-side service: the seed's master, built in. It checks and
//! appends submits, completions and failures; starts pending tasks on the workers with free
//! capacity (fewest running first, by priority then submission order) right after every
//! request and on every tick; puts the running tasks of a worker whose registration ended
//! back to pending in the command that retires it; and retries attempts that outlived their
//! timeout with exponential backoff and jitter, to the dead letters after `max_attempts`.
//!
//! What it decides on is replicated, so a new leader needs no reload. It keeps two things
//! of its own: each running attempt's deadline (a new leader gives every attempt a full
//! timeout afresh: waiting longer, never less), and the offset of the wall clock from its
//! own, learned from requests (times a task waits for, `not_before`, are wall-clock times;
//! until the offset is known, a delayed task waits).

use std::collections::{BTreeMap, HashMap};

use super::state::{
    After, Command, Finish, InvalidName, QueueSpec, Run, Task, TaskStart, TaskState, Tasks,
    WorkerId, WorkerSpec, check_name,
};
use crate::consensus::{Leader, Outcome, Service};
use crate::machines::Part;
use crate::machines::registry::{FencingToken, NodeId, Registry};
use crate::time::Millis;

/// The configured limits and defaults (config key `tasks`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskLimits {
    /// Largest payload, and largest result, of one task.
    pub max_payload_bytes: usize,
    /// Tasks the cluster holds at most, in all queues and states.
    pub max_tasks: usize,
    pub max_queues: usize,
    /// How long a finished task (completed, failed, cancelled) and its result are kept.
    /// Dead letters are kept until requeued or purged.
    pub result_ttl_ms: u64,
    /// A queue's attempt timeout, unless it names its own.
    pub default_timeout_ms: u64,
    /// A queue's attempts before the dead letters, unless it names its own.
    pub default_max_attempts: u32,
    /// A retry waits `backoff_base_ms * 2^(attempt - 1)`, at most `backoff_max_ms`, less a
    /// random part of up to half of it (jitter).
    pub backoff_base_ms: u64,
    pub backoff_max_ms: u64,
}

impl Default for TaskLimits {
    fn default() -> TaskLimits {
        TaskLimits {
            max_payload_bytes: 64 * 1024,
            max_tasks: 100_000,
            max_queues: 1_000,
            result_ttl_ms: 3_600_000,
            default_timeout_ms: 30_000,
            default_max_attempts: 5,
            backoff_base_ms: 1_000,
            backoff_max_ms: 60_000,
        }
    }
}

/// Most tasks one worker runs at once.
pub const MAX_CAPACITY: u32 = 10_000;
/// Longest attempt timeout: a day.
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    CreateQueue {
        name: String,
        timeout_ms: Option<u64>,
        max_attempts: Option<u32>,
        wall_ms: u64,
    },
    DeleteQueue(String),
    Submit {
        queue: String,
        name: String,
        payload: Vec<u8>,
        priority: i32,
        timeout_ms: Option<u64>,
        max_attempts: Option<u32>,
        /// Not started before `wall_ms + delay_ms`.
        delay_ms: u64,
        /// The client's ID for this submit, kept across its retries (0: none).
        submit_id: u64,
        wall_ms: u64,
    },
    /// A live registration serves these queues, up to `capacity` tasks at once.
    Serve {
        worker: WorkerId,
        queues: Vec<String>,
        capacity: u32,
        wall_ms: u64,
    },
    /// The worker running attempt `token` is still at it: its timeout starts again.
    Heartbeat {
        queue: String,
        name: String,
        token: FencingToken,
    },
    Complete {
        queue: String,
        name: String,
        token: FencingToken,
        result: Vec<u8>,
        wall_ms: u64,
    },
    Fail {
        queue: String,
        name: String,
        token: FencingToken,
        error: String,
        /// Worth another attempt (if any are left); otherwise the task fails for good.
        retry: bool,
        wall_ms: u64,
    },
    Cancel {
        queue: String,
        name: String,
        wall_ms: u64,
    },
    /// Finished tasks back to pending (none named: every dead letter of the queue).
    Requeue {
        queue: String,
        names: Vec<String>,
    },
    /// Finished tasks forgotten (none named: every dead letter of the queue).
    Purge {
        queue: String,
        names: Vec<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// Boxed: every machine's answer is as large as its largest variant, and an answer is
    /// moved a few times on its way to its connection (see the registry's `Response`).
    Task(Box<Task>),
    Tasks(Vec<Task>),
    /// The queue as it is (after create), or as it was (after delete; `None` if none was).
    Queue(Option<QueueSpec>),
    Served,
}

/// Why a request was refused; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    #[error(transparent)]
    Name(#[from] InvalidName),
    #[error("{0}")]
    Invalid(String),
    #[error("{what} of {size} bytes is over the limit of {max} (key `tasks.max_payload_bytes`)")]
    TooLarge {
        what: &'static str,
        size: usize,
        max: usize,
    },
    #[error("no queue named `{0}`: create it first (`nebcli queue create {0}`)")]
    UnknownQueue(String),
    #[error("queue `{queue}` has no task named `{name}`")]
    UnknownTask { queue: String, name: String },
    #[error(
        "queue `{name}` exists with timeout {timeout_ms} ms and {max_attempts} attempts; delete it first to change it"
    )]
    QueueConflict {
        name: String,
        timeout_ms: u64,
        max_attempts: u32,
    },
    #[error("queue `{queue}` has {live} pending or running tasks: cancel them first")]
    QueueInUse { queue: String, live: usize },
    #[error("this cluster holds {max} {what}, the most it may (key `tasks.{key}`)")]
    TooMany {
        what: &'static str,
        max: usize,
        key: &'static str,
    },
    #[error(
        "task `{name}` of `{queue}` is not running under token {named} ({now}); nothing was changed"
    )]
    NotHolder {
        queue: String,
        name: String,
        named: FencingToken,
        now: String,
    },
    #[error("task `{name}` of `{queue}` is {state} already")]
    Finished {
        queue: String,
        name: String,
        state: &'static str,
    },
    #[error("node {0} with that fencing token holds no live registration")]
    NotRegistered(NodeId),
}

/// What a write waits with until committed.
#[derive(Debug, Clone)]
pub enum Waiting {
    /// Answer with the task as the write left it (a later write may have changed it since;
    /// the answer is about this one).
    Task(Task),
    Tasks(Vec<Task>),
    /// Answer with the queue as the committed state has it (or as it was, deleted).
    Queue(String, Option<QueueSpec>),
    Served,
}

/// The task-queue machine's leader-side service.
#[derive(Debug, Clone, Default)]
pub struct TaskService {
    limits: TaskLimits,
    /// Each running attempt's deadline on this leader's clock, by task.
    deadlines: HashMap<(String, String), (FencingToken, Millis)>,
    /// When finished tasks were last looked over for expiry.
    last_sweep: Millis,
}

/// Returns the refusal if `$check` fails.
macro_rules! refuse {
    ($check:expr) => {
        if let Err(e) = $check {
            return Outcome::Now(Err(e.into()));
        }
    };
}

fn tasks<S: Part<Tasks>>(state: &S) -> &Tasks {
    state.part()
}

/// Whether `worker` is a live registration.
fn live<S: Part<Registry>>(state: &S, worker: &WorkerId) -> bool {
    state.part().is_live(worker.0, worker.1)
}

/// Whether `worker` is a live registration in rotation (not critical, not draining): only
/// such a worker is given new tasks; one that is not finishes what it runs.
fn takes_work<S: Part<Registry>>(state: &S, worker: &WorkerId) -> bool {
    let registry: &Registry = state.part();
    registry
        .get(worker.0)
        .is_some_and(|r| r.token() == worker.1 && r.health().serving())
}

/// A number spread over u64 from its inputs (splitmix64): the jitter of a retry, decided by
/// the leader and replicated as the retry's time, so no replica draws on its own.
fn spread(name: &str, attempt: u32, index: u64) -> u64 {
    let mut x = index ^ (u64::from(attempt) << 32);
    for b in name.bytes() {
        x = x.rotate_left(5) ^ u64::from(b);
    }
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl TaskService {
    pub fn new(limits: TaskLimits) -> TaskService {
        TaskService {
            limits,
            ..TaskService::default()
        }
    }

    pub fn limits(&self) -> &TaskLimits {
        &self.limits
    }

    /// How long the retry after `attempt` attempts waits: exponential, capped, jittered.
    pub fn backoff_ms(&self, name: &str, attempt: u32, index: u64) -> u64 {
        let exp = attempt.saturating_sub(1).min(32);
        let full = self
            .limits
            .backoff_base_ms
            .saturating_mul(1u64 << exp)
            .min(self.limits.backoff_max_ms);
        let half = full / 2;
        full - spread(name, attempt, index) % (half + 1)
    }

    /// How the running attempt of `task` ends when it was not the worker's choice (a
    /// timeout, or the worker's end): retried after a backoff, or dead without attempts left.
    fn ended(&self, task: &Task, run: &Run, error: String, wall: u64, backoff: bool) -> Finish {
        let to = if task.attempt >= task.max_attempts {
            After::Dead
        } else {
            let wait = if backoff {
                self.backoff_ms(&task.name, task.attempt, run.token.index)
            } else {
                0
            };
            After::Retry {
                not_before_ms: if wait == 0 { 0 } else { wall + wait },
            }
        };
        Finish {
            queue: task.queue.clone(),
            name: task.name.clone(),
            token: Some(run.token),
            to,
            error,
            at_ms: wall,
        }
    }

    /// Starts pending tasks on workers with free capacity: per queue, in priority then
    /// submission order, each on the live worker in rotation (neither critical nor
    /// draining) serving it that runs fewest (ties: lowest node ID). One command for all.
    fn dispatch<S: Part<Registry> + Part<Tasks>>(&mut self, leader: &mut Leader<'_, S>) {
        let wall = leader.wall_ms();
        let state = tasks(leader.state());
        let mut free: BTreeMap<WorkerId, (usize, usize)> = state
            .workers()
            .filter(|w| takes_work(leader.state(), &w.id))
            .filter_map(|w| {
                let running = state.running_count(&w.id);
                let room = (w.capacity as usize).saturating_sub(running);
                (room > 0).then_some((w.id, (running, room)))
            })
            .collect();
        if free.is_empty() {
            return;
        }
        let token = FencingToken {
            term: leader.term(),
            index: leader.next_index(),
        };
        let started_ms = wall;
        let mut starts = Vec::new();
        for queue in state.queues().filter(|q| q.pending_len() > 0) {
            let serving: Vec<WorkerId> = state
                .workers()
                .filter(|w| free.contains_key(&w.id) && w.queues.contains(&queue.spec.name))
                .map(|w| w.id)
                .collect();
            if serving.is_empty() {
                continue;
            }
            // Bounded: a queue of delayed tasks does not make every request scan it all.
            for task in queue.pending().take(4096) {
                if task.not_before_ms > 0 && wall < task.not_before_ms {
                    continue;
                }
                let Some(worker) = serving
                    .iter()
                    .filter(|w| free[w].1 > 0)
                    .min_by_key(|w| (free[w].0, w.0))
                    .copied()
                else {
                    break;
                };
                let slot = free.get_mut(&worker).expect("listed");
                slot.0 += 1;
                slot.1 -= 1;
                starts.push(TaskStart {
                    queue: task.queue.clone(),
                    name: task.name.clone(),
                    run: Run {
                        worker,
                        token,
                        started_ms,
                    },
                });
            }
        }
        if !starts.is_empty() {
            let now = leader.now();
            for s in &starts {
                let timeout = state.task(&s.queue, &s.name).map_or(0, |t| t.timeout_ms);
                self.deadlines
                    .insert((s.queue.clone(), s.name.clone()), (token, now + timeout));
            }
            leader.append(<S as Part<Tasks>>::wrap(Command::Start(starts)));
        }
    }

    fn check_payload(&self, what: &'static str, bytes: &[u8]) -> Result<(), TaskError> {
        if bytes.len() > self.limits.max_payload_bytes {
            return Err(TaskError::TooLarge {
                what,
                size: bytes.len(),
                max: self.limits.max_payload_bytes,
            });
        }
        Ok(())
    }

    fn create_queue<S: Part<Tasks>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        spec: QueueSpec,
    ) -> Outcome<Response, TaskError, Waiting> {
        refuse!(check_name("queue", &spec.name));
        refuse!(check_timeout(spec.timeout_ms));
        refuse!(check_attempts(spec.max_attempts));
        let state = tasks(leader.state());
        if let Some(old) = state.queue(&spec.name) {
            if old.spec.timeout_ms == spec.timeout_ms && old.spec.max_attempts == spec.max_attempts
            {
                return committed(leader, Waiting::Queue(spec.name, None));
            }
            return Outcome::Now(Err(TaskError::QueueConflict {
                name: spec.name,
                timeout_ms: old.spec.timeout_ms,
                max_attempts: old.spec.max_attempts,
            }));
        }
        if state.queues().count() >= self.limits.max_queues {
            return Outcome::Now(Err(TaskError::TooMany {
                what: "queues",
                max: self.limits.max_queues,
                key: "max_queues",
            }));
        }
        let name = spec.name.clone();
        write(
            leader,
            Command::CreateQueue(spec),
            Waiting::Queue(name, None),
        )
    }

    fn delete_queue<S: Part<Tasks>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        name: String,
    ) -> Outcome<Response, TaskError, Waiting> {
        refuse!(check_name("queue", &name));
        let Some(queue) = tasks(leader.state()).queue(&name) else {
            return committed(leader, Waiting::Queue(name, None));
        };
        let live = queue.tasks().filter(|t| !t.state.is_finished()).count();
        if live > 0 {
            return Outcome::Now(Err(TaskError::QueueInUse { queue: name, live }));
        }
        let old = queue.spec.clone();
        write(
            leader,
            Command::DeleteQueue(name.clone()),
            Waiting::Queue(name, Some(old)),
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn submit<S: Part<Tasks>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        queue: String,
        name: String,
        payload: Vec<u8>,
        priority: i32,
        timeout_ms: Option<u64>,
        max_attempts: Option<u32>,
        delay_ms: u64,
        submit_id: u64,
        wall_ms: u64,
    ) -> Outcome<Response, TaskError, Waiting> {
        refuse!(check_name("queue", &queue));
        refuse!(check_name("task", &name));
        refuse!(self.check_payload("payload", &payload));
        if let Some(t) = timeout_ms {
            refuse!(check_timeout(t));
        }
        if let Some(a) = max_attempts {
            refuse!(check_attempts(a));
        }
        let state = tasks(leader.state());
        let Some(q) = state.queue(&queue) else {
            return Outcome::Now(Err(TaskError::UnknownQueue(queue)));
        };
        let existing = q.get(&name);
        let retried = |t: &Task| submit_id != 0 && t.submit_id == submit_id;
        if existing.is_some_and(|t| !t.state.is_finished() || retried(t)) {
            // The same task is never pending or running twice: the one there is the answer.
            // Nor is a finished one run again by the retry of the submit that made it (its
            // answer lost in a failover): the same submit ID is answered with it as it is.
            return committed(leader, task_now(leader, &queue, &name));
        }
        if existing.is_none() && state.len() >= self.limits.max_tasks {
            return Outcome::Now(Err(TaskError::TooMany {
                what: "tasks",
                max: self.limits.max_tasks,
                key: "max_tasks",
            }));
        }
        let task = Task {
            timeout_ms: timeout_ms.unwrap_or(q.spec.timeout_ms),
            max_attempts: max_attempts.unwrap_or(q.spec.max_attempts),
            queue: queue.clone(),
            name: name.clone(),
            payload,
            priority,
            submitted_ms: wall_ms,
            seq: leader.next_index(),
            submit_id,
            not_before_ms: if delay_ms > 0 { wall_ms + delay_ms } else { 0 },
            attempt: 0,
            state: TaskState::Pending,
            error: String::new(),
            finished_ms: 0,
            ended: None,
        };
        write_task(leader, Command::Submit(task), &queue, &name)
    }

    fn serve<S: Part<Registry> + Part<Tasks>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        spec: WorkerSpec,
    ) -> Outcome<Response, TaskError, Waiting> {
        if spec.capacity == 0 || spec.capacity > MAX_CAPACITY {
            return Outcome::Now(Err(TaskError::Invalid(format!(
                "a worker runs 1 to {MAX_CAPACITY} tasks at once, not {}",
                spec.capacity
            ))));
        }
        if spec.queues.is_empty() {
            return Outcome::Now(Err(TaskError::Invalid(
                "name at least one queue to serve".into(),
            )));
        }
        for q in &spec.queues {
            refuse!(check_name("queue", q));
            if tasks(leader.state()).queue(q).is_none() {
                return Outcome::Now(Err(TaskError::UnknownQueue(q.clone())));
            }
        }
        if !live(leader.state(), &spec.id) {
            return Outcome::Now(Err(TaskError::NotRegistered(spec.id.0)));
        }
        if tasks(leader.state()).worker(&spec.id) == Some(&spec) {
            return committed(leader, Waiting::Served);
        }
        write(leader, Command::Serve(spec), Waiting::Served)
    }

    /// The running attempt `token` of a task, or why there is none.
    fn held<'s>(
        state: &'s Tasks,
        queue: &str,
        name: &str,
        token: FencingToken,
    ) -> Result<(&'s Task, &'s Run), TaskError> {
        check_name("queue", queue)?;
        check_name("task", name)?;
        let q = state
            .queue(queue)
            .ok_or_else(|| TaskError::UnknownQueue(queue.to_owned()))?;
        let task = q.get(name).ok_or_else(|| TaskError::UnknownTask {
            queue: queue.to_owned(),
            name: name.to_owned(),
        })?;
        match task.running() {
            Some(run) if run.token == token => Ok((task, run)),
            other => Err(TaskError::NotHolder {
                queue: queue.to_owned(),
                name: name.to_owned(),
                named: token,
                now: match other {
                    Some(run) => format!(
                        "attempt {} runs under token {} on node {}",
                        task.attempt, run.token, run.worker.0
                    ),
                    None => format!("it is {}", task.state.name()),
                },
            }),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn end<S: Part<Tasks>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        queue: String,
        name: String,
        token: FencingToken,
        outcome: Result<Vec<u8>, (String, bool)>,
        wall_ms: u64,
    ) -> Outcome<Response, TaskError, Waiting> {
        if let Ok(result) = &outcome {
            refuse!(self.check_payload("result", result));
        }
        let state = tasks(leader.state());
        let (task, run) = match Self::held(state, &queue, &name, token) {
            Ok(held) => held,
            Err(e) => {
                // The same report again (its answer was lost): answered with what it did.
                let repeat = state.task(&queue, &name).is_some_and(|t| {
                    t.ended == Some(token)
                        && match &outcome {
                            Ok(result) => t.state == TaskState::Completed(result.clone()),
                            Err(_) => !matches!(t.state, TaskState::Completed(_)),
                        }
                });
                if repeat {
                    return committed(leader, task_now(leader, &queue, &name));
                }
                return Outcome::Now(Err(e));
            }
        };
        let finish = match outcome {
            Ok(result) => Finish {
                queue: queue.clone(),
                name: name.clone(),
                token: Some(token),
                to: After::Completed(result),
                error: String::new(),
                at_ms: wall_ms,
            },
            Err((error, true)) => self.ended(task, run, error, wall_ms, true),
            Err((error, false)) => Finish {
                queue: queue.clone(),
                name: name.clone(),
                token: Some(token),
                to: After::Failed,
                error,
                at_ms: wall_ms,
            },
        };
        self.deadlines.remove(&(queue.clone(), name.clone()));
        write_task(leader, Command::Finish(vec![finish]), &queue, &name)
    }

    fn cancel<S: Part<Tasks>>(
        &mut self,
        leader: &mut Leader<'_, S>,
        queue: String,
        name: String,
        wall_ms: u64,
    ) -> Outcome<Response, TaskError, Waiting> {
        refuse!(check_name("queue", &queue));
        refuse!(check_name("task", &name));
        let state = tasks(leader.state());
        let Some(task) = state.task(&queue, &name) else {
            return Outcome::Now(Err(match state.queue(&queue) {
                None => TaskError::UnknownQueue(queue),
                Some(_) => TaskError::UnknownTask { queue, name },
            }));
        };
        match &task.state {
            TaskState::Cancelled => committed(leader, task_now(leader, &queue, &name)),
            s if s.is_finished() => Outcome::Now(Err(TaskError::Finished {
                queue,
                name,
                state: s.name(),
            })),
            s => {
                let finish = Finish {
                    queue: queue.clone(),
                    name: name.clone(),
                    token: task.running().map(|r| r.token),
                    to: After::Cancelled,
                    error: match s {
                        TaskState::Running(_) => "cancelled while running".into(),
                        _ => "cancelled".into(),
                    },
                    at_ms: wall_ms,
                };
                write_task(leader, Command::Finish(vec![finish]), &queue, &name)
            }
        }
    }

    /// The finished tasks `names` names (none: every dead letter), for requeue or purge.
    fn finished<S: Part<Tasks>>(
        leader: &Leader<'_, S>,
        queue: &str,
        names: &[String],
    ) -> Result<Vec<Task>, TaskError> {
        check_name("queue", queue)?;
        let q = tasks(leader.state())
            .queue(queue)
            .ok_or_else(|| TaskError::UnknownQueue(queue.to_owned()))?;
        if names.is_empty() {
            return Ok(q
                .tasks()
                .filter(|t| t.state == TaskState::Dead)
                .cloned()
                .collect());
        }
        names
            .iter()
            .map(|name| {
                check_name("task", name)?;
                let task = q.get(name).ok_or_else(|| TaskError::UnknownTask {
                    queue: queue.to_owned(),
                    name: name.clone(),
                })?;
                if !task.state.is_finished() {
                    return Err(TaskError::Invalid(format!(
                        "task `{name}` of `{queue}` is {}: only a finished task is requeued or purged (cancel it first)",
                        task.state.name()
                    )));
                }
                Ok(task.clone())
            })
            .collect()
    }

    /// Attempts past their deadline are retried (or die); workers whose registration ended
    /// are retired with their running tasks back to pending.
    fn expire<S: Part<Registry> + Part<Tasks>>(&mut self, leader: &mut Leader<'_, S>) {
        let now = leader.now();
        let wall = leader.wall_ms();
        let state = tasks(leader.state());
        let mut retired = Vec::new();
        let mut requeued = Vec::new();
        for w in state.workers() {
            if live(leader.state(), &w.id) {
                continue;
            }
            retired.push(w.id);
            for task in state.running_on(&w.id) {
                let run = task.running().expect("running");
                let error = format!("worker node {} ended while running it", w.id.0);
                requeued.push(self.ended(task, run, error, wall, false));
            }
        }
        let mut timed_out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for w in state.workers().filter(|w| !retired.contains(&w.id)) {
            for task in state.running_on(&w.id) {
                let run = task.running().expect("running");
                let key = task.key();
                let (token, deadline) = *self
                    .deadlines
                    .entry(key.clone())
                    .and_modify(|d| {
                        if d.0 != run.token {
                            *d = (run.token, now + task.timeout_ms);
                        }
                    })
                    .or_insert((run.token, now + task.timeout_ms));
                seen.insert(key);
                if token == run.token && now >= deadline {
                    let error = format!(
                        "attempt {} timed out after {} ms on node {}",
                        task.attempt, task.timeout_ms, run.worker.0
                    );
                    timed_out.push(self.ended(task, run, error, wall, true));
                }
            }
        }
        self.deadlines.retain(|k, _| seen.contains(k));
        if !retired.is_empty() {
            leader.notice(format!(
                "{} task workers ended: {} running tasks back to pending",
                retired.len(),
                requeued.len()
            ));
            leader.append(<S as Part<Tasks>>::wrap(Command::Retire {
                workers: retired,
                finishes: requeued,
            }));
        }
        if !timed_out.is_empty() {
            leader.append(<S as Part<Tasks>>::wrap(Command::Finish(timed_out)));
        }
    }

    /// Finished tasks past `result_ttl_ms` are forgotten, looked over once a second.
    fn sweep<S: Part<Tasks>>(&mut self, leader: &mut Leader<'_, S>) {
        let now = leader.now();
        if now.saturating_sub(self.last_sweep) < 1_000 {
            return;
        }
        self.last_sweep = now;
        let wall = leader.wall_ms();
        let ttl = self.limits.result_ttl_ms;
        let expired: Vec<(String, String)> = tasks(leader.state())
            .queues()
            .flat_map(|q| q.tasks())
            .filter(|t| {
                matches!(
                    t.state,
                    TaskState::Completed(_) | TaskState::Failed | TaskState::Cancelled
                ) && t.finished_ms.saturating_add(ttl) <= wall
            })
            .take(10_000)
            .map(Task::key)
            .collect();
        if !expired.is_empty() {
            leader.append(<S as Part<Tasks>>::wrap(Command::Purge(expired)));
        }
    }
}

fn check_timeout(ms: u64) -> Result<(), TaskError> {
    if ms == 0 || ms > MAX_TIMEOUT_MS {
        return Err(TaskError::Invalid(format!(
            "a timeout is 1 to {MAX_TIMEOUT_MS} ms, not {ms}"
        )));
    }
    Ok(())
}

fn check_attempts(n: u32) -> Result<(), TaskError> {
    if n == 0 || n > 1_000 {
        return Err(TaskError::Invalid(format!(
            "max_attempts is 1 to 1000, not {n}"
        )));
    }
    Ok(())
}

/// Answered with `waiting` once everything up to the last entry is committed.
fn committed<S: Part<Tasks>>(
    leader: &Leader<'_, S>,
    waiting: Waiting,
) -> Outcome<Response, TaskError, Waiting> {
    Outcome::WhenCommitted {
        index: leader.last_index(),
        waiting,
    }
}

/// The task as the state has it now, as what a write waits to answer with.
fn task_now<S: Part<Tasks>>(leader: &Leader<'_, S>, queue: &str, name: &str) -> Waiting {
    match tasks(leader.state()).task(queue, name) {
        Some(t) => Waiting::Task(t.clone()),
        None => Waiting::Tasks(Vec::new()),
    }
}

/// Appends `command` and answers, once committed, with task `(queue, name)` as it left it.
fn write_task<S: Part<Tasks>>(
    leader: &mut Leader<'_, S>,
    command: Command,
    queue: &str,
    name: &str,
) -> Outcome<Response, TaskError, Waiting> {
    match write(leader, command, Waiting::Tasks(Vec::new())) {
        Outcome::WhenCommitted { index, .. } => Outcome::WhenCommitted {
            index,
            waiting: task_now(leader, queue, name),
        },
        refused => refused,
    }
}

/// Appends `command`; answered with `waiting` once committed.
fn write<S: Part<Tasks>>(
    leader: &mut Leader<'_, S>,
    command: Command,
    waiting: Waiting,
) -> Outcome<Response, TaskError, Waiting> {
    match leader.append(S::wrap(command)) {
        Some(index) => Outcome::WhenCommitted { index, waiting },
        // Checked against the state just before: a bug, and the leader's notice says so.
        None => Outcome::Now(Err(TaskError::Invalid(
            "the leader refused its own command; see its log".into(),
        ))),
    }
}

impl<S: Part<Registry> + Part<Tasks>> Service<S> for TaskService {
    type Request = Request;
    type Response = Response;
    type Error = TaskError;
    type Waiting = Waiting;

    /// A new leader gives every running attempt a full timeout afresh.
    fn lead(&mut self, _state: &S, _now: Millis, _renewals: crate::consensus::Knowledge) {
        self.deadlines.clear();
    }

    fn step_down(&mut self) {
        self.deadlines.clear();
    }

    fn request(
        &mut self,
        leader: &mut Leader<'_, S>,
        request: Request,
    ) -> Outcome<Response, TaskError, Waiting> {
        let outcome = match request {
            Request::CreateQueue {
                name,
                timeout_ms,
                max_attempts,
                wall_ms,
            } => self.create_queue(
                leader,
                QueueSpec {
                    name,
                    timeout_ms: timeout_ms.unwrap_or(self.limits.default_timeout_ms),
                    max_attempts: max_attempts.unwrap_or(self.limits.default_max_attempts),
                    created_ms: wall_ms,
                },
            ),
            Request::DeleteQueue(name) => self.delete_queue(leader, name),
            Request::Submit {
                queue,
                name,
                payload,
                priority,
                timeout_ms,
                max_attempts,
                delay_ms,
                submit_id,
                wall_ms,
            } => self.submit(
                leader,
                queue,
                name,
                payload,
                priority,
                timeout_ms,
                max_attempts,
                delay_ms,
                submit_id,
                wall_ms,
            ),
            Request::Serve {
                worker,
                queues,
                capacity,
                ..
            } => self.serve(
                leader,
                WorkerSpec {
                    id: worker,
                    queues,
                    capacity,
                },
            ),
            Request::Heartbeat { queue, name, token } => {
                match Self::held(tasks(leader.state()), &queue, &name, token) {
                    Ok((task, _)) => {
                        let deadline = leader.now() + task.timeout_ms;
                        let task = task.clone();
                        self.deadlines.insert(task.key(), (token, deadline));
                        Outcome::Now(Ok(Response::Task(Box::new(task))))
                    }
                    Err(e) => Outcome::Now(Err(e)),
                }
            }
            Request::Complete {
                queue,
                name,
                token,
                result,
                wall_ms,
            } => self.end(leader, queue, name, token, Ok(result), wall_ms),
            Request::Fail {
                queue,
                name,
                token,
                error,
                retry,
                wall_ms,
            } => self.end(leader, queue, name, token, Err((error, retry)), wall_ms),
            Request::Cancel {
                queue,
                name,
                wall_ms,
            } => self.cancel(leader, queue, name, wall_ms),
            Request::Requeue { queue, names } => match Self::finished(leader, &queue, &names) {
                Err(e) => Outcome::Now(Err(e)),
                Ok(found) if found.is_empty() => committed(leader, Waiting::Tasks(Vec::new())),
                Ok(found) => {
                    let keys = found.iter().map(Task::key).collect();
                    write(leader, Command::Requeue(keys), Waiting::Tasks(found))
                }
            },
            Request::Purge { queue, names } => match Self::finished(leader, &queue, &names) {
                Err(e) => Outcome::Now(Err(e)),
                Ok(found) if found.is_empty() => committed(leader, Waiting::Tasks(Vec::new())),
                Ok(found) => {
                    let keys = found.iter().map(Task::key).collect();
                    write(leader, Command::Purge(keys), Waiting::Tasks(found))
                }
            },
        };
        // Whatever freed a worker or added a task starts what can start now, in this step.
        if matches!(outcome, Outcome::WhenCommitted { .. }) {
            self.dispatch(leader);
        }
        outcome
    }

    fn tick(&mut self, leader: &mut Leader<'_, S>) {
        self.expire(leader);
        self.sweep(leader);
        self.dispatch(leader);
    }

    fn answer(&self, state: &S, waiting: Waiting) -> Result<Response, TaskError> {
        Ok(match waiting {
            Waiting::Task(task) => Response::Task(Box::new(task)),
            Waiting::Tasks(found) => Response::Tasks(found),
            Waiting::Queue(name, None) => {
                Response::Queue(tasks(state).queue(&name).map(|q| q.spec.clone()))
            }
            Waiting::Queue(_, gone) => Response::Queue(gone),
            Waiting::Served => Response::Served,
        })
    }
}
