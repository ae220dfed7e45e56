//! A submitter's side of task queues: submit by name, await the result.
//!
//! One watch per queue follows the queue's finished tasks at the leader; every handle waits
//! on it, so a thousand tasks in flight hold one connection, not a thousand. A waiter is
//! in place before its submit is sent, and a watch that moves to a new leader asks about
//! every name still awaited, so no result is missed across a failover.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{broadcast, oneshot, watch};
use tokio::task::JoinHandle;

use super::SubmitOptions;
use crate::machines::tasks::wire::{TasksCmd, TasksErrorCode};
use crate::net::{ClientError, Cluster, ConnectOptions};
use crate::pb::tasks as pb;
use crate::wire::{Code, ErrorCode};

/// How a task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskOutcome {
    Completed(Vec<u8>),
    /// The worker reported a failure not worth retrying.
    Failed(String),
    /// Out of attempts: a dead letter (the last error).
    Dead(String),
    Cancelled(String),
}

impl TaskOutcome {
    /// The outcome of a finished task (`None` while it is pending or running).
    pub fn of(task: &pb::TaskInfo) -> Option<TaskOutcome> {
        Some(match task.state.as_str() {
            "completed" => TaskOutcome::Completed(task.result.clone()),
            "failed" => TaskOutcome::Failed(task.error.clone()),
            "dead" => TaskOutcome::Dead(task.error.clone()),
            "cancelled" => TaskOutcome::Cancelled(task.error.clone()),
            _ => return None,
        })
    }
}

type Key = (String, String);

/// Whether a queue's watch has begun (or why it cannot).
type Ready = watch::Receiver<Option<Result<(), String>>>;

#[derive(Default)]
struct Shared {
    waiters: Mutex<HashMap<Key, Vec<oneshot::Sender<pb::TaskInfo>>>>,
    /// Per queue: every finished task, for [`Tasks::finished`].
    finished: Mutex<HashMap<String, broadcast::Sender<pb::TaskInfo>>>,
}

impl Shared {
    fn wait(&self, key: Key) -> oneshot::Receiver<pb::TaskInfo> {
        let (tx, rx) = oneshot::channel();
        self.waiters
            .lock()
            .expect("waiters")
            .entry(key)
            .or_default()
            .push(tx);
        rx
    }

    fn awaited(&self, queue: &str) -> Vec<String> {
        self.waiters
            .lock()
            .expect("waiters")
            .keys()
            .filter(|(q, _)| q == queue)
            .map(|(_, n)| n.clone())
            .collect()
    }

    fn deliver(&self, task: pb::TaskInfo) {
        let waiting = self
            .waiters
            .lock()
            .expect("waiters")
            .remove(&(task.queue.clone(), task.name.clone()));
        for tx in waiting.into_iter().flatten() {
            let _ = tx.send(task.clone());
        }
        if let Some(tx) = self.finished.lock().expect("finished").get(&task.queue) {
            let _ = tx.send(task);
        }
    }

    /// The queue's watch has ended for good: its waiters learn so (their senders drop).
    fn abandon(&self, queue: &str) {
        self.waiters
            .lock()
            .expect("waiters")
            .retain(|(q, _), _| q != queue);
    }
}

/// Submits tasks and awaits their results.
pub struct Tasks {
    beacons: Vec<String>,
    opts: ConnectOptions,
    retry_for: Duration,
    cluster: tokio::sync::Mutex<Cluster>,
    shared: Arc<Shared>,
    /// Per queue: its watch, and whether it has begun (or why it cannot).
    watches: tokio::sync::Mutex<HashMap<String, (JoinHandle<()>, Ready)>>,
}

impl Drop for Tasks {
    fn drop(&mut self) {
        for (task, _) in self.watches.get_mut().values() {
            task.abort();
        }
    }
}

/// A submitted task, whose outcome can be awaited.
pub struct TaskHandle {
    task: pb::TaskInfo,
    rx: oneshot::Receiver<pb::TaskInfo>,
    shared: Arc<Shared>,
}

impl TaskHandle {
    /// The task as the submit left it (or the same-named task that was pending or running).
    pub fn task(&self) -> &pb::TaskInfo {
        &self.task
    }

    /// Waits for the task to finish.
    pub async fn result(mut self) -> Result<TaskOutcome, ClientError> {
        loop {
            let Ok(task) = (&mut self.rx).await else {
                return Err(ClientError::Ended {
                    what: "the wait for a task's result",
                    why: format!("the watch of queue `{}` ended", self.task.queue),
                });
            };
            // A finished task of the same name from before this submit: wait on.
            if task.seq < self.task.seq {
                self.rx = self
                    .shared
                    .wait((self.task.queue.clone(), self.task.name.clone()));
                continue;
            }
            return Ok(TaskOutcome::of(&task).expect("delivered finished"));
        }
    }

    /// Waits at most `limit` for the task to finish.
    pub async fn result_within(self, limit: Duration) -> Result<TaskOutcome, ClientError> {
        let queue = self.task.queue.clone();
        tokio::time::timeout(limit, self.result())
            .await
            .unwrap_or_else(|_| {
                Err(ClientError::Ended {
                    what: "the wait for a task's result",
                    why: format!("no outcome within {limit:?} (queue `{queue}`)"),
                })
            })
    }
}

impl Tasks {
    /// Tasks of the cluster reached through `beacons`; nothing is connected until used.
    pub fn new(beacons: Vec<String>, opts: ConnectOptions, retry_for: Duration) -> Tasks {
        Tasks {
            cluster: tokio::sync::Mutex::new(Cluster::new(
                beacons.clone(),
                opts.clone(),
                retry_for,
            )),
            beacons,
            opts,
            retry_for,
            shared: Arc::new(Shared::default()),
            watches: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Submits a task with the queue's defaults.
    pub async fn submit(
        &self,
        queue: &str,
        name: &str,
        payload: &[u8],
    ) -> Result<TaskHandle, ClientError> {
        self.submit_with(queue, name, payload, &SubmitOptions::default())
            .await
    }

    /// Submits a task. A task of that name pending or running is returned instead of a
    /// second one, and its handle awaits that task.
    pub async fn submit_with(
        &self,
        queue: &str,
        name: &str,
        payload: &[u8],
        options: &SubmitOptions,
    ) -> Result<TaskHandle, ClientError> {
        self.watching(queue).await?;
        let key = (queue.to_owned(), name.to_owned());
        let rx = self.shared.wait(key.clone());
        let submitted = self
            .cluster
            .lock()
            .await
            .submit_task(queue, name, payload, options)
            .await;
        match submitted {
            Ok(task) => Ok(TaskHandle {
                task,
                rx,
                shared: self.shared.clone(),
            }),
            Err(e) => {
                drop(rx);
                if let Some(list) = self.shared.waiters.lock().expect("waiters").get_mut(&key) {
                    list.retain(|tx| !tx.is_closed());
                }
                Err(e)
            }
        }
    }

    /// A handle on a task submitted before (by anyone).
    pub async fn handle(&self, queue: &str, name: &str) -> Result<TaskHandle, ClientError> {
        self.watching(queue).await?;
        let rx = self.shared.wait((queue.to_owned(), name.to_owned()));
        let task = self.cluster.lock().await.task(queue, name).await?;
        if TaskOutcome::of(&task).is_some() {
            self.shared.deliver(task.clone());
        }
        Ok(TaskHandle {
            task,
            rx,
            shared: self.shared.clone(),
        })
    }

    /// Every task of `queue` that finishes from now on (a lagging receiver loses the oldest).
    pub async fn finished(
        &self,
        queue: &str,
    ) -> Result<broadcast::Receiver<pb::TaskInfo>, ClientError> {
        let rx = self
            .shared
            .finished
            .lock()
            .expect("finished")
            .entry(queue.to_owned())
            .or_insert_with(|| broadcast::channel(4096).0)
            .subscribe();
        self.watching(queue).await?;
        Ok(rx)
    }

    /// The cluster this submits to (for the other task calls).
    pub async fn cluster(&self) -> tokio::sync::MutexGuard<'_, Cluster> {
        self.cluster.lock().await
    }

    /// Starts the queue's watch if it has not begun, and waits until it has.
    async fn watching(&self, queue: &str) -> Result<(), ClientError> {
        let mut ready = {
            let mut watches = self.watches.lock().await;
            let finished = watches
                .get(queue)
                .is_some_and(|(task, _)| task.is_finished());
            if finished {
                watches.remove(queue);
            }
            watches
                .entry(queue.to_owned())
                .or_insert_with(|| {
                    let (tx, rx) = watch::channel(None);
                    let cluster =
                        Cluster::new(self.beacons.clone(), self.opts.clone(), self.retry_for);
                    let task =
                        tokio::spawn(follow(queue.to_owned(), cluster, self.shared.clone(), tx));
                    (task, rx)
                })
                .1
                .clone()
        };
        let limit = self.retry_for + self.opts.timeout;
        let state = tokio::time::timeout(limit, ready.wait_for(Option::is_some))
            .await
            .map_err(|_| ClientError::Ended {
                what: "the queue watch",
                why: format!("no leader began it within {limit:?}"),
            })?
            .map(|s| s.clone())
            .map_err(|_| ClientError::Ended {
                what: "the queue watch",
                why: "it stopped".into(),
            })?;
        state
            .expect("waited for")
            .map_err(|why| ClientError::Ended {
                what: "the queue watch",
                why,
            })
    }
}

/// Follows `queue`'s finished tasks at the leader for as long as it can, delivering each to
/// its waiters; after a failover, resumes from the log index after the last notice heard,
/// or, when that is compacted, asks about every name still awaited.
async fn follow(
    queue: String,
    mut cluster: Cluster,
    shared: Arc<Shared>,
    ready: watch::Sender<Option<Result<(), String>>>,
) {
    // The log index heard through; 0 before the first answer.
    let mut index = 0;
    loop {
        let resume = if index > 0 { index + 1 } else { 0 };
        let req = pb::WatchQueue {
            queue: queue.clone(),
            names: shared.awaited(&queue),
            start_index: resume,
        };
        let opened: Result<(_, pb::WatchQueueReply), _> = cluster
            .open_stream(TasksCmd::WatchQueue, &req, "the queue watch")
            .await;
        let (mut conn, reply) = match opened {
            Ok(opened) => opened,
            Err(e) if e.is(TasksErrorCode::UnknownQueue) || e.is(ErrorCode::InvalidRequest) => {
                ready.send_replace(Some(Err(e.to_string())));
                shared.abandon(&queue);
                return;
            }
            Err(e) if e.is(ErrorCode::Compacted) => {
                // Too far behind to resume: ask about the names instead.
                index = 0;
                continue;
            }
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        ready.send_replace(Some(Ok(())));
        index = reply.index;
        for task in reply.finished {
            shared.deliver(task);
        }
        loop {
            let Ok(frame) = conn.next_pushed("the queue watch").await else {
                break;
            };
            if frame.cmd != TasksCmd::QueueNotice.code() {
                break;
            }
            let Ok(notice) = frame.decode::<pb::QueueNotice>() else {
                break;
            };
            index = index.max(notice.index);
            for task in notice.finished {
                shared.deliver(task);
            }
        }
    }
}
