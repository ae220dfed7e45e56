//! Work assignment under the seeded simulation: beacons composed as production composes them,
//! stored through the real storage code, under drawn faults (loss, delay, one-way cuts,
//! splits, rings, bridges, crashes with torn writes, pauses), with workers registering,
//! reporting, dying and coming back, and an admin adding, deleting and rebalancing
//! resources and a slot group, draining workers and letting their revoked slots go. The
//! invariants are the checker's (`machines/assign/checker.rs`): a resource or a slot changes
//! holder only once its previous holder's registration has ended or it was being revoked,
//! fencing tokens of successive holders and slot versions rise, and no service holds two
//! slots of a group.
//!
//! `BEACON_SIM_SEEDS=N` runs N seeds; `BEACON_SIM_SEED=S` one, with its trace.

use beacon::machines::assign::checker::Clients;
use beacon::machines::assign::{AssignLimits, AssignService, Assignments};
use beacon::machines::registry::{IdRange, Registry, RegistryService};
use beacon::machines::{Services, State};
use beacon_testkit::rng::SimRng as Rng;
use beacon_testkit::sim::{self, Setup};

use super::support;

fn fresh() -> (State, Services) {
    let (state, mut services) = support::simulated(IdRange { first: 1, last: 16 }, 1_000, 1_000);
    services.assign = AssignService::new(AssignLimits {
        max_moves: 3,
        ..AssignLimits::default()
    });
    (state, services)
}

#[test]
fn one_owner_at_a_time_and_rising_tokens_under_seeded_faults() {
    let totals = sim::run_workload(
        300,
        "assign_sim",
        fresh,
        |rng| {
            let workload: Clients = Clients::new(2 + rng.below(4) as usize);
            (Setup::drawn(rng, |_| workload.clients()), workload)
        },
        |sim| {
            [
                sim.workload.moves,
                sim.workload.registrations,
                sim.workload.admin_writes,
                sim.core.stats.snapshots,
                sim.workload.slot_moves,
                sim.workload.drains,
                sim.workload.slot_releases,
            ]
        },
    );
    let sum = totals.sums;
    println!(
        "{} seeds: {} resource and {} slot holder changes seen, {} registrations, {} admin writes, {} snapshots, {} drains, {} revoked slots let go",
        totals.seeds, sum[0], sum[4], sum[1], sum[2], sum[3], sum[5], sum[6]
    );
    if totals.seeds > 1 {
        assert!(
            sum.iter().all(|&n| n > 0),
            "every kind of event happened: {sum:?}"
        );
    }
}

/// A service whose rebalance moves resources at once instead of revoking them first: the
/// invariants must catch it (the old holder's registration is live while the new one runs).
mod eager {
    use super::*;
    use beacon::consensus::{Leader, Service};
    use beacon::machines::Part;
    use beacon::machines::assign::placement::{self, Candidate};
    use beacon::machines::assign::{
        Command as AssignCommand, Holder, Placement, Request as AssignRequest,
    };
    use beacon::machines::registry::FencingToken;
    use beacon::sim::{Broken, Fault, OutcomeOf};

    /// Moves resources at once on a rebalance, instead of revoking them first.
    #[derive(Debug, Clone, Default)]
    pub struct Moves;

    pub type Eager = Broken<AssignService, Moves>;

    impl<S: Part<Registry> + Part<Assignments>> Fault<S, AssignService> for Moves {
        fn request(
            &mut self,
            service: &mut AssignService,
            leader: &mut Leader<'_, S>,
            request: AssignRequest,
        ) -> OutcomeOf<S, AssignService> {
            if let AssignRequest::Rebalance(t) = &request {
                let registry: &Registry = leader.state().part();
                let candidates: Vec<Candidate> = registry.nodes().map(Candidate::of).collect();
                let assignments: &Assignments = leader.state().part();
                let token = FencingToken {
                    term: leader.term(),
                    index: leader.next_index(),
                };
                let placements: Vec<Placement> =
                    placement::rebalance(assignments, &candidates, t.as_deref(), 0, 3)
                        .into_iter()
                        .map(|(name, to)| {
                            let c = candidates.iter().find(|c| c.node_id == to).unwrap();
                            Placement {
                                name,
                                to: Some(Holder {
                                    node_id: to,
                                    addr: c.addr,
                                    registration: c.registration,
                                    token,
                                    since_ms: 0,
                                }),
                            }
                        })
                        .collect();
                if !placements.is_empty() {
                    leader.append(<S as Part<Assignments>>::wrap(AssignCommand::Place(
                        placements,
                    )));
                }
            }
            Service::<S>::request(service, leader, request)
        }
    }

    beacon::compose! {
        registry: Registry => Registry, RegistryService;
        assign: Assign => Assignments, Eager;
    }

    pub fn fresh() -> (State, Services) {
        let (state, services) = super::fresh();
        (
            State {
                registry: state.registry,
                assign: state.assign,
            },
            Services {
                registry: services.registry,
                assign: Broken {
                    service: services.assign,
                    fault: Moves,
                },
            },
        )
    }
}

#[test]
fn moving_a_resource_before_its_holder_lets_go_is_caught() {
    let caught = sim::count_caught(150, "moving before the release", |seed| {
        let mut rng = Rng::new(seed);
        let workload = Clients::<eager::Eager>::new(2 + rng.below(4) as usize);
        let setup = Setup::calm(workload.clients());
        sim::Sim::<eager::State, eager::Services, Clients<eager::Eager>>::new(
            seed,
            setup,
            eager::fresh,
            workload,
            false,
        )
        .run()
    });
    assert!(
        caught > 0,
        "the invariants must catch a move before the holder lets go"
    );
}
