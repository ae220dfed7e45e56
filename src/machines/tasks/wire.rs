//! Task queues on the wire (`proto/tasks.proto`): its command and error codes, its part of
//! log entries and snapshots, and conversions between its messages and types.

use prost::Message as _;

use super::state::{
    After, Command, Finish, QueueSpec, Run, Task, TaskStart, TaskState, Tasks, TasksSnapshot,
    WorkerId, WorkerSpec,
};
use crate::machines::registry::FencingToken;
use crate::pb::tasks as pb;
use crate::wire::codes::codes;
use crate::wire::{MachineWire, WireError};

codes! {
    command;
    /// The task-queue machine's command codes.
    pub enum TasksCmd {
        /// Create a queue (`CreateQueue` / `QueueReply`).
        CreateQueue = 601,
        /// Delete a queue (`DeleteQueue` / `QueueReply`).
        DeleteQueue = 603,
        /// Submit a task (`Submit` / `TaskReply`).
        Submit = 605,
        /// One task (`GetTask` / `TaskReply`).
        Get = 607,
        /// A queue's tasks (`TasksRequest` / `TasksReply`).
        List = 609,
        /// The queues (`QueuesRequest` / `QueuesReply`).
        Queues = 611,
        /// Cancel a task (`Cancel` / `TaskReply`).
        Cancel = 613,
        /// A worker's result (`Complete` / `TaskReply`).
        Complete = 615,
        /// A worker's failure (`Fail` / `TaskReply`).
        Fail = 617,
        /// A worker is still at a task (`Heartbeat` / `TaskReply`).
        Heartbeat = 619,
        /// Serve queues and follow what is given (`Work` / `WorkReply`, then `WorkNotice`s).
        Work = 621,
        /// Pushed to workers, one-way (`WorkNotice`).
        WorkNotice = 623,
        /// Follow a queue's finished tasks (`WatchQueue` / `WatchQueueReply`, then
        /// `QueueNotice`s).
        WatchQueue = 625,
        /// Pushed to queue watchers, one-way (`QueueNotice`).
        QueueNotice = 627,
        /// Finished tasks back to pending (`Requeue` / `TasksDone`).
        Requeue = 629,
        /// Finished tasks forgotten (`Purge` / `TasksDone`).
        Purge = 631,
    }
}

codes! {
    error;
    /// The task-queue machine's codes carried by `ErrorReply`.
    pub enum TasksErrorCode {
        /// No queue has the name given.
        UnknownQueue = 50 => "UNKNOWN_QUEUE" NotFound,
        /// The queue has no task of the name given.
        UnknownTask = 51 => "UNKNOWN_TASK" NotFound,
        /// A queue of that name exists with other settings.
        QueueConflict = 52 => "QUEUE_CONFLICT" AlreadyExists,
        /// A completion, failure or heartbeat named an attempt that is not the task's running one.
        NotTaskHolder = 53 => "NOT_TASK_HOLDER" FailedPrecondition,
        /// As many tasks or queues as the configuration allows.
        TooManyTasks = 54 => "TOO_MANY_TASKS" ResourceExhausted,
        /// The task is finished already (cancel).
        TaskFinished = 55 => "TASK_FINISHED" FailedPrecondition,
        /// The queue has pending or running tasks (delete).
        QueueInUse = 56 => "QUEUE_IN_USE" FailedPrecondition,
        /// A payload or result is over `tasks.max_payload_bytes`.
        TooLarge = 57 => "TOO_LARGE" ResourceExhausted,
    }
}

fn token(term: u64, index: u64) -> FencingToken {
    FencingToken { term, index }
}

pub fn worker_to_pb(w: &WorkerId) -> pb::WorkerRef {
    pb::WorkerRef {
        node_id: w.0,
        term: w.1.term,
        index: w.1.index,
    }
}

pub fn worker_from_pb(w: pb::WorkerRef) -> WorkerId {
    (w.node_id, token(w.term, w.index))
}

pub fn run_to_pb(r: &Run) -> pb::RunInfo {
    pb::RunInfo {
        worker: Some(worker_to_pb(&r.worker)),
        term: r.token.term,
        index: r.token.index,
        started_ms: r.started_ms,
    }
}

pub fn run_from_pb(r: pb::RunInfo) -> Result<Run, WireError> {
    Ok(Run {
        worker: worker_from_pb(r.worker.ok_or(WireError::Missing("RunInfo.worker"))?),
        token: token(r.term, r.index),
        started_ms: r.started_ms,
    })
}

pub fn queue_to_pb(q: &QueueSpec) -> pb::QueueInfo {
    pb::QueueInfo {
        name: q.name.clone(),
        timeout_ms: q.timeout_ms,
        max_attempts: q.max_attempts,
        created_ms: q.created_ms,
    }
}

pub fn queue_from_pb(q: pb::QueueInfo) -> QueueSpec {
    QueueSpec {
        name: q.name,
        timeout_ms: q.timeout_ms,
        max_attempts: q.max_attempts,
        created_ms: q.created_ms,
    }
}

/// `task` as the wire carries it; `brief` leaves the payload and result out.
pub fn task_to_pb(t: &Task, brief: bool) -> pb::TaskInfo {
    pb::TaskInfo {
        queue: t.queue.clone(),
        name: t.name.clone(),
        payload: if brief { Vec::new() } else { t.payload.clone() },
        priority: t.priority,
        timeout_ms: t.timeout_ms,
        max_attempts: t.max_attempts,
        submitted_ms: t.submitted_ms,
        seq: t.seq,
        submit_id: t.submit_id,
        not_before_ms: t.not_before_ms,
        attempt: t.attempt,
        state: t.state.name().into(),
        run: t.running().map(run_to_pb),
        result: match (&t.state, brief) {
            (TaskState::Completed(r), false) => r.clone(),
            _ => Vec::new(),
        },
        error: t.error.clone(),
        finished_ms: t.finished_ms,
        has_ended: t.ended.is_some(),
        ended_term: t.ended.map_or(0, |e| e.term),
        ended_index: t.ended.map_or(0, |e| e.index),
    }
}

pub fn task_from_pb(t: pb::TaskInfo) -> Result<Task, WireError> {
    let state = match t.state.as_str() {
        "pending" => TaskState::Pending,
        "running" => TaskState::Running(run_from_pb(
            t.run.ok_or(WireError::Missing("TaskInfo.run"))?,
        )?),
        "completed" => TaskState::Completed(t.result),
        "failed" => TaskState::Failed,
        "dead" => TaskState::Dead,
        "cancelled" => TaskState::Cancelled,
        other => {
            return Err(WireError::Invalid(format!(
                "TaskInfo.state: `{other}` is no task state"
            )));
        }
    };
    Ok(Task {
        queue: t.queue,
        name: t.name,
        payload: t.payload,
        priority: t.priority,
        timeout_ms: t.timeout_ms,
        max_attempts: t.max_attempts,
        submitted_ms: t.submitted_ms,
        seq: t.seq,
        submit_id: t.submit_id,
        not_before_ms: t.not_before_ms,
        attempt: t.attempt,
        state,
        error: t.error,
        finished_ms: t.finished_ms,
        ended: t.has_ended.then(|| token(t.ended_term, t.ended_index)),
    })
}

fn finish_to_pb(f: &Finish) -> pb::FinishInfo {
    let (to, not_before_ms, result) = match &f.to {
        After::Retry { not_before_ms } => (1, *not_before_ms, Vec::new()),
        After::Completed(r) => (2, 0, r.clone()),
        After::Failed => (3, 0, Vec::new()),
        After::Dead => (4, 0, Vec::new()),
        After::Cancelled => (5, 0, Vec::new()),
    };
    pb::FinishInfo {
        queue: f.queue.clone(),
        name: f.name.clone(),
        has_token: f.token.is_some(),
        term: f.token.map_or(0, |t| t.term),
        index: f.token.map_or(0, |t| t.index),
        to,
        not_before_ms,
        result,
        error: f.error.clone(),
        at_ms: f.at_ms,
    }
}

fn finish_from_pb(f: pb::FinishInfo) -> Result<Finish, WireError> {
    let to = match f.to {
        1 => After::Retry {
            not_before_ms: f.not_before_ms,
        },
        2 => After::Completed(f.result),
        3 => After::Failed,
        4 => After::Dead,
        5 => After::Cancelled,
        other => {
            return Err(WireError::Invalid(format!(
                "FinishInfo.to: {other} is no outcome"
            )));
        }
    };
    Ok(Finish {
        queue: f.queue,
        name: f.name,
        token: f.has_token.then(|| token(f.term, f.index)),
        to,
        error: f.error,
        at_ms: f.at_ms,
    })
}

fn worker_spec_to_pb(w: &WorkerSpec) -> pb::WorkerInfo {
    pb::WorkerInfo {
        id: Some(worker_to_pb(&w.id)),
        queues: w.queues.clone(),
        capacity: w.capacity,
    }
}

fn worker_spec_from_pb(w: pb::WorkerInfo) -> Result<WorkerSpec, WireError> {
    Ok(WorkerSpec {
        id: worker_from_pb(w.id.ok_or(WireError::Missing("WorkerInfo.id"))?),
        queues: w.queues,
        capacity: w.capacity,
    })
}

fn keys_to_pb(keys: &[(String, String)]) -> pb::TaskKeys {
    pb::TaskKeys {
        keys: keys
            .iter()
            .map(|(queue, name)| pb::TaskKey {
                queue: queue.clone(),
                name: name.clone(),
            })
            .collect(),
    }
}

fn keys_from_pb(keys: pb::TaskKeys) -> Vec<(String, String)> {
    keys.keys.into_iter().map(|k| (k.queue, k.name)).collect()
}

fn finishes_from_pb(finishes: Vec<pb::FinishInfo>) -> Result<Vec<Finish>, WireError> {
    finishes.into_iter().map(finish_from_pb).collect()
}

impl MachineWire for Tasks {
    fn encode_command(command: &Command, buf: &mut Vec<u8>) {
        use pb::tasks_entry::Command as C;
        let command = match command {
            Command::CreateQueue(q) => C::CreateQueue(queue_to_pb(q)),
            Command::DeleteQueue(name) => C::DeleteQueue(name.clone()),
            Command::Submit(t) => C::Submit(task_to_pb(t, false)),
            Command::Start(starts) => C::Start(pb::Starts {
                starts: starts
                    .iter()
                    .map(|s| pb::StartInfo {
                        queue: s.queue.clone(),
                        name: s.name.clone(),
                        run: Some(run_to_pb(&s.run)),
                    })
                    .collect(),
            }),
            Command::Finish(f) => C::Finish(pb::Finishes {
                finishes: f.iter().map(finish_to_pb).collect(),
            }),
            Command::Serve(w) => C::Serve(worker_spec_to_pb(w)),
            Command::Retire { workers, finishes } => C::Retire(pb::Retire {
                workers: workers.iter().map(worker_to_pb).collect(),
                finishes: finishes.iter().map(finish_to_pb).collect(),
            }),
            Command::Requeue(keys) => C::Requeue(keys_to_pb(keys)),
            Command::Purge(keys) => C::Purge(keys_to_pb(keys)),
        };
        pb::TasksEntry {
            command: Some(command),
        }
        .encode_raw(buf);
    }

    fn decode_command(entry: &[u8]) -> Result<Option<Command>, WireError> {
        use pb::tasks_entry::Command as C;
        let Some(command) = pb::TasksEntry::decode(entry)?.command else {
            return Ok(None);
        };
        Ok(Some(match command {
            C::CreateQueue(q) => Command::CreateQueue(queue_from_pb(q)),
            C::DeleteQueue(name) => Command::DeleteQueue(name),
            C::Submit(t) => Command::Submit(task_from_pb(t)?),
            C::Start(s) => Command::Start(
                s.starts
                    .into_iter()
                    .map(|s| {
                        Ok(TaskStart {
                            queue: s.queue,
                            name: s.name,
                            run: run_from_pb(s.run.ok_or(WireError::Missing("StartInfo.run"))?)?,
                        })
                    })
                    .collect::<Result<_, WireError>>()?,
            ),
            C::Finish(f) => Command::Finish(finishes_from_pb(f.finishes)?),
            C::Serve(w) => Command::Serve(worker_spec_from_pb(w)?),
            C::Retire(r) => Command::Retire {
                workers: r.workers.into_iter().map(worker_from_pb).collect(),
                finishes: finishes_from_pb(r.finishes)?,
            },
            C::Requeue(keys) => Command::Requeue(keys_from_pb(keys)),
            C::Purge(keys) => Command::Purge(keys_from_pb(keys)),
        }))
    }

    fn encode_snapshot(s: &TasksSnapshot, buf: &mut Vec<u8>) {
        pb::TasksSnapshot {
            queues: s.queues.iter().map(queue_to_pb).collect(),
            tasks: s.tasks.iter().map(|t| task_to_pb(t, false)).collect(),
            workers: s.workers.iter().map(worker_spec_to_pb).collect(),
        }
        .encode_raw(buf);
    }

    fn decode_snapshot(bytes: &[u8]) -> Result<TasksSnapshot, WireError> {
        let s = pb::TasksSnapshot::decode(bytes)?;
        Ok(TasksSnapshot {
            queues: s.queues.into_iter().map(queue_from_pb).collect(),
            tasks: s
                .tasks
                .into_iter()
                .map(task_from_pb)
                .collect::<Result<_, _>>()?,
            workers: s
                .workers
                .into_iter()
                .map(worker_spec_from_pb)
                .collect::<Result<_, _>>()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consensus::{Entry, Payload};
    use crate::wire::envelope::{entry_bytes, entry_from_bytes};

    #[test]
    fn every_command_round_trips_in_a_log_entry() {
        let run = Run {
            worker: (3, token(1, 2)),
            token: token(2, 9),
            started_ms: 7,
        };
        let task = Task {
            queue: "q".into(),
            name: "t".into(),
            payload: vec![0, 1, 255],
            priority: -3,
            timeout_ms: 500,
            max_attempts: 4,
            submitted_ms: 1,
            seq: 8,
            submit_id: 0xfeed,
            not_before_ms: 11,
            attempt: 2,
            state: TaskState::Running(run.clone()),
            error: "timed out".into(),
            finished_ms: 0,
            ended: Some(token(2, 5)),
        };
        let finish = |to| Finish {
            queue: "q".into(),
            name: "t".into(),
            token: Some(token(2, 9)),
            to,
            error: "e".into(),
            at_ms: 3,
        };
        for command in [
            Command::CreateQueue(QueueSpec {
                name: "q".into(),
                timeout_ms: 10,
                max_attempts: 2,
                created_ms: 1,
            }),
            Command::DeleteQueue("q".into()),
            Command::Submit(task.clone()),
            Command::Submit(Task {
                state: TaskState::Completed(b"r".to_vec()),
                ..task
            }),
            Command::Start(vec![TaskStart {
                queue: "q".into(),
                name: "t".into(),
                run,
            }]),
            Command::Finish(vec![
                finish(After::Retry { not_before_ms: 4 }),
                finish(After::Completed(b"ok".to_vec())),
                finish(After::Failed),
                finish(After::Dead),
                Finish {
                    token: None,
                    ..finish(After::Cancelled)
                },
            ]),
            Command::Serve(WorkerSpec {
                id: (3, token(1, 2)),
                queues: vec!["q".into(), "r".into()],
                capacity: 4,
            }),
            Command::Retire {
                workers: vec![(3, token(1, 2))],
                finishes: vec![finish(After::Dead)],
            },
            Command::Requeue(vec![("q".into(), "t".into())]),
            Command::Purge(vec![("q".into(), "t".into())]),
        ] {
            let e = Entry {
                index: 9,
                term: 2,
                payload: Payload::Command(command),
            };
            let bytes = entry_bytes::<Tasks>(&e);
            assert_eq!(entry_from_bytes::<Tasks>(&bytes).unwrap(), e);
        }
    }
}
