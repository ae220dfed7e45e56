//! Where resources go: pure functions over the state and the live services, so the leader's
//! decisions can be tested without a cluster.
//!
//! * [`orphans`]: every resource without a live holder goes to the eligible live service
//!   with the least total weight (ties: the lowest node ID), heaviest resources first, as the
//!   seed's least-load rule. Holders that are live keep what they hold (assignment is sticky).
//!   A resource bound to a slot is never an orphan: it runs wherever its slot's holder is and
//!   moves only with the slot ([`slot_grants`]), so a slot without a holder leaves it unheld.
//! * [`rebalance`]: moves from the most to the least loaded eligible service, each of them
//!   narrowing the spread, until the spread is within a bound or a limit of moves is reached
//!   (so a join does not move everything at once).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

use super::state::{Assignments, Holder, Resource};
use crate::machines::registry::{FencingToken, NodeId, NodeRecord};

/// A live service that may hold resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub node_id: NodeId,
    pub addr: SocketAddr,
    pub registration: FencingToken,
    pub node_type: String,
    /// The top-level fields of its registration metadata, as text.
    pub labels: BTreeMap<String, String>,
    /// In rotation (passing or warning, not draining): only such a service is given new
    /// work; a critical one keeps what it holds.
    pub serving: bool,
    /// An operator is draining it: it hands what it holds to others.
    pub draining: bool,
}

impl Candidate {
    pub fn of(record: &NodeRecord) -> Candidate {
        Candidate {
            node_id: record.node_id,
            addr: record.addr,
            registration: record.token(),
            node_type: record.node_type.to_string(),
            labels: labels_of(&record.metadata),
            serving: record.health().serving(),
            draining: record.health().draining,
        }
    }

    /// Whether this service is the holder `h` (the same registration, not only the same ID).
    pub fn is(&self, h: &Holder) -> bool {
        self.node_id == h.node_id && self.registration == h.registration
    }
}

/// The labels a registration carries: the top-level fields of its metadata (a JSON object);
/// strings as they are, other values as their JSON text.
pub fn labels_of(metadata: &str) -> BTreeMap<String, String> {
    let Ok(serde_json::Value::Object(fields)) = serde_json::from_str(metadata) else {
        return BTreeMap::new();
    };
    fields
        .into_iter()
        .map(|(k, v)| {
            let text = match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            (k, text)
        })
        .collect()
}

/// Whether `c` may run `r`: its node type, and every label `r` asks for.
pub fn eligible(r: &Resource, c: &Candidate) -> bool {
    c.node_type == r.node_type && r.labels.iter().all(|(k, v)| c.labels.get(k) == Some(v))
}

/// The live candidates by node ID, so that whether a holder is live takes one lookup: the
/// leader's tick asks it of every resource, and a scan of the candidates for each made a
/// tick cost resources x services (10,000 resources on 100 services held the leader at
/// 6.5% of a core while nothing changed). Only looked up, never iterated: no order to keep.
pub struct Live<'a>(HashMap<NodeId, &'a Candidate>);

impl<'a> Live<'a> {
    pub fn of(candidates: &'a [Candidate]) -> Live<'a> {
        Live(candidates.iter().map(|c| (c.node_id, c)).collect())
    }

    /// The live candidate that is holder `h` (the same registration, not only the same ID).
    pub fn holding(&self, h: &Holder) -> Option<&'a Candidate> {
        self.0.get(&h.node_id).copied().filter(|c| c.is(h))
    }
}

/// Whether `r`'s holder is one of the `live` candidates.
pub fn held_live(r: &Resource, live: &Live<'_>) -> bool {
    r.holder.as_ref().is_some_and(|h| live.holding(h).is_some())
}

/// Each candidate's load: the weight of what it holds.
pub fn loads(state: &Assignments, candidates: &[Candidate]) -> BTreeMap<NodeId, u64> {
    let live = Live::of(candidates);
    let mut loads: BTreeMap<NodeId, u64> = candidates.iter().map(|c| (c.node_id, 0)).collect();
    for r in state.iter() {
        if let Some(h) = &r.holder
            && live.holding(h).is_some()
        {
            *loads.entry(h.node_id).or_default() += u64::from(r.weight);
        }
    }
    loads
}

/// The eligible serving candidate with the least load (ties: the lowest node ID).
fn least_loaded<'a>(
    r: &Resource,
    candidates: &'a [Candidate],
    loads: &BTreeMap<NodeId, u64>,
) -> Option<&'a Candidate> {
    candidates
        .iter()
        .filter(|c| c.serving && eligible(r, c))
        .min_by_key(|c| (loads.get(&c.node_id).copied().unwrap_or(0), c.node_id))
}

/// Where each resource without a live holder goes: `Some(node)` for the least-loaded
/// eligible candidate, `None` when none is eligible (and its holder is gone). Resources
/// that are already unassigned with no eligible candidate are left out (nothing changes).
pub fn orphans(state: &Assignments, candidates: &[Candidate]) -> Vec<(String, Option<NodeId>)> {
    let live = Live::of(candidates);
    let mut orphans: Vec<&Resource> = state
        .iter()
        .filter(|r| r.slot.is_none() && !held_live(r, &live))
        .collect();
    if orphans.is_empty() {
        // The tick's usual case: no loads to weigh.
        return Vec::new();
    }
    let mut loads = loads(state, candidates);
    // Heaviest first: the least-load rule balances best when the large pieces go first.
    orphans.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.name.cmp(&b.name)));
    let mut placed = Vec::new();
    for r in orphans {
        match least_loaded(r, candidates, &loads) {
            Some(c) => {
                *loads.entry(c.node_id).or_default() += u64::from(r.weight);
                placed.push((r.name.clone(), Some(c.node_id)));
            }
            None if r.holder.is_some() => placed.push((r.name.clone(), None)),
            None => {}
        }
    }
    placed
}

/// Moves (resource, to) that take resources off the draining candidates, to the least
/// loaded eligible serving ones, at most `limit`: each is revoked first, and moves once its
/// holder lets it go, as a rebalance's moves do. A resource with nowhere to go stays.
pub fn drains(
    state: &Assignments,
    candidates: &[Candidate],
    limit: usize,
) -> Vec<(String, NodeId)> {
    let mut loads = loads(state, candidates);
    let live = Live::of(candidates);
    let mut moves = Vec::new();
    for r in state.iter().filter(|r| !r.revoking && r.slot.is_none()) {
        if moves.len() >= limit {
            break;
        }
        let Some(h) = &r.holder else { continue };
        if !live.holding(h).is_some_and(|c| c.draining) {
            continue;
        }
        if let Some(to) = least_loaded(r, candidates, &loads) {
            *loads.entry(to.node_id).or_default() += u64::from(r.weight);
            moves.push((r.name.clone(), to.node_id));
        }
    }
    moves
}

/// The node ID a new resource goes to: the least-loaded eligible candidate.
pub fn place_new(state: &Assignments, r: &Resource, candidates: &[Candidate]) -> Option<NodeId> {
    least_loaded_id(r, candidates, &loads(state, candidates))
}

/// [`place_new`] with the candidates' loads known ([`loads`]).
pub fn least_loaded_id(
    r: &Resource,
    candidates: &[Candidate],
    loads: &BTreeMap<NodeId, u64>,
) -> Option<NodeId> {
    least_loaded(r, candidates, loads).map(|c| c.node_id)
}

/// Moves (resource, to) that narrow the spread of load among the candidates of `node_type`
/// (every type when `None`) until it is at most `bound`, at most `limit` of them. Each move
/// takes, from the most loaded candidate, the resource whose weight comes closest to half
/// the spread without reaching it, so every move narrows it. Resources being revoked stay.
pub fn rebalance(
    state: &Assignments,
    candidates: &[Candidate],
    node_type: Option<&str>,
    bound: u64,
    limit: usize,
) -> Vec<(String, NodeId)> {
    let mut types: Vec<&str> = candidates
        .iter()
        .map(|c| c.node_type.as_str())
        .filter(|t| node_type.is_none_or(|want| want == *t))
        .collect();
    types.sort_unstable();
    types.dedup();
    let mut loads = loads(state, candidates);
    let live = Live::of(candidates);
    let mut holder: BTreeMap<&str, NodeId> = state
        .iter()
        .filter_map(|r| {
            let h = r.holder.as_ref()?;
            live.holding(h).map(|_| (r.name.as_str(), h.node_id))
        })
        .collect();
    let mut moves = Vec::new();
    for t in types {
        // Only services in rotation give or take in a rebalance: a draining one hands its
        // resources off apart ([`drains`]), and a critical one keeps what it holds.
        let of_type: Vec<&Candidate> = candidates
            .iter()
            .filter(|c| c.node_type == t && c.serving)
            .collect();
        while moves.len() < limit {
            let by_load = |c: &&&Candidate| (loads[&c.node_id], c.node_id);
            let (Some(most), Some(least)) = (
                of_type.iter().max_by_key(by_load).copied(),
                of_type.iter().min_by_key(by_load).copied(),
            ) else {
                break;
            };
            let spread = loads[&most.node_id] - loads[&least.node_id];
            if spread <= bound {
                break;
            }
            let pick = state
                .iter()
                .filter(|r| {
                    holder.get(r.name.as_str()) == Some(&most.node_id)
                        && !r.revoking
                        && r.slot.is_none()
                        && u64::from(r.weight) < spread
                        && eligible(r, least)
                })
                .min_by_key(|r| (u64::from(r.weight) * 2).abs_diff(spread));
            let Some(r) = pick else {
                break;
            };
            let w = u64::from(r.weight);
            *loads.get_mut(&most.node_id).expect("a candidate") -= w;
            *loads.get_mut(&least.node_id).expect("a candidate") += w;
            holder.insert(r.name.as_str(), least.node_id);
            moves.push((r.name.clone(), least.node_id));
        }
    }
    moves
}

/// Slots to grant in `group`: each free slot, or one whose holder's registration has ended,
/// goes to the oldest standby (a live service of the group's node type holding no slot of
/// it, oldest registration first); with no standby, a slot whose holder ended is freed.
pub fn slot_grants(
    group: &super::state::SlotGroup,
    candidates: &[Candidate],
) -> Vec<(u32, Option<NodeId>)> {
    let live_holder = |s: &super::state::Slot| {
        s.holder
            .as_ref()
            .is_some_and(|h| candidates.iter().any(|c| c.is(h)))
    };
    let mut standbys = standbys(group, candidates).into_iter();
    let mut grants = Vec::new();
    for (i, slot) in group.slots.iter().enumerate() {
        if live_holder(slot) {
            continue;
        }
        match standbys.next() {
            Some(c) => grants.push((i as u32, Some(c.node_id))),
            None if slot.holder.is_some() => grants.push((i as u32, None)),
            None => {}
        }
    }
    grants
}

/// The services in rotation of `group`'s type that hold none of its slots, oldest
/// registration first: the order they get freed slots in.
fn standbys<'a>(
    group: &super::state::SlotGroup,
    candidates: &'a [Candidate],
) -> Vec<&'a Candidate> {
    let mut standbys: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| c.node_type == group.node_type && c.serving)
        .filter(|c| {
            !group
                .slots
                .iter()
                .any(|s| s.holder.as_ref().is_some_and(|h| c.is(h)))
        })
        .collect();
    standbys.sort_by_key(|c| (c.registration, c.node_id));
    standbys
}

/// The slots of `group` to revoke because their holder is draining: as many as there are
/// standbys left to take them (a slot already being revoked has one meant for it), so a
/// drained holder keeps a slot nobody else could run.
pub fn slot_drains(group: &super::state::SlotGroup, candidates: &[Candidate]) -> Vec<u32> {
    let holder_of = |s: &super::state::Slot| {
        s.holder
            .as_ref()
            .and_then(|h| candidates.iter().find(|c| c.is(h)))
    };
    let already = group
        .slots
        .iter()
        .filter(|s| s.revoking && holder_of(s).is_some())
        .count();
    let free = standbys(group, candidates).len().saturating_sub(already);
    group
        .slots
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.revoking && holder_of(s).is_some_and(|c| c.draining))
        .map(|(i, _)| i as u32)
        .take(free)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machines::assign::state::{Command, Placement};

    fn candidate(node_id: NodeId, node_type: &str, labels: &[(&str, &str)]) -> Candidate {
        Candidate {
            node_id,
            addr: SocketAddr::from(([10, 0, 0, node_id as u8], 80)),
            registration: FencingToken {
                term: 1,
                index: u64::from(node_id),
            },
            node_type: node_type.into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            serving: true,
            draining: false,
        }
    }

    fn resource(name: &str, weight: u32, labels: &[(&str, &str)]) -> Resource {
        Resource {
            name: name.into(),
            node_type: "CRAWLER".into(),
            weight,
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            holder: None,
            revoking: false,
            created_ms: 0,
            slot: None,
        }
    }

    /// Applies placements as the leader would: one command, whose log position is every new
    /// holder's token.
    fn place(
        state: &mut Assignments,
        candidates: &[Candidate],
        moves: &[(String, Option<NodeId>)],
    ) {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let index = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let placements = moves
            .iter()
            .map(|(name, to)| Placement {
                name: name.clone(),
                to: to.map(|id| {
                    let c = candidates.iter().find(|c| c.node_id == id).unwrap();
                    Holder {
                        node_id: id,
                        addr: c.addr,
                        registration: c.registration,
                        token: FencingToken { term: 9, index },
                        since_ms: 0,
                    }
                }),
            })
            .collect();
        state.apply(&Command::Place(placements)).unwrap();
    }

    fn spread(state: &Assignments, candidates: &[Candidate]) -> u64 {
        let loads = loads(state, candidates);
        loads.values().max().unwrap() - loads.values().min().unwrap()
    }

    #[test]
    fn the_seed_story_five_resources_split_three_two_then_all_move_to_the_survivor() {
        let mut state = Assignments::default();
        for i in 1..=5 {
            state
                .apply(&Command::Add(resource(&format!("r{i}"), 1, &[])))
                .unwrap();
        }
        let two = vec![candidate(1, "CRAWLER", &[]), candidate(2, "CRAWLER", &[])];
        let moves = orphans(&state, &two);
        place(&mut state, &two, &moves);
        assert_eq!(state.loads(), BTreeMap::from([(1, 3), (2, 2)]));
        // Worker 1 dies: its three go to worker 2, in one command.
        let one = vec![two[1].clone()];
        let moves = orphans(&state, &one);
        assert_eq!(moves.len(), 3);
        place(&mut state, &one, &moves);
        assert_eq!(state.loads(), BTreeMap::from([(2, 5)]));
        // Worker 1 comes back (a new registration): nothing moves on its own.
        let back = vec![candidate(1, "CRAWLER", &[]), two[1].clone()];
        assert!(orphans(&state, &back).is_empty(), "assignment is sticky");
        // Asked to, a rebalance moves two, one at a time narrowing the spread.
        let moves = rebalance(&state, &back, None, 1, 10);
        assert_eq!(moves.len(), 2);
        let moves: Vec<_> = moves.into_iter().map(|(n, id)| (n, Some(id))).collect();
        place(&mut state, &back, &moves);
        assert_eq!(state.loads(), BTreeMap::from([(1, 2), (2, 3)]));
    }

    #[test]
    fn work_goes_only_to_serving_services_and_a_drained_one_hands_its_work_off() {
        use crate::machines::assign::state::{Slot, SlotGroup};
        let mut state = Assignments::default();
        for i in 1..=4 {
            state
                .apply(&Command::Add(resource(&format!("r{i}"), 1, &[])))
                .unwrap();
        }
        let mut three: Vec<Candidate> = (1..=3).map(|i| candidate(i, "CRAWLER", &[])).collect();
        // 1 is critical: it is given nothing new; 2 and 3 share the work.
        three[0].serving = false;
        let moves = orphans(&state, &three);
        assert!(moves.iter().all(|(_, to)| *to != Some(1)), "{moves:?}");
        place(&mut state, &three, &moves);
        assert_eq!(state.loads(), BTreeMap::from([(2, 2), (3, 2)]));
        assert!(
            rebalance(&state, &three, None, 0, 10).is_empty(),
            "1 takes none"
        );
        // 3 is drained: its two are meant for the one serving service left, 2 (1 is still
        // critical), at most `limit` at a time; a critical service keeps what it holds.
        three[2].serving = false;
        three[2].draining = true;
        assert_eq!(drains(&state, &three, 1).len(), 1);
        let moves = drains(&state, &three, 10);
        assert_eq!(moves.len(), 2);
        assert!(moves.iter().all(|(_, to)| *to == 2), "{moves:?}");
        // Nobody serving: nothing to hand off to, and it stays where it is.
        let nobody: Vec<Candidate> = three
            .iter()
            .cloned()
            .map(|mut c| {
                c.serving = false;
                c.draining = true;
                c
            })
            .collect();
        assert!(drains(&state, &nobody, 10).is_empty());
        // A slot goes only to a serving standby.
        let group = SlotGroup {
            name: "g".into(),
            node_type: "CRAWLER".into(),
            slots: vec![Slot::default()],
            created_ms: 0,
        };
        assert_eq!(slot_grants(&group, &three), vec![(0, Some(2))]);
    }

    #[test]
    fn free_slots_go_to_the_oldest_standbys() {
        use crate::machines::assign::state::{Slot, SlotGroup};
        let five: Vec<Candidate> = (1..=5).map(|i| candidate(i, "ROBOT", &[])).collect();
        let mut group = SlotGroup {
            name: "g".into(),
            node_type: "ROBOT".into(),
            slots: vec![Slot::default(); 3],
            created_ms: 0,
        };
        // Three free slots: the three oldest registrations (tokens 1, 2, 3) get them.
        let grants = slot_grants(&group, &five);
        assert_eq!(grants, vec![(0, Some(1)), (1, Some(2)), (2, Some(3))]);
        for (slot, node) in grants {
            let c = &five[node.unwrap() as usize - 1];
            group.slots[slot as usize].holder = Some(Holder {
                node_id: c.node_id,
                addr: c.addr,
                registration: c.registration,
                token: FencingToken { term: 1, index: 10 },
                since_ms: 0,
            });
        }
        assert!(
            slot_grants(&group, &five).is_empty(),
            "all held by live services"
        );
        // The holder of slot 1 dies: the oldest standby (4) takes it; 5 stands by.
        let four: Vec<Candidate> = five.iter().filter(|c| c.node_id != 2).cloned().collect();
        assert_eq!(slot_grants(&group, &four), vec![(1, Some(4))]);
        // No standby left: the slot is freed.
        let two: Vec<Candidate> = five
            .iter()
            .filter(|c| c.node_id <= 1 || c.node_id == 3)
            .cloned()
            .collect();
        assert_eq!(slot_grants(&group, &two), vec![(1, None)]);
    }

    #[test]
    fn a_draining_holder_gives_up_its_slot_only_to_a_standby_in_rotation() {
        use crate::machines::assign::state::{Slot, SlotGroup};
        let mut four: Vec<Candidate> = (1..=4).map(|i| candidate(i, "ROBOT", &[])).collect();
        let held_by = |c: &Candidate| Slot {
            holder: Some(Holder {
                node_id: c.node_id,
                addr: c.addr,
                registration: c.registration,
                token: FencingToken { term: 1, index: 10 },
                since_ms: 0,
            }),
            version: 1,
            revoking: false,
        };
        // 1 and 2 hold the two slots; 3 and 4 stand by.
        let mut group = SlotGroup {
            name: "g".into(),
            node_type: "ROBOT".into(),
            slots: vec![held_by(&four[0]), held_by(&four[1])],
            created_ms: 0,
        };
        assert!(slot_drains(&group, &four).is_empty(), "nobody drains");
        for c in &mut four[..2] {
            c.draining = true;
            c.serving = false;
        }
        assert_eq!(slot_drains(&group, &four), vec![0, 1]);
        // One standby is critical: only one slot can go.
        four[3].serving = false;
        assert_eq!(slot_drains(&group, &four), vec![0]);
        // That one is being revoked, and the only standby is meant for it.
        group.slots[0].revoking = true;
        assert!(slot_drains(&group, &four).is_empty());
        // The released slot goes to the standby; the other holder still drains, and no
        // standby is left for it: it keeps its slot.
        let grants = slot_grants(
            &SlotGroup {
                slots: vec![Slot::default(), group.slots[1].clone()],
                ..group.clone()
            },
            &four[1..],
        );
        assert_eq!(grants, vec![(0, Some(3))]);
    }

    #[test]
    fn a_resource_bound_to_a_slot_without_a_holder_is_no_orphan() {
        let mut state = Assignments::default();
        let bound = |name: &str, slot: u32| Resource {
            node_type: "ROBOT".into(),
            slot: Some(("robots".into(), slot)),
            ..resource(name, 1, &[])
        };
        state.apply(&Command::Add(bound("bot-0", 0))).unwrap();
        state.apply(&Command::Add(bound("bot-1", 1))).unwrap();
        // The holder of slot 0 is a live ROBOT, eligible by type: it must not get bot-1.
        let robots = vec![candidate(1, "ROBOT", &[])];
        assert!(
            orphans(&state, &robots).is_empty(),
            "{:?}",
            orphans(&state, &robots)
        );
    }

    #[test]
    fn labels_and_types_decide_who_is_eligible() {
        let mut state = Assignments::default();
        state
            .apply(&Command::Add(resource("gpu-job", 1, &[("gpu", "true")])))
            .unwrap();
        let c = vec![
            candidate(1, "CRAWLER", &[]),
            candidate(2, "OTHER", &[("gpu", "true")]),
        ];
        assert!(orphans(&state, &c).is_empty(), "nobody eligible: it waits");
        let c = vec![c[0].clone(), candidate(3, "CRAWLER", &[("gpu", "true")])];
        assert_eq!(orphans(&state, &c), vec![("gpu-job".into(), Some(3))]);
        assert_eq!(
            labels_of(r#"{"gpu": true, "zone": "b", "n": 3}"#),
            BTreeMap::from([
                ("gpu".into(), "true".into()),
                ("n".into(), "3".into()),
                ("zone".into(), "b".into())
            ])
        );
        assert!(labels_of("not json").is_empty());
    }

    #[test]
    fn least_load_keeps_the_spread_within_the_largest_weight_and_rebalance_is_bounded() {
        let mut state = Assignments::default();
        let weights = [5, 1, 3, 2, 8, 1, 1, 4, 2, 6, 3, 1];
        for (i, w) in weights.iter().enumerate() {
            state
                .apply(&Command::Add(resource(&format!("r{i:02}"), *w, &[])))
                .unwrap();
        }
        let three: Vec<Candidate> = (1..=3).map(|i| candidate(i, "CRAWLER", &[])).collect();
        let moves = orphans(&state, &three);
        place(&mut state, &three, &moves);
        assert!(spread(&state, &three) <= 8, "{:?}", state.loads());
        // A fourth worker joins: at most `limit` moves, each narrowing the spread.
        let four: Vec<Candidate> = (1..=4).map(|i| candidate(i, "CRAWLER", &[])).collect();
        let before = spread(&state, &four);
        let moves = rebalance(&state, &four, Some("CRAWLER"), 1, 2);
        assert!(moves.len() <= 2 && !moves.is_empty());
        let moves: Vec<_> = moves.into_iter().map(|(n, id)| (n, Some(id))).collect();
        place(&mut state, &four, &moves);
        assert!(spread(&state, &four) < before);
        // Unbounded, it settles within the largest weight.
        let moves = rebalance(&state, &four, None, 0, 100);
        let moves: Vec<_> = moves.into_iter().map(|(n, id)| (n, Some(id))).collect();
        place(&mut state, &four, &moves);
        assert!(spread(&state, &four) <= 8, "{:?}", state.loads());
    }
}
