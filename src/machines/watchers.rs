//! What the watches of one beacon hold, and what keeps a slow watcher from costing the
//! others: each watcher's queue is bounded in bytes as well as in notices, a notice that
//! several watchers of the same kind get is encoded once and shared by all of them, and the
//! watchers dropped for falling behind are logged in one line per interval, not one each.
//!
//! A notice's bytes are a [`Bytes`]: a thousand watchers of every node hold one copy of a
//! registration's notice, not a thousand. A watcher whose connection does not take what is
//! queued for it (its client stopped reading, its process was stopped) is dropped once its
//! queue holds [`WatchLimits::queue_bytes`] or [`WatchLimits::queue_notices`]; its client
//! resumes from the log index after the last notice it took, from the history every beacon
//! keeps (`watch.history`), so it misses nothing.

// The machines' handlers are compiled in every build, the daemon that calls them only with
// the `server` feature: without it (`beacon-client`) part of this module has no caller.
#![cfg_attr(not(feature = "server"), allow(dead_code))]

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::wire::Frame;

/// How much a watcher may hold queued before it is dropped (key `watch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchLimits {
    /// Bytes of notices queued (`watch.queue_bytes`, default 1 MiB).
    pub queue_bytes: usize,
    /// Notices queued (`watch.queue_notices`, default 4,096).
    pub queue_notices: usize,
}

impl Default for WatchLimits {
    fn default() -> Self {
        WatchLimits {
            queue_bytes: 1 << 20,
            queue_notices: 4096,
        }
    }
}

/// Listings larger than one answer sent at once, at most: a herd of watchers that all list
/// again at the same time (they were away too long to resume) waits its turn here, on the
/// connections' tasks, instead of encoding a registry each at once. Two leave a machine's
/// cores to the writes: on two cores, eight listings at once held the writes' p99 at 313 ms
/// against 14 ms idle (bench `gray`, the herd).
pub const LISTINGS_AT_ONCE: usize = 2;

/// How long a listing may go without its client taking a page: a client that stops reading
/// in the middle is dropped then, and its turn goes to the next. A listing whose pages come
/// slowly because the bulk thread is kept waiting (the machine is busy with everything
/// else) keeps its turn while its client takes them: dropping it would only list it again.
pub const LISTING_TIME: Duration = Duration::from_secs(30);

/// The rest of a watch's first answer, too large for one frame: pages made (encoded) one at
/// a time as the watcher's connection sends them, off the core, from what the core listed
/// (pointers into the state, as of the answer's index).
pub trait Pages: Send {
    /// The next page's body, or `None` after the last.
    fn next_page(&mut self) -> Option<Bytes>;
}

/// A listing's turn: one of [`LISTINGS_AT_ONCE`], given back when the listing is sent, or
/// once its client took no page for [`LISTING_TIME`].
pub(crate) struct Turn {
    permit: Arc<Mutex<Option<tokio::sync::OwnedSemaphorePermit>>>,
    /// When its client last took a page (or the listing began).
    progress: Arc<Mutex<tokio::time::Instant>>,
}

impl Turn {
    /// Its client took a page.
    fn moved(&self) {
        *self.progress.lock().unwrap_or_else(|e| e.into_inner()) = tokio::time::Instant::now();
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        // Given back now, not when the timer that bounds it fires.
        self.permit.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// How often the dropped watchers are summed up in the log.
const DROP_LOG_EVERY: Duration = Duration::from_secs(10);

/// Notices kept for sharing, at most (one per kind of watch and command).
const SHARED_KINDS: usize = 4096;

/// Every watch of this beacon: the limits, the gauges, the notices shared, the drop log.
#[derive(Debug)]
pub struct Watchers {
    limits: WatchLimits,
    /// Watchers open now.
    open: AtomicI64,
    /// Bytes queued for all of them and not taken by their connections yet.
    backlog: AtomicI64,
    /// The most one watcher has held queued since the last read of it (a scrape).
    deepest: AtomicUsize,
    /// Watchers dropped for falling behind, since start.
    dropped: AtomicU64,
    /// Notices encoded for a kind of watch: (pushed command, kind) -> (log index, body).
    shared: Mutex<HashMap<(u32, u64), SharedNotice>>,
    /// The same for the history replayed to resumed watches, on the bulk thread: apart, so
    /// that a replay walking old indexes neither evicts the live notices the core shares nor
    /// holds the lock the core takes.
    replayed: Mutex<HashMap<(u32, u64), SharedNotice>>,
    /// Bodies encoded, and bodies handed out again without encoding.
    encoded: AtomicU64,
    reused: AtomicU64,
    drops: Mutex<DropLog>,
    /// Turns for listings sent in pages.
    listings: Arc<tokio::sync::Semaphore>,
}

/// The notice last made for a kind of watch: the log index it tells, and its body (`None`:
/// that change concerns no watcher of the kind).
type SharedNotice = (u64, Option<Bytes>);

/// The drops since the last line about them.
#[derive(Debug, Default)]
struct DropLog {
    since: Option<Instant>,
    count: u64,
    what: Vec<&'static str>,
}

/// What the metrics read of the watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WatchGauges {
    pub open: i64,
    pub backlog_bytes: i64,
    pub deepest_bytes: usize,
    pub dropped: u64,
    pub encoded: u64,
    pub reused: u64,
}

impl Default for Watchers {
    fn default() -> Self {
        Watchers::new(WatchLimits::default())
    }
}

impl Watchers {
    pub fn new(limits: WatchLimits) -> Watchers {
        Watchers {
            limits,
            open: AtomicI64::new(0),
            backlog: AtomicI64::new(0),
            deepest: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            shared: Mutex::new(HashMap::new()),
            replayed: Mutex::new(HashMap::new()),
            encoded: AtomicU64::new(0),
            reused: AtomicU64::new(0),
            drops: Mutex::new(DropLog::default()),
            listings: Arc::new(tokio::sync::Semaphore::new(LISTINGS_AT_ONCE)),
        }
    }

    /// Waits for a turn to send a listing in pages.
    pub(crate) async fn listing_turn(&self) -> Turn {
        let permit = self
            .listings
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        let permit = Arc::new(Mutex::new(Some(permit)));
        let progress = Arc::new(Mutex::new(tokio::time::Instant::now()));
        // A client that stops reading in the middle of its listing gives its turn back
        // after a while all the same.
        let (held, moved) = (permit.clone(), progress.clone());
        tokio::spawn(async move {
            loop {
                let last = *moved.lock().unwrap_or_else(|e| e.into_inner());
                if last.elapsed() >= LISTING_TIME {
                    held.lock().unwrap_or_else(|e| e.into_inner()).take();
                    return;
                }
                tokio::time::sleep_until(last + LISTING_TIME).await;
                if held.lock().unwrap_or_else(|e| e.into_inner()).is_none() {
                    return;
                }
            }
        });
        Turn { permit, progress }
    }

    pub fn limits(&self) -> WatchLimits {
        self.limits
    }

    /// The gauges now; the deepest backlog starts again from 0.
    pub fn gauges(&self) -> WatchGauges {
        WatchGauges {
            open: self.open.load(Ordering::Relaxed),
            backlog_bytes: self.backlog.load(Ordering::Relaxed),
            deepest_bytes: self.deepest.swap(0, Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            encoded: self.encoded.load(Ordering::Relaxed),
            reused: self.reused.load(Ordering::Relaxed),
        }
    }

    /// A new watcher's queue: what its subscriber pushes into and its connection takes
    /// from. `behind` is set once it falls behind; a watch that subscribes again (after a
    /// long replay, `machines/follow.rs`) passes each of its queues the same.
    pub(crate) fn queue(
        self: &Arc<Self>,
        behind: Arc<std::sync::atomic::AtomicBool>,
    ) -> (Queue, Pushes) {
        let (tx, rx) = mpsc::channel(self.limits.queue_notices);
        let backlog = Arc::new(Backlog {
            behind,
            ..Backlog::default()
        });
        self.open.fetch_add(1, Ordering::Relaxed);
        (
            Queue {
                tx,
                backlog: backlog.clone(),
                watchers: self.clone(),
            },
            Pushes {
                rx,
                backlog,
                watchers: Some(self.clone()),
                listing: None,
                made_page: false,
                then: None,
            },
        )
    }

    /// The body of the notice a watch of kind `kind` gets for the change at `index`,
    /// encoded by `make` only if no watcher of that kind got it already: watchers of one
    /// kind (the same command, the same filter) are told the same change in turn, so the
    /// last body made is the one to share.
    pub(crate) fn shared(
        &self,
        cmd: u32,
        kind: u64,
        index: u64,
        make: impl FnOnce() -> Option<Bytes>,
    ) -> Option<Bytes> {
        self.cached(&self.shared, cmd, kind, index, make)
    }

    /// [`Watchers::shared`] for a change the history replays to a resumed watch: watches
    /// resuming at the same point walk it together and share each notice's bytes.
    pub(crate) fn replayed(
        &self,
        cmd: u32,
        kind: u64,
        index: u64,
        make: impl FnOnce() -> Option<Bytes>,
    ) -> Option<Bytes> {
        self.cached(&self.replayed, cmd, kind, index, make)
    }

    fn cached(
        &self,
        cache: &Mutex<HashMap<(u32, u64), SharedNotice>>,
        cmd: u32,
        kind: u64,
        index: u64,
        make: impl FnOnce() -> Option<Bytes>,
    ) -> Option<Bytes> {
        let mut shared = cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, body)) = shared.get(&(cmd, kind))
            && *at == index
        {
            self.reused.fetch_add(1, Ordering::Relaxed);
            return body.clone();
        }
        let body = make();
        self.encoded.fetch_add(1, Ordering::Relaxed);
        if shared.len() >= SHARED_KINDS {
            shared.clear();
        }
        shared.insert((cmd, kind), (index, body.clone()));
        body
    }

    /// Notes a watcher of `what` dropped for falling behind: the first of an interval is
    /// logged at once, the rest summed up in one line when the interval is over.
    fn dropped(&self, what: &'static str, why: &str) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        let mut log = self.drops.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        match log.since {
            None => {
                tracing::warn!(
                    "a watcher of {what} fell behind ({why}) and was dropped; its client resumes from its log index (further drops are summed up every {} s)",
                    DROP_LOG_EVERY.as_secs()
                );
                log.since = Some(now);
            }
            Some(since) => {
                log.count += 1;
                if !log.what.contains(&what) {
                    log.what.push(what);
                }
                if now.duration_since(since) >= DROP_LOG_EVERY {
                    tracing::warn!(
                        "{} more watchers ({}) fell behind and were dropped in the last {} s; their clients resume from their log index",
                        log.count,
                        log.what.join(", "),
                        now.duration_since(since).as_secs()
                    );
                    *log = DropLog {
                        since: Some(now),
                        ..DropLog::default()
                    };
                }
            }
        }
    }
}

/// One watcher's queue as both its sides see it.
#[derive(Debug, Default)]
struct Backlog {
    /// Bytes queued and not taken yet.
    bytes: AtomicUsize,
    /// It fell behind and was dropped: what is still queued is of no use (its stream ends,
    /// and its client resumes from the last notice it took), so its connection drops it.
    /// Shared with the stream's end, which then says so.
    behind: Arc<std::sync::atomic::AtomicBool>,
    /// A listing is being sent ahead of what is queued: the notices that arrive meanwhile
    /// are held to the count limit alone. A herd that resumes at once is listed slowly
    /// (two listings at a time), and dropping a watcher for what queued behind its own
    /// listing would only list it again, and again.
    listing: std::sync::atomic::AtomicBool,
}

/// The pushing side of one watcher's queue (its subscriber's, on the driver's task).
pub(crate) struct Queue {
    tx: mpsc::Sender<Frame>,
    backlog: Arc<Backlog>,
    watchers: Arc<Watchers>,
}

/// What a push did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    Queued,
    /// The watcher is gone (its connection closed).
    Gone,
    /// It fell behind its limits and is dropped.
    Behind,
}

impl Queue {
    /// Queues `frame` for the watcher, unless it is gone or falls behind its limits with
    /// it (then it is dropped: the caller ends its stream).
    pub(crate) fn push(&mut self, frame: Frame, what: &'static str) -> Pushed {
        let len = frame.body.len();
        let limits = self.watchers.limits;
        let held = self.backlog.bytes.load(Ordering::Relaxed);
        let exempt = self.backlog.listing.load(Ordering::Relaxed);
        if !exempt && held + len > limits.queue_bytes {
            let why = format!(
                "{} bytes queued, the limit is {}",
                held + len,
                limits.queue_bytes
            );
            self.watchers.dropped(what, &why);
            self.backlog.behind.store(true, Ordering::Relaxed);
            return Pushed::Behind;
        }
        // Counted before it is queued: its connection may take it (and count it out) the
        // moment it is.
        let now = self.backlog.bytes.fetch_add(len, Ordering::Relaxed) + len;
        self.watchers
            .backlog
            .fetch_add(len as i64, Ordering::Relaxed);
        let refused = match self.tx.try_send(frame) {
            Ok(()) => {
                self.watchers.deepest.fetch_max(now, Ordering::Relaxed);
                return Pushed::Queued;
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                let why = format!("{} notices queued", limits.queue_notices);
                self.watchers.dropped(what, &why);
                self.backlog.behind.store(true, Ordering::Relaxed);
                Pushed::Behind
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Pushed::Gone,
        };
        self.backlog.bytes.fetch_sub(len, Ordering::Relaxed);
        self.watchers
            .backlog
            .fetch_sub(len as i64, Ordering::Relaxed);
        refused
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// A stream's pushed frames as its connection takes them; what it takes no longer counts
/// against its watcher's limits. Dropping it closes the watch.
pub struct Pushes {
    rx: mpsc::Receiver<Frame>,
    backlog: Arc<Backlog>,
    /// `None` for a stream that is no watch (a backup's chunks).
    watchers: Option<Arc<Watchers>>,
    /// Pages sent before anything queued: a listing (with its turn), or the changes a
    /// resumed watch is owed from the history (no turn: a resume lists nothing). They are
    /// made on the bulk thread ([`super::bulk`]) and come here through a channel of two.
    listing: Option<(mpsc::Receiver<Bytes>, u32, Option<Turn>)>,
    /// A page was made at the last poll: this one yields first, so that a listing's
    /// encoding takes its turns with the runtime's other tasks (the core's among them).
    made_page: bool,
    /// What follows once everything here is taken and nothing more can come: the frames of
    /// the same watch subscribed again (after a long replay sent with no live queue behind
    /// it, `machines/follow.rs`), or nothing, and the stream ends.
    then: Option<futures_util::future::BoxFuture<'static, Option<Pushes>>>,
}

impl Pushes {
    /// Frames pushed by a task of its own (a backup), counted in no watcher's limits.
    pub(crate) fn plain(rx: mpsc::Receiver<Frame>) -> Pushes {
        Pushes {
            rx,
            backlog: Default::default(),
            watchers: None,
            listing: None,
            made_page: false,
            then: None,
        }
    }

    /// Sends `pages` (as frames of command `cmd`) before anything queued, in `turn`; the
    /// pages are made on the bulk thread, two ahead at most.
    pub(crate) fn listing_first(
        &mut self,
        mut pages: Box<dyn Pages>,
        cmd: u32,
        turn: Option<Turn>,
    ) {
        let (tx, rx) = mpsc::channel(2);
        super::bulk::spawn(async move {
            // Ends when the pages do, or when the watch no longer wants them.
            while let Some(page) = pages.next_page() {
                if tx.send(page).await.is_err() {
                    return;
                }
            }
        });
        self.listing = Some((rx, cmd, turn));
        self.backlog.listing.store(true, Ordering::Relaxed);
    }

    /// Goes on with the frames `next` gives once these are all taken.
    pub(crate) fn then(&mut self, next: futures_util::future::BoxFuture<'static, Option<Pushes>>) {
        self.then = Some(next);
    }

    /// The listing is sent (or abandoned): what queues from now on is held to every limit.
    fn listed(&mut self) {
        self.listing = None;
        self.backlog.listing.store(false, Ordering::Relaxed);
    }

    /// The next frame, or `None` once the stream has ended.
    pub async fn recv(&mut self) -> Option<Frame> {
        std::future::poll_fn(|cx| self.poll_take(cx)).await
    }

    fn poll_take(&mut self, cx: &mut Context<'_>) -> Poll<Option<Frame>> {
        if self.backlog.behind.load(Ordering::Relaxed) {
            // Dropped for falling behind: what is queued goes, and the stream ends.
            self.rx.close();
            while let Ok(frame) = self.rx.try_recv() {
                self.taken(frame.body.len());
            }
            return Poll::Ready(None);
        }
        if let Some((pages, cmd, turn)) = &mut self.listing {
            let expired = turn.as_ref().is_some_and(|turn| {
                turn.permit
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .is_none()
            });
            if expired {
                // It took longer than its turn allows: the watch ends; its client lists
                // again later, in another turn.
                self.backlog.behind.store(true, Ordering::Relaxed);
                self.listed();
                return self.poll_take(cx);
            }
            if std::mem::take(&mut self.made_page) {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            match pages.poll_recv(cx) {
                Poll::Ready(Some(body)) => {
                    self.made_page = true;
                    if let Some(turn) = turn {
                        turn.moved();
                    }
                    return Poll::Ready(Some(Frame {
                        cmd: *cmd,
                        seq: 0,
                        flags: crate::wire::FLAG_ONEWAY,
                        body,
                    }));
                }
                Poll::Ready(None) => self.listed(),
                // The next page is being made; what is queued waits for the pages.
                Poll::Pending => return Poll::Pending,
            }
        }
        let polled = self.rx.poll_recv(cx);
        match &polled {
            Poll::Ready(Some(frame)) => self.taken(frame.body.len()),
            Poll::Ready(None) => {
                if let Some(then) = &mut self.then {
                    return match then.as_mut().poll(cx) {
                        Poll::Ready(Some(next)) => {
                            // This queue's count and gauges go with it (its drop).
                            *self = next;
                            self.poll_take(cx)
                        }
                        Poll::Ready(None) => {
                            self.then = None;
                            Poll::Ready(None)
                        }
                        Poll::Pending => Poll::Pending,
                    };
                }
            }
            Poll::Pending => {}
        }
        polled
    }

    fn taken(&self, len: usize) {
        self.backlog.bytes.fetch_sub(len, Ordering::Relaxed);
        if let Some(w) = &self.watchers {
            w.backlog.fetch_sub(len as i64, Ordering::Relaxed);
        }
    }
}

impl futures_util::Stream for Pushes {
    type Item = Frame;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Frame>> {
        self.get_mut().poll_take(cx)
    }
}

impl Drop for Pushes {
    fn drop(&mut self) {
        if let Some(w) = &self.watchers {
            let left = self.backlog.bytes.swap(0, Ordering::Relaxed);
            w.backlog.fetch_sub(left as i64, Ordering::Relaxed);
            w.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(len: usize) -> Frame {
        Frame {
            cmd: 106,
            seq: 0,
            flags: 0,
            body: Bytes::from(vec![7u8; len]),
        }
    }

    #[tokio::test]
    async fn a_watcher_is_bounded_in_bytes_and_what_its_connection_takes_frees_room() {
        let watchers = Arc::new(Watchers::new(WatchLimits {
            queue_bytes: 1000,
            queue_notices: 100,
        }));
        let (mut queue, mut pushes) = watchers.queue(Default::default());
        for _ in 0..4 {
            assert_eq!(queue.push(frame(250), "nodes"), Pushed::Queued);
        }
        assert_eq!(watchers.gauges().backlog_bytes, 1000);
        // Taken by its connection: room again.
        assert_eq!(pushes.recv().await.unwrap().body.len(), 250);
        assert_eq!(queue.push(frame(250), "nodes"), Pushed::Queued);
        let g = watchers.gauges();
        assert_eq!((g.open, g.backlog_bytes, g.deepest_bytes), (1, 1000, 1000));
        assert_eq!(queue.push(frame(1), "nodes"), Pushed::Behind);
        assert_eq!(watchers.gauges().dropped, 1);
        // Dropped: what was queued goes at the connection's next look, and the stream ends.
        assert!(pushes.recv().await.is_none());
        assert_eq!(watchers.gauges().backlog_bytes, 0);
        drop(pushes);
        let g = watchers.gauges();
        assert_eq!(
            (g.open, g.backlog_bytes),
            (0, 0),
            "a closed watch holds nothing"
        );
        assert_eq!(queue.push(frame(1), "nodes"), Pushed::Gone);
    }

    #[tokio::test]
    async fn a_watcher_is_bounded_in_notices() {
        let watchers = Arc::new(Watchers::new(WatchLimits {
            queue_bytes: 100,
            queue_notices: 2,
        }));
        let (mut queue, _pushes) = watchers.queue(Default::default());
        assert_eq!(queue.push(frame(1), "nodes"), Pushed::Queued);
        assert_eq!(queue.push(frame(1), "nodes"), Pushed::Queued);
        assert_eq!(
            queue.push(frame(1), "nodes"),
            Pushed::Behind,
            "two notices at most"
        );
    }

    struct Numbered(std::ops::Range<u8>);

    impl Pages for Numbered {
        fn next_page(&mut self) -> Option<Bytes> {
            self.0.next().map(|i| Bytes::from(vec![i]))
        }
    }

    #[tokio::test]
    async fn what_queues_behind_a_listing_is_held_to_the_count_alone() {
        let watchers = Arc::new(Watchers::new(WatchLimits {
            queue_bytes: 100,
            queue_notices: 3,
        }));
        let (mut queue, mut pushes) = watchers.queue(Default::default());
        pushes.listing_first(Box::new(Numbered(1..3)), 106, None);
        // Past the byte limit while the listing is sent: kept.
        for _ in 0..3 {
            assert_eq!(queue.push(frame(90), "nodes"), Pushed::Queued);
        }
        assert_eq!(
            queue.push(frame(1), "nodes"),
            Pushed::Behind,
            "the count still bounds it"
        );
        let (mut queue, mut pushes) = watchers.queue(Default::default());
        pushes.listing_first(Box::new(Numbered(1..3)), 106, None);
        assert_eq!(queue.push(frame(90), "nodes"), Pushed::Queued);
        assert_eq!(queue.push(frame(90), "nodes"), Pushed::Queued);
        // The listing's two pages and the first notice: the listing is sent.
        for _ in 0..3 {
            pushes.recv().await.unwrap();
        }
        assert_eq!(
            queue.push(frame(90), "nodes"),
            Pushed::Behind,
            "listed: the byte limit holds again (90 queued + 90 > 100)"
        );
    }

    #[tokio::test]
    async fn a_listing_goes_before_what_is_queued_and_gives_its_turn_back() {
        let watchers = Arc::new(Watchers::default());
        let mut turns = Vec::new();
        for _ in 0..LISTINGS_AT_ONCE {
            turns.push(watchers.listing_turn().await);
        }
        let waiting = tokio::spawn({
            let watchers = watchers.clone();
            async move { watchers.listing_turn().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "no turn is free");
        let (mut queue, mut pushes) = watchers.queue(Default::default());
        assert_eq!(queue.push(frame(9), "nodes"), Pushed::Queued);
        pushes.listing_first(Box::new(Numbered(1..4)), 106, turns.pop());
        let mut got = Vec::new();
        for _ in 0..4 {
            got.push(pushes.recv().await.unwrap().body.to_vec());
        }
        assert_eq!(got, vec![vec![1], vec![2], vec![3], vec![7u8; 9]]);
        // The listing is sent: its turn is the waiting one's.
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the turn came back")
            .unwrap();
    }

    #[test]
    fn a_notice_is_encoded_once_for_every_watcher_of_its_kind() {
        let watchers = Watchers::new(WatchLimits::default());
        let made = std::cell::Cell::new(0);
        let body = |index: u64| {
            watchers.shared(106, 42, index, || {
                made.set(made.get() + 1);
                Some(Bytes::from(index.to_string()))
            })
        };
        let first: Vec<Option<Bytes>> = (0..1000).map(|_| body(5)).collect();
        assert_eq!(made.get(), 1);
        assert!(first.iter().all(|b| b.as_deref() == Some(&b"5"[..])));
        // The same bytes, not copies.
        assert_eq!(
            first[0].as_ref().unwrap().as_ptr(),
            first[999].as_ref().unwrap().as_ptr()
        );
        body(6);
        assert_eq!(made.get(), 2, "the next change is made once more");
        // Another kind of watch makes its own.
        watchers.shared(106, 43, 6, || Some(Bytes::from_static(b"x")));
        let g = watchers.gauges();
        assert_eq!((g.encoded, g.reused), (3, 999));
    }
}
