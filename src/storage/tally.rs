//! A tiny machine for the storage tests, so that they exercise the generic layers alone: it
//! adds numbers, and writes them in `LogEntry` field 20 and `Snapshot` field 20.

use crate::consensus::Machine;
use crate::time::Millis;
use crate::wire::field::{get_u64, put_u64};
use crate::wire::{MachineWire, WireError};

const FIELD: u32 = 20;

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Tally(pub u64);

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("never")]
pub(crate) struct Never;

impl Machine for Tally {
    type Command = u64;
    type Change = u64;
    type Snapshot = u64;
    type ApplyError = Never;

    fn apply(&mut self, add: &u64, _now: Millis) -> Result<Option<u64>, Never> {
        self.0 += add;
        Ok(Some(self.0))
    }
    fn snapshot(&self, _now: Millis) -> u64 {
        self.0
    }
    fn restore(&mut self, snapshot: u64, _now: Millis) {
        self.0 = snapshot;
    }
    fn records(&self) -> usize {
        1
    }
    fn summary(&self) -> String {
        format!("total {}", self.0)
    }
}

impl MachineWire for Tally {
    fn encode_command(add: &u64, buf: &mut Vec<u8>) {
        put_u64(FIELD, *add, buf);
    }
    fn decode_command(entry: &[u8]) -> Result<Option<u64>, WireError> {
        get_u64(FIELD, entry)
    }
    fn encode_snapshot(total: &u64, buf: &mut Vec<u8>) {
        put_u64(FIELD, *total, buf);
    }
    fn decode_snapshot(snapshot: &[u8]) -> Result<u64, WireError> {
        Ok(get_u64(FIELD, snapshot)?.unwrap_or(0))
    }
}
