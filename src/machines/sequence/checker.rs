//! The sequence issuer's workload and invariants for the simulations.
