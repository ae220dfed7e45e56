//! The sequence issuer's gRPC service, `beacon.v1.sequence.Sequences` (see
//! [`crate::wire::rpc`]).

use super::wire::{SequenceCmd, SequenceErrorCode};
use crate::wire::rpc::{Service, service};

pub(crate) const SERVICE: Service = service! {
    "beacon.v1.sequence.Sequences", SequenceCmd, SequenceErrorCode;
    unary: Create, Change, Delete, Next, GiveBack, List;
};
