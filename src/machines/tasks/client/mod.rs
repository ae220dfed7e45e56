//! Task queues' client calls: on a [`Cluster`] (the leader, followed across failovers) the
//! writes; on a [`Client`] (one beacon) the reads; [`Tasks`], a submitter that awaits
//! results; and [`Worker`], a registration that runs the tasks it is given.

mod tasks;
pub mod worker;

/// The codes a refusal of this machine carries ([`ClientError::is`]).
pub use super::wire::TasksErrorCode;
pub use tasks::{TaskHandle, TaskOutcome, Tasks};
pub use worker::{TaskFailure, TaskInput, Worker, WorkerEvent, WorkerStats};

use super::wire::TasksCmd as Cmd;
use crate::net::{Client, ClientError, Cluster};
use crate::pb::tasks as pb;

/// A task to submit: its queue, name and payload, and what it may change of its queue's
/// defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubmitOptions {
    /// Higher runs first.
    pub priority: i32,
    /// The attempt timeout (0: the queue's).
    pub timeout_ms: u64,
    /// Attempts before the dead letters (0: the queue's).
    pub max_attempts: u32,
    /// Not started before this long after the submit.
    pub delay_ms: u64,
    /// This submit's ID, the same on each retry (0: a fresh one for each call). A call
    /// retries a submit whose answer a failover lost: with the same ID, a task that ran and
    /// finished meanwhile is answered as it is rather than run again. Give one of your own
    /// to make a submit that your process may repeat (after a restart) count once.
    pub submit_id: u64,
}

/// A random submit ID, never 0, for a call that was given none.
fn fresh_submit_id() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    RandomState::new()
        .hash_one((std::time::SystemTime::now(), std::process::id(), call))
        .max(1)
}

/// The attempt of a running task, as its fencing token: what a worker's reports name.
pub fn attempt_of(task: &pb::TaskInfo) -> Option<(u64, u64)> {
    task.run.as_ref().map(|r| (r.term, r.index))
}

impl Client {
    /// One task as this beacon holds it, with its payload and result.
    pub async fn task(&mut self, queue: &str, name: &str) -> Result<pb::TaskInfo, ClientError> {
        let req = pb::GetTask {
            queue: queue.to_owned(),
            name: name.to_owned(),
        };
        let reply: pb::TaskReply = self.request(Cmd::Get, &req, "the task request").await?;
        Ok(reply.task.unwrap_or_default())
    }

    /// The tasks of `queue` this beacon holds, of one state (`""`: all), at most `limit`
    /// (0: 1000); `brief` leaves payloads and results out.
    pub async fn tasks(
        &mut self,
        queue: &str,
        state: &str,
        limit: u32,
        brief: bool,
    ) -> Result<pb::TasksReply, ClientError> {
        let req = pb::TasksRequest {
            queue: queue.to_owned(),
            state: state.to_owned(),
            limit,
            brief,
        };
        self.request(Cmd::List, &req, "the tasks request").await
    }

    /// The queues this beacon holds, with their counts.
    pub async fn queues(&mut self) -> Result<pb::QueuesReply, ClientError> {
        self.queues_matching(&pb::QueuesRequest::default()).await
    }

    /// The queues `req` asks for: a page of them when `req.limit` is set (`next` continues,
    /// `total` counts them all).
    pub async fn queues_matching(
        &mut self,
        req: &pb::QueuesRequest,
    ) -> Result<pb::QueuesReply, ClientError> {
        self.request(Cmd::Queues, req, "the queues request").await
    }
}

impl Cluster {
    /// One task as the leader holds it, with its payload and result.
    pub async fn task(&mut self, queue: &str, name: &str) -> Result<pb::TaskInfo, ClientError> {
        let req = pb::GetTask {
            queue: queue.to_owned(),
            name: name.to_owned(),
        };
        let reply: pb::TaskReply = self.call(Cmd::Get, &req, "the task request").await?;
        Ok(reply.task.unwrap_or_default())
    }

    /// Creates a queue (idempotent); 0 takes the configured default.
    pub async fn create_queue(
        &mut self,
        name: &str,
        timeout_ms: u64,
        max_attempts: u32,
    ) -> Result<pb::QueueInfo, ClientError> {
        let req = pb::CreateQueue {
            name: name.to_owned(),
            timeout_ms,
            max_attempts,
        };
        let reply: pb::QueueReply = self
            .call(Cmd::CreateQueue, &req, "the queue create")
            .await?;
        Ok(reply.queue.unwrap_or_default())
    }

    /// Deletes a queue and its finished tasks (idempotent); returns it as it was.
    pub async fn delete_queue(&mut self, name: &str) -> Result<Option<pb::QueueInfo>, ClientError> {
        let req = pb::DeleteQueue {
            name: name.to_owned(),
        };
        let reply: pb::QueueReply = self
            .call(Cmd::DeleteQueue, &req, "the queue delete")
            .await?;
        Ok(reply.queue)
    }

    /// Submits a task; a task of that name pending or running is returned instead of a
    /// second one, and so is the task this submit made (by its ID) when a retry finds it
    /// finished.
    pub async fn submit_task(
        &mut self,
        queue: &str,
        name: &str,
        payload: &[u8],
        options: &SubmitOptions,
    ) -> Result<pb::TaskInfo, ClientError> {
        let req = pb::Submit {
            queue: queue.to_owned(),
            name: name.to_owned(),
            payload: payload.to_vec(),
            priority: options.priority,
            timeout_ms: options.timeout_ms,
            max_attempts: options.max_attempts,
            delay_ms: options.delay_ms,
            submit_id: match options.submit_id {
                0 => fresh_submit_id(),
                id => id,
            },
        };
        let reply: pb::TaskReply = self.call(Cmd::Submit, &req, "the task submit").await?;
        Ok(reply.task.unwrap_or_default())
    }

    /// Cancels a pending or running task.
    pub async fn cancel_task(
        &mut self,
        queue: &str,
        name: &str,
    ) -> Result<pb::TaskInfo, ClientError> {
        let req = pb::Cancel {
            queue: queue.to_owned(),
            name: name.to_owned(),
        };
        let reply: pb::TaskReply = self.call(Cmd::Cancel, &req, "the task cancel").await?;
        Ok(reply.task.unwrap_or_default())
    }

    /// Reports the result of attempt `token` of a task: accepted once, refused for an
    /// attempt that is no longer the running one.
    pub async fn complete_task(
        &mut self,
        queue: &str,
        name: &str,
        token: (u64, u64),
        result: &[u8],
    ) -> Result<pb::TaskInfo, ClientError> {
        let req = pb::Complete {
            queue: queue.to_owned(),
            name: name.to_owned(),
            term: token.0,
            index: token.1,
            result: result.to_vec(),
        };
        let reply: pb::TaskReply = self
            .call(Cmd::Complete, &req, "the task completion")
            .await?;
        Ok(reply.task.unwrap_or_default())
    }

    /// Reports that attempt `token` of a task failed: retried while attempts are left, or
    /// (`retry` false) failed for good.
    pub async fn fail_task(
        &mut self,
        queue: &str,
        name: &str,
        token: (u64, u64),
        error: &str,
        retry: bool,
    ) -> Result<pb::TaskInfo, ClientError> {
        let req = pb::Fail {
            queue: queue.to_owned(),
            name: name.to_owned(),
            term: token.0,
            index: token.1,
            error: error.to_owned(),
            retry,
        };
        let reply: pb::TaskReply = self.call(Cmd::Fail, &req, "the task failure").await?;
        Ok(reply.task.unwrap_or_default())
    }

    /// Attempt `token` of a task is still running: its timeout starts again.
    pub async fn heartbeat_task(
        &mut self,
        queue: &str,
        name: &str,
        token: (u64, u64),
    ) -> Result<pb::TaskInfo, ClientError> {
        let req = pb::Heartbeat {
            queue: queue.to_owned(),
            name: name.to_owned(),
            term: token.0,
            index: token.1,
        };
        let reply: pb::TaskReply = self
            .call(Cmd::Heartbeat, &req, "the task heartbeat")
            .await?;
        Ok(reply.task.unwrap_or_default())
    }

    /// Finished tasks back to pending (none named: every dead letter of the queue).
    pub async fn requeue_tasks(
        &mut self,
        queue: &str,
        names: &[String],
    ) -> Result<Vec<pb::TaskInfo>, ClientError> {
        let req = pb::Requeue {
            queue: queue.to_owned(),
            names: names.to_vec(),
        };
        let reply: pb::TasksDone = self.call(Cmd::Requeue, &req, "the requeue").await?;
        Ok(reply.tasks)
    }

    /// Finished tasks forgotten (none named: every dead letter of the queue).
    pub async fn purge_tasks(
        &mut self,
        queue: &str,
        names: &[String],
    ) -> Result<Vec<pb::TaskInfo>, ClientError> {
        let req = pb::Purge {
            queue: queue.to_owned(),
            names: names.to_vec(),
        };
        let reply: pb::TasksDone = self.call(Cmd::Purge, &req, "the purge").await?;
        Ok(reply.tasks)
    }
}
