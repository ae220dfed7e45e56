//! The task queue of seed 003 on ZooKeeper, as the seed gives it, for the task part to
//! drive beside beacon's: persistent znodes `pending_tasks`, `running_tasks` and
//! `completed_tasks`; an ephemeral znode per worker under `workers` with a persistent queue
//! of its own under `queues`; and one master that moves pending tasks to a worker's queue
//! (least loaded), puts a vanished worker's tasks back to pending in one transaction,
//! cleans up at start-up and publishes results. Results are published as znodes under
//! `results`, which the submitter watches.
//!
//! Written as a careful user would: every move is one multi-op transaction, one-shot
//! watches are set again after each event, and each loop also looks again every
//! [`RESCAN`] in case a reconnection fell between an event and the next watch.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::FutureExt;
use futures_util::future::join_all;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;
use zookeeper_client as zk;

use super::clients::zk_connect;

const ROOT: &str = "/tq";
const PENDING: &str = "/tq/pending_tasks";
const RUNNING: &str = "/tq/running_tasks";
const COMPLETED: &str = "/tq/completed_tasks";
const WORKERS: &str = "/tq/workers";
const QUEUES: &str = "/tq/queues";
const RESULTS: &str = "/tq/results";

/// How often a loop looks again without an event.
const RESCAN: Duration = Duration::from_millis(500);
/// How often a completion is retried after a lost connection.
const RETRIES: usize = 20;

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

fn ephemeral() -> zk::CreateOptions<'static> {
    zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all())
}

/// Creates `path`; an existing one is fine.
async fn ensure(client: &zk::Client, path: &str) -> anyhow::Result<()> {
    match client.create(path, b"", &persistent()).await {
        Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("create {path}")),
    }
}

/// Tasks spawned for one part of the design; aborted when dropped.
pub struct Spawned(Vec<JoinHandle<()>>);

impl Drop for Spawned {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// The master's view: live workers, how many tasks each holds, and who holds what.
#[derive(Default)]
struct Book {
    workers: BTreeSet<String>,
    load: HashMap<String, usize>,
    owner: HashMap<String, String>,
}

impl Book {
    /// The least loaded live worker, ties by name.
    fn pick(&self) -> Option<String> {
        self.workers
            .iter()
            .min_by_key(|w| (self.load.get(*w).copied().unwrap_or(0), *w))
            .cloned()
    }

    fn assigned(&mut self, task: &str, worker: &str) {
        *self.load.entry(worker.to_owned()).or_default() += 1;
        self.owner.insert(task.to_owned(), worker.to_owned());
    }

    fn done(&mut self, task: &str) {
        if let Some(w) = self.owner.remove(task)
            && let Some(n) = self.load.get_mut(&w)
        {
            *n = n.saturating_sub(1);
        }
    }
}

/// Makes the tree and starts the master: the seed's start-up cleanup, then its three
/// watches (workers, pending tasks, completed tasks).
pub async fn start_master(endpoints: &[SocketAddr]) -> anyhow::Result<Spawned> {
    let client = zk_connect(endpoints, Duration::from_secs(10)).await?;
    for path in [ROOT, PENDING, RUNNING, COMPLETED, WORKERS, QUEUES, RESULTS] {
        ensure(&client, path).await?;
    }
    let book = Arc::new(Mutex::new(Book::default()));
    let wake = Arc::new(Notify::new());
    // Start-up: queues of workers that are gone go back to pending; results are published.
    let live: HashSet<String> = client.list_children(WORKERS).await?.into_iter().collect();
    for q in client.list_children(QUEUES).await? {
        if !live.contains(&q) {
            requeue(&client, &q, &book).await;
        }
    }
    publish(&client, &book).await;
    let workers = {
        let (client, book, wake) = (client.clone(), book.clone(), wake.clone());
        tokio::spawn(async move {
            loop {
                if let Ok((now, watch)) = client.list_and_watch_children(WORKERS).await {
                    let now: BTreeSet<String> = now.into_iter().collect();
                    let gone: Vec<String> = {
                        let b = book.lock().unwrap();
                        b.workers.difference(&now).cloned().collect()
                    };
                    book.lock().unwrap().workers = now;
                    for w in gone {
                        requeue(&client, &w, &book).await;
                    }
                    wake.notify_one();
                    let _ = tokio::time::timeout(RESCAN, watch.changed()).await;
                } else {
                    tokio::time::sleep(RESCAN).await;
                }
            }
        })
    };
    let pending = {
        let (client, book) = (client.clone(), book.clone());
        tokio::spawn(async move {
            loop {
                if let Ok((mut names, watch)) = client.list_and_watch_children(PENDING).await {
                    names.sort();
                    join_all(names.iter().map(|n| dispatch(&client, n, &book))).await;
                    tokio::select! {
                        _ = watch.changed() => {}
                        _ = wake.notified() => {}
                        _ = tokio::time::sleep(RESCAN) => {}
                    }
                } else {
                    tokio::time::sleep(RESCAN).await;
                }
            }
        })
    };
    let completed = tokio::spawn(async move {
        loop {
            let watch = publish(&client, &book).await;
            match watch {
                Some(w) => {
                    let _ = tokio::time::timeout(RESCAN, w.changed()).await;
                }
                None => tokio::time::sleep(RESCAN).await,
            }
        }
    });
    Ok(Spawned(vec![workers, pending, completed]))
}

/// The seed's "pending task created" transaction: running znode, the worker's queue entry,
/// pending znode deleted, at once.
async fn dispatch(client: &zk::Client, name: &str, book: &Mutex<Book>) {
    let Some(worker) = book.lock().unwrap().pick() else {
        return;
    };
    let from = format!("{PENDING}/{name}");
    let Ok((payload, _)) = client.get_data(&from).await else {
        return;
    };
    let mut tx = client.new_multi_writer();
    let ops = tx
        .add_create(
            &format!("{RUNNING}/{name}"),
            worker.as_bytes(),
            &persistent(),
        )
        .and_then(|_| {
            tx.add_create(
                &format!("{QUEUES}/{worker}/{name}"),
                &payload,
                &persistent(),
            )
        })
        .and_then(|_| tx.add_delete(&from, None));
    if ops.is_ok() && tx.commit().await.is_ok() {
        book.lock().unwrap().assigned(name, &worker);
    }
}

/// The seed's "worker deleted" transaction: its tasks back to pending, its queue removed.
async fn requeue(client: &zk::Client, worker: &str, book: &Mutex<Book>) {
    let queue = format!("{QUEUES}/{worker}");
    let Ok(names) = client.list_children(&queue).await else {
        return;
    };
    let mut tx = client.new_multi_writer();
    let mut ops = Ok(());
    for name in &names {
        let Ok((payload, _)) = client.get_data(&format!("{queue}/{name}")).await else {
            return;
        };
        ops = ops
            .and_then(|_| tx.add_create(&format!("{PENDING}/{name}"), &payload, &persistent()))
            .and_then(|_| tx.add_delete(&format!("{RUNNING}/{name}"), None))
            .and_then(|_| tx.add_delete(&format!("{queue}/{name}"), None));
    }
    if ops.and_then(|_| tx.add_delete(&queue, None)).is_ok() && tx.commit().await.is_ok() {
        let mut b = book.lock().unwrap();
        for name in &names {
            b.done(name);
        }
        b.load.remove(worker);
    }
}

/// Publishes every completed task's result and deletes the completed znode (one
/// transaction each); returns the watch on completed tasks.
async fn publish(client: &zk::Client, book: &Mutex<Book>) -> Option<zk::OneshotWatcher> {
    let (names, watch) = client.list_and_watch_children(COMPLETED).await.ok()?;
    join_all(names.iter().map(|name| async move {
        let from = format!("{COMPLETED}/{name}");
        let Ok((result, _)) = client.get_data(&from).await else {
            return;
        };
        let mut tx = client.new_multi_writer();
        let ops = tx
            .add_create(&format!("{RESULTS}/{name}"), &result, &persistent())
            .and_then(|_| tx.add_delete(&from, None));
        if ops.is_ok() && tx.commit().await.is_ok() {
            book.lock().unwrap().done(name);
        }
    }))
    .await;
    Some(watch)
}

/// Starts a worker as the seed's worker algorithm: its queue, its ephemeral znode, then a
/// watch on its queue; each task is run (at most `capacity` at once) by echoing its
/// payload, and completed in one transaction.
pub async fn start_worker(
    endpoints: &[SocketAddr],
    name: &str,
    capacity: usize,
) -> anyhow::Result<Spawned> {
    let client = zk_connect(endpoints, Duration::from_secs(10)).await?;
    let queue = format!("{QUEUES}/{name}");
    ensure(&client, &queue).await?;
    client
        .create(&format!("{WORKERS}/{name}"), b"", &ephemeral())
        .await
        .with_context(|| format!("register worker {name}"))?;
    let slots = Arc::new(Semaphore::new(capacity));
    let inflight = Arc::new(Mutex::new(HashSet::<String>::new()));
    let watcher = tokio::spawn(async move {
        loop {
            let Ok((names, watch)) = client.list_and_watch_children(&queue).await else {
                tokio::time::sleep(RESCAN).await;
                continue;
            };
            for task in names {
                if !inflight.lock().unwrap().insert(task.clone()) {
                    continue;
                }
                let (client, queue, slots, inflight) = (
                    client.clone(),
                    queue.clone(),
                    slots.clone(),
                    inflight.clone(),
                );
                tokio::spawn(async move {
                    let _slot = slots.acquire().await;
                    perform(&client, &queue, &task).await;
                    inflight.lock().unwrap().remove(&task);
                });
            }
            let _ = tokio::time::timeout(RESCAN, watch.changed()).await;
        }
    });
    Ok(Spawned(vec![watcher]))
}

/// Runs one task and completes it: the completed znode with the result, the queue entry and
/// the running znode deleted, at once. A retry after a lost connection that finds the work
/// done (the entry gone) stops.
async fn perform(client: &zk::Client, queue: &str, task: &str) {
    let entry = format!("{queue}/{task}");
    for _ in 0..RETRIES {
        let payload = match client.get_data(&entry).await {
            Ok((payload, _)) => payload,
            Err(zk::Error::NoNode) => return,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let mut tx = client.new_multi_writer();
        let ops = tx
            .add_create(&format!("{COMPLETED}/{task}"), &payload, &persistent())
            .and_then(|_| tx.add_delete(&entry, None))
            .and_then(|_| tx.add_delete(&format!("{RUNNING}/{task}"), None));
        if ops.is_err() {
            return;
        }
        match tx.commit().await {
            Ok(_) | Err(zk::MultiWriteError::OperationFailed { .. }) => return,
            Err(zk::MultiWriteError::RequestFailed { .. }) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// A client that submits tasks and awaits their published results.
pub struct Submitter {
    client: zk::Client,
}

impl Submitter {
    pub async fn connect(endpoints: &[SocketAddr]) -> anyhow::Result<Submitter> {
        Ok(Submitter {
            client: zk_connect(endpoints, Duration::from_secs(10)).await?,
        })
    }

    /// Submits task `name` (a pending znode; one that exists is the same task) and waits
    /// up to `within` for its result. `Err`: not submitted; `Ok(None)`: submitted, no
    /// result in time.
    pub async fn run(
        &self,
        name: &str,
        payload: &[u8],
        within: Duration,
    ) -> anyhow::Result<Option<Vec<u8>>> {
        let result = format!("{RESULTS}/{name}");
        let (stat, watch) = self.client.check_and_watch_stat(&result).await?;
        match self
            .client
            .create(&format!("{PENDING}/{name}"), payload, &persistent())
            .await
        {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(e).context("submit"),
        }
        let deadline = Instant::now() + within;
        let mut fired = Box::pin(watch.changed().fuse());
        let mut look = stat.is_some();
        loop {
            if look {
                match self.client.get_data(&result).await {
                    Ok((data, _)) => {
                        let _ = self.client.delete(&result, None).await;
                        return Ok(Some(data));
                    }
                    Err(_) if Instant::now() < deadline => {}
                    Err(_) => return Ok(None),
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            tokio::select! {
                _ = &mut fired => {}
                _ = tokio::time::sleep(left.min(Duration::from_secs(1))) => {}
            }
            look = true;
        }
    }
}
