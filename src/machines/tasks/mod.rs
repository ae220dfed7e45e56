//! Task queues: tasks submitted by name, run by live workers, at most one running attempt
//! at a time, none lost when a worker or a leader dies (the seed's ZooKeeper master, built
//! in).
//!
//! * [`state`]: queues, tasks (pending, running, completed, failed, dead, cancelled) and
//!   the workers serving them; each attempt named by a fencing token.
//! * [`service`]: the leader's side: dedupe by name, starting tasks on workers with free
//!   capacity, timeouts with backoff, dead letters, retiring ended workers.
//! * [`wire`]: `proto/tasks.proto`, its codes, its part of log entries and snapshots.
//! * `rpc`: the server's handlers; [`client`]: its calls, [`client::Tasks`] and
//!   [`client::Worker`]; [`cli`]: nebcli's commands.

pub mod checker;
pub mod cli;
pub mod client;
pub mod config;
pub(crate) mod grpc;
mod metrics;
pub(crate) mod rpc;
pub mod service;
pub mod state;
pub mod wire;

pub use service::{Request, Response, TaskError, TaskLimits, TaskService};
pub use state::{After, Command, QueueSpec, Run, Task, TaskState, Tasks, WorkerId, WorkerSpec};
pub use wire::{TasksCmd, TasksErrorCode};

use crate::machines::{Configurable, Configured};

impl Configurable for Tasks {
    type Section = TaskLimits;
}

impl Configured<TaskLimits> for Tasks {
    fn configured(_section: &TaskLimits) -> Tasks {
        Tasks::default()
    }
}

impl Configured<TaskLimits> for TaskService {
    fn configured(section: &TaskLimits) -> TaskService {
        TaskService::new(section.clone())
    }
}
