//! What work assignment shows on `/metrics`: resources by node type and state (held,
//! unassigned, revoking) and each slot group's held and free slots, so work that runs
//! nowhere can be alerted on.

use std::collections::BTreeMap;

use super::state::Assignments;
use crate::machines::{GaugeSample, Measured, Part};

impl<S: Part<Assignments>> Measured<S> for Assignments {
    fn gauges(state: &S, _section: &Self::Section, _wall_ms: u64, out: &mut Vec<GaugeSample>) {
        let assignments: &Assignments = state.part();
        let mut by_type: BTreeMap<&str, [u64; 3]> = BTreeMap::new();
        for r in assignments.iter() {
            let counts = by_type.entry(r.node_type.as_str()).or_default();
            match (&r.holder, r.revoking) {
                (None, _) => counts[1] += 1,
                (Some(_), true) => counts[2] += 1,
                (Some(_), false) => counts[0] += 1,
            }
        }
        for (node_type, counts) in by_type {
            for (state, n) in ["held", "unassigned", "revoking"].into_iter().zip(counts) {
                out.push(GaugeSample {
                    name: "resources",
                    help: "Resources by node type and state (unassigned: no eligible live service runs it)",
                    labels: vec![("node_type", node_type.to_owned()), ("state", state.into())],
                    value: n as f64,
                });
            }
        }
        for g in assignments.groups() {
            let held = g.slots.iter().filter(|s| s.holder.is_some()).count();
            for (state, n) in [("held", held), ("free", g.slots.len() - held)] {
                out.push(GaugeSample {
                    name: "slots",
                    help: "Slots of a slot group by state (free: no holder)",
                    labels: vec![("group", g.name.clone()), ("state", state.into())],
                    value: n as f64,
                });
            }
        }
    }
}
