//! The leader's leases, with the order they fall due in.
//!
//! Every node report renews a lease (100k renewals a second at 100k registrations), and every
//! tick asks which leases ran out. Scanning every lease at each tick cost the core thread
//! time in proportion to the registrations, on every tick; here a tick looks only at the
//! leases that may have run out. Each lease has one entry in a min-heap, keyed by when it
//! was last seen as of that entry; a renewal only updates the lease (no heap work), and
//! when its entry comes up the lease is either out of time or put back at its newer time.
//! So a lease costs the heap about one pop and push per `lease_ms`, whatever its renewals.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use super::state::NodeId;
use super::wire::LoadStats;
use crate::time::Millis;

/// A live registration's lease, at the leader.
#[derive(Debug, Clone)]
pub struct Lease {
    pub last_seen: Millis,
    pub report: Option<(LoadStats, Vec<LoadStats>)>,
}

impl Lease {
    /// A lease that starts at `now`, with no report yet.
    fn fresh(now: Millis) -> Lease {
        Lease {
            last_seen: now,
            report: None,
        }
    }
}

/// Leases by node ID, and when each was last looked at.
#[derive(Debug, Clone, Default)]
pub(super) struct Leases {
    by_id: HashMap<NodeId, Held, BuildHasherDefault<IdHasher>>,
    /// (last seen as of this entry, node ID, the lease's number): the earliest first.
    due: BinaryHeap<Reverse<(Millis, NodeId, u64)>>,
    /// Numbers leases, so an entry left from an ended lease never counts for a later one
    /// of the same ID.
    next: u64,
    /// When this beacon took over: every registration live then holds a lease from that
    /// moment until it reports (and gets an entry of its own). Building an entry for each of
    /// a million registrations at the takeover was most of a 312 ms step on the new
    /// leader's core thread, in the middle of a failover; those still without one are found
    /// once, when the presumed leases run out.
    presumed: Option<Millis>,
}

#[derive(Debug, Clone)]
struct Held {
    lease: Lease,
    number: u64,
}

impl Leases {
    /// The leases of a beacon that takes over at `now`: every live registration's starts
    /// now.
    pub(super) fn presumed_from(now: Millis) -> Leases {
        Leases {
            presumed: Some(now),
            ..Leases::default()
        }
    }

    /// The lease of `id`, a live registration: its own, or the one presumed from the
    /// takeover.
    pub(super) fn get(&self, id: NodeId) -> Option<Cow<'_, Lease>> {
        match (self.by_id.get(&id), self.presumed) {
            (Some(h), _) => Some(Cow::Borrowed(&h.lease)),
            (None, Some(since)) => Some(Cow::Owned(Lease::fresh(since))),
            (None, None) => None,
        }
    }

    /// Renews the lease of `id` at `now`, starting one if it has none.
    pub(super) fn renew(&mut self, id: NodeId, now: Millis) -> &mut Lease {
        let Leases {
            by_id, due, next, ..
        } = self;
        let held = by_id.entry(id).or_insert_with(|| {
            *next += 1;
            due.push(Reverse((now, id, *next)));
            Held {
                lease: Lease::fresh(now),
                number: *next,
            }
        });
        held.lease.last_seen = held.lease.last_seen.max(now);
        &mut held.lease
    }

    pub(super) fn remove(&mut self, id: NodeId) {
        // Its heap entry stays until it comes up, and is dropped then.
        self.by_id.remove(&id);
    }

    /// Ends and returns (in ID order) the leases not renewed for more than `lease_ms`
    /// before `now`; `live` lists the live registrations, read only when the leases
    /// presumed from the takeover run out (once).
    pub(super) fn expire(
        &mut self,
        now: Millis,
        lease_ms: Millis,
        live: impl Iterator<Item = NodeId>,
    ) -> Vec<NodeId> {
        let mut out = Vec::new();
        if let Some(since) = self.presumed
            && now.saturating_sub(since) > lease_ms
        {
            self.presumed = None;
            out.extend(live.filter(|id| !self.by_id.contains_key(id)));
        }
        while let Some(&Reverse((seen, id, number))) = self.due.peek() {
            if now.saturating_sub(seen) <= lease_ms {
                break;
            }
            self.due.pop();
            let Some(held) = self.by_id.get(&id).filter(|h| h.number == number) else {
                continue;
            };
            if held.lease.last_seen > seen {
                self.due.push(Reverse((held.lease.last_seen, id, number)));
            } else {
                self.by_id.remove(&id);
                out.push(id);
            }
        }
        out.sort_unstable();
        out
    }

    #[cfg(test)]
    fn queued(&self) -> usize {
        self.due.len()
    }
}

/// Fibonacci hashing of a node ID: node IDs are small integers the leader hands out itself,
/// so one multiplication hashes them well, where the default SipHash showed in profiles.
#[derive(Debug, Default, Clone, Copy)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not used by u32 keys; kept correct for any other.
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none() -> std::iter::Empty<NodeId> {
        std::iter::empty()
    }

    #[test]
    fn a_lease_runs_out_only_after_lease_ms_without_renewal() {
        let mut leases = Leases::default();
        for id in [1, 2, 3] {
            leases.renew(id, 0);
        }
        leases.renew(2, 500);
        assert_eq!(leases.expire(1000, 1000, none()), Vec::<NodeId>::new());
        assert_eq!(leases.expire(1001, 1000, none()), vec![1, 3]);
        assert!(leases.get(1).is_none() && leases.get(3).is_none());
        assert_eq!(leases.expire(1500, 1000, none()), Vec::<NodeId>::new());
        leases.renew(2, 1400);
        assert_eq!(leases.expire(2400, 1000, none()), Vec::<NodeId>::new());
        assert_eq!(leases.expire(2401, 1000, none()), vec![2]);
        assert_eq!(leases.queued(), 0, "nothing is left behind");
    }

    /// After a takeover every live registration holds a lease from then without an entry
    /// of its own; those that never reported run out with it, the others live on.
    #[test]
    fn presumed_leases_run_out_for_those_that_never_reported() {
        let mut leases = Leases::presumed_from(100);
        assert_eq!(leases.get(9).map(|l| l.last_seen), Some(100));
        leases.renew(2, 600);
        let live = || [1, 2, 3].into_iter();
        assert_eq!(leases.expire(1100, 1000, live()), Vec::<NodeId>::new());
        assert_eq!(leases.expire(1101, 1000, live()), vec![1, 3]);
        assert!(leases.get(1).is_none(), "presumed no more");
        assert_eq!(leases.get(2).map(|l| l.last_seen), Some(600));
        assert_eq!(leases.expire(1601, 1000, live()), vec![2]);
    }

    #[test]
    fn renewals_cost_the_heap_nothing_and_an_ended_lease_never_counts_again() {
        let mut leases = Leases::default();
        leases.renew(7, 0);
        for t in 1..10_000 {
            leases.renew(7, t);
        }
        assert_eq!(leases.queued(), 1);
        // Removed, then started again under the same ID: the old entry is dropped, the new
        // one alone decides.
        leases.remove(7);
        leases.renew(7, 20_000);
        assert_eq!(leases.expire(20_500, 1000, none()), Vec::<NodeId>::new());
        assert_eq!(leases.expire(21_001, 1000, none()), vec![7]);
        assert_eq!(leases.queued(), 0);
    }

    /// Against the plain scan it replaces, over a random schedule of renewals, removals and
    /// ticks.
    #[test]
    fn it_expires_what_a_scan_of_every_lease_would() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut rand = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let lease_ms = 300;
        let mut leases = Leases::default();
        let mut plain: std::collections::BTreeMap<NodeId, Millis> = Default::default();
        for now in 0..20_000u64 {
            let id = rand(50) as NodeId;
            match rand(4) {
                0 => {
                    leases.remove(id);
                    plain.remove(&id);
                }
                _ => {
                    leases.renew(id, now);
                    plain.insert(id, now);
                }
            }
            if now % 37 == 0 {
                let want: Vec<NodeId> = plain
                    .iter()
                    .filter(|(_, seen)| now - **seen > lease_ms)
                    .map(|(id, _)| *id)
                    .collect();
                plain.retain(|_, seen| now - *seen <= lease_ms);
                assert_eq!(leases.expire(now, lease_ms, none()), want, "at {now}");
            }
        }
    }
}
