//! The replicated machines, and the list that composes them into what beacon replicates.
//!
//! A machine is one folder: its state and commands (`state.rs`, a [`Machine`]), its
//! leader-side service (`service.rs`, a [`Service`]), its wire part (`wire.rs`: its own proto
//! file, its command codes, its part of log entries, snapshots and heartbeats), its server
//! handlers (`rpc.rs`), its client API (`client/`), its nebcli commands (`cli/`, a
//! [`crate::cli::Commands`] set) and its workload and invariants for the simulations
//! (`checker.rs`, a [`crate::sim::Workload`]). The consensus core names no machine: it is
//! generic over the composite that [`compose!`](crate::compose) builds from one line per machine.
//!
//! Ranges each machine owns, so that their parts merge into the shared messages:
//!
//! | machine | command codes | `LogEntry` | `Snapshot` | `Election` | `Hello` | error codes |
//! |---|---|---|---|---|---|---|
//! | core | 1-2, 113-114, 301-302 | 1-2, 8 | 1-2 | 1, 5-20 | 1-5, 8-9 | 1-11, 16-18, 20-21 |
//! | registry | 101-118, 303-308 | 3-7 | 3-5 | 2-4 | 6-7 | 12-15, 19 |
//! | sequence | 401-412 | 20-23 | 20 | - | - | 30-34 |
//! | assign | 501-524 | 30-36 | 30-31 | - | - | 40-47 |
//! | tasks | 601-632 | 40-48 | 40-42 | - | - | 50-57 |
//! | (next) | 701-799 | 50-59 | 50-59 | 50-59 | 20-29 | 60-69 |
//!
//! Adding a machine: its folder, and one line each in the list below, in `build.rs` and
//! [`crate::pb`] (its proto file), in [`rpc`] (its handlers) and in nebcli's command table
//! (`nebcli/src/commands.rs`). `tests/counter/` is a small example, composed in
//! `tests/counter_machine.rs`.

pub mod assign;
pub mod registry;
pub mod rpc;
pub mod sequence;
pub mod tasks;

pub use crate::consensus::{Machine, Service};

use crate::config::Config;

/// A composite state that holds machine `M`: a service of `M` reads its part and appends its
/// commands through the composite, so the same service serves any composite holding `M`.
pub trait Part<M: Machine>: Machine {
    fn part(&self) -> &M;
    fn wrap(command: M::Command) -> Self::Command;
    /// `M`'s change, if `change` is one.
    fn change(change: &Self::Change) -> Option<&M::Change>;
}

/// A machine alone is a composite of one.
impl<M: Machine> Part<M> for M {
    fn part(&self) -> &M {
        self
    }
    fn wrap(command: M::Command) -> M::Command {
        command
    }
    fn change(change: &M::Change) -> Option<&M::Change> {
        Some(change)
    }
}

/// A composite service over state `S` that routes to service `V`: requests to `V` go in
/// wrapped, and `V`'s answers come out unwrapped (`None` for another machine's, a bug).
pub trait Routes<S: Machine, V: Service<S>>: Service<S> {
    fn service(&self) -> &V;
    fn request(request: V::Request) -> Self::Request;
    fn response(response: Self::Response) -> Option<V::Response>;
    fn error(error: Self::Error) -> Option<V::Error>;
}

/// Built from the beacon's configuration: a machine's empty state, or its service.
pub trait Configured {
    fn configured(config: &Config) -> Self;
}

/// Composes machines and their services into one replicated state and one service, in the
/// calling module: `State`, `Command`, `Change`, `Snapshot`, `ApplyError` (the [`Machine`]),
/// `Services`, `Request`, `Response`, `Error`, `Waiting` (the [`Service`]), and their wire
/// codec. One line per machine: `field: Variant => MachineType, ServiceType;`.
#[macro_export]
macro_rules! compose {
    ($( $field:ident : $Variant:ident => $M:ty, $V:ty; )+) => {
        /// The replicated state: every machine's.
        #[derive(Debug, Clone)]
        pub struct State {
            $( pub $field: $M, )+
        }

        /// A command of one of the machines.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Command {
            $( $Variant(<$M as $crate::consensus::Machine>::Command), )+
        }

        /// What a command changed.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Change {
            $( $Variant(<$M as $crate::consensus::Machine>::Change), )+
        }

        /// Every machine's snapshot.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Snapshot {
            $( pub $field: <$M as $crate::consensus::Machine>::Snapshot, )+
        }

        /// A command that did not fit its machine.
        #[derive(Debug, Clone, PartialEq)]
        pub enum ApplyError {
            $( $Variant(<$M as $crate::consensus::Machine>::ApplyError), )+
        }

        impl std::fmt::Display for ApplyError {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self {
                    $( ApplyError::$Variant(e) => std::fmt::Display::fmt(e, f), )+
                }
            }
        }

        impl std::error::Error for ApplyError {}

        impl $crate::consensus::Machine for State {
            type Command = Command;
            type Change = Change;
            type Snapshot = Snapshot;
            type ApplyError = ApplyError;

            fn apply(
                &mut self,
                command: &Command,
                now: $crate::time::Millis,
            ) -> Result<Option<Change>, ApplyError> {
                match command {
                    $( Command::$Variant(c) =>
                        <$M as $crate::consensus::Machine>::apply(&mut self.$field, c, now)
                            .map(|change| change.map(Change::$Variant))
                            .map_err(ApplyError::$Variant), )+
                }
            }

            fn snapshot(&self, now: $crate::time::Millis) -> Snapshot {
                Snapshot {
                    $( $field: <$M as $crate::consensus::Machine>::snapshot(&self.$field, now), )+
                }
            }

            fn restore(&mut self, snapshot: Snapshot, now: $crate::time::Millis) {
                $( <$M as $crate::consensus::Machine>::restore(&mut self.$field, snapshot.$field, now); )+
            }

            fn records(&self) -> usize {
                0 $( + <$M as $crate::consensus::Machine>::records(&self.$field) )+
            }

            fn summary(&self) -> String {
                let parts: Vec<String> = vec![
                    $( <$M as $crate::consensus::Machine>::summary(&self.$field), )+
                ];
                parts.join(", ")
            }

            fn restored(&mut self) -> Result<(), String> {
                $( <$M as $crate::consensus::Machine>::restored(&mut self.$field)?; )+
                Ok(())
            }
        }

        $(
            impl $crate::machines::Part<$M> for State {
                fn part(&self) -> &$M {
                    &self.$field
                }
                fn wrap(command: <$M as $crate::consensus::Machine>::Command) -> Command {
                    Command::$Variant(command)
                }
                fn change(change: &Change) -> Option<&<$M as $crate::consensus::Machine>::Change> {
                    match change {
                        Change::$Variant(c) => Some(c),
                        #[allow(unreachable_patterns)]
                        _ => None,
                    }
                }
            }
        )+

        impl $crate::wire::MachineWire for State {
            fn encode_command(command: &Command, buf: &mut Vec<u8>) {
                match command {
                    $( Command::$Variant(c) => <$M as $crate::wire::MachineWire>::encode_command(c, buf), )+
                }
            }

            fn decode_command(entry: &[u8]) -> Result<Option<Command>, $crate::wire::WireError> {
                $(
                    if let Some(c) = <$M as $crate::wire::MachineWire>::decode_command(entry)? {
                        return Ok(Some(Command::$Variant(c)));
                    }
                )+
                Ok(None)
            }

            fn encode_snapshot(snapshot: &Snapshot, buf: &mut Vec<u8>) {
                $( <$M as $crate::wire::MachineWire>::encode_snapshot(&snapshot.$field, buf); )+
            }

            fn decode_snapshot(bytes: &[u8]) -> Result<Snapshot, $crate::wire::WireError> {
                Ok(Snapshot {
                    $( $field: <$M as $crate::wire::MachineWire>::decode_snapshot(bytes)?, )+
                })
            }

            fn annotate(&self, commands: &[&Command], buf: &mut Vec<u8>) {
                $(
                    let mine: Vec<&<$M as $crate::consensus::Machine>::Command> = commands
                        .iter()
                        .filter_map(|c| match c {
                            Command::$Variant(c) => Some(c),
                            #[allow(unreachable_patterns)]
                            _ => None,
                        })
                        .collect();
                    <$M as $crate::wire::MachineWire>::annotate(&self.$field, &mine, buf);
                )+
            }
        }

        /// Every machine's leader-side service.
        #[derive(Debug, Clone)]
        pub struct Services {
            $( pub $field: $V, )+
        }

        /// A request to one of the machines.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Request {
            $( $Variant(<$V as $crate::consensus::Service<State>>::Request), )+
        }

        /// An answer of one of the machines.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Response {
            $( $Variant(<$V as $crate::consensus::Service<State>>::Response), )+
        }

        /// A refusal of one of the machines.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Error {
            $( $Variant(<$V as $crate::consensus::Service<State>>::Error), )+
        }

        impl std::fmt::Display for Error {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self {
                    $( Error::$Variant(e) => std::fmt::Display::fmt(e, f), )+
                }
            }
        }

        impl std::error::Error for Error {}

        /// What a write of one of the machines waits with.
        #[derive(Debug, Clone)]
        pub enum Waiting {
            $( $Variant(<$V as $crate::consensus::Service<State>>::Waiting), )+
        }

        impl $crate::consensus::Service<State> for Services {
            type Request = Request;
            type Response = Response;
            type Error = Error;
            type Waiting = Waiting;

            fn lead(&mut self, state: &State, now: $crate::time::Millis) {
                $( $crate::consensus::Service::<State>::lead(&mut self.$field, state, now); )+
            }

            fn step_down(&mut self) {
                $( $crate::consensus::Service::<State>::step_down(&mut self.$field); )+
            }

            fn request(
                &mut self,
                leader: &mut $crate::consensus::Leader<'_, State>,
                request: Request,
            ) -> $crate::consensus::Outcome<Response, Error, Waiting> {
                match request {
                    $( Request::$Variant(r) =>
                        <$V as $crate::consensus::Service<State>>::request(&mut self.$field, leader, r)
                            .map(Response::$Variant, Error::$Variant, Waiting::$Variant), )+
                }
            }

            fn tick(&mut self, leader: &mut $crate::consensus::Leader<'_, State>) {
                $( $crate::consensus::Service::<State>::tick(&mut self.$field, leader); )+
            }

            fn answer(&self, state: &State, waiting: Waiting) -> Result<Response, Error> {
                match waiting {
                    $( Waiting::$Variant(w) =>
                        <$V as $crate::consensus::Service<State>>::answer(&self.$field, state, w)
                            .map(Response::$Variant)
                            .map_err(Error::$Variant), )+
                }
            }
        }

        $(
            impl $crate::machines::Routes<State, $V> for Services {
                fn service(&self) -> &$V {
                    &self.$field
                }
                fn request(request: <$V as $crate::consensus::Service<State>>::Request) -> Request {
                    Request::$Variant(request)
                }
                fn response(response: Response) -> Option<<$V as $crate::consensus::Service<State>>::Response> {
                    match response {
                        Response::$Variant(r) => Some(r),
                        #[allow(unreachable_patterns)]
                        _ => None,
                    }
                }
                fn error(error: Error) -> Option<<$V as $crate::consensus::Service<State>>::Error> {
                    match error {
                        Error::$Variant(e) => Some(e),
                        #[allow(unreachable_patterns)]
                        _ => None,
                    }
                }
            }
        )+

        impl $crate::machines::Configured for State {
            fn configured(config: &$crate::config::Config) -> State {
                State {
                    $( $field: <$M as $crate::machines::Configured>::configured(config), )+
                }
            }
        }

        impl $crate::machines::Configured for Services {
            fn configured(config: &$crate::config::Config) -> Services {
                Services {
                    $( $field: <$V as $crate::machines::Configured>::configured(config), )+
                }
            }
        }
    };
}

// The machines beacon replicates: one line per machine.
compose! {
    registry: Registry => registry::Registry, registry::RegistryService;
    sequence: Sequence => sequence::Sequences, sequence::SequenceService;
    assign: Assign => assign::Assignments, assign::AssignService;
    tasks: Tasks => tasks::Tasks, tasks::TaskService;
}

/// A beacon's replica of every machine.
pub type Replica = crate::consensus::Replica<State, Services>;

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::assign::{AssignCmd, AssignErrorCode};
    use super::registry::{RegistryCmd, RegistryErrorCode};
    use super::sequence::{SequenceCmd, SequenceErrorCode};
    use super::tasks::{TasksCmd, TasksErrorCode};
    use crate::wire::{Cmd, Code, ErrorCode};

    /// Every request code and its response (`cmd + 1`) belongs to one owner.
    fn claim(taken: &mut BTreeSet<u32>, owner: &str, code: u32) {
        assert!(taken.insert(code), "{owner}: code {code} is taken twice");
        assert!(
            taken.insert(code + 1),
            "{owner}: response code {} is taken twice",
            code + 1
        );
    }

    #[test]
    fn the_machines_command_and_error_codes_do_not_overlap() {
        let mut cmds = BTreeSet::new();
        for c in Cmd::ALL {
            claim(&mut cmds, "core", c.code());
        }
        for c in RegistryCmd::ALL {
            claim(&mut cmds, "registry", c.code());
        }
        for c in SequenceCmd::ALL {
            claim(&mut cmds, "sequence", c.code());
        }
        for c in AssignCmd::ALL {
            claim(&mut cmds, "assign", c.code());
        }
        for c in TasksCmd::ALL {
            claim(&mut cmds, "tasks", c.code());
        }
        let mut errors = BTreeSet::new();
        for e in ErrorCode::ALL {
            assert!(errors.insert(e as u32), "core error {e:?}");
        }
        for e in RegistryErrorCode::ALL {
            assert!(
                errors.insert(u32::from(e)),
                "registry error {e:?} is a core code"
            );
        }
        for e in SequenceErrorCode::ALL {
            assert!(errors.insert(u32::from(e)), "sequence error {e:?} is taken");
        }
        for e in AssignErrorCode::ALL {
            assert!(errors.insert(u32::from(e)), "assign error {e:?} is taken");
        }
        for e in TasksErrorCode::ALL {
            assert!(errors.insert(u32::from(e)), "tasks error {e:?} is taken");
        }
    }
}
