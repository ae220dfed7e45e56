//! What a service uses, in one place: connections to beacons ([`crate::net`]: [`Client`],
//! [`Cluster`], [`ConnectOptions`], [`ClientError`]) and every machine's client API
//! ([`Registration`], [`Watch`], [`Sequence`], [`Snowflake`], [`Assignments`], [`Lock`],
//! [`Tasks`], [`Worker`], ...), re-exported from each machine's `client` module by
//! `compose!` (see [`crate::machines::clients`]).

pub use crate::machines::clients::*;
pub use crate::net::*;
