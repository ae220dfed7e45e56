//! A double-buffered issuer of numbers from one sequence.
//!
//! The numbers of the current segment are handed out locally: `next_id()` is one atomic
//! increment on the segment in use, safe from any number of threads and tasks. When a
//! fraction of it (`prefetch_at`, 20 % by default) has been handed out, a background task
//! fetches the next segment from the leader, so that the switch to it costs nothing. If no
//! beacon answers, numbers keep coming from what is held and the outage is reported; only
//! when both segments are used up does `next_id()` wait, up to `wait_for`, and then fail
//! with a clear error.
//!
//! The segment size adapts, as Leaf's does: a segment that lasted less than the target
//! period doubles the next request, one that lasted more than twice it halves it (never
//! below the sequence's own step); the beacon caps it at its `sequence.max_step`.
//!
//! [`Sequence::close`] hands the unused tail back when it is still the sequence's last
//! segment, so a service restarted cleanly does not burn numbers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::machines::sequence::wire::SequenceErrorCode;
use crate::net::{ClientError, Cluster, ConnectOptions};
use crate::pb::sequence as pb;
use crate::wire::ErrorCode;

/// How a [`Sequence`] fetches and serves.
#[derive(Debug, Clone)]
pub struct SequenceOptions {
    pub connect: ConnectOptions,
    /// How long one fetch keeps looking for a leader before it reports an outage and
    /// tries again.
    pub retry_for: Duration,
    /// The fraction of the current segment handed out when the next one is fetched.
    pub prefetch_at: f64,
    /// How long `next_id()` waits for a segment when both are used up.
    pub wait_for: Duration,
    /// A segment should last about this long: one used up faster makes the next request
    /// twice as large, one that lasts more than twice as long halves it.
    pub target_period: Duration,
    /// The largest count this client asks for (the beacon caps it too).
    pub max_count: u64,
}

impl Default for SequenceOptions {
    fn default() -> SequenceOptions {
        SequenceOptions {
            connect: ConnectOptions::default(),
            retry_for: Duration::from_secs(2),
            prefetch_at: 0.2,
            wait_for: Duration::from_secs(3),
            target_period: Duration::from_secs(15 * 60),
            max_count: u64::MAX,
        }
    }
}

/// Why a [`Sequence`] could not hand out a number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SequenceClientError {
    #[error(
        "sequence `{name}`: both segments are used up and no new one came within {} ms{}",
        waited.as_millis(),
        outage.as_ref().map(|o| format!(" (no beacon answered: {o})")).unwrap_or_default()
    )]
    Empty {
        name: String,
        waited: Duration,
        outage: Option<String>,
    },
    #[error("sequence `{name}`: the cluster refused the next segment: {msg}")]
    Refused {
        name: String,
        code: u32,
        msg: String,
    },
    #[error("sequence `{name}` is closed")]
    Closed { name: String },
}

/// What a [`Sequence`] holds and how its fetches go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceStatus {
    pub name: String,
    /// Numbers left in the current and the next segment.
    pub remaining: u64,
    /// The count the next fetch asks for.
    pub count: u64,
    /// Segments fetched, and fetch attempts that failed.
    pub fetches: u64,
    pub failures: u64,
    /// Times `next_id()` found both segments used up and waited.
    pub waits: u64,
    /// Why the last fetch failed, while no beacon answers.
    pub outage: Option<String>,
}

/// Numbers in `taken` past this are a closed segment's.
const CLOSED: u64 = u64::MAX / 2;

/// One segment being handed out.
#[derive(Debug)]
struct Buffer {
    start: u64,
    count: u64,
    index: u64,
    /// Numbers taken so far (may run past `count` by the threads that found it used up).
    taken: AtomicU64,
    /// When `taken` reaches this, the next segment is fetched.
    prefetch_at: u64,
}

impl Buffer {
    fn new(segment: &pb::Segment, prefetch_at: f64) -> Buffer {
        let count = segment.end - segment.start + 1;
        Buffer {
            start: segment.start,
            count,
            index: segment.index,
            taken: AtomicU64::new(0),
            prefetch_at: ((count as f64 * prefetch_at) as u64).min(count - 1),
        }
    }

    /// A buffer that holds nothing (before the first segment, and after close).
    fn empty() -> Buffer {
        Buffer {
            start: 0,
            count: 0,
            index: 0,
            taken: AtomicU64::new(CLOSED),
            prefetch_at: 0,
        }
    }

    fn left(&self) -> u64 {
        self.count
            .saturating_sub(self.taken.load(Ordering::Relaxed).min(self.count))
    }

    fn wanted_next(&self) -> bool {
        self.taken.load(Ordering::Relaxed) >= self.prefetch_at
    }
}

/// What only the slow path and the fetcher touch, under a lock.
#[derive(Debug, Default)]
struct Slow {
    next: Option<Arc<Buffer>>,
    outage: Option<String>,
    /// A refusal no retry can fix (the sequence was deleted, or is exhausted).
    refused: Option<SequenceClientError>,
    closed: bool,
    count: u64,
}

#[derive(Debug)]
struct Shared {
    name: String,
    opts: SequenceOptions,
    current: ArcSwap<Buffer>,
    slow: Mutex<Slow>,
    /// Told when a segment arrives or the fetcher gives up for good.
    refilled: Condvar,
    refilled_async: Notify,
    /// Wakes the fetcher.
    want: Notify,
    fetches: AtomicU64,
    failures: AtomicU64,
    waits: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Slow> {
        self.slow.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current segment `seen` is used up: switch to the next one if it is there.
    /// `Ok(true)`: switched (or another thread did); `Ok(false)`: nothing to switch to yet.
    fn switch(&self, slow: &mut Slow, seen: &Arc<Buffer>) -> Result<bool, SequenceClientError> {
        if !Arc::ptr_eq(&self.current.load(), seen) {
            return Ok(true);
        }
        if let Some(next) = slow.next.take() {
            self.current.store(next);
            self.want.notify_one();
            return Ok(true);
        }
        if slow.closed {
            return Err(SequenceClientError::Closed {
                name: self.name.clone(),
            });
        }
        if let Some(refused) = &slow.refused {
            return Err(refused.clone());
        }
        self.want.notify_one();
        Ok(false)
    }

    /// Both segments are used up: how much longer a caller that began waiting at
    /// `started` (now, if not yet) may wait, or the error once `wait_for` has passed.
    fn left_to_wait(
        &self,
        started: &mut Option<Instant>,
        slow: &Slow,
    ) -> Result<Duration, SequenceClientError> {
        let began = *started.get_or_insert_with(|| {
            self.waits.fetch_add(1, Ordering::Relaxed);
            Instant::now()
        });
        let left = self.opts.wait_for.saturating_sub(began.elapsed());
        if left.is_zero() {
            return Err(SequenceClientError::Empty {
                name: self.name.clone(),
                waited: began.elapsed(),
                outage: slow.outage.clone(),
            });
        }
        Ok(left)
    }

    /// The fast path: a number of the current segment, or the segment that was used up.
    #[inline]
    fn take(&self) -> Result<u64, Arc<Buffer>> {
        let buffer = self.current.load();
        let k = buffer.taken.fetch_add(1, Ordering::Relaxed);
        if k < buffer.count {
            if k == buffer.prefetch_at {
                self.want.notify_one();
            }
            return Ok(buffer.start + k);
        }
        Err(arc_swap::Guard::into_inner(buffer))
    }
}

/// A double-buffered issuer of one sequence's numbers. Cheap to share: wrap it in an `Arc`
/// and call [`Sequence::next_id`] from any thread.
pub struct Sequence {
    shared: Arc<Shared>,
    stop: CancellationToken,
    fetcher: Option<JoinHandle<Cluster>>,
}

impl std::fmt::Debug for Sequence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sequence")
            .field("name", &self.shared.name)
            .finish_non_exhaustive()
    }
}

impl Sequence {
    /// Opens sequence `name` (which must exist) through `beacons` and fetches its first
    /// segment.
    pub async fn open(
        beacons: Vec<String>,
        name: &str,
        opts: SequenceOptions,
    ) -> Result<Sequence, ClientError> {
        let mut cluster = Cluster::new(beacons, opts.connect.clone(), opts.retry_for);
        let first = cluster.next_segment(name, 0).await?;
        let segment = first.segment.clone().unwrap_or_default();
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            current: ArcSwap::from_pointee(Buffer::new(&segment, opts.prefetch_at)),
            slow: Mutex::new(Slow {
                count: first.step.max(1),
                ..Slow::default()
            }),
            refilled: Condvar::new(),
            refilled_async: Notify::new(),
            want: Notify::new(),
            fetches: AtomicU64::new(1),
            failures: AtomicU64::new(0),
            waits: AtomicU64::new(0),
            opts,
        });
        let stop = CancellationToken::new();
        let fetcher = Fetcher {
            shared: shared.clone(),
            cluster,
            step: first.step.max(1),
            max_step: first.max_step.max(1),
            last_fetch: Instant::now(),
        };
        let task = tokio::spawn(fetcher.run(stop.clone()));
        Ok(Sequence {
            shared,
            stop,
            fetcher: Some(task),
        })
    }

    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The next number: local while a segment holds numbers; when both are used up it
    /// blocks this thread for up to `wait_for`. From async code, prefer
    /// [`Sequence::next_id_async`], which waits without blocking the thread.
    pub fn next_id(&self) -> Result<u64, SequenceClientError> {
        let mut started: Option<Instant> = None;
        loop {
            let seen = match self.shared.take() {
                Ok(n) => return Ok(n),
                Err(seen) => seen,
            };
            let mut slow = self.shared.lock();
            if self.shared.switch(&mut slow, &seen)? {
                continue;
            }
            let left = self.shared.left_to_wait(&mut started, &slow)?;
            let (guard, _) = self
                .shared
                .refilled
                .wait_timeout(slow, left)
                .unwrap_or_else(|p| p.into_inner());
            drop(guard);
        }
    }

    /// [`Sequence::next_id`] for async code: the same local fast path; when both segments
    /// are used up it awaits the next one for up to `wait_for`.
    pub async fn next_id_async(&self) -> Result<u64, SequenceClientError> {
        let mut started: Option<Instant> = None;
        loop {
            let seen = match self.shared.take() {
                Ok(n) => return Ok(n),
                Err(seen) => seen,
            };
            let refilled = self.shared.refilled_async.notified();
            tokio::pin!(refilled);
            refilled.as_mut().enable();
            let left = {
                let mut slow = self.shared.lock();
                if self.shared.switch(&mut slow, &seen)? {
                    continue;
                }
                self.shared.left_to_wait(&mut started, &slow)?
            };
            let _ = tokio::time::timeout(left, refilled).await;
        }
    }

    /// What it holds and how its fetches go.
    pub fn status(&self) -> SequenceStatus {
        let slow = self.shared.lock();
        let current = self.shared.current.load();
        SequenceStatus {
            name: self.shared.name.clone(),
            remaining: current.left() + slow.next.as_ref().map_or(0, |n| n.left()),
            count: slow.count,
            fetches: self.shared.fetches.load(Ordering::Relaxed),
            failures: self.shared.failures.load(Ordering::Relaxed),
            waits: self.shared.waits.load(Ordering::Relaxed),
            outage: slow.outage.clone(),
        }
    }

    /// Stops handing out numbers and hands the unused ones back, when the segment that
    /// holds them is still the sequence's last (so nobody else has numbers past them).
    /// Returns the range handed back, if any. Numbers not handed back are burned, never
    /// reused.
    pub async fn close(mut self) -> Result<Option<(u64, u64)>, ClientError> {
        self.stop.cancel();
        let Some(task) = self.fetcher.take() else {
            return Ok(None);
        };
        let mut cluster = match task.await {
            Ok(cluster) => cluster,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        };
        let unused = {
            let mut slow = self.shared.lock();
            slow.closed = true;
            let next = slow.next.take();
            let current = self.shared.current.swap(Arc::new(Buffer::empty()));
            let taken = current
                .taken
                .swap(CLOSED, Ordering::AcqRel)
                .min(current.count);
            self.shared.refilled.notify_all();
            self.shared.refilled_async.notify_waiters();
            match next {
                // The next segment is the later one: only it can be the last.
                Some(next) => Some((next.start, next.start + (next.count - 1), next.index)),
                None if taken < current.count => Some((
                    current.start + taken,
                    current.start + (current.count - 1),
                    current.index,
                )),
                None => None,
            }
        };
        let Some((start, end, index)) = unused else {
            return Ok(None);
        };
        match cluster
            .give_back(&self.shared.name, start, end, index)
            .await
        {
            Ok(_) => Ok(Some((start, end))),
            Err(e)
                if e.is(SequenceErrorCode::NotLastSegment)
                    || e.is(SequenceErrorCode::UnknownSequence) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

impl Drop for Sequence {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The background task that keeps a next segment ready.
struct Fetcher {
    shared: Arc<Shared>,
    cluster: Cluster,
    /// The sequence's own step: the adaptive count never goes below it.
    step: u64,
    max_step: u64,
    last_fetch: Instant,
}

impl Fetcher {
    async fn run(mut self, stop: CancellationToken) -> Cluster {
        let mut pause = Duration::from_millis(50);
        loop {
            // Wait until the current segment has reached its prefetch point and no next
            // segment is held.
            loop {
                let wanted = {
                    let slow = self.shared.lock();
                    slow.next.is_none()
                        && slow.refused.is_none()
                        && self.shared.current.load().wanted_next()
                };
                if wanted {
                    break;
                }
                tokio::select! {
                    _ = stop.cancelled() => return self.cluster,
                    _ = self.shared.want.notified() => {}
                }
            }
            if stop.is_cancelled() {
                return self.cluster;
            }
            let count = self.shared.lock().count;
            let asked_at = Instant::now();
            // A fetch in flight is seen through even when the sequence closes: abandoned,
            // its segment would become the sequence's last one unknown to this client, and
            // close() could hand back no tail (the beacon refuses any but the last). The
            // cluster's own retry bound ends it.
            let fetched = self.cluster.next_segment(&self.shared.name, count).await;
            match fetched {
                Ok(reply) => {
                    pause = Duration::from_millis(50);
                    self.got(reply, asked_at.elapsed());
                }
                Err(e) => {
                    self.shared.failures.fetch_add(1, Ordering::Relaxed);
                    if self.refused(&e) {
                        continue;
                    }
                    tokio::select! {
                        _ = stop.cancelled() => return self.cluster,
                        _ = tokio::time::sleep(pause) => {}
                    }
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    /// A segment arrived (`took` after it was asked for): hold it as the next one and size
    /// the next request.
    ///
    /// Leaf's rule sizes it by how long the last segment lasted against the target period
    /// (shorter: double; more than twice as long: halve). On top of that, a segment must
    /// outlast a fetch: at the rate the last one was used, the part left after the prefetch
    /// point must cover four fetches, so a burst that outgrows the step is caught up with
    /// in one fetch instead of a series of doublings.
    fn got(&mut self, reply: pb::SegmentReply, took: Duration) {
        let segment = reply.segment.unwrap_or_default();
        self.step = reply.step.max(1);
        self.max_step = reply.max_step.max(1);
        let lasted = self.last_fetch.elapsed();
        self.last_fetch = Instant::now();
        let target = self.shared.opts.target_period;
        let ceiling = self.max_step.min(self.shared.opts.max_count).max(1);
        let mut slow = self.shared.lock();
        let asked = slow.count.max(1);
        let by_period = if lasted < target {
            asked.saturating_mul(2)
        } else if lasted > target * 2 {
            (asked / 2).max(self.step)
        } else {
            asked
        };
        let rate = asked as f64 / lasted.as_secs_f64().max(1e-6);
        let after_prefetch = (1.0 - self.shared.opts.prefetch_at).max(0.05);
        let cover = (rate * took.as_secs_f64() * 4.0 / after_prefetch) as u64;
        slow.count = by_period.max(cover).min(ceiling);
        if slow.outage.take().is_some() {
            tracing::info!(sequence = %self.shared.name, "a beacon answers again");
        }
        slow.next = Some(Arc::new(Buffer::new(
            &segment,
            self.shared.opts.prefetch_at,
        )));
        self.shared.fetches.fetch_add(1, Ordering::Relaxed);
        drop(slow);
        self.shared.refilled.notify_all();
        self.shared.refilled_async.notify_waiters();
    }

    /// A fetch failed: a refusal no retry can fix is kept for `next_id()` to report (true);
    /// anything else is an outage, reported while numbers are still served (false).
    fn refused(&self, e: &ClientError) -> bool {
        let permanent = !e.is_retryable()
            && !matches!(e, ClientError::NoLeader { .. })
            && (e.is(SequenceErrorCode::UnknownSequence)
                || e.is(SequenceErrorCode::SequenceExhausted)
                || e.is(ErrorCode::InvalidRequest));
        let mut slow = self.shared.lock();
        if permanent {
            tracing::warn!(sequence = %self.shared.name, "no more segments: {e}");
            slow.refused = Some(SequenceClientError::Refused {
                name: self.shared.name.clone(),
                code: e.code().unwrap_or_default(),
                msg: e.to_string(),
            });
        } else {
            if slow.outage.is_none() {
                tracing::warn!(
                    sequence = %self.shared.name,
                    "cannot fetch the next segment, serving from what is held: {e}"
                );
            }
            slow.outage = Some(e.to_string());
        }
        drop(slow);
        self.shared.refilled.notify_all();
        self.shared.refilled_async.notify_waiters();
        permanent
    }
}
