//! The sequence issuer under the seeded simulation: beacons composed as production composes
//! them (the registry and the sequence issuer), stored through the real storage code, under
//! drawn faults (loss, delay, one-way cuts, splits, rings, bridges, crashes with torn
//! writes, pauses), with clients taking segments, handing tails back and changing steps.
//! The invariants are the checker's (`machines/sequence/checker.rs`): segments never
//! overlap, and a leader never holds a `max` below an acknowledged segment.
//!
//! `BEACON_SIM_SEEDS=N` runs N seeds; `BEACON_SIM_SEED=S` one, with its trace.

use beacon::consensus::{Leader, Outcome, Service};
use beacon::machines::registry::{IdRange, Registry, RegistryService};
use beacon::machines::sequence::checker::Clients;
use beacon::machines::sequence::{SequenceLimits, SequenceService, Sequences};
use beacon::machines::{Part, Services, State};
use beacon_testkit::rng::SimRng as Rng;
use beacon_testkit::sim::{self, Setup};

use super::support;

fn registry_parts() -> (Registry, RegistryService) {
    support::simulated_registry(IdRange { first: 1, last: 8 }, 1_000, 1_000)
}

fn limits() -> SequenceLimits {
    SequenceLimits {
        default_step: 10,
        max_step: 30,
        max_sequences: 8,
    }
}

fn fresh() -> (State, Services) {
    let (state, mut services) = support::simulated(IdRange { first: 1, last: 8 }, 1_000, 1_000);
    services.sequence = SequenceService::new(limits());
    (state, services)
}

fn setup(rng: &mut Rng) -> Setup {
    Setup::drawn(rng, |rng| 1 + rng.below(4) as usize)
}

#[test]
fn segments_never_overlap_under_seeded_faults() {
    let totals = sim::run_workload(
        400,
        "sequence_sim",
        fresh,
        |rng| {
            let setup = setup(rng);
            let workload: Clients = Clients::new(setup.clients);
            (setup, workload)
        },
        |sim| {
            [
                sim.workload.segments,
                sim.workload.numbers,
                sim.workload.given_back,
                sim.core.stats.snapshots,
            ]
        },
    );
    let sum = totals.sums;
    println!(
        "{} seeds: {} segments ({} numbers) acknowledged, {} tails handed back, {} snapshots",
        totals.seeds, sum[0], sum[1], sum[2], sum[3]
    );
    if totals.seeds > 1 {
        assert!(sum[0] > totals.seeds, "segments were handed out");
        assert!(
            sum[2] > 0 && sum[3] > 0,
            "tails came back and snapshots were taken"
        );
    }
}

/// A service that answers a segment as soon as it is appended, not once committed. The
/// core holds such an answer, read off a state holding entries not yet committed, until
/// they are (`Replica::answer_from_state`); without that hold the invariant caught it in
/// most seeds (a segment answered by a leader that is then deposed is handed out again by
/// the next one).
mod hasty {
    use super::*;
    use beacon::sim::{Broken, Fault, OutcomeOf};

    /// Answers a write once appended, not once committed.
    #[derive(Debug, Clone, Default)]
    pub struct Early;

    pub type Hasty = Broken<SequenceService, Early>;

    impl<S: Part<Sequences>> Fault<S, SequenceService> for Early {
        fn request(
            &mut self,
            service: &mut SequenceService,
            leader: &mut Leader<'_, S>,
            request: <SequenceService as Service<S>>::Request,
        ) -> OutcomeOf<S, SequenceService> {
            match Service::<S>::request(service, leader, request) {
                Outcome::WhenCommitted { waiting, .. } => {
                    Outcome::Now(Service::<S>::answer(service, leader.state(), waiting))
                }
                other => other,
            }
        }
    }

    beacon::compose! {
        registry: Registry => Registry, RegistryService;
        sequence: Sequence => Sequences, Hasty;
    }

    pub fn fresh() -> (State, Services) {
        let (registry, registry_service) = registry_parts();
        (
            State {
                registry,
                sequence: Sequences::default(),
            },
            Services {
                registry: registry_service,
                sequence: Broken {
                    service: SequenceService::new(limits()),
                    fault: Early,
                },
            },
        )
    }
}

#[test]
fn an_answer_given_before_the_commit_is_held_by_the_core() {
    let seeds = 150;
    let mut failed = Vec::new();
    for seed in 0..seeds {
        let mut rng = Rng::new(seed);
        let setup = setup(&mut rng);
        let workload = Clients::<hasty::Hasty>::new(setup.clients);
        let mut sim = sim::Sim::<hasty::State, hasty::Services, Clients<hasty::Hasty>>::new(
            seed,
            setup,
            hasty::fresh,
            workload,
            false,
        );
        if let Err(why) = sim.run() {
            failed.push((seed, why));
        }
    }
    assert!(
        failed.is_empty(),
        "a hasty answer left before its commit in {} of {seeds} seeds; first: {:?}",
        failed.len(),
        failed.first()
    );
}
