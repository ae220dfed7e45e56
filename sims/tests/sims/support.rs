//! What every simulation starts from: the registry its services register with, and the
//! other machines empty.

/// A registry replaying node IDs `ids` (an ended one reused after `reuse_delay` ms) and its
/// service with leases of `lease_ms`: what every simulation's services register with.
pub fn simulated_registry(
    ids: beacon::machines::registry::IdRange,
    reuse_delay: beacon::time::Millis,
    lease_ms: u64,
) -> (
    beacon::machines::registry::Registry,
    beacon::machines::registry::RegistryService,
) {
    use beacon::machines::registry::{Registry, RegistryConfig, RegistryService};
    (
        Registry::for_replay(ids, reuse_delay),
        RegistryService::new(RegistryConfig {
            lease_ms,
            subscriptions: Default::default(),
            damping: Default::default(),
            // A table of a few leases still takes several ticks to install.
            table_part: 3,
            routine_waits: true,
        }),
    )
}

/// What a simulation of the composed machines starts from: the registry of
/// [`simulated_registry`], every other machine empty with its defaults. A simulation sets
/// its own machine's part.
pub fn simulated(
    ids: beacon::machines::registry::IdRange,
    reuse_delay: beacon::time::Millis,
    lease_ms: u64,
) -> (beacon::machines::State, beacon::machines::Services) {
    use beacon::machines::{Services, State};
    let (registry, service) = simulated_registry(ids, reuse_delay, lease_ms);
    (
        State {
            registry,
            sequence: Default::default(),
            assign: Default::default(),
            tasks: Default::default(),
            configs: Default::default(),
        },
        Services {
            registry: service,
            sequence: Default::default(),
            assign: Default::default(),
            tasks: Default::default(),
            configs: Default::default(),
        },
    )
}
