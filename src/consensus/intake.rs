//! What a replica notices about its inputs before it acts on them: a gap between its steps
//! (the process was stopped or starved), the wall clock's offset from its own, and peers
//! whose messages carry terms or indexes beyond the bounds.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use super::bounds;
use super::message::PeerMessage;
use crate::time::Millis;

/// A gap between two steps longer than two ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Gap {
    pub(super) ms: u64,
    /// Ticks that passed without a step.
    pub(super) missed: u32,
}

/// A message refused for its bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refused {
    pub(super) why: String,
    /// The first refused from its sender: the one worth a notice.
    pub(super) first: bool,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub(super) struct Intake {
    /// When the previous step ran.
    last_step: Option<Millis>,
    /// Wall-clock minus this replica's clock, as of the last tick.
    wall_offset: i64,
    /// Peers whose messages were refused for their bounds, and how many.
    refused: BTreeMap<SocketAddr, u64>,
}

impl Intake {
    /// A step at `now`: the gap since the previous one, when longer than two ticks.
    pub(super) fn step(&mut self, now: Millis, tick_ms: u64) -> Option<Gap> {
        let last = self.last_step.replace(now)?;
        let tick = tick_ms.max(1);
        let gap = now.saturating_sub(last);
        (gap > 2 * tick).then(|| Gap {
            ms: gap,
            missed: (gap / tick).saturating_sub(1).min(u64::from(u32::MAX)) as u32,
        })
    }

    /// A tick at `now` taken at wall-clock time `wall_ms`.
    pub(super) fn tick(&mut self, now: Millis, wall_ms: u64) {
        self.wall_offset = wall_ms as i64 - now as i64;
    }

    /// The wall-clock time at `now`, as of the last tick.
    pub(super) fn wall_ms(&self, now: Millis) -> u64 {
        (now as i64 + self.wall_offset).max(0) as u64
    }

    /// Whether `msg` from `from` is refused: it carries a term or index beyond the bounds
    /// (it is then dropped whole).
    pub(super) fn refuse<C, S>(
        &mut self,
        from: SocketAddr,
        msg: &PeerMessage<C, S>,
    ) -> Option<Refused> {
        let why = bounds::message_beyond(msg)?;
        let count = self.refused.entry(from).or_default();
        *count += 1;
        Some(Refused {
            why,
            first: *count == 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::MAX_TERM;
    use super::super::Position;
    use super::super::testing::follower;
    use super::*;

    #[test]
    fn a_gap_is_longer_than_two_ticks_and_counts_the_ticks_missed() {
        let mut intake = Intake::default();
        assert_eq!(intake.step(1_000, 100), None, "the first step has no gap");
        assert_eq!(intake.step(1_200, 100), None, "two ticks is no gap");
        assert_eq!(intake.step(2_000, 100), Some(Gap { ms: 800, missed: 7 }));
        assert_eq!(
            intake.step(1_500, 100),
            None,
            "a clock that went back is no gap"
        );
    }

    #[test]
    fn the_wall_clock_follows_the_last_tick() {
        let mut intake = Intake::default();
        intake.tick(1_000, 1_700_000_000_000);
        assert_eq!(intake.wall_ms(1_500), 1_700_000_000_500);
        intake.tick(0, 0);
        assert_eq!(intake.wall_ms(10), 10);
    }

    #[test]
    fn only_the_first_message_beyond_the_bounds_from_a_sender_is_worth_a_notice() {
        let mut intake = Intake::default();
        let from = SocketAddr::from(([127, 0, 0, 1], 7001));
        let fine = follower(1, 1, Position::default(), 0);
        assert_eq!(intake.refuse(from, &fine), None);
        let mut wild = fine.clone();
        wild.heartbeat.term = MAX_TERM + 1;
        let first = intake.refuse(from, &wild).expect("refused");
        assert!(first.first && first.why.contains("term"), "{first:?}");
        assert!(!intake.refuse(from, &wild).expect("refused").first);
        let other = SocketAddr::from(([127, 0, 0, 1], 7002));
        assert!(intake.refuse(other, &wild).expect("refused").first);
    }
}
