//! The config store under the seeded simulation: beacons composed as production composes
//! them, stored through the real storage code, under drawn faults (loss, delay, one-way
//! cuts, splits, rings, bridges, crashes with torn writes, pauses), with clients
//! incrementing counters by compare-and-set. The invariants are the checker's
//! (`machines/configs/checker.rs`): a compare-and-set on an old revision changes nothing,
//! revisions only grow, no acknowledged write is lost, and the beacons converge.
//!
//! `BEACON_SIM_SEEDS=N` runs N seeds; `BEACON_SIM_SEED=S` one, with its trace.

use beacon::consensus::{Leader, Service};
use beacon::machines::configs::checker::Clients;
use beacon::machines::configs::{ConfigService, ConfigStore};
use beacon::machines::registry::{IdRange, Registry, RegistryService};
use beacon::machines::{Part, Services, State};
use beacon_testkit::rng::SimRng as Rng;
use beacon_testkit::sim::{self, Faults, Setup};

use super::support;

fn registry_parts() -> (Registry, RegistryService) {
    support::simulated_registry(IdRange { first: 1, last: 8 }, 1_000, 1_000)
}

fn fresh() -> (State, Services) {
    let (mut state, mut services) = support::simulated(IdRange { first: 1, last: 8 }, 1_000, 1_000);
    state.configs = ConfigStore::new(3);
    services.configs = ConfigService::default();
    (state, services)
}

fn setup(rng: &mut Rng) -> Setup {
    Setup::drawn(rng, |rng| 2 + rng.below(3) as usize)
}

#[test]
fn compare_and_set_loses_no_update_under_seeded_faults() {
    let totals = sim::run_workload(
        300,
        "configs_sim",
        fresh,
        |rng| {
            let setup = setup(rng);
            let workload: Clients = Clients::new(setup.clients);
            (setup, workload)
        },
        |sim| {
            [
                sim.workload.increments,
                sim.workload.conflicts,
                sim.core.stats.snapshots,
            ]
        },
    );
    let sum = totals.sums;
    println!(
        "{} seeds: {} increments acknowledged, {} compare-and-set conflicts, {} snapshots",
        totals.seeds, sum[0], sum[1], sum[2]
    );
    if totals.seeds > 1 {
        assert!(sum[0] > totals.seeds, "increments went through");
        assert!(
            sum[1] > 0 && sum[2] > 0,
            "clients conflicted and snapshots were taken"
        );
    }
}

/// A service that drops a write's checks (a compare-and-set that always sets): the
/// invariants must catch two clients both incrementing from the same value.
mod careless {
    use super::*;
    use beacon::machines::configs::Request as ConfigRequest;
    use beacon::sim::{Broken, Fault, OutcomeOf};

    /// Drops a write's checks: a compare-and-set that ignores its revision.
    #[derive(Debug, Clone, Default)]
    pub struct NoChecks;

    pub type Careless = Broken<ConfigService, NoChecks>;

    impl<S: Part<ConfigStore>> Fault<S, ConfigService> for NoChecks {
        fn request(
            &mut self,
            service: &mut ConfigService,
            leader: &mut Leader<'_, S>,
            request: ConfigRequest,
        ) -> OutcomeOf<S, ConfigService> {
            let request = match request {
                ConfigRequest::Write { ops, wall_ms, .. } => ConfigRequest::Write {
                    checks: Vec::new(),
                    ops,
                    wall_ms,
                },
                other => other,
            };
            Service::<S>::request(service, leader, request)
        }
    }

    beacon::compose! {
        registry: Registry => Registry, RegistryService;
        configs: Configs => ConfigStore, Careless;
    }

    pub fn fresh() -> (State, Services) {
        let (registry, registry_service) = registry_parts();
        (
            State {
                registry,
                configs: ConfigStore::new(3),
            },
            Services {
                registry: registry_service,
                configs: Broken {
                    service: ConfigService::default(),
                    fault: NoChecks,
                },
            },
        )
    }
}

#[test]
fn a_compare_and_set_that_ignores_its_revision_is_caught() {
    let caught = (0..40u64).any(|seed| {
        let mut rng = Rng::new(seed);
        let setup = Setup {
            faults: Faults::none(),
            clients: 4,
            ..setup(&mut rng)
        };
        let workload = Clients::<careless::Careless>::new(setup.clients);
        let mut sim = sim::Sim::<careless::State, careless::Services, _>::new(
            seed,
            setup,
            careless::fresh,
            workload,
            false,
        );
        sim.run()
            .is_err_and(|why| why.contains("an increment was lost"))
    });
    assert!(caught, "a lost update went unnoticed in 40 seeds");
}
