//! The core's beat: how long it went between two steps, and how long a request waited in
//! the queue before the core took it.
//!
//! A gap between steps longer than a tick is a defect to measure, not a log line to explain:
//! on three beacons a gap of a few ticks is an election and every lease judged again. Each
//! figure is a histogram on `/metrics` (`beacon_step_gap_seconds`,
//! `beacon_request_queue_seconds`) and the worst of the last minute in `show beacon` and
//! `endpoint status`, where an operator looks first.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::admission::pace::Pace;

use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// How far back "the worst of the last minute" looks, in buckets of [`BUCKET`].
const BUCKETS: usize = 6;
const BUCKET: Duration = Duration::from_secs(10);

/// The largest value seen within the last minute, kept in six buckets of ten seconds, so
/// that an old worst falls out within ten seconds of its minute.
#[derive(Debug)]
pub(crate) struct WorstOfMinute {
    /// Per bucket: when it started, and its largest value.
    buckets: Mutex<[(Option<Instant>, Duration); BUCKETS]>,
}

impl Default for WorstOfMinute {
    fn default() -> Self {
        WorstOfMinute {
            buckets: Mutex::new([(None, Duration::ZERO); BUCKETS]),
        }
    }
}

impl WorstOfMinute {
    /// Notes `value`, seen at `now`.
    pub(crate) fn note(&self, now: Instant, value: Duration) {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let newest = buckets
            .iter_mut()
            .max_by_key(|(start, _)| *start)
            .expect("six buckets");
        match newest.0 {
            Some(start) if now.duration_since(start) < BUCKET => {
                newest.1 = newest.1.max(value);
            }
            _ => {
                let oldest = buckets
                    .iter_mut()
                    .min_by_key(|(start, _)| *start)
                    .expect("six buckets");
                *oldest = (Some(now), value);
            }
        }
    }

    /// The largest value noted within the minute before `now`.
    pub(crate) fn worst(&self, now: Instant) -> Duration {
        let buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let minute = BUCKET * BUCKETS as u32;
        buckets
            .iter()
            .filter(|(start, _)| start.is_some_and(|s| now.duration_since(s) < minute))
            .map(|(_, v)| *v)
            .max()
            .unwrap_or_default()
    }
}

/// The core's beat, written by the driver's thread and read by metrics and status.
#[derive(Debug)]
pub(crate) struct Beat {
    pub(crate) step_gap: Histogram,
    pub(crate) queue_wait: Histogram,
    step_gap_worst: WorstOfMinute,
    queue_wait_worst: WorstOfMinute,
    /// What admission reads of the waits and the core's cost.
    pace: Arc<Pace>,
}

/// 100 µs to about 13 s, doubling.
fn histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

/// The step gap's buckets: doubling from 100 µs to 51.2 ms, then close together around the
/// ticks an idle core steps on (a tick is 100 ms by default, and a gap a little past it is
/// not one of two ticks), then doubling to about 13 s.
fn step_gap_histogram() -> Histogram {
    let fine = [
        0.075, 0.1, 0.11, 0.125, 0.15, 0.175, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0,
    ];
    let below = exponential_buckets(0.0001, 2.0, 10);
    let above = exponential_buckets(1.6384, 2.0, 4);
    Histogram::new(below.chain(fine).chain(above))
}

impl Beat {
    /// A beat that keeps `pace` (admission's) up to date.
    pub(crate) fn new(pace: Arc<Pace>) -> Beat {
        Beat {
            step_gap: step_gap_histogram(),
            queue_wait: histogram(),
            step_gap_worst: WorstOfMinute::default(),
            queue_wait_worst: WorstOfMinute::default(),
            pace,
        }
    }

    /// The core stepped at `now`, `gap` after its step before.
    pub(crate) fn stepped(&self, now: Instant, gap: Duration) {
        self.step_gap.observe(gap.as_secs_f64());
        self.step_gap_worst.note(now, gap);
    }

    /// The core took a request that waited `wait` in its queue.
    pub(crate) fn taken(&self, now: Instant, wait: Duration) {
        self.queue_wait.observe(wait.as_secs_f64());
        self.queue_wait_worst.note(now, wait);
        self.pace.taken(now, wait);
    }

    /// The core finished a turn: `asks` asks handled in `busy`, `queued` still waiting.
    pub(crate) fn turned(&self, asks: usize, busy: Duration, queued: usize) {
        self.pace.turned(asks, busy, queued);
    }

    /// The longest gap between two steps within the last minute.
    pub(crate) fn worst_step_gap(&self) -> Duration {
        self.step_gap_worst.worst(Instant::now())
    }

    /// The longest a request waited for the core within the last minute.
    pub(crate) fn worst_queue_wait(&self) -> Duration {
        self.queue_wait_worst.worst(Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_of_the_minute_falls_out_once_the_minute_has_passed() {
        let w = WorstOfMinute::default();
        let t0 = Instant::now();
        w.note(t0, Duration::from_millis(900));
        w.note(t0 + Duration::from_secs(5), Duration::from_millis(10));
        assert_eq!(
            w.worst(t0 + Duration::from_secs(6)),
            Duration::from_millis(900)
        );
        // Six buckets later the 900 ms is forgotten; what came after it is not.
        for k in 1..=6u64 {
            w.note(
                t0 + Duration::from_secs(10 * k + 1),
                Duration::from_millis(k),
            );
        }
        let later = t0 + Duration::from_secs(62);
        assert_eq!(w.worst(later), Duration::from_millis(6));
        assert_eq!(w.worst(t0 + Duration::from_secs(200)), Duration::ZERO);
    }
}
