//! A new machine takes its folder and one line: the replicated counter of `counter/` (beside
//! this file) is composed with the node-ID registry below, stored through the real storage
//! code, and run through the simulation harness under the same faults as the registry, with its own
//! invariants. Nothing in the consensus core, the storage or the harness names it.

#[path = "counter/mod.rs"]
mod counter;

use beacon::machines::registry::{IdRange, Registry, RegistryService};
use beacon_testkit::sim::{self, Setup};

// The machines of this test's beacons: one line per machine.
beacon::compose! {
    registry: Registry => Registry, RegistryService;
    counter: Counter => counter::Counter, counter::CounterService;
}

use super::support;

fn fresh() -> (State, Services) {
    let (registry, service) =
        support::simulated_registry(IdRange { first: 1, last: 8 }, 1_000, 1_000);
    (
        State {
            registry,
            counter: counter::Counter::default(),
        },
        Services {
            registry: service,
            counter: counter::CounterService,
        },
    )
}

#[test]
fn the_counter_keeps_its_invariants_under_seeded_faults() {
    let totals = sim::run_workload(
        300,
        "counter_machine",
        fresh,
        |rng| {
            let setup = Setup::drawn(rng, |rng| 1 + rng.below(3) as usize);
            let workload = counter::checker::Clients::new(setup.clients);
            (setup, workload)
        },
        |sim| {
            [
                sim.workload.adds,
                sim.workload.reads,
                sim.core.stats.snapshots,
            ]
        },
    );
    let [adds, reads, snapshots] = totals.sums;
    println!(
        "{} seeds: {adds} adds and {reads} reads acknowledged, {snapshots} snapshots",
        totals.seeds
    );
    if totals.seeds > 1 {
        assert!(adds > totals.seeds && reads > 0 && snapshots > 0);
    }
}

/// The counter's entries and snapshots ride in the same log and snapshot as the registry's,
/// each machine reading its own fields back.
#[test]
fn both_machines_parts_survive_the_storage_round_trip() {
    use beacon::consensus::{Entry, Payload, Position, Snapshot, Store};
    use beacon::machines::registry::{self, NodeRecord};
    use std::net::SocketAddr;

    let mut disk = sim::Disk::<State>::default();
    disk.open().unwrap();
    let record = NodeRecord {
        owner: "".into(),
        health: None,
        node_id: 3,
        node_type: "LOGIC".into(),
        addr: SocketAddr::from(([10, 0, 0, 1], 1)),
        access_addr: None,
        worker_num: 1,
        metadata: "".into(),
        registered_ms: 0,
        term: 1,
        index: 1,
    };
    let entries = vec![
        Entry {
            index: 1,
            term: 1,
            payload: Payload::Command(Command::Registry(Box::new(registry::Command::Register(
                record.into(),
            )))),
        },
        Entry {
            index: 2,
            term: 1,
            payload: Payload::Command(Command::Counter(Box::new(counter::state::Add(5)))),
        },
    ];
    disk.store(&Store {
        snapshot: None,
        entries: entries.clone(),
        commit: 0,
    })
    .unwrap();
    let restored = disk.open().unwrap();
    assert_eq!(restored.entries, entries);
    let mut state = fresh().0;
    let snapshot = Snapshot {
        members: None,
        position: Position { index: 2, term: 1 },
        state: {
            for e in &entries {
                if let Payload::Command(c) = &e.payload {
                    beacon::consensus::Machine::apply(&mut state, c, 0).unwrap();
                }
            }
            beacon::consensus::Machine::snapshot(&state, 0)
        },
    };
    disk.install(&snapshot).unwrap();
    let restored = disk.open().unwrap();
    let got = restored.snapshot.unwrap();
    assert_eq!(got.state.counter, 5);
    assert_eq!(got.state.registry.nodes.len(), 1);
}
