//! The sequence issuer on the wire (`proto/sequence.proto`): its command and error codes,
//! its part of log entries and snapshots, and conversions between its messages and types.

use prost::Message as _;

use super::state::{Command, Segment, SequenceRecord, Sequences};
use crate::pb::sequence as pb;
use crate::wire::codes::codes;
use crate::wire::{MachineWire, WireError};

codes! {
    command;
    /// The sequence issuer's command codes.
    pub enum SequenceCmd {
        /// Create a sequence (`CreateSequence` / `SequenceReply`).
        Create = 401,
        /// Change a sequence's step or move it forward (`ChangeSequence` / `SequenceReply`).
        Change = 403,
        /// Delete a sequence (`DeleteSequence` / `SequenceReply`).
        Delete = 405,
        /// The next segment (`NextSegment` / `SegmentReply`).
        Next = 407,
        /// Hand back the unused tail of the last segment (`GiveBack` / `SegmentReply`).
        GiveBack = 409,
        /// The sequences (`SequencesRequest` / `SequencesReply`).
        List = 411,
    }
}

codes! {
    error;
    /// The sequence issuer's codes carried by `ErrorReply`.
    pub enum SequenceErrorCode {
        /// No sequence has the name given.
        UnknownSequence = 30 => "UNKNOWN_SEQUENCE" NotFound,
        /// A sequence of that name exists, with other settings.
        SequenceExists = 31 => "SEQUENCE_EXISTS" AlreadyExists,
        /// Every number of the sequence has been handed out.
        SequenceExhausted = 32 => "SEQUENCE_EXHAUSTED" ResourceExhausted,
        /// A give-back named a segment that is no longer the sequence's last: nothing came back.
        NotLastSegment = 33 => "NOT_LAST_SEGMENT" FailedPrecondition,
        /// The cluster holds as many sequences as `sequence.max_sequences` allows.
        TooManySequences = 34 => "TOO_MANY_SEQUENCES" ResourceExhausted,
    }
}

pub fn record_to_pb(r: &SequenceRecord) -> pb::SequenceInfo {
    pb::SequenceInfo {
        name: r.name.clone(),
        max: r.max,
        step: r.step,
        segments: r.segments,
        last_ms: r.last_ms,
        last_index: r.last_index,
        created_ms: r.created_ms,
        last_start: r.last_start,
    }
}

pub fn record_from_pb(r: pb::SequenceInfo) -> SequenceRecord {
    SequenceRecord {
        name: r.name,
        max: r.max,
        step: r.step,
        segments: r.segments,
        last_ms: r.last_ms,
        last_index: r.last_index,
        created_ms: r.created_ms,
        last_start: r.last_start,
    }
}

pub fn segment_to_pb(s: &Segment) -> pb::Segment {
    pb::Segment {
        name: s.name.clone(),
        start: s.start,
        end: s.end,
        index: s.index,
        wall_ms: s.wall_ms,
    }
}

pub fn segment_from_pb(s: pb::Segment) -> Segment {
    Segment {
        name: s.name,
        start: s.start,
        end: s.end,
        index: s.index,
        wall_ms: s.wall_ms,
    }
}

impl MachineWire for Sequences {
    fn encode_command(command: &Command, buf: &mut Vec<u8>) {
        use pb::sequence_entry::Command as C;
        let command = match command {
            Command::Put(r) => C::Put(record_to_pb(r)),
            Command::Delete(name) => C::Delete(name.clone()),
            Command::Advance(s) => C::Advance(segment_to_pb(s)),
            Command::GiveBack(s) => C::GiveBack(segment_to_pb(s)),
        };
        pb::SequenceEntry {
            command: Some(command),
        }
        .encode_raw(buf);
    }

    fn decode_command(entry: &[u8]) -> Result<Option<Command>, WireError> {
        use pb::sequence_entry::Command as C;
        let Some(command) = pb::SequenceEntry::decode(entry)?.command else {
            return Ok(None);
        };
        Ok(Some(match command {
            C::Put(r) => Command::Put(record_from_pb(r)),
            C::Delete(name) => Command::Delete(name),
            C::Advance(s) => Command::Advance(segment_from_pb(s)),
            C::GiveBack(s) => Command::GiveBack(segment_from_pb(s)),
        }))
    }

    fn encode_snapshot(sequences: &Vec<SequenceRecord>, buf: &mut Vec<u8>) {
        pb::SequenceSnapshot {
            sequences: sequences.iter().map(record_to_pb).collect(),
        }
        .encode_raw(buf);
    }

    fn decode_snapshot(bytes: &[u8]) -> Result<Vec<SequenceRecord>, WireError> {
        Ok(pb::SequenceSnapshot::decode(bytes)?
            .sequences
            .into_iter()
            .map(record_from_pb)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consensus::{Entry, Payload};
    use crate::wire::envelope::{entry_bytes, entry_from_bytes};

    #[test]
    fn every_command_round_trips_in_a_log_entry() {
        let segment = Segment {
            name: "orders".into(),
            start: 11,
            end: 20,
            index: 9,
            wall_ms: 1_700_000_000_000,
        };
        let record = SequenceRecord {
            name: "orders".into(),
            max: 10,
            step: 10,
            segments: 1,
            last_ms: 3,
            last_index: 4,
            last_start: 3,
            created_ms: 1,
        };
        for command in [
            Command::Put(record),
            Command::Delete("orders".into()),
            Command::Advance(segment.clone()),
            Command::GiveBack(segment),
        ] {
            let e = Entry {
                index: 9,
                term: 2,
                payload: Payload::Command(command),
            };
            let bytes = entry_bytes::<Sequences>(&e);
            assert_eq!(entry_from_bytes::<Sequences>(&bytes).unwrap(), e);
        }
    }
}
