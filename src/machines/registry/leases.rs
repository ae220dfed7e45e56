//! The leader's leases, with the order they fall due in.
//!
//! Every node report renews a lease (100k renewals a second at 100k registrations), and every
//! tick asks which leases ran out. Scanning every lease at each tick cost the core thread
//! time in proportion to the registrations, on every tick; here a tick looks only at the
//! leases that may have run out. Each lease has one entry in a min-heap, keyed by when it
//! was last seen as of that entry; a renewal only updates the lease (no heap work), and
//! when its entry comes up the lease is either out of time or put back at its newer time.
//! So a lease costs the heap about one pop and push per `lease_ms`, whatever its renewals.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::hash::BuildHasherDefault;
use std::num::NonZeroU32;
use std::sync::{Arc, OnceLock};

use super::id_slots::{IdHasher, IdSlots};
use super::state::NodeId;
use super::wire::LoadStats;
use crate::consensus::RenewalTable;
use crate::time::Millis;

/// What a service's last report said of its load: its own and each worker's.
pub type LoadReport = (LoadStats, Vec<LoadStats>);

/// A live registration's lease, at the leader.
///
/// Kept small (16 bytes): the leader holds one per live registration, a million at scale.
/// A report is held apart; the common one that says nothing (all zeros, no workers) is one
/// shared value, not a copy per registration.
#[derive(Debug, Clone)]
pub struct Lease {
    pub last_seen: Millis,
    pub report: Option<Arc<LoadReport>>,
}

/// The report of a service that reports no load: shared by every lease that has it.
fn zero_report() -> Arc<LoadReport> {
    static ZERO: OnceLock<Arc<LoadReport>> = OnceLock::new();
    ZERO.get_or_init(|| Arc::new((LoadStats::default(), Vec::new())))
        .clone()
}

impl Lease {
    /// A lease that starts at `now`, with no report yet.
    fn fresh(now: Millis) -> Lease {
        Lease {
            last_seen: now,
            report: None,
        }
    }

    /// Keeps `load` (`None`: all zeros, no workers) as the last report, in place when this
    /// lease holds its report alone.
    pub fn set_report(&mut self, load: Option<Box<LoadReport>>) {
        let Some(load) = load.filter(|l| l.0 != LoadStats::default() || !l.1.is_empty()) else {
            self.report = Some(zero_report());
            return;
        };
        match self.report.as_mut().and_then(Arc::get_mut) {
            Some(kept) => *kept = *load,
            None => self.report = Some(Arc::from(load)),
        }
    }
}

/// Leases by node ID, and when each was last looked at.
#[derive(Debug, Clone, Default)]
pub(super) struct Leases {
    by_id: IdSlots<Held>,
    /// (last seen as of this entry, node ID, the lease's number): the earliest first.
    due: BinaryHeap<Reverse<(Millis, NodeId, NonZeroU32)>>,
    /// Numbers leases, so an entry left from an ended lease never counts for a later one
    /// of the same ID. It wraps: an entry stays in the heap about `lease_ms`, and 2^32
    /// leases are not started in that time.
    next: u32,
    /// The registrations this beacon found live when it took the leadership, whose lease
    /// has not been renewed or ended since.
    cohort: Cohort,
    /// A follower's table from its leader, not yet installed whole.
    installing: Option<Installing>,
}

/// A leader's table being installed a part per follower tick. A restarted follower is sent a
/// million leases at once; installed in one step they held its core thread some 30 ms, and
/// when its leader died in that time (it is often the first online beacon, the one that
/// takes over), every beacon waited for it. A part is [`TABLE_PART`] leases; what is not yet
/// installed when this beacon comes to lead counts as renewed at that moment, as the leases
/// it heard nothing of do ([`Leases::known`]): never earlier than it was.
#[derive(Debug, Clone)]
struct Installing {
    ages: Arc<Vec<(u64, u64)>>,
    /// When the table arrived: its ages count back from here.
    at: Millis,
    /// Leases installed so far, from the front.
    done: usize,
}

/// Most leases installed from a table in one step (about 2 ms of the core thread): the
/// default of [`super::RegistryConfig::table_part`].
pub const TABLE_PART: usize = 65_536;

/// What a new leader found live: every one of them holds a lease that started when it took
/// over, kept as one start rather than a lease each. Giving a million registrations a lease
/// each took 120 ms on the core thread at the moment of failover, and even listing their
/// IDs 10 ms; the cohort lists nothing. Its members are the live registrations without a
/// lease of their own: whatever registers later gets one at once, one that renews gets one,
/// one that ends leaves. Once the cohort's lease runs out, those still in it expire, a chunk
/// of the registry's IDs per tick, never early.
#[derive(Debug, Clone, Default)]
struct Cohort {
    /// The cohort's lease, as every one of its leases reads; `None`: no cohort.
    lease: Option<Lease>,
    /// IDs below this were judged already.
    judged_below: NodeId,
    /// Members that ended (or ended and came back with a lease of their own) since.
    left: HashSet<NodeId, BuildHasherDefault<IdHasher>>,
}

/// Most cohort members judged by one call to [`Leases::expire`]: a tick of the core thread
/// is never spent on all of a million; the rest expire on the following ticks, never early.
const COHORT_CHUNK: usize = 65_536;

impl Cohort {
    /// Whether `id`, a live registration, still holds the cohort's lease (not renewed on
    /// its own, not ended, not judged).
    fn holds(&self, id: NodeId, by_id: &IdSlots<Held>) -> bool {
        self.lease.is_some()
            && id >= self.judged_below
            && !by_id.contains(id)
            && !self.left.contains(&id)
    }
}

#[derive(Debug, Clone)]
struct Held {
    lease: Lease,
    /// Never zero, so that an empty slot costs nothing more (24 bytes a slot).
    number: NonZeroU32,
}

impl Leases {
    /// A fresh lease at `now` for every live registration: a new leader's, for all of them
    /// at once, a million at scale. They share one lease (see [`Cohort`]).
    pub(super) fn fresh(now: Millis) -> Leases {
        Leases {
            cohort: Cohort {
                lease: Some(Lease::fresh(now)),
                ..Cohort::default()
            },
            ..Leases::default()
        }
    }

    /// A new leader's leases from what it heard as a follower: each renewal it heard of
    /// keeps its time; every other live registration (one it heard nothing of) gets a fresh
    /// lease at `now`, as with [`Leases::fresh`].
    pub(super) fn known(self, now: Millis) -> Leases {
        Leases {
            cohort: Cohort {
                lease: Some(Lease::fresh(now)),
                ..Cohort::default()
            },
            installing: None,
            ..self
        }
    }

    /// A follower's leases from its leader's table, received at `now`: each renewed as
    /// long before `now` as the table says. The first `part` are installed now, the rest
    /// `part` at a time by [`Leases::install_more`].
    pub(super) fn from_table(table: &RenewalTable, now: Millis, part: usize) -> Leases {
        let mut leases = Leases {
            cohort: Cohort {
                lease: table
                    .rest_age
                    .map(|age| Lease::fresh(now.saturating_sub(age))),
                ..Cohort::default()
            },
            installing: Some(Installing {
                ages: table.ages.clone(),
                at: now,
                done: 0,
            }),
            ..Leases::default()
        };
        leases.install_more(part);
        leases
    }

    /// Installs the next `part` leases of a table from the leader, if one is not installed
    /// whole. A renewal heard since counts over the table's older one ([`Leases::renew`]
    /// keeps the later time).
    pub(super) fn install_more(&mut self, part: usize) {
        let Some(mut installing) = self.installing.take() else {
            return;
        };
        let end = installing.ages.len().min(installing.done + part.max(1));
        for (key, age) in &installing.ages[installing.done..end] {
            if let Ok(id) = NodeId::try_from(*key) {
                self.renew(id, installing.at.saturating_sub(*age));
            }
        }
        installing.done = end;
        if end < installing.ages.len() {
            self.installing = Some(installing);
        }
    }

    /// Every lease of a registration `live` says is live, as a table of ages at `now`, in
    /// no particular order (a million of them take a few milliseconds; sorting would
    /// triple it, and the follower needs no order).
    pub(super) fn table(&self, now: Millis, live: impl Fn(NodeId) -> bool) -> RenewalTable {
        let ages = self
            .by_id
            .iter()
            .filter(|(id, _)| live(*id))
            .map(|(id, held)| (u64::from(id), now.saturating_sub(held.lease.last_seen)))
            .collect();
        RenewalTable {
            ages: Arc::new(ages),
            rest_age: self
                .cohort
                .lease
                .as_ref()
                .map(|l| now.saturating_sub(l.last_seen)),
        }
    }

    /// The lease of `id`, a live registration.
    pub(super) fn get(&self, id: NodeId) -> Option<&Lease> {
        match self.by_id.get(id) {
            Some(held) => Some(&held.lease),
            None if self.cohort.holds(id, &self.by_id) => self.cohort.lease.as_ref(),
            None => None,
        }
    }

    /// Renews the lease of `id` at `now`, starting one if it has none (a member of the
    /// cohort gets its own, and its own heap entry: the cohort no longer speaks for it).
    pub(super) fn renew(&mut self, id: NodeId, now: Millis) -> &mut Lease {
        let Leases {
            by_id, due, next, ..
        } = self;
        let held = by_id.get_or_insert_with(id, || {
            *next = next.checked_add(1).unwrap_or(1);
            let number = NonZeroU32::new(*next).expect("never zero");
            due.push(Reverse((now, id, number)));
            Held {
                lease: Lease::fresh(now),
                number,
            }
        });
        held.lease.last_seen = held.lease.last_seen.max(now);
        &mut held.lease
    }

    /// Starts loading `id`'s lease into the cache (see [`Leases::renew`]).
    pub(super) fn prefetch(&self, id: NodeId) {
        self.by_id.prefetch(id);
    }

    /// Ends `id`'s lease (it ended, or expired).
    pub(super) fn remove(&mut self, id: NodeId) {
        // Its heap entry stays until it comes up, and is dropped then.
        self.by_id.remove(id);
        if self.cohort.lease.is_some() {
            self.cohort.left.insert(id);
        }
    }

    /// Ends and returns (in ID order) the leases not renewed for more than `lease_ms`
    /// before `now`; `live_from(id)` lists the live registrations from `id` on, in order.
    pub(super) fn expire<I: Iterator<Item = NodeId>>(
        &mut self,
        now: Millis,
        lease_ms: Millis,
        live_from: impl FnOnce(NodeId) -> I,
    ) -> Vec<NodeId> {
        let mut out = self.expire_cohort(now, lease_ms, live_from);
        while let Some(&Reverse((seen, id, number))) = self.due.peek() {
            if now.saturating_sub(seen) <= lease_ms {
                break;
            }
            self.due.pop();
            let Some(held) = self.by_id.get(id).filter(|h| h.number == number) else {
                continue;
            };
            if held.lease.last_seen > seen {
                self.due.push(Reverse((held.lease.last_seen, id, number)));
            } else {
                self.remove(id);
                out.push(id);
            }
        }
        out.sort_unstable();
        out
    }

    /// Once the cohort's lease has run out: its members among the next chunk of live
    /// registrations; the cohort is gone once every live registration was judged.
    fn expire_cohort<I: Iterator<Item = NodeId>>(
        &mut self,
        now: Millis,
        lease_ms: Millis,
        live_from: impl FnOnce(NodeId) -> I,
    ) -> Vec<NodeId> {
        let Some(lease) = &self.cohort.lease else {
            return Vec::new();
        };
        if now.saturating_sub(lease.last_seen) <= lease_ms {
            return Vec::new();
        }
        let chunk: Vec<NodeId> = live_from(self.cohort.judged_below)
            .take(COHORT_CHUNK)
            .collect();
        let out = chunk
            .iter()
            .copied()
            .filter(|id| self.cohort.holds(*id, &self.by_id))
            .collect();
        match chunk.last() {
            Some(last) if chunk.len() == COHORT_CHUNK && *last < NodeId::MAX => {
                self.cohort.judged_below = last + 1;
            }
            _ => self.cohort = Cohort::default(),
        }
        out
    }

    #[cfg(test)]
    fn queued(&self) -> usize {
        self.due.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// [`Leases::expire`] over the live registrations `live`.
    fn expire(
        leases: &mut Leases,
        live: &BTreeSet<NodeId>,
        now: Millis,
        lease_ms: Millis,
    ) -> Vec<NodeId> {
        leases.expire(now, lease_ms, |from| live.range(from..).copied())
    }

    #[test]
    fn a_lease_keeps_its_last_report_and_a_silent_one_shares_the_zero_report() {
        let mut leases = Leases::fresh(0);
        let busy = LoadStats {
            load: 7,
            ..Default::default()
        };
        leases
            .renew(1, 10)
            .set_report(Some(Box::new((busy, vec![busy]))));
        let kept = leases
            .get(1)
            .and_then(|l| l.report.clone())
            .expect("a report");
        assert_eq!(*kept, (busy, vec![busy]));
        drop(kept);
        // A later report replaces it.
        leases.renew(1, 20).set_report(None);
        // Zeros said outright are no report either.
        leases
            .renew(2, 20)
            .set_report(Some(Box::new((LoadStats::default(), Vec::new()))));
        let (a, b) = (leases.get(1).unwrap(), leases.get(2).unwrap());
        let (a, b) = (a.report.as_ref().unwrap(), b.report.as_ref().unwrap());
        assert_eq!(**a, (LoadStats::default(), Vec::new()));
        assert!(Arc::ptr_eq(a, b), "one shared value, not a copy per lease");
        // What the leader holds per registration stays this small (a million of them at
        // scale), an empty slot no larger.
        assert!(std::mem::size_of::<Option<Held>>() <= 24);
    }

    #[test]
    fn a_new_leader_keeps_the_renewals_it_heard_and_a_fresh_lease_for_the_rest() {
        // As a follower: 1 and 2 renewed (heard at 100 and 400), 9 renewed and then its
        // registration ended.
        let mut heard = Leases::default();
        heard.renew(1, 100);
        heard.renew(2, 400);
        heard.renew(9, 300);
        let live: BTreeSet<NodeId> = [1, 2, 3].into();
        // It leads at 500: 3, heard of by no renewal, gets a lease from now.
        let mut leases = heard.known(500);
        assert_eq!(leases.get(1).map(|l| l.last_seen), Some(100));
        assert_eq!(leases.get(3).map(|l| l.last_seen), Some(500));
        assert_eq!(
            expire(&mut leases, &live, 1_100, 1_000),
            Vec::<NodeId>::new()
        );
        assert_eq!(expire(&mut leases, &live, 1_101, 1_000), vec![1]);
        // 9 comes up too, as a lease of no live registration: the service filters it out.
        assert_eq!(expire(&mut leases, &live, 1_401, 1_000), vec![2, 9]);
        assert_eq!(expire(&mut leases, &live, 1_501, 1_000), vec![3]);
    }

    #[test]
    fn a_table_carries_each_lease_by_its_age_and_the_fresh_ones_as_one() {
        let mut leases = Leases::fresh(1_000);
        leases.renew(4, 1_200);
        leases.renew(8, 1_500);
        leases.renew(6, 1_300);
        let table = leases.table(1_600, |id| id != 8);
        let mut ages = table.ages.to_vec();
        ages.sort_unstable();
        assert_eq!(ages, vec![(4, 400), (6, 300)], "8 ended: left out");
        assert_eq!(table.rest_age, Some(600));
        // A follower that gets it at its 50_000 holds the same leases on its clock.
        let there = Leases::from_table(&table, 50_000, TABLE_PART);
        assert_eq!(there.get(4).map(|l| l.last_seen), Some(49_600));
        assert_eq!(
            there.get(7).map(|l| l.last_seen),
            Some(49_400),
            "the fresh ones"
        );
    }

    #[test]
    fn a_large_table_is_installed_a_part_per_tick_and_a_new_leader_counts_the_rest_fresh() {
        let part = 100;
        let n = (part * 2 + 10) as NodeId;
        // Every lease 300 ms old, but the first's: 100 ms.
        let ages: Vec<(u64, u64)> = (1..=n)
            .map(|id| (u64::from(id), if id == 1 { 100 } else { 300 }))
            .collect();
        let table = RenewalTable {
            ages: Arc::new(ages),
            rest_age: None,
        };
        let last = n;
        let mut leases = Leases::from_table(&table, 10_000, part);
        // The first part is in at once; the last lease is not yet.
        assert_eq!(leases.get(1).map(|l| l.last_seen), Some(9_900));
        assert!(leases.get(last).is_none(), "installed whole in one step");
        // A renewal heard before the table's part for it keeps its later time.
        leases.renew(last, 10_050);
        leases.install_more(part);
        assert!(leases.get(last - 1).is_none(), "two parts and a bit");
        leases.install_more(part);
        assert_eq!(leases.get(last - 1).map(|l| l.last_seen), Some(9_700));
        assert_eq!(leases.get(last).map(|l| l.last_seen), Some(10_050));
        assert!(leases.installing.is_none(), "done");

        // A follower that comes to lead half-way: what it installed keeps its time, the
        // rest counts from the moment it leads, never earlier than the table said.
        let mut half = Leases::from_table(&table, 10_000, part);
        let live: BTreeSet<NodeId> = (1..=n).collect();
        let mut led = half.clone().known(10_500);
        assert!(led.installing.is_none(), "the rest is not installed later");
        assert_eq!(led.get(2).map(|l| l.last_seen), Some(9_700));
        assert_eq!(led.get(last).map(|l| l.last_seen), Some(10_500));
        // With a lease of 1 s: the installed part runs out at 10_701, the rest at 11_501.
        let out = expire(&mut led, &live, 10_701, 1_000);
        assert_eq!(out.len(), part - 1, "the installed part but lease 1");
        assert!(expire(&mut led, &live, 11_500, 1_000).contains(&1));
        let rest = (part as NodeId + 1..=n).collect::<Vec<_>>();
        let mut later = Vec::new();
        for _ in 0..4 {
            later.extend(expire(&mut led, &live, 11_501, 1_000));
        }
        assert_eq!(later, rest, "the rest, from when it led");
        // Left a follower, it would have gone on with the rest.
        half.install_more(part);
        half.install_more(part);
        assert!(half.installing.is_none());
    }

    #[test]
    fn a_lease_runs_out_only_after_lease_ms_without_renewal() {
        let mut live: BTreeSet<NodeId> = [1, 2, 3].into();
        let mut leases = Leases::fresh(0);
        leases.renew(2, 500);
        assert_eq!(expire(&mut leases, &live, 1000, 1000), Vec::<NodeId>::new());
        assert_eq!(expire(&mut leases, &live, 1001, 1000), vec![1, 3]);
        live.retain(|id| *id == 2);
        assert!(leases.get(1).is_none() && leases.get(3).is_none());
        assert_eq!(expire(&mut leases, &live, 1500, 1000), Vec::<NodeId>::new());
        leases.renew(2, 1400);
        assert_eq!(expire(&mut leases, &live, 2400, 1000), Vec::<NodeId>::new());
        assert_eq!(expire(&mut leases, &live, 2401, 1000), vec![2]);
        assert_eq!(leases.queued(), 0, "nothing is left behind");
    }

    #[test]
    fn renewals_cost_the_heap_nothing_and_an_ended_lease_never_counts_again() {
        let live: BTreeSet<NodeId> = [7].into();
        let mut leases = Leases::fresh(0);
        for t in 1..10_000 {
            leases.renew(7, t);
        }
        assert_eq!(leases.queued(), 1);
        // Removed, then started again under the same ID: the old entry is dropped, the new
        // one alone decides.
        leases.remove(7);
        leases.renew(7, 20_000);
        assert_eq!(
            expire(&mut leases, &live, 20_500, 1000),
            Vec::<NodeId>::new()
        );
        assert_eq!(expire(&mut leases, &live, 21_001, 1000), vec![7]);
        assert_eq!(leases.queued(), 0);
    }

    #[test]
    fn a_cohort_too_large_for_one_tick_expires_over_several_never_early() {
        let n = COHORT_CHUNK as NodeId + 10;
        let mut live: BTreeSet<NodeId> = (1..=n).collect();
        let mut leases = Leases::fresh(0);
        assert!(leases.get(n).is_some_and(|l| l.last_seen == 0));
        // Two renew on their own; one ends; none of them is the cohort's to expire.
        leases.renew(1, 500);
        leases.renew(n, 500);
        leases.remove(2);
        live.remove(&2);
        assert!(leases.get(2).is_none());
        assert_eq!(
            expire(&mut leases, &live, 1000, 1000),
            Vec::<NodeId>::new(),
            "not yet"
        );
        // A chunk of the live registrations (1, then 3 on), less the one that renewed.
        let first = expire(&mut leases, &live, 1001, 1000);
        assert_eq!(first.len(), COHORT_CHUNK - 1);
        assert_eq!(
            (first[0], first[first.len() - 1]),
            (3, COHORT_CHUNK as NodeId + 1)
        );
        live.retain(|id| first.binary_search(id).is_err());
        let rest = expire(&mut leases, &live, 1002, 1000);
        assert_eq!(rest, (COHORT_CHUNK as NodeId + 2..n).collect::<Vec<_>>());
        live.retain(|id| rest.binary_search(id).is_err());
        assert!(leases.get(3).is_none() && leases.get(n - 1).is_none());
        // Registered after the takeover: a lease of its own, never the cohort's.
        leases.renew(2, 1300);
        live.insert(2);
        assert_eq!(
            expire(&mut leases, &live, 1400, 1000),
            Vec::<NodeId>::new(),
            "nothing twice"
        );
        assert_eq!(
            expire(&mut leases, &live, 1501, 1000),
            vec![1, n],
            "the renewed, on their own time"
        );
        assert_eq!(expire(&mut leases, &live, 2301, 1000), vec![2]);
    }

    /// Against the plain scan it replaces, over a random schedule of renewals, removals and
    /// ticks.
    #[test]
    fn it_expires_what_a_scan_of_every_lease_would() {
        let mut rand = super::super::id_slots::draws(0x2545_F491_4F6C_DD1D);
        let lease_ms = 300;
        // A leader that took over 40 live registrations: they share one lease from 0.
        let mut leases = Leases::fresh(0);
        let mut plain: std::collections::BTreeMap<NodeId, Millis> =
            (0..40).map(|id| (id, 0)).collect();
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
                for (id, seen) in &plain {
                    let lease = leases.get(*id).expect("a live registration has a lease");
                    assert_eq!(lease.last_seen, *seen, "{id} at {now}");
                }
                let want: Vec<NodeId> = plain
                    .iter()
                    .filter(|(_, seen)| now - **seen > lease_ms)
                    .map(|(id, _)| *id)
                    .collect();
                plain.retain(|_, seen| now - *seen <= lease_ms);
                let live: BTreeSet<NodeId> = plain.keys().copied().collect();
                assert_eq!(expire(&mut leases, &live, now, lease_ms), want, "at {now}");
            }
        }
    }
}
