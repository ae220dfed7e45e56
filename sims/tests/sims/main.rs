//! The simulations, one module per machine (and the election alone): `cargo test -p
//! beacon-sims` runs them all; `BEACON_SIM_SEEDS=N` runs N seeds of each seeded case, and
//! `BEACON_SIM_SEED=S cargo test -p beacon-sims --test sims registry_sim::` replays seed S of
//! one machine's, with its trace.

mod support;

mod assign_sim;
mod configs_sim;
mod counter_machine;
mod election_sim;
mod registry_sim;
mod sequence_sim;
mod tasks_sim;
