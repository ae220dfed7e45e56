//! The simulations live in `tests/sims/`, one test binary with a module per machine: whole
//! replicas of three to five beacons stepped by the testkit's harness (time and randomness
//! passed in), under seeded faults, each machine held to its invariants. A package of their
//! own so that they are built optimized while the rest of the tests are not.
