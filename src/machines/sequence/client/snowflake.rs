//! Snowflake IDs on a registration's node ID: generated locally, time-ordered, unique in the
//! cluster as long as each worker ID has one holder at a time, which the registry's leases
//! guarantee.
//!
//! An ID is `0 | milliseconds since the epoch | worker ID | sequence`, 41, 10 and 12 bits by
//! default ([`Layout`]). Three things keep two IDs from ever being equal:
//!
//! * The worker ID is the registration's node ID and is used only while the registration
//!   holds it: every report of a registration that generates IDs carries a clock
//!   *reservation* (the highest timestamp it may use before its next report is confirmed),
//!   which the leader commits before it confirms the report. The generator never uses a
//!   timestamp past the last confirmed reservation, so it stops on its own when no leader
//!   confirms it any more, and at once when the lease is revoked.
//! * The beacon keeps, per node ID, the last reservation (or, after a clean unregister, the
//!   last timestamp actually used), and a new holder of the ID learns it at registration
//!   and generates only after it: a service restarted on a machine whose clock went back
//!   cannot repeat its predecessor's IDs.
//! * A clock that steps back is waited out when the step is small (`max_backward`, 5 ms by
//!   default) and refused otherwise, never answered with a duplicate.
//!
//! The generator itself ([`Generator`]) is sans-IO: time comes from a [`Clock`], so tests
//! drive it with a clock of their own.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::machines::registry::{ClockShare, Registration};

/// Milliseconds since the Unix epoch of 2024-01-01T00:00:00Z, the default epoch.
pub const DEFAULT_EPOCH_MS: u64 = 1_704_067_200_000;

/// A wall clock, in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync {
    fn now_ms(&self) -> u64;
    /// Waits about `ms` milliseconds (a clock of a test advances itself instead).
    fn sleep_ms(&self, ms: u64) {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        crate::time::wall_ms()
    }

    /// A millisecond's sequence numbers used up: spin to the next millisecond rather than
    /// sleep, which would overshoot it.
    fn sleep_ms(&self, ms: u64) {
        if ms > 1 {
            std::thread::sleep(Duration::from_millis(ms));
            return;
        }
        let from = self.now_ms();
        while self.now_ms() == from {
            std::hint::spin_loop();
        }
    }
}

/// The bit widths of an ID (they add up to 63: the sign bit stays 0) and its epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub time_bits: u32,
    pub worker_bits: u32,
    pub sequence_bits: u32,
    /// Time 0 of the IDs, in milliseconds since the Unix epoch.
    pub epoch_ms: u64,
}

impl Default for Layout {
    fn default() -> Layout {
        Layout {
            time_bits: 41,
            worker_bits: 10,
            sequence_bits: 12,
            epoch_ms: DEFAULT_EPOCH_MS,
        }
    }
}

/// A layout that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error(
        "the bit widths {time} + {worker} + {sequence} add up to {sum}; they must add up to 63 (the sign bit stays 0)"
    )]
    Width {
        time: u32,
        worker: u32,
        sequence: u32,
        sum: u32,
    },
    #[error("each part needs at least one bit (time {time}, worker {worker}, sequence {sequence})")]
    Empty {
        time: u32,
        worker: u32,
        sequence: u32,
    },
    #[error(
        "node IDs go up to {last} (key `id_range`), but {worker_bits} worker bits hold IDs up to {max}: give the layout more worker bits or the beacons a smaller id_range"
    )]
    Range {
        last: u32,
        worker_bits: u32,
        max: u64,
    },
    #[error("`{0}` is not a layout: give three bit widths TIME,WORKER,SEQUENCE such as 41,10,12")]
    Parse(String),
}

impl Layout {
    /// A layout of these widths from `epoch_ms`.
    pub fn new(
        time_bits: u32,
        worker_bits: u32,
        sequence_bits: u32,
        epoch_ms: u64,
    ) -> Result<Layout, LayoutError> {
        if time_bits == 0 || worker_bits == 0 || sequence_bits == 0 {
            return Err(LayoutError::Empty {
                time: time_bits,
                worker: worker_bits,
                sequence: sequence_bits,
            });
        }
        let sum = time_bits + worker_bits + sequence_bits;
        if sum != 63 {
            return Err(LayoutError::Width {
                time: time_bits,
                worker: worker_bits,
                sequence: sequence_bits,
                sum,
            });
        }
        Ok(Layout {
            time_bits,
            worker_bits,
            sequence_bits,
            epoch_ms,
        })
    }

    /// Parses `TIME,WORKER,SEQUENCE` bit widths.
    pub fn parse(widths: &str, epoch_ms: u64) -> Result<Layout, LayoutError> {
        let parts: Vec<u32> = widths
            .split(',')
            .map(|p| p.trim().parse())
            .collect::<Result<_, _>>()
            .map_err(|_| LayoutError::Parse(widths.to_owned()))?;
        match parts[..] {
            [t, w, s] => Layout::new(t, w, s, epoch_ms),
            _ => Err(LayoutError::Parse(widths.to_owned())),
        }
    }

    pub fn max_worker(&self) -> u64 {
        (1 << self.worker_bits) - 1
    }

    pub fn max_sequence(&self) -> u64 {
        (1 << self.sequence_bits) - 1
    }

    pub fn max_time(&self) -> u64 {
        (1 << self.time_bits) - 1
    }

    /// Whether node IDs up to `last` fit the worker bits.
    pub fn check_range(&self, last: u32) -> Result<(), LayoutError> {
        if u64::from(last) > self.max_worker() {
            return Err(LayoutError::Range {
                last,
                worker_bits: self.worker_bits,
                max: self.max_worker(),
            });
        }
        Ok(())
    }

    /// The ID of `sequence` at `unix_ms` on `worker`.
    pub fn compose(&self, unix_ms: u64, worker: u64, sequence: u64) -> u64 {
        ((unix_ms - self.epoch_ms) << (self.worker_bits + self.sequence_bits))
            | (worker << self.sequence_bits)
            | sequence
    }

    /// The parts of `id`.
    pub fn decode(&self, id: u64) -> Decoded {
        Decoded {
            unix_ms: (id >> (self.worker_bits + self.sequence_bits)) + self.epoch_ms,
            worker: (id >> self.sequence_bits) & self.max_worker(),
            sequence: id & self.max_sequence(),
        }
    }
}

/// An ID taken apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Decoded {
    /// When it was generated, in milliseconds since the Unix epoch.
    pub unix_ms: u64,
    pub worker: u64,
    pub sequence: u64,
}

/// The parts of `id` in `layout`.
pub fn decode(layout: &Layout, id: u64) -> Decoded {
    layout.decode(id)
}

/// Why no ID was generated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnowflakeError {
    #[error(
        "the clock went back {by_ms} ms (from {last_ms} to {now_ms} ms since the Unix epoch), more than the {max_ms} ms waited out; no ID until it catches up"
    )]
    ClockBackward {
        by_ms: u64,
        last_ms: u64,
        now_ms: u64,
        max_ms: u64,
    },
    #[error(
        "the clock reads {now_ms} ms, before the last timestamp {floor_ms} the previous holder of worker ID {worker} may have used; no ID until it passes it"
    )]
    BehindPreviousHolder {
        worker: u64,
        now_ms: u64,
        floor_ms: u64,
    },
    #[error(
        "worker ID {worker} may not be used at {now_ms} ms: no beacon has confirmed the registration that far (confirmed up to {reserved_ms} ms); the lease is lost or in doubt"
    )]
    NotConfirmed {
        worker: u64,
        now_ms: u64,
        reserved_ms: u64,
    },
    #[error(
        "the clock reads {now_ms} ms, outside the layout's time range from its epoch {epoch_ms}"
    )]
    OutOfRange { now_ms: u64, epoch_ms: u64 },
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error("worker ID {worker} does not fit {bits} worker bits")]
    Worker { worker: u64, bits: u32 },
}

/// The generator's state: sans-IO, time passed in.
#[derive(Debug, Clone)]
pub struct Generator {
    layout: Layout,
    worker: u64,
    /// The last timestamp used, and the last sequence number used in it.
    last_ms: u64,
    sequence: u64,
    max_backward_ms: u64,
    /// The previous holder's last timestamp: nothing at or before it.
    floor_ms: u64,
}

/// What the generator asks of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Id(u64),
    /// Wait this many milliseconds and ask again (a small clock step back, or a
    /// millisecond's sequence numbers used up).
    Wait(u64),
}

impl Generator {
    pub fn new(
        layout: Layout,
        worker: u64,
        floor_ms: u64,
        max_backward_ms: u64,
    ) -> Result<Generator, SnowflakeError> {
        if worker > layout.max_worker() {
            return Err(SnowflakeError::Worker {
                worker,
                bits: layout.worker_bits,
            });
        }
        Ok(Generator {
            layout,
            worker,
            last_ms: floor_ms,
            // The floor's millisecond is the previous holder's: start after it.
            sequence: layout.max_sequence(),
            max_backward_ms,
            floor_ms,
        })
    }

    /// The last timestamp used (or the floor, before the first ID).
    pub fn last_ms(&self) -> u64 {
        self.last_ms
    }

    /// The next ID at `now_ms`, given that timestamps up to `reserved_ms` are confirmed.
    pub fn next(&mut self, now_ms: u64, reserved_ms: u64) -> Result<Step, SnowflakeError> {
        if now_ms < self.last_ms {
            let by_ms = self.last_ms - now_ms;
            if self.last_ms == self.floor_ms && by_ms > self.max_backward_ms {
                return Err(SnowflakeError::BehindPreviousHolder {
                    worker: self.worker,
                    now_ms,
                    floor_ms: self.floor_ms,
                });
            }
            if by_ms > self.max_backward_ms {
                return Err(SnowflakeError::ClockBackward {
                    by_ms,
                    last_ms: self.last_ms,
                    now_ms,
                    max_ms: self.max_backward_ms,
                });
            }
            return Ok(Step::Wait(by_ms));
        }
        if now_ms == self.last_ms && self.sequence >= self.layout.max_sequence() {
            return Ok(Step::Wait(1));
        }
        if now_ms > reserved_ms {
            return Err(SnowflakeError::NotConfirmed {
                worker: self.worker,
                now_ms,
                reserved_ms,
            });
        }
        if now_ms < self.layout.epoch_ms || now_ms - self.layout.epoch_ms > self.layout.max_time() {
            return Err(SnowflakeError::OutOfRange {
                now_ms,
                epoch_ms: self.layout.epoch_ms,
            });
        }
        if now_ms == self.last_ms {
            self.sequence += 1;
        } else {
            self.last_ms = now_ms;
            self.sequence = 0;
        }
        Ok(Step::Id(self.layout.compose(
            now_ms,
            self.worker,
            self.sequence,
        )))
    }
}

/// How a [`Snowflake`] generates.
#[derive(Clone)]
pub struct SnowflakeOptions {
    pub layout: Layout,
    /// A clock step back up to this long is waited out; a longer one is refused.
    pub max_backward: Duration,
    /// How long [`Snowflake::new`] waits for the first confirmed reservation and for the
    /// clock to pass the previous holder's last timestamp.
    pub start_wait: Duration,
    pub clock: Arc<dyn Clock>,
}

impl Default for SnowflakeOptions {
    fn default() -> SnowflakeOptions {
        SnowflakeOptions {
            layout: Layout::default(),
            max_backward: Duration::from_millis(5),
            start_wait: Duration::from_secs(5),
            clock: Arc::new(SystemClock),
        }
    }
}

impl std::fmt::Debug for SnowflakeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnowflakeOptions")
            .field("layout", &self.layout)
            .field("max_backward", &self.max_backward)
            .field("start_wait", &self.start_wait)
            .finish_non_exhaustive()
    }
}

/// A snowflake ID generator on a live [`Registration`]'s node ID. Make one per registration
/// and share it between threads (it is `Sync`): two generators on one worker ID would
/// repeat each other's IDs.
pub struct Snowflake {
    generator: Mutex<Generator>,
    clock: Arc<dyn Clock>,
    share: Arc<ClockShare>,
    layout: Layout,
}

impl std::fmt::Debug for Snowflake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snowflake")
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

impl Snowflake {
    /// Generates on `registration`'s node ID. Checks the layout against the cluster's
    /// `id_range`, asks the leader for the first clock reservation, and waits (up to
    /// `start_wait`) for the clock to pass what the ID's previous holder used.
    pub async fn new(
        registration: &Registration,
        opts: SnowflakeOptions,
    ) -> Result<Snowflake, SnowflakeError> {
        let layout = opts.layout;
        layout.check_range(registration.id_range().1)?;
        let worker = u64::from(registration.node_id());
        let share = registration.clock_share();
        let floor_ms = share.floor_ms();
        let max_backward_ms = opts.max_backward.as_millis() as u64;
        let generator = Generator::new(layout, worker, floor_ms, max_backward_ms)?;
        share.attach(opts.clock.now_ms().max(floor_ms));
        let began = std::time::Instant::now();
        loop {
            let now = opts.clock.now_ms();
            let reserved = share.reserved_ms();
            // A clock a few milliseconds short of the floor is waited out by the generator.
            let near = now + max_backward_ms > floor_ms;
            if near && reserved > now.max(floor_ms) {
                break;
            }
            if began.elapsed() >= opts.start_wait {
                if !near {
                    return Err(SnowflakeError::BehindPreviousHolder {
                        worker,
                        now_ms: now,
                        floor_ms,
                    });
                }
                return Err(SnowflakeError::NotConfirmed {
                    worker,
                    now_ms: now,
                    reserved_ms: reserved,
                });
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Ok(Snowflake {
            generator: Mutex::new(generator),
            clock: opts.clock,
            share,
            layout,
        })
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The next ID. Waits (blocking the thread) through a small clock step back or a
    /// millisecond whose sequence numbers are used up; fails when the clock went back
    /// further, or when the registration is no longer confirmed.
    pub fn next_id(&self) -> Result<u64, SnowflakeError> {
        let mut generator = self.generator.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let now = self.clock.now_ms();
            match generator.next(now, self.share.reserved_ms())? {
                Step::Id(id) => {
                    self.share.used(generator.last_ms());
                    return Ok(id);
                }
                Step::Wait(ms) => self.clock.sleep_ms(ms),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = DEFAULT_EPOCH_MS + 1_000_000;

    fn generator(floor: u64) -> Generator {
        Generator::new(Layout::default(), 7, floor, 5).unwrap()
    }

    #[test]
    fn ids_rise_and_decode_to_their_parts() {
        let mut g = generator(0);
        let Step::Id(a) = g.next(T0, u64::MAX).unwrap() else {
            panic!()
        };
        let Step::Id(b) = g.next(T0, u64::MAX).unwrap() else {
            panic!()
        };
        let Step::Id(c) = g.next(T0 + 1, u64::MAX).unwrap() else {
            panic!()
        };
        assert!(a < b && b < c);
        let d = Layout::default().decode(b);
        assert_eq!((d.unix_ms, d.worker, d.sequence), (T0, 7, 1));
        assert_eq!(Layout::default().decode(c).sequence, 0);
    }

    #[test]
    fn a_millisecond_holds_4096_ids_then_waits() {
        let mut g = generator(0);
        for _ in 0..4096 {
            assert!(matches!(g.next(T0, u64::MAX), Ok(Step::Id(_))));
        }
        assert_eq!(g.next(T0, u64::MAX), Ok(Step::Wait(1)));
        assert!(matches!(g.next(T0 + 1, u64::MAX), Ok(Step::Id(_))));
    }

    #[test]
    fn a_small_step_back_waits_and_a_large_one_refuses() {
        let mut g = generator(0);
        g.next(T0, u64::MAX).unwrap();
        assert_eq!(g.next(T0 - 3, u64::MAX), Ok(Step::Wait(3)));
        assert!(matches!(
            g.next(T0 - 6, u64::MAX),
            Err(SnowflakeError::ClockBackward { by_ms: 6, .. })
        ));
        // Nothing was used meanwhile: the next ID comes after the last one.
        let Step::Id(id) = g.next(T0, u64::MAX).unwrap() else {
            panic!()
        };
        assert_eq!(Layout::default().decode(id).sequence, 1);
    }

    #[test]
    fn nothing_past_the_confirmed_reservation() {
        let mut g = generator(0);
        assert!(matches!(
            g.next(T0 + 1, T0),
            Err(SnowflakeError::NotConfirmed { .. })
        ));
        assert!(matches!(g.next(T0, T0), Ok(Step::Id(_))));
    }

    #[test]
    fn a_new_holder_starts_after_the_previous_holders_last_timestamp() {
        let mut g = generator(T0);
        // In the previous holder's last millisecond: wait for the next.
        assert_eq!(g.next(T0, u64::MAX), Ok(Step::Wait(1)));
        assert_eq!(g.next(T0 - 2, u64::MAX), Ok(Step::Wait(2)));
        assert!(matches!(
            g.next(T0 - 1_000, u64::MAX),
            Err(SnowflakeError::BehindPreviousHolder { floor_ms: T0, .. })
        ));
        let Step::Id(id) = g.next(T0 + 1, u64::MAX).unwrap() else {
            panic!()
        };
        assert_eq!(Layout::default().decode(id).unix_ms, T0 + 1);
    }

    #[test]
    fn layouts_are_checked() {
        assert!(matches!(
            Layout::new(40, 10, 12, 0),
            Err(LayoutError::Width { sum: 62, .. })
        ));
        assert!(Layout::new(0, 51, 12, 0).is_err());
        let small = Layout::parse("43,8,12", 0).unwrap();
        assert_eq!(small.max_worker(), 255);
        assert!(small.check_range(255).is_ok());
        assert!(matches!(
            small.check_range(1023),
            Err(LayoutError::Range { max: 255, .. })
        ));
        assert!(Layout::parse("41,10", 0).is_err());
        assert!(Layout::parse("a,b,c", 0).is_err());
        assert!(matches!(
            Generator::new(small, 256, 0, 5),
            Err(SnowflakeError::Worker { .. })
        ));
    }
}
