//! The registry's gRPC service, `beacon.v1.registry.Registry`: its methods are the native
//! commands (see [`crate::wire::rpc`]), and its error codes' gRPC statuses.

use super::wire::{RegistryCmd, RegistryErrorCode};
use crate::wire::rpc::{Service, service};

pub(crate) const SERVICE: Service = service! {
    "beacon.v1.registry.Registry", RegistryCmd, RegistryErrorCode;
    unary: Register, Unregister, FreeId, SetHealth, Holds, Nodes, Ids, Subscriptions;
    stream: Watch;
    each: KeepAlive = NodeReport;
};
