//! The task-queue machine's replicated state: named queues, their tasks, and the workers
//! that serve them.
//!
//! A task is named within its queue, and a name is pending or running at most once (the
//! dedupe of a task named after its computation). A running task names its attempt by a
//! fencing token, the log position of the command that started it: only a completion or a
//! failure carrying that token ends the attempt, so a worker that lost its task (timed out,
//! or its registration ended) cannot overwrite the result of the attempt that replaced it.
//! A worker is named by its registration (node ID and the registration's token); its end
//! puts its running tasks back to pending in the same command that forgets it.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use crate::consensus::Machine;
use crate::machines::registry::{FencingToken, NodeId};
use crate::time::Millis;

/// Longest queue or task name.
pub const MAX_NAME_LEN: usize = 200;

/// A worker: a live registration.
pub type WorkerId = (NodeId, FencingToken);

/// A queue and the defaults of its tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSpec {
    pub name: String,
    /// How long an attempt may run without a heartbeat before it is retried.
    pub timeout_ms: u64,
    /// Attempts before a task goes to the dead letters.
    pub max_attempts: u32,
    pub created_ms: u64,
}

/// The running attempt of a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub worker: WorkerId,
    /// The log position of the start: names this attempt, rises with each.
    pub token: FencingToken,
    pub started_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskState {
    /// Waiting for a worker (and for `not_before_ms`).
    Pending,
    Running(Run),
    /// The accepted result: set once, never changed.
    Completed(Vec<u8>),
    /// The worker reported a failure not worth retrying.
    Failed,
    /// Out of attempts: a dead letter, until requeued or purged.
    Dead,
    Cancelled,
}

impl TaskState {
    pub fn name(&self) -> &'static str {
        match self {
            TaskState::Pending => "pending",
            TaskState::Running(_) => "running",
            TaskState::Completed(_) => "completed",
            TaskState::Failed => "failed",
            TaskState::Dead => "dead",
            TaskState::Cancelled => "cancelled",
        }
    }

    /// Done: nothing more happens to it until it is purged (or, dead, requeued).
    pub fn is_finished(&self) -> bool {
        !matches!(self, TaskState::Pending | TaskState::Running(_))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub queue: String,
    pub name: String,
    pub payload: Vec<u8>,
    /// Higher runs first.
    pub priority: i32,
    pub timeout_ms: u64,
    pub max_attempts: u32,
    /// Wall-clock time of the submit (ms since the Unix epoch).
    pub submitted_ms: u64,
    /// Submission order: the log index of the submit.
    pub seq: u64,
    /// The client's ID for the submit (0: none): its retry is answered with this task even
    /// once it has finished, where a new submit of a finished name runs it again.
    pub submit_id: u64,
    /// Not started before this wall-clock time (a delayed task, or a retry's backoff).
    pub not_before_ms: u64,
    /// Attempts begun.
    pub attempt: u32,
    pub state: TaskState,
    /// Why the last attempt failed (empty if none did).
    pub error: String,
    /// Wall-clock time it finished (0 while it has not).
    pub finished_ms: u64,
    /// The token of the last attempt that ended (a retried completion of that attempt is
    /// answered with what it recorded).
    pub ended: Option<FencingToken>,
}

impl Task {
    pub fn running(&self) -> Option<&Run> {
        match &self.state {
            TaskState::Running(run) => Some(run),
            _ => None,
        }
    }

    pub fn key(&self) -> (String, String) {
        (self.queue.clone(), self.name.clone())
    }
}

/// A worker serves these queues, running up to `capacity` tasks at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerSpec {
    pub id: WorkerId,
    pub queues: Vec<String>,
    pub capacity: u32,
}

/// A task starts on a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskStart {
    pub queue: String,
    pub name: String,
    pub run: Run,
}

/// Where a task goes when it leaves pending or running (other than to running).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum After {
    /// Back to pending, not before this wall-clock time (a retry).
    Retry {
        not_before_ms: u64,
    },
    Completed(Vec<u8>),
    Failed,
    Dead,
    Cancelled,
}

/// A task's attempt ends, or a pending task is cancelled (`token` names the attempt; none
/// for a pending task).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish {
    pub queue: String,
    pub name: String,
    pub token: Option<FencingToken>,
    pub to: After,
    pub error: String,
    pub at_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    CreateQueue(QueueSpec),
    /// A queue and its (finished) tasks go.
    DeleteQueue(String),
    /// A new task, pending; it replaces a finished task of the same name.
    Submit(Task),
    Start(Vec<TaskStart>),
    Finish(Vec<Finish>),
    /// A worker begins serving (or changes its queues or capacity).
    Serve(WorkerSpec),
    /// Workers whose registration ended are forgotten, and their running tasks end as
    /// `finishes` say (back to pending, or dead), all in this one command.
    Retire {
        workers: Vec<WorkerId>,
        finishes: Vec<Finish>,
    },
    /// Dead, failed or cancelled tasks go back to pending with their attempts reset.
    Requeue(Vec<(String, String)>),
    /// Finished tasks are forgotten.
    Purge(Vec<(String, String)>),
}

/// What a command changed, for watchers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A task as it is now (submitted, started, finished, requeued).
    Task(Task),
    /// An attempt ended: the worker that ran it should stop if it still does.
    Released {
        queue: String,
        name: String,
        run: Run,
    },
    /// A task was forgotten.
    Purged { queue: String, name: String },
    Queue {
        name: String,
        now: Option<QueueSpec>,
    },
}

/// A command that does not fit the state: the replicas have diverged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("queue `{0}` does not exist")]
    UnknownQueue(String),
    #[error("queue `{0}` exists already")]
    QueueExists(String),
    #[error("task `{1}` of queue `{0}` does not exist")]
    UnknownTask(String, String),
    #[error("task `{1}` of queue `{0}` is pending or running already")]
    TaskLive(String, String),
    #[error("task `{1}` of queue `{0}` is not in a state to {2}")]
    WrongState(String, String, &'static str),
    #[error("worker {0} with that registration does not serve")]
    UnknownWorker(NodeId),
}

/// The state as a snapshot holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TasksSnapshot {
    pub queues: Vec<QueueSpec>,
    pub tasks: Vec<Task>,
    pub workers: Vec<WorkerSpec>,
}

/// A queue with its tasks, and the pending ones in the order they start in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queue {
    pub spec: QueueSpec,
    tasks: BTreeMap<String, Task>,
    /// Pending tasks: priority (highest first), then submission order.
    pending: BTreeSet<(Reverse<i32>, u64, String)>,
}

impl Queue {
    fn new(spec: QueueSpec) -> Queue {
        Queue {
            spec,
            tasks: BTreeMap::new(),
            pending: BTreeSet::new(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&Task> {
        self.tasks.get(name)
    }

    pub fn tasks(&self) -> impl Iterator<Item = &Task> {
        self.tasks.values()
    }

    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Pending tasks in the order they start in.
    pub fn pending(&self) -> impl Iterator<Item = &Task> {
        self.pending.iter().map(|(_, _, name)| &self.tasks[name])
    }

    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Puts `task` in (replacing any of its name), keeping the pending order.
    fn put(&mut self, task: Task) {
        self.remove(&task.name);
        if task.state == TaskState::Pending {
            self.pending
                .insert((Reverse(task.priority), task.seq, task.name.clone()));
        }
        self.tasks.insert(task.name.clone(), task);
    }

    fn remove(&mut self, name: &str) -> Option<Task> {
        let old = self.tasks.remove(name)?;
        self.pending
            .remove(&(Reverse(old.priority), old.seq, old.name.clone()));
        Some(old)
    }
}

/// The task-queue state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tasks {
    queues: BTreeMap<String, Queue>,
    workers: BTreeMap<WorkerId, WorkerSpec>,
    /// Running tasks by worker.
    running: BTreeMap<WorkerId, BTreeSet<(String, String)>>,
    /// Tasks in all queues.
    count: usize,
}

impl Tasks {
    pub fn queue(&self, name: &str) -> Option<&Queue> {
        self.queues.get(name)
    }

    pub fn queues(&self) -> impl Iterator<Item = &Queue> {
        self.queues.values()
    }

    pub fn task(&self, queue: &str, name: &str) -> Option<&Task> {
        self.queues.get(queue)?.get(name)
    }

    pub fn workers(&self) -> impl Iterator<Item = &WorkerSpec> {
        self.workers.values()
    }

    pub fn worker(&self, id: &WorkerId) -> Option<&WorkerSpec> {
        self.workers.get(id)
    }

    /// The tasks `worker` runs.
    pub fn running_on(&self, worker: &WorkerId) -> impl Iterator<Item = &Task> {
        self.running
            .get(worker)
            .into_iter()
            .flatten()
            .filter_map(|(q, n)| self.task(q, n))
    }

    pub fn running_count(&self, worker: &WorkerId) -> usize {
        self.running.get(worker).map_or(0, BTreeSet::len)
    }

    /// Tasks in all queues.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    fn queue_mut(&mut self, name: &str) -> Result<&mut Queue, ApplyError> {
        self.queues
            .get_mut(name)
            .ok_or_else(|| ApplyError::UnknownQueue(name.to_owned()))
    }

    /// Puts `task` in its queue, keeping the running index and the count.
    fn put(&mut self, task: Task) {
        let old = self
            .task(&task.queue, &task.name)
            .map(|t| t.running().cloned());
        if let Some(Some(run)) = &old {
            self.unindex(run.worker, &task.key());
        }
        if old.is_none() {
            self.count += 1;
        }
        if let Some(run) = task.running() {
            self.running
                .entry(run.worker)
                .or_default()
                .insert(task.key());
        }
        let queue = self
            .queues
            .get_mut(&task.queue)
            .expect("checked by the caller");
        queue.put(task);
    }

    fn purge(&mut self, queue: &str, name: &str) -> Option<Task> {
        let old = self.queues.get_mut(queue)?.remove(name)?;
        self.count -= 1;
        if let Some(run) = old.running() {
            self.unindex(run.worker, &old.key());
        }
        Some(old)
    }

    /// `key` no longer runs on `worker`.
    fn unindex(&mut self, worker: WorkerId, key: &(String, String)) {
        if let Some(set) = self.running.get_mut(&worker) {
            set.remove(key);
            if set.is_empty() {
                self.running.remove(&worker);
            }
        }
    }

    fn check_finish(&self, f: &Finish) -> Result<(), ApplyError> {
        let task = self
            .task(&f.queue, &f.name)
            .ok_or_else(|| ApplyError::UnknownTask(f.queue.clone(), f.name.clone()))?;
        let fits = match (&task.state, f.token) {
            (TaskState::Running(run), Some(token)) => run.token == token,
            (TaskState::Pending, None) => matches!(f.to, After::Cancelled),
            _ => false,
        };
        if !fits {
            return Err(ApplyError::WrongState(
                f.queue.clone(),
                f.name.clone(),
                "finish so",
            ));
        }
        Ok(())
    }

    fn finish(&mut self, f: &Finish, changes: &mut Vec<Change>) {
        let mut task = self.task(&f.queue, &f.name).expect("checked").clone();
        if let Some(run) = task.running().cloned() {
            task.ended = Some(run.token);
            changes.push(Change::Released {
                queue: f.queue.clone(),
                name: f.name.clone(),
                run,
            });
        }
        if !f.error.is_empty() {
            task.error = f.error.clone();
        }
        task.state = match &f.to {
            After::Retry { not_before_ms } => {
                task.not_before_ms = *not_before_ms;
                TaskState::Pending
            }
            After::Completed(result) => TaskState::Completed(result.clone()),
            After::Failed => TaskState::Failed,
            After::Dead => TaskState::Dead,
            After::Cancelled => TaskState::Cancelled,
        };
        if task.state.is_finished() {
            task.finished_ms = f.at_ms;
        }
        changes.push(Change::Task(task.clone()));
        self.put(task);
    }

    pub fn apply(&mut self, command: &Command) -> Result<Option<Vec<Change>>, ApplyError> {
        let mut changes = Vec::new();
        match command {
            Command::CreateQueue(spec) => {
                if self.queues.contains_key(&spec.name) {
                    return Err(ApplyError::QueueExists(spec.name.clone()));
                }
                self.queues
                    .insert(spec.name.clone(), Queue::new(spec.clone()));
                changes.push(Change::Queue {
                    name: spec.name.clone(),
                    now: Some(spec.clone()),
                });
            }
            Command::DeleteQueue(name) => {
                let queue = self.queue_mut(name)?;
                if queue.tasks.values().any(|t| !t.state.is_finished()) {
                    return Err(ApplyError::TaskLive(name.clone(), "(some)".into()));
                }
                let gone = self.queues.remove(name).expect("checked");
                self.count -= gone.tasks.len();
                changes.push(Change::Queue {
                    name: name.clone(),
                    now: None,
                });
            }
            Command::Submit(task) => {
                let queue = self.queue_mut(&task.queue)?;
                if queue
                    .get(&task.name)
                    .is_some_and(|t| !t.state.is_finished())
                {
                    return Err(ApplyError::TaskLive(task.queue.clone(), task.name.clone()));
                }
                self.put(task.clone());
                changes.push(Change::Task(task.clone()));
            }
            Command::Start(starts) => {
                for s in starts {
                    let task = self
                        .task(&s.queue, &s.name)
                        .ok_or_else(|| ApplyError::UnknownTask(s.queue.clone(), s.name.clone()))?;
                    if task.state != TaskState::Pending {
                        return Err(ApplyError::WrongState(
                            s.queue.clone(),
                            s.name.clone(),
                            "start",
                        ));
                    }
                    if !self.workers.contains_key(&s.run.worker) {
                        return Err(ApplyError::UnknownWorker(s.run.worker.0));
                    }
                }
                for s in starts {
                    let mut task = self.task(&s.queue, &s.name).expect("checked").clone();
                    if task.running().is_some() {
                        // Named twice in one command: the first start stands.
                        continue;
                    }
                    task.attempt += 1;
                    task.state = TaskState::Running(s.run.clone());
                    changes.push(Change::Task(task.clone()));
                    self.put(task);
                }
            }
            Command::Finish(finishes) => {
                for f in finishes {
                    self.check_finish(f)?;
                }
                for f in finishes {
                    if self.check_finish(f).is_ok() {
                        self.finish(f, &mut changes);
                    }
                }
            }
            Command::Serve(spec) => {
                for q in &spec.queues {
                    if !self.queues.contains_key(q) {
                        return Err(ApplyError::UnknownQueue(q.clone()));
                    }
                }
                self.workers.insert(spec.id, spec.clone());
            }
            Command::Retire { workers, finishes } => {
                for f in finishes {
                    self.check_finish(f)?;
                }
                for f in finishes {
                    if self.check_finish(f).is_ok() {
                        self.finish(f, &mut changes);
                    }
                }
                for w in workers {
                    self.workers.remove(w);
                }
            }
            Command::Requeue(keys) => {
                for (q, n) in keys {
                    let task = self
                        .task(q, n)
                        .ok_or_else(|| ApplyError::UnknownTask(q.clone(), n.clone()))?;
                    if !task.state.is_finished() {
                        return Err(ApplyError::WrongState(q.clone(), n.clone(), "requeue"));
                    }
                }
                for (q, n) in keys {
                    let mut task = self.task(q, n).expect("checked").clone();
                    task.state = TaskState::Pending;
                    task.attempt = 0;
                    task.not_before_ms = 0;
                    task.finished_ms = 0;
                    changes.push(Change::Task(task.clone()));
                    self.put(task);
                }
            }
            Command::Purge(keys) => {
                for (q, n) in keys {
                    let task = self
                        .task(q, n)
                        .ok_or_else(|| ApplyError::UnknownTask(q.clone(), n.clone()))?;
                    if !task.state.is_finished() {
                        return Err(ApplyError::WrongState(q.clone(), n.clone(), "purge"));
                    }
                }
                for (q, n) in keys {
                    if self.purge(q, n).is_some() {
                        changes.push(Change::Purged {
                            queue: q.clone(),
                            name: n.clone(),
                        });
                    }
                }
            }
        }
        Ok(Some(changes))
    }
}

impl Machine for Tasks {
    type Command = Command;
    type Change = Vec<Change>;
    type Snapshot = TasksSnapshot;
    type ApplyError = ApplyError;

    /// A task's payload and result count: they may be up to `max_payload_bytes` each.
    fn change_bytes(changes: &Vec<Change>) -> usize {
        let buffers: usize = changes
            .iter()
            .map(|c| match c {
                Change::Task(t) => {
                    let result = match &t.state {
                        TaskState::Completed(r) => r.len(),
                        _ => 0,
                    };
                    t.payload.len() + result + t.error.len() + t.name.len() + t.queue.len()
                }
                _ => 0,
            })
            .sum();
        std::mem::size_of::<Vec<Change>>() + changes.len() * std::mem::size_of::<Change>() + buffers
    }

    fn apply(
        &mut self,
        command: &Command,
        _now: Millis,
    ) -> Result<Option<Vec<Change>>, ApplyError> {
        Tasks::apply(self, command)
    }

    fn snapshot(&self, _now: Millis) -> TasksSnapshot {
        TasksSnapshot {
            queues: self.queues.values().map(|q| q.spec.clone()).collect(),
            tasks: self
                .queues
                .values()
                .flat_map(|q| q.tasks.values().cloned())
                .collect(),
            workers: self.workers.values().cloned().collect(),
        }
    }

    fn restore(&mut self, snapshot: TasksSnapshot, _now: Millis) {
        *self = Tasks::default();
        for spec in snapshot.queues {
            self.queues.insert(spec.name.clone(), Queue::new(spec));
        }
        for w in snapshot.workers {
            self.workers.insert(w.id, w);
        }
        for task in snapshot.tasks {
            if self.queues.contains_key(&task.queue) {
                self.put(task);
            }
        }
    }

    fn records(&self) -> usize {
        self.count + self.queues.len() + self.workers.len()
    }

    fn summary(&self) -> String {
        let pending: usize = self.queues.values().map(Queue::pending_len).sum();
        let running: usize = self.running.values().map(BTreeSet::len).sum();
        format!(
            "{} queues, {} tasks ({pending} pending, {running} running), {} workers",
            self.queues.len(),
            self.count,
            self.workers.len()
        )
    }
}

/// A name that is not acceptable; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{what} name `{name}` is invalid: use 1 to {MAX_NAME_LEN} characters from A-Z a-z 0-9 . _ - : / @ ="
)]
pub struct InvalidName {
    pub what: &'static str,
    pub name: String,
}

/// Checks a queue's or a task's name.
pub fn check_name(what: &'static str, name: &str) -> Result<(), InvalidName> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "._-:/@=".contains(c);
    if name.is_empty() || name.len() > MAX_NAME_LEN || !name.chars().all(ok) {
        return Err(InvalidName {
            what,
            name: name.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(id: NodeId) -> WorkerId {
        (
            id,
            FencingToken {
                term: 1,
                index: u64::from(id),
            },
        )
    }

    fn task(name: &str, priority: i32, seq: u64) -> Task {
        Task {
            queue: "q".into(),
            name: name.into(),
            payload: b"p".to_vec(),
            priority,
            timeout_ms: 1000,
            max_attempts: 3,
            submitted_ms: 0,
            seq,
            submit_id: 0,
            not_before_ms: 0,
            attempt: 0,
            state: TaskState::Pending,
            error: String::new(),
            finished_ms: 0,
            ended: None,
        }
    }

    fn run(w: NodeId, index: u64) -> Run {
        Run {
            worker: worker(w),
            token: FencingToken { term: 1, index },
            started_ms: 0,
        }
    }

    fn queue() -> Tasks {
        let mut s = Tasks::default();
        s.apply(&Command::CreateQueue(QueueSpec {
            name: "q".into(),
            timeout_ms: 1000,
            max_attempts: 3,
            created_ms: 0,
        }))
        .unwrap();
        s.apply(&Command::Serve(WorkerSpec {
            id: worker(1),
            queues: vec!["q".into()],
            capacity: 2,
        }))
        .unwrap();
        s
    }

    #[test]
    fn a_changes_payload_and_result_count_in_its_bytes() {
        let small = <Tasks as Machine>::change_bytes(&vec![Change::Task(task("t", 0, 1))]);
        let mut big = task("t", 0, 1);
        big.payload = vec![0; 10_000];
        big.state = TaskState::Completed(vec![0; 5_000]);
        let bytes = <Tasks as Machine>::change_bytes(&vec![Change::Task(big)]);
        assert!(bytes >= small + 15_000 - 1, "{bytes} against {small}");
    }

    #[test]
    fn pending_tasks_start_by_priority_then_submission() {
        let mut s = queue();
        for (name, prio, seq) in [("a", 0, 1), ("b", 5, 2), ("c", 0, 3), ("d", 5, 4)] {
            s.apply(&Command::Submit(task(name, prio, seq))).unwrap();
        }
        let order: Vec<_> = s
            .queue("q")
            .unwrap()
            .pending()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(order, ["b", "d", "a", "c"]);
        assert!(matches!(
            s.apply(&Command::Submit(task("a", 0, 9))),
            Err(ApplyError::TaskLive(..))
        ));
        assert_eq!(s.len(), 4);
    }

    #[test]
    fn only_the_running_attempt_finishes_a_task_and_a_result_stands() {
        let mut s = queue();
        s.apply(&Command::Submit(task("a", 0, 1))).unwrap();
        s.apply(&Command::Start(vec![TaskStart {
            queue: "q".into(),
            name: "a".into(),
            run: run(1, 5),
        }]))
        .unwrap();
        assert_eq!(s.running_count(&worker(1)), 1);
        let finish = |index, to| Finish {
            queue: "q".into(),
            name: "a".into(),
            token: Some(FencingToken { term: 1, index }),
            to,
            error: String::new(),
            at_ms: 1,
        };
        // A stale token is refused, and nothing changes.
        assert!(
            s.apply(&Command::Finish(vec![finish(
                4,
                After::Completed(b"x".to_vec())
            )]))
            .is_err()
        );
        s.apply(&Command::Finish(vec![finish(
            5,
            After::Retry { not_before_ms: 9 },
        )]))
        .unwrap();
        assert_eq!(s.running_count(&worker(1)), 0);
        assert_eq!(s.task("q", "a").unwrap().not_before_ms, 9);
        s.apply(&Command::Start(vec![TaskStart {
            queue: "q".into(),
            name: "a".into(),
            run: run(1, 7),
        }]))
        .unwrap();
        assert_eq!(s.task("q", "a").unwrap().attempt, 2);
        s.apply(&Command::Finish(vec![finish(
            7,
            After::Completed(b"r".to_vec()),
        )]))
        .unwrap();
        assert_eq!(
            s.task("q", "a").unwrap().state,
            TaskState::Completed(b"r".to_vec())
        );
        assert!(
            s.apply(&Command::Finish(vec![finish(
                7,
                After::Completed(b"s".to_vec())
            )]))
            .is_err()
        );
        // A finished name may be submitted again: a new task.
        s.apply(&Command::Submit(task("a", 0, 8))).unwrap();
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn a_retired_worker_s_tasks_go_back_to_pending_in_the_same_command() {
        let mut s = queue();
        s.apply(&Command::Submit(task("a", 0, 1))).unwrap();
        s.apply(&Command::Start(vec![TaskStart {
            queue: "q".into(),
            name: "a".into(),
            run: run(1, 5),
        }]))
        .unwrap();
        let changes = s
            .apply(&Command::Retire {
                workers: vec![worker(1)],
                finishes: vec![Finish {
                    queue: "q".into(),
                    name: "a".into(),
                    token: Some(FencingToken { term: 1, index: 5 }),
                    to: After::Retry { not_before_ms: 0 },
                    error: "worker ended".into(),
                    at_ms: 2,
                }],
            })
            .unwrap()
            .unwrap();
        assert!(matches!(&changes[0], Change::Released { .. }));
        assert_eq!(s.task("q", "a").unwrap().state, TaskState::Pending);
        assert!(s.worker(&worker(1)).is_none());
        assert_eq!(s.queue("q").unwrap().pending_len(), 1);
        // A snapshot restores the same state, indexes included.
        let mut t = Tasks::default();
        t.restore(s.snapshot(0), 0);
        assert_eq!(t, s);
    }
}
