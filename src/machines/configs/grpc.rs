//! The config store's gRPC service, `beacon.v1.configs.Configs`: its methods are the native
//! commands (see [`crate::wire::rpc`]), and its error codes' gRPC statuses.

use super::wire::{ConfigCmd as C, ConfigErrorCode as E};
use crate::wire::rpc::{Method, Service};

pub(crate) const SERVICE: Service = Service {
    name: "beacon.v1.configs.Configs",
    methods: &[
        Method::unary("Write", C::Write as u32),
        Method::unary("Get", C::Get as u32),
        Method::unary("History", C::History as u32),
        Method::stream("Watch", C::Watch as u32),
    ],
    errors: &E::GRPC,
};
