//! An example machine, used only in tests: a replicated counter. It is here to show what a
//! new machine takes: this folder (state, service, wire part, workload and invariants) and
//! one line in a `compose!` list; no file of the consensus core, the storage or the
//! simulation harness changes.

pub mod checker;
pub mod service;
pub mod state;
pub mod wire;

pub use service::CounterService;
pub use state::Counter;
