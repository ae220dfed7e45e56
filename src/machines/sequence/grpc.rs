//! The sequence issuer's gRPC service, `beacon.v1.sequence.Sequences` (see
//! [`crate::wire::rpc`]).

use super::wire::{SequenceCmd as C, SequenceErrorCode as E};
use crate::wire::rpc::{Method, Service};

pub(crate) const SERVICE: Service = Service {
    name: "beacon.v1.sequence.Sequences",
    methods: &[
        Method::unary("Create", C::Create as u32),
        Method::unary("Change", C::Change as u32),
        Method::unary("Delete", C::Delete as u32),
        Method::unary("Next", C::Next as u32),
        Method::unary("GiveBack", C::GiveBack as u32),
        Method::unary("List", C::List as u32),
    ],
    errors: &E::GRPC,
};
