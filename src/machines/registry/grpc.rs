//! The registry's gRPC service, `beacon.v1.registry.Registry`: its methods are the native
//! commands (see [`crate::wire::rpc`]), and its error codes' gRPC statuses.

use super::wire::{RegistryCmd as C, RegistryErrorCode as E};
use crate::wire::rpc::{Method, Service};

pub(crate) const SERVICE: Service = Service {
    name: "beacon.v1.registry.Registry",
    methods: &[
        Method::unary("Register", C::Register as u32),
        Method::each("KeepAlive", C::NodeReport as u32),
        Method::unary("Unregister", C::Unregister as u32),
        Method::unary("FreeId", C::FreeId as u32),
        Method::unary("SetHealth", C::SetHealth as u32),
        Method::unary("Holds", C::Holds as u32),
        Method::unary("Nodes", C::Nodes as u32),
        Method::unary("Ids", C::Ids as u32),
        Method::unary("Subscriptions", C::Subscriptions as u32),
        Method::stream("Watch", C::Watch as u32),
    ],
    errors: &E::GRPC,
};
