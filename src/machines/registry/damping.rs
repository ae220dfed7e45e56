//! Flap damping, decided by the leader: a service whose reported status changes more than
//! `max_flaps` times within `window_ms` is held at `critical` with the note `flapping` until
//! its reports have kept one status for `stable_ms`; then that status is published. One noisy
//! check cannot game it (the service's client already asks for a status to hold for several
//! checks before reporting it), and it is visible: `show nodes` lists the registration as
//! `critical since ... (flapping: ...)`.
//!
//! What the leader counts is its own: a new leader counts afresh, so a service keeps
//! flapping only as long as it keeps changing, and every published change is one log entry
//! at most per `stable_ms` while it is held.

use std::collections::{HashMap, VecDeque};

use super::state::{NodeId, Status};
use crate::time::Millis;

/// When a service counts as flapping, and how long it must hold still after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DampingConfig {
    /// Changes within `window_ms` beyond which a service is held critical.
    pub max_flaps: u32,
    pub window_ms: u64,
    /// How long its reports must keep one status before it is published again.
    pub stable_ms: u64,
}

impl Default for DampingConfig {
    fn default() -> Self {
        DampingConfig {
            max_flaps: 5,
            window_ms: 60_000,
            stable_ms: 30_000,
        }
    }
}

/// One registration's recent reports.
#[derive(Debug, Clone)]
struct Flaps {
    /// When its reported status changed, within the window.
    changes: VecDeque<Millis>,
    /// What it reported last, and why.
    last: (Status, String),
    /// Held at critical until then (each change while held moves it on).
    held_until: Option<Millis>,
}

/// The leader's count of each registration's status changes.
#[derive(Debug, Clone, Default)]
pub struct Damping {
    cfg: DampingConfig,
    by_node: HashMap<NodeId, Flaps>,
}

/// The note a flapping service is held with.
pub fn flapping_note(changes: usize, window_ms: u64) -> String {
    format!(
        "flapping: {changes} status changes in {} s",
        window_ms.div_ceil(1000)
    )
}

impl Damping {
    pub fn new(cfg: DampingConfig) -> Damping {
        Damping {
            cfg,
            by_node: HashMap::new(),
        }
    }

    /// The status (with its note) to publish now that node `id`'s service reported
    /// `status` at `now`, its registration showing `published`; `None` leaves it.
    pub fn reported(
        &mut self,
        id: NodeId,
        status: Status,
        note: String,
        published: Status,
        now: Millis,
    ) -> Option<(Status, String)> {
        let cfg = self.cfg;
        let f = self.by_node.entry(id).or_insert_with(|| Flaps {
            changes: VecDeque::new(),
            last: (published, String::new()),
            held_until: None,
        });
        if status != f.last.0 {
            f.changes.push_back(now);
        }
        f.last = (status, note);
        while f
            .changes
            .front()
            .is_some_and(|t| now.saturating_sub(*t) > cfg.window_ms)
        {
            f.changes.pop_front();
        }
        if f.held_until.is_some() {
            if f.changes.back() == Some(&now) {
                f.held_until = Some(now + cfg.stable_ms);
            }
            return None;
        }
        if f.changes.len() > cfg.max_flaps as usize {
            f.held_until = Some(now + cfg.stable_ms);
            let note = flapping_note(f.changes.len(), cfg.window_ms);
            return Some((Status::Critical, note));
        }
        let out = (status != published).then(|| f.last.clone());
        if f.changes.is_empty() {
            // Nothing to remember: a steady service costs no entry here.
            self.by_node.remove(&id);
        }
        out
    }

    /// The registrations whose hold ended by `now`, each with the status its reports kept
    /// (and their note), to publish.
    pub fn due(&mut self, now: Millis) -> Vec<(NodeId, Status, String)> {
        let mut due = Vec::new();
        self.by_node.retain(|id, f| match f.held_until {
            Some(until) if until <= now => {
                due.push((*id, f.last.0, f.last.1.clone()));
                false
            }
            Some(_) => true,
            None => !f.changes.is_empty(),
        });
        due
    }

    /// Forgets node `id` (its registration ended).
    pub fn forget(&mut self, id: NodeId) {
        self.by_node.remove(&id);
    }

    /// Forgets everything (leadership changed hands).
    pub fn clear(&mut self) {
        self.by_node.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: DampingConfig = DampingConfig {
        max_flaps: 3,
        window_ms: 10_000,
        stable_ms: 5_000,
    };

    #[test]
    fn a_steady_change_is_published_and_a_flapping_service_is_held_until_it_is_still() {
        use Status::*;
        let mut d = Damping::new(CFG);
        // One change: published as reported, with its note.
        assert_eq!(
            d.reported(1, Critical, "db down".into(), Passing, 0),
            Some((Critical, "db down".into()))
        );
        // The same again: nothing to publish.
        assert_eq!(
            d.reported(1, Critical, "db down".into(), Critical, 100),
            None
        );
        // Up, down, up within the window: the fourth change holds it critical.
        assert_eq!(
            d.reported(1, Passing, String::new(), Critical, 200),
            Some((Passing, String::new()))
        );
        assert_eq!(
            d.reported(1, Critical, "again".into(), Passing, 300),
            Some((Critical, "again".into()))
        );
        let held = d.reported(1, Passing, String::new(), Critical, 400);
        assert_eq!(
            held,
            Some((Critical, flapping_note(4, 10_000))),
            "held at critical"
        );
        // While held, its reports publish nothing; each change moves the hold on.
        assert_eq!(d.reported(1, Critical, "x".into(), Critical, 1_000), None);
        assert_eq!(d.reported(1, Passing, String::new(), Critical, 2_000), None);
        assert!(
            d.due(6_999).is_empty(),
            "still within 5 s of the last change"
        );
        assert_eq!(d.due(7_000), vec![(1, Passing, String::new())]);
        assert!(d.due(100_000).is_empty(), "published once");
    }

    #[test]
    fn changes_spread_over_more_than_the_window_never_hold_and_steady_services_cost_nothing() {
        use Status::*;
        let mut d = Damping::new(CFG);
        let mut published = Passing;
        for i in 0..20u64 {
            let status = if i % 2 == 0 { Critical } else { Passing };
            let out = d.reported(2, status, String::new(), published, i * 4_000);
            assert_eq!(out, Some((status, String::new())), "change {i}");
            published = status;
        }
        for id in 100..200 {
            assert_eq!(d.reported(id, Passing, String::new(), Passing, 0), None);
        }
        assert!(d.by_node.len() <= 1, "{} remembered", d.by_node.len());
        d.forget(2);
        assert!(d.by_node.is_empty());
    }
}
