//! Admission by queueing delay: how long new work would wait for the core, and whether the
//! core's queue has stood above the target for a while.
//!
//! A limit on how many requests are under way says nothing of how long they wait: a
//! thousand writes are a few milliseconds of the core's time on one host and a second on a
//! loaded one. What a service feels is the wait, so new work is refused `BUSY` once the
//! wait it would meet passes `limits.queue_delay_ms` (5 ms by default), and what is
//! admitted is served at nearly the unloaded latency. Two signals, both from the core's own
//! thread ([`super::super::beat::Beat`]):
//!
//! * **the wait ahead**: the asks queued for the core, and the new requests admitted since
//!   the core last counted them, times what one ask has cost the core lately. It answers at
//!   once, before a queue has formed;
//! * **a standing queue** (CoDel): the shortest wait of any ask the core took within the last
//!   interval (100 ms) was above the target. A burst that drains within the interval is
//!   not one; a queue that stays is, however the cost was misjudged.
//!
//! Renewals of live leases and reads of the cluster's status are not held to the target:
//! they keep what exists alive, and the count limits alone bound them.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The window over which a standing queue is judged.
const INTERVAL: Duration = Duration::from_millis(100);

/// How fast the cost of an ask follows what the core measures: each turn moves it an
/// eighth of the way.
const COST_WEIGHT: f64 = 1.0 / 8.0;

/// The fewest asks a turn must have handled to teach what an ask costs. A turn's fixed
/// part (its fsync, its carry-out) is shared by the asks it took: a turn of one ask costs
/// as much as one of a dozen, and judging a queue by it would refuse work a shallow queue
/// serves in one turn. A queue deep enough to matter fills turns like these.
const COST_SAMPLE_ASKS: usize = 8;

/// The pace of one beacon's core, written by the core's thread and read by admission.
#[derive(Debug)]
pub(crate) struct Pace {
    /// The target wait; zero: admission by delay is off.
    target: Duration,
    /// Asks in the core's queue when it last counted.
    queued: AtomicUsize,
    /// New requests admitted since the core last counted its queue.
    admitted_since: AtomicUsize,
    /// What one ask costs the core, in nanoseconds (a moving average).
    cost_ns: AtomicU64,
    /// The CoDel window: its start, and the shortest wait seen in it.
    window: Mutex<Window>,
    /// The shortest wait of the last whole window, in nanoseconds.
    standing_ns: AtomicU64,
    /// When the last whole window ended, in nanoseconds after `born`.
    judged_ns: AtomicU64,
    born: Instant,
}

#[derive(Debug)]
struct Window {
    start: Instant,
    shortest: Option<Duration>,
    /// Asks taken in it.
    taken: usize,
}

/// The fewest asks a window must have taken for its shortest wait to be a standing queue:
/// a few asks behind one slow turn (a beacon's first fsyncs) are no queue of work.
const STANDING_ASKS: usize = 8;

/// Why new work waits: what a `BUSY` says, and how long to wait before retrying.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TooSlow {
    pub(crate) why: String,
    pub(crate) wait: Duration,
}

impl Pace {
    pub(crate) fn new(target: Duration) -> Pace {
        let now = Instant::now();
        Pace {
            target,
            queued: AtomicUsize::new(0),
            admitted_since: AtomicUsize::new(0),
            cost_ns: AtomicU64::new(0),
            window: Mutex::new(Window {
                start: now,
                shortest: None,
                taken: 0,
            }),
            standing_ns: AtomicU64::new(0),
            judged_ns: AtomicU64::new(0),
            born: now,
        }
    }

    /// The core took an ask at `now` that had waited `wait` (the core's thread).
    pub(crate) fn taken(&self, now: Instant, wait: Duration) {
        let mut window = self.window.lock().unwrap_or_else(|e| e.into_inner());
        window.shortest = Some(window.shortest.map_or(wait, |s| s.min(wait)));
        window.taken += 1;
        if now.saturating_duration_since(window.start) >= INTERVAL {
            let shortest = match window.taken >= STANDING_ASKS {
                true => window.shortest.take().unwrap_or_default(),
                false => Duration::ZERO,
            };
            window.shortest = None;
            window.taken = 0;
            self.standing_ns
                .store(shortest.as_nanos() as u64, Ordering::Relaxed);
            self.judged_ns.store(
                now.saturating_duration_since(self.born).as_nanos() as u64,
                Ordering::Relaxed,
            );
            window.start = now;
        }
    }

    /// The core finished a turn in which it handled `asks` asks in `busy`, and has `queued`
    /// more waiting (the core's thread).
    pub(crate) fn turned(&self, asks: usize, busy: Duration, queued: usize) {
        if asks >= COST_SAMPLE_ASKS {
            let sample = busy.as_nanos() as f64 / asks as f64;
            let old = self.cost_ns.load(Ordering::Relaxed) as f64;
            let cost = if old == 0.0 {
                sample
            } else {
                old + (sample - old) * COST_WEIGHT
            };
            self.cost_ns.store(cost as u64, Ordering::Relaxed);
        }
        self.queued.store(queued, Ordering::Relaxed);
        self.admitted_since.store(0, Ordering::Relaxed);
        if queued == 0 {
            // The queue emptied: whatever waited before, none stands now (CoDel's rule).
            let mut window = self.window.lock().unwrap_or_else(|e| e.into_inner());
            window.shortest = Some(Duration::ZERO);
        }
    }

    /// What one ask costs the core lately.
    pub(crate) fn cost(&self) -> Duration {
        Duration::from_nanos(self.cost_ns.load(Ordering::Relaxed))
    }

    /// The wait a request admitted now would meet before the core takes it.
    pub(crate) fn wait_ahead(&self) -> Duration {
        let ahead =
            self.queued.load(Ordering::Relaxed) + self.admitted_since.load(Ordering::Relaxed);
        self.cost() * ahead.min(u32::MAX as usize) as u32
    }

    /// Whether new work may be admitted at `now`: `Err` says why not and for how long. An
    /// admitted request is counted towards the wait ahead of the next.
    pub(crate) fn admit_new(&self, now: Instant) -> Result<(), TooSlow> {
        if self.target.is_zero() {
            return Ok(());
        }
        let ahead = self.wait_ahead();
        if ahead > self.target {
            return Err(TooSlow {
                why: format!(
                    "new work would wait {} ms for the core (target {} ms; key `limits.queue_delay_ms`)",
                    ahead.as_millis(),
                    self.target.as_millis()
                ),
                wait: ahead,
            });
        }
        // A standing queue counts while it is fresh: a core that took nothing for two
        // windows has no queue to speak of.
        let judged = self.born + Duration::from_nanos(self.judged_ns.load(Ordering::Relaxed));
        let standing = Duration::from_nanos(self.standing_ns.load(Ordering::Relaxed));
        if standing > self.target && now.saturating_duration_since(judged) < 2 * INTERVAL {
            return Err(TooSlow {
                why: format!(
                    "every request the core took in the last {} ms waited {} ms or more (target {} ms; key `limits.queue_delay_ms`)",
                    INTERVAL.as_millis(),
                    standing.as_millis(),
                    self.target.as_millis()
                ),
                wait: standing,
            });
        }
        self.admitted_since.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn new_work_waits_once_the_queue_ahead_would_pass_the_target() {
        let pace = Pace::new(5 * MS);
        let now = Instant::now();
        // A turn of one ask teaches nothing: its fsync is most of it.
        pace.turned(1, 2 * MS, 3);
        assert_eq!(pace.cost(), Duration::ZERO);
        assert!(pace.admit_new(now).is_ok());
        // 100 µs an ask, 40 queued: 4 ms ahead, admitted.
        pace.turned(10, MS, 40);
        assert_eq!(pace.cost(), Duration::from_micros(100));
        assert!(pace.admit_new(now).is_ok());
        // Each admitted request adds to the wait ahead of the next.
        let mut admitted = 1;
        while pace.admit_new(now).is_ok() {
            admitted += 1;
            assert!(admitted < 100, "the wait ahead must grow");
        }
        assert_eq!(
            admitted, 11,
            "admitted with 40 to 50 ahead; 51 ahead is 5.1 ms"
        );
        let busy = pace.admit_new(now).unwrap_err();
        assert!(busy.why.contains("limits.queue_delay_ms"), "{busy:?}");
        assert!(busy.wait > 5 * MS);
        // The core counts its queue again: drained, new work is admitted.
        pace.turned(50, 5 * MS, 0);
        assert!(pace.admit_new(now).is_ok());
    }

    #[test]
    fn a_standing_queue_refuses_new_work_and_a_burst_does_not() {
        let pace = Pace::new(5 * MS);
        let t0 = Instant::now();
        // A burst: one ask waited 50 ms, another in the same window none.
        pace.taken(t0, 50 * MS);
        pace.taken(t0 + 10 * MS, Duration::ZERO);
        pace.taken(t0 + 110 * MS, 50 * MS);
        assert!(pace.admit_new(t0 + 111 * MS).is_ok(), "a burst drained");
        // Three asks that waited long: too few to be a queue of work.
        pace.taken(t0 + 120 * MS, 30 * MS);
        pace.taken(t0 + 130 * MS, 30 * MS);
        pace.taken(t0 + 220 * MS, 30 * MS);
        assert!(pace.admit_new(t0 + 221 * MS).is_ok(), "three asks");
        let t0 = t0 + 110 * MS;
        // Every ask of a window waited 8 ms or more: a standing queue.
        for k in 0..10u32 {
            pace.taken(t0 + 120 * MS + k * 10 * MS, 8 * MS + k * MS);
        }
        pace.taken(t0 + 230 * MS, 9 * MS);
        let busy = pace.admit_new(t0 + 231 * MS).unwrap_err();
        assert!(busy.why.contains("waited 8 ms or more"), "{busy:?}");
        // Nothing taken for two windows: no queue stands.
        assert!(pace.admit_new(t0 + 500 * MS).is_ok());
        // Asks that waited long, but the queue emptied between them: no queue stands.
        pace.taken(t0 + 600 * MS, 9 * MS);
        pace.turned(1, MS, 0);
        pace.taken(t0 + 650 * MS, 9 * MS);
        pace.taken(t0 + 710 * MS, 9 * MS);
        assert!(pace.admit_new(t0 + 711 * MS).is_ok());
    }

    #[test]
    fn a_target_of_zero_admits_everything() {
        let pace = Pace::new(Duration::ZERO);
        pace.turned(1, Duration::from_secs(1), 1_000);
        assert!(pace.admit_new(Instant::now()).is_ok());
    }
}
