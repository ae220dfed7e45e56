//! The counter's part of the shared messages: `LogEntry` field 20 (an add) and `Snapshot`
//! field 20 (the value), in the range the machines table leaves to the next machine.

use beacon::wire::field::{get_u64, put_u64};
use beacon::wire::{MachineWire, WireError};

use super::state::{Add, Counter};

const FIELD: u32 = 20;

impl MachineWire for Counter {
    fn encode_command(Add(n): &Add, buf: &mut Vec<u8>) {
        put_u64(FIELD, *n, buf);
    }

    fn decode_command(entry: &[u8]) -> Result<Option<Add>, WireError> {
        Ok(get_u64(FIELD, entry)?.map(Add))
    }

    fn encode_snapshot(value: &u64, buf: &mut Vec<u8>) {
        put_u64(FIELD, *value, buf);
    }

    fn decode_snapshot(snapshot: &[u8]) -> Result<u64, WireError> {
        Ok(get_u64(FIELD, snapshot)?.unwrap_or(0))
    }
}
