//! The config store's gRPC service, `beacon.v1.configs.Configs`: its methods are the native
//! commands (see [`crate::wire::rpc`]), and its error codes' gRPC statuses.

use super::wire::{ConfigCmd, ConfigErrorCode};
use crate::wire::rpc::{Service, service};

pub(crate) const SERVICE: Service = service! {
    "beacon.v1.configs.Configs", ConfigCmd, ConfigErrorCode;
    unary: Write, Get, History;
    stream: Watch;
};
