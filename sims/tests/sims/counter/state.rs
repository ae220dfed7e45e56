//! The counter's replicated state: one number, raised by commands.

use beacon::consensus::Machine;
use beacon::machines::Configured;
use beacon::time::Millis;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counter {
    pub value: u64,
}

/// Raises the counter.
#[derive(Debug, Clone, PartialEq)]
pub struct Add(pub u64);

/// A command that would overflow: the replicas diverged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("adding {add} to {value} overflows")]
pub struct Overflow {
    pub value: u64,
    pub add: u64,
}

impl Machine for Counter {
    type Command = Add;
    /// The value after the command.
    type Change = u64;
    type Snapshot = u64;
    type ApplyError = Overflow;

    fn apply(&mut self, Add(add): &Add, _now: Millis) -> Result<Option<u64>, Overflow> {
        self.value = self.value.checked_add(*add).ok_or(Overflow {
            value: self.value,
            add: *add,
        })?;
        Ok(Some(self.value))
    }

    fn snapshot(&self, _now: Millis) -> u64 {
        self.value
    }

    fn restore(&mut self, value: u64, _now: Millis) {
        self.value = value;
    }

    fn records(&self) -> usize {
        1
    }

    fn summary(&self) -> String {
        format!("counter at {}", self.value)
    }
}

/// The counter has no configuration keys, and is not served over the wire.
impl beacon::machines::Configurable for Counter {
    type Section = ();
}

impl Configured<()> for Counter {
    fn configured(_: &()) -> Counter {
        Counter::default()
    }
}

impl beacon::machines::Served for Counter {
    type Cmd = beacon::machines::NoCommands;
}

/// Its value on `/metrics`, as `beacon_counter_value`.
impl<S: beacon::machines::Part<Counter>> beacon::machines::Measured<S> for Counter {
    fn gauges(state: &S, _: &(), _wall_ms: u64, out: &mut Vec<beacon::machines::GaugeSample>) {
        out.push(beacon::machines::GaugeSample {
            name: "counter_value",
            help: "The counter's value",
            labels: Vec::new(),
            value: state.part().value as f64,
        });
    }
}
