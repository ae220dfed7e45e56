//! Task queues under the seeded simulation: beacons composed as production composes them,
//! stored through the real storage code, under drawn faults (loss, delay, one-way cuts,
//! splits, rings, bridges, crashes with torn writes, pauses), with a submitter submitting,
//! cancelling and requeueing tasks by a few names, and workers registering, serving,
//! completing and failing tasks, dying mid-task and coming back. The invariants are the
//! checker's (`machines/tasks/checker.rs`): attempts of a task follow one another with
//! rising tokens, a completed task's result never changes, each submission has at most one
//! acknowledged completion, no acknowledged submit is lost, and once healed no task runs
//! on an ended registration.
//!
//! `BEACON_SIM_SEEDS=N` runs N seeds; `BEACON_SIM_SEED=S` one, with its trace.

use beacon::machines::registry::{IdRange, Registry, RegistryService};
use beacon::machines::tasks::checker::Clients;
use beacon::machines::tasks::{TaskLimits, TaskService, Tasks};
use beacon::machines::{Services, State};
use beacon_testkit::rng::SimRng as Rng;
use beacon_testkit::sim::{self, Setup};

use super::support;

fn fresh() -> (State, Services) {
    let (state, mut services) = support::simulated(IdRange { first: 1, last: 16 }, 1_000, 1_000);
    services.tasks = TaskService::new(TaskLimits {
        backoff_base_ms: 100,
        backoff_max_ms: 800,
        ..TaskLimits::default()
    });
    (state, services)
}

#[test]
fn one_attempt_at_a_time_one_result_no_submit_lost_under_seeded_faults() {
    let totals = sim::run_workload(
        300,
        "tasks_sim",
        fresh,
        |rng| {
            let workload: Clients = Clients::new(2 + rng.below(4) as usize);
            (Setup::drawn(rng, |_| workload.clients()), workload)
        },
        |sim| {
            [
                sim.workload.starts,
                sim.workload.completed,
                sim.workload.submits,
                sim.workload.registrations,
                sim.core.stats.snapshots,
            ]
        },
    );
    let sum = totals.sums;
    println!(
        "{} seeds: {} attempts started, {} completions acknowledged, {} submits, {} registrations, {} snapshots",
        totals.seeds, sum[0], sum[1], sum[2], sum[3], sum[4]
    );
    if totals.seeds > 1 {
        assert!(sum[0] > 0 && sum[1] > 0 && sum[2] > 0 && sum[3] > 0);
    }
}

/// A service that restarts a retried task under its previous attempt's token (less one):
/// the invariants must catch the token going back.
mod stale {
    use super::*;
    use beacon::consensus::{Leader, Service};
    use beacon::machines::Part;
    use beacon::machines::registry::FencingToken;
    use beacon::machines::tasks::Command as TaskCommand;
    use beacon::machines::tasks::state::{Run, TaskStart};
    use beacon::sim::{Broken, Fault};

    /// Restarts a task whose attempt ended under an older token, on a tick.
    #[derive(Debug, Clone, Default)]
    pub struct Restarts;

    pub type Stale = Broken<TaskService, Restarts>;

    impl<S: Part<Registry> + Part<Tasks>> Fault<S, TaskService> for Restarts {
        fn tick(&mut self, service: &mut TaskService, leader: &mut Leader<'_, S>) {
            let tasks: &Tasks = leader.state().part();
            let worker = tasks.workers().next().map(|w| w.id);
            let retried = tasks.queues().flat_map(|q| q.pending()).find_map(|t| {
                let ended = t.ended?;
                (ended.index > 1).then(|| (t.queue.clone(), t.name.clone(), ended))
            });
            if let (Some(worker), Some((queue, name, ended))) = (worker, retried) {
                let token = FencingToken {
                    term: ended.term,
                    index: ended.index - 1,
                };
                leader.append(<S as Part<Tasks>>::wrap(TaskCommand::Start(vec![
                    TaskStart {
                        queue,
                        name,
                        run: Run {
                            worker,
                            token,
                            started_ms: 0,
                        },
                    },
                ])));
            }
            Service::<S>::tick(service, leader)
        }
    }

    beacon::compose! {
        registry: Registry => Registry, RegistryService;
        tasks: Tasks => Tasks, Stale;
    }

    pub fn fresh() -> (State, Services) {
        let (state, services) = super::fresh();
        (
            State {
                registry: state.registry,
                tasks: state.tasks,
            },
            Services {
                registry: services.registry,
                tasks: Broken {
                    service: services.tasks,
                    fault: Restarts,
                },
            },
        )
    }
}

#[test]
fn an_attempt_restarted_under_an_old_token_is_caught() {
    let caught = sim::count_caught(60, "a restart under an old token", |seed| {
        let mut rng = Rng::new(seed);
        let workload = Clients::<stale::Stale>::new(2 + rng.below(4) as usize);
        let setup = Setup::calm(workload.clients());
        sim::Sim::<stale::State, stale::Services, Clients<stale::Stale>>::new(
            seed,
            setup,
            stale::fresh,
            workload,
            false,
        )
        .run()
    });
    assert!(caught > 0, "the invariants must catch a token going back");
}
