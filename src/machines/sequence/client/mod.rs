//! The sequence issuer's client API.
//!
//! - Its calls on a [`Client`] (one beacon) and on a [`Cluster`] (the leader, followed
//!   across failovers): create, change, delete, next segment, give back, list.
//! - [`Sequence`]: a double-buffered issuer of numbers from one sequence; `next_id()` is a
//!   local operation while a buffer holds numbers.
//! - [`Snowflake`]: time-ordered 64-bit IDs generated locally on a registration's node ID.

mod buffer;
mod snowflake;

/// The codes a refusal of this machine carries ([`ClientError::is`]).
pub use super::wire::SequenceErrorCode;
pub use buffer::{Sequence, SequenceClientError, SequenceOptions, SequenceStatus};
pub use snowflake::{
    Clock, DEFAULT_EPOCH_MS, Decoded, Generator, Layout, LayoutError, Snowflake, SnowflakeError,
    SnowflakeOptions, Step, SystemClock, decode,
};

use super::wire::SequenceCmd as Cmd;
use crate::net::{Client, ClientError, Cluster};
use crate::pb::sequence as pb;

impl Client {
    /// The sequences this beacon holds, or the one named (`""`: all).
    pub async fn sequences(&mut self, name: &str) -> Result<pb::SequencesReply, ClientError> {
        let req = pb::SequencesRequest {
            name: name.to_owned(),
            ..Default::default()
        };
        self.sequences_matching(&req).await
    }

    /// The sequences `req` asks for: a page of them when `req.limit` is set (`next`
    /// continues, `total` counts them all).
    pub async fn sequences_matching(
        &mut self,
        req: &pb::SequencesRequest,
    ) -> Result<pb::SequencesReply, ClientError> {
        self.request(Cmd::List, req, "the sequences request").await
    }
}

impl Cluster {
    /// Creates a sequence (`start`, `step`: 0 for the defaults).
    pub async fn create_sequence(
        &mut self,
        name: &str,
        start: u64,
        step: u64,
    ) -> Result<pb::SequenceInfo, ClientError> {
        let req = pb::CreateSequence {
            name: name.to_owned(),
            start,
            step,
        };
        let reply: pb::SequenceReply = self.call(Cmd::Create, &req, "the sequence create").await?;
        Ok(reply.sequence.unwrap_or_default())
    }

    /// Changes a sequence's step and/or moves it forward (0: unchanged).
    pub async fn change_sequence(
        &mut self,
        name: &str,
        step: u64,
        start: u64,
    ) -> Result<pb::SequenceInfo, ClientError> {
        let req = pb::ChangeSequence {
            name: name.to_owned(),
            step,
            start,
        };
        let reply: pb::SequenceReply = self.call(Cmd::Change, &req, "the sequence change").await?;
        Ok(reply.sequence.unwrap_or_default())
    }

    /// Deletes a sequence; returns it as it was.
    pub async fn delete_sequence(&mut self, name: &str) -> Result<pb::SequenceInfo, ClientError> {
        let req = pb::DeleteSequence {
            name: name.to_owned(),
        };
        let reply: pb::SequenceReply = self.call(Cmd::Delete, &req, "the sequence delete").await?;
        Ok(reply.sequence.unwrap_or_default())
    }

    /// The next segment of `name`: `count` numbers (0: the sequence's step), answered once
    /// committed.
    pub async fn next_segment(
        &mut self,
        name: &str,
        count: u64,
    ) -> Result<pb::SegmentReply, ClientError> {
        let req = pb::NextSegment {
            name: name.to_owned(),
            count,
        };
        let reply: pb::SegmentReply = self.call(Cmd::Next, &req, "the segment request").await?;
        // A number handed out is used as is: a reply that does not hold a range of the
        // sequence asked for is refused rather than served.
        match &reply.segment {
            Some(s) if s.name == name && s.start >= 1 && s.end >= s.start => Ok(reply),
            other => Err(ClientError::BadReply {
                what: "the segment request",
                msg: format!("asked for a segment of `{name}`, got {other:?}"),
            }),
        }
    }

    /// Hands back `start..=end` of the segment handed out at `index`: accepted only while
    /// that segment is the sequence's last and `end` its `max`.
    pub async fn give_back(
        &mut self,
        name: &str,
        start: u64,
        end: u64,
        index: u64,
    ) -> Result<pb::SegmentReply, ClientError> {
        let req = pb::GiveBack {
            name: name.to_owned(),
            start,
            end,
            index,
        };
        self.call(Cmd::GiveBack, &req, "the give-back").await
    }
}
