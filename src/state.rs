//! The replicated state machine: everything the beacons of a cluster agree on, changed only by
//! typed commands applied in log order.
//!
//! The log ([`crate::replication`]) orders [`Command`]s; every beacon applies them one by one
//! to its [`State`], so equal logs make equal states. Each part of the state is a [`Machine`]
//! with commands of its own: today the node-ID [`Registry`]; sequences, slots, resources and
//! task queues join as further parts, each a variant of [`Command`] and a field of [`State`]
//! and [`StateSnapshot`], without touching election, replication or storage.

use crate::election::Millis;
use crate::registry::{self, ApplyError, Change, Registry, RegistrySnapshot};

/// One part of the replicated state: deterministic, so that every beacon applying the same
/// commands in the same order holds the same state.
pub trait Machine {
    type Command;
    /// What applying a command changed, for watchers.
    type Change;
    type Snapshot;
    type Error;

    /// Applies one command at time `now` (the leader's clock when it was proposed is not
    /// carried: time-dependent effects, such as a quarantine's end, are commands of their own).
    fn apply(
        &mut self,
        command: &Self::Command,
        now: Millis,
    ) -> Result<Option<Self::Change>, Self::Error>;
    fn snapshot(&self, now: Millis) -> Self::Snapshot;
    fn restore(&mut self, snapshot: Self::Snapshot, now: Millis);
}

/// A replicated state change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// A leader starts its term (quorum mode). Changes nothing; committing it commits
    /// everything the leader took over from earlier terms.
    LeaderStart,
    /// A change to the node-ID registry.
    Registry(registry::Command),
}

impl From<registry::Command> for Command {
    fn from(c: registry::Command) -> Command {
        Command::Registry(c)
    }
}

/// The whole replicated state.
#[derive(Debug, Clone)]
pub struct State {
    pub registry: Registry,
}

/// The whole replicated state, for snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateSnapshot {
    pub registry: RegistrySnapshot,
}

impl State {
    pub fn new(registry: Registry) -> State {
        State { registry }
    }

    /// Records a snapshot of the state holds (live registrations, quarantined IDs).
    pub fn records(&self) -> usize {
        self.registry.records()
    }
}

impl Machine for State {
    type Command = Command;
    type Change = Change;
    type Snapshot = StateSnapshot;
    type Error = ApplyError;

    fn apply(&mut self, command: &Command, now: Millis) -> Result<Option<Change>, ApplyError> {
        match command {
            Command::LeaderStart => Ok(None),
            Command::Registry(c) => self.registry.apply(c, now),
        }
    }

    fn snapshot(&self, now: Millis) -> StateSnapshot {
        StateSnapshot {
            registry: self.registry.snapshot(now),
        }
    }

    fn restore(&mut self, snapshot: StateSnapshot, now: Millis) {
        self.registry.restore(snapshot.registry, now);
    }
}

impl Machine for Registry {
    type Command = registry::Command;
    type Change = Change;
    type Snapshot = RegistrySnapshot;
    type Error = ApplyError;

    fn apply(
        &mut self,
        command: &registry::Command,
        now: Millis,
    ) -> Result<Option<Change>, ApplyError> {
        Registry::apply(self, command, now)
    }

    fn snapshot(&self, now: Millis) -> RegistrySnapshot {
        Registry::snapshot(self, now)
    }

    fn restore(&mut self, snapshot: RegistrySnapshot, now: Millis) {
        Registry::restore(self, snapshot, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{IdRange, NodeRecord};

    #[test]
    fn commands_reach_their_part_and_snapshots_restore_the_whole() {
        let mut state = State::new(Registry::new(IdRange { first: 1, last: 9 }, 100));
        assert_eq!(state.apply(&Command::LeaderStart, 0), Ok(None));
        let record = NodeRecord {
            node_id: 3,
            node_type: "LOGIC".into(),
            addr: "10.0.0.1:1".parse().unwrap(),
            access_addr: None,
            worker_num: 1,
            metadata: String::new(),
            registered_ms: 0,
            term: 1,
            index: 2,
        };
        let added = state
            .apply(&registry::Command::Register(record.clone()).into(), 0)
            .unwrap();
        assert_eq!(added, Some(Change::Added(record.clone())));
        let snapshot = state.snapshot(0);
        let mut other = State::new(Registry::new(IdRange { first: 1, last: 9 }, 100));
        other.restore(snapshot.clone(), 0);
        assert_eq!(other.snapshot(0), snapshot);
        assert_eq!(other.registry.get(3), Some(&record));
    }
}
