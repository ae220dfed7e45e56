//! What the registry shows on `/metrics`: live registrations by node type (every configured
//! type, 0 when it has none, so that an alert on a type going to zero fires) and the node-ID
//! allocator (in use, free, in quarantine), as the leader sees them.

use std::collections::BTreeMap;

use super::config::RegistrySettings;
use super::service::{NodeFilter, counts_by_type};
use super::state::Registry;
use crate::machines::{GaugeSample, Measured, Part};

impl<S: Part<Registry>> Measured<S> for Registry {
    fn gauges(state: &S, section: &RegistrySettings, _wall_ms: u64, out: &mut Vec<GaugeSample>) {
        let registry: &Registry = state.part();
        // Counted by reference: a scrape copies each type name once, not each registration's.
        let mut by_type: BTreeMap<&str, u64> = section
            .subscriptions
            .keys()
            .map(|t| (t.as_str(), 0))
            .collect();
        let counts = counts_by_type(registry, &NodeFilter::default());
        for (t, (live, _)) in &counts {
            if *live > 0 {
                by_type.insert(t.as_str(), *live as u64);
            }
        }
        for (node_type, n) in by_type {
            out.push(GaugeSample {
                name: "registrations",
                help: "Live registrations by node type (leader's view)",
                labels: vec![("node_type", node_type.to_owned())],
                value: n as f64,
            });
        }
        let range = registry.range();
        let in_use = registry.len() as u64;
        let quarantined = registry.quarantined().count() as u64;
        let free = range.len().saturating_sub(in_use + quarantined);
        for (name, help, value) in [
            ("ids_in_use", "Node IDs held by live registrations", in_use),
            ("ids_free", "Node IDs that can be handed out now", free),
            (
                "ids_quarantined",
                "Node IDs of ended registrations waiting out id_reuse_delay_ms",
                quarantined,
            ),
        ] {
            out.push(GaugeSample {
                name,
                help,
                labels: Vec::new(),
                value: value as f64,
            });
        }
    }
}
