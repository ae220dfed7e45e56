//! The leader changes this beacon has seen, with when: what the status page draws as a
//! timeline and `GET /v1/leaders` lists. `beacon_server_leader_changes_seen_total` counts
//! the same changes; this keeps the last few of them with their time and term.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Mutex;

use serde::Serialize;

use crate::time::wall_ms;

/// How many changes are kept: far more than a healthy cluster makes in an hour, and a
/// flapping one shows its last ones.
pub(crate) const KEPT: usize = 256;

/// One change: from `at_ms` (Unix time, milliseconds) on, this beacon followed `leader`
/// (or knew none) in `term`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct LeaderChange {
    pub(crate) at_ms: u64,
    pub(crate) term: u64,
    pub(crate) leader: Option<String>,
}

/// The last [`KEPT`] changes, oldest first.
#[derive(Debug, Default)]
pub(crate) struct LeaderHistory {
    changes: Mutex<VecDeque<LeaderChange>>,
}

impl LeaderHistory {
    /// Notes that this beacon now follows `leader` (or knows none) in `term`.
    pub(crate) fn record(&self, leader: Option<SocketAddr>, term: u64) {
        self.record_at(wall_ms(), leader, term);
    }

    fn record_at(&self, at_ms: u64, leader: Option<SocketAddr>, term: u64) {
        let mut changes = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        if changes.len() == KEPT {
            changes.pop_front();
        }
        changes.push_back(LeaderChange {
            at_ms,
            term,
            leader: leader.map(|l| l.to_string()),
        });
    }

    /// The kept changes, oldest first.
    pub(crate) fn changes(&self) -> Vec<LeaderChange> {
        let changes = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        changes.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_changes_in_order() {
        let h = LeaderHistory::default();
        let a: SocketAddr = "127.0.0.1:16000".parse().unwrap();
        for term in 1..=(KEPT as u64 + 10) {
            h.record_at(term * 1000, (term % 3 != 0).then_some(a), term);
        }
        let changes = h.changes();
        assert_eq!(changes.len(), KEPT);
        assert_eq!(changes[0].term, 11, "the oldest ten were dropped");
        assert_eq!(changes.last().unwrap().term, KEPT as u64 + 10);
        assert!(changes.windows(2).all(|w| w[0].at_ms < w[1].at_ms));
        assert_eq!(changes[1].leader, None, "term 12 knew no leader");
        assert_eq!(changes[0].leader.as_deref(), Some("127.0.0.1:16000"));
    }
}
