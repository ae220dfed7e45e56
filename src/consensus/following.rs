//! What a follower keeps of its leader: the latest confirmation round it saw (to
//! acknowledge it), the highest commit index the leader announced (how far behind this
//! beacon is, for readiness), and how far it has heard its leaders' renewals
//! ([`super::renewals`]).

/// A confirmation round of a leader's, as a follower last saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct RoundSeen {
    /// The term of the leader that started it.
    term: u64,
    beat: u64,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub(super) struct Following {
    round: RoundSeen,
    leader_commit: u64,
    pub(super) heard: super::renewals::Heard,
}

impl Following {
    /// The round to acknowledge in a message of term `term`: the latest seen of a leader
    /// of that term (0: none).
    pub(super) fn ack_beat(&self, term: u64) -> u64 {
        if self.round.term == term {
            self.round.beat
        } else {
            0
        }
    }

    /// Round `beat` of the leader of `term` arrived: whether it is new (to be acknowledged
    /// at once).
    pub(super) fn see_round(&mut self, term: u64, beat: u64) -> bool {
        let new = if self.round.term == term {
            beat > self.round.beat
        } else {
            beat > 0
        };
        if new {
            self.round = RoundSeen { term, beat };
        }
        new
    }

    /// The leader announced commit index `commit`.
    pub(super) fn hear_commit(&mut self, commit: u64) {
        self.leader_commit = self.leader_commit.max(commit);
    }

    /// Committed entries this beacon lacks, at commit index `commit`, that its leader has
    /// announced.
    pub(super) fn lag(&self, commit: u64) -> u64 {
        self.leader_commit.saturating_sub(commit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_is_new_once_per_beat_and_a_new_leaders_first_round_is_new() {
        let mut f = Following::default();
        assert_eq!(f.ack_beat(3), 0);
        assert!(!f.see_round(3, 0), "a message with no round");
        assert!(f.see_round(3, 1));
        assert!(!f.see_round(3, 1), "seen already");
        assert!(!f.see_round(3, 0));
        assert_eq!(f.ack_beat(3), 1);
        assert!(
            f.see_round(5, 1),
            "another leader's rounds count from its own"
        );
        assert_eq!(
            f.ack_beat(3),
            0,
            "nothing of term 5 acknowledges term 3's rounds"
        );
        assert_eq!(f.ack_beat(5), 1);
    }

    #[test]
    fn the_lag_is_what_the_leader_announced_beyond_our_commit() {
        let mut f = Following::default();
        f.hear_commit(10);
        f.hear_commit(7);
        assert_eq!(f.lag(4), 6, "the highest announced stays");
        assert_eq!(f.lag(12), 0);
    }
}
