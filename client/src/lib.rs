#![doc = include_str!("../README.md")]

// What a service uses: connections and clusters, registrations, watches, sequences and
// snowflakes, assignments and locks, tasks and workers, configuration documents, and the
// errors they return. The daemon (`beacon`'s `server` feature) is not built.
pub use beacon::client::*;

/// The protobuf messages the client's calls take and return (`pb::registry::NodeInfo`, ...):
/// the same types a beacon serves over gRPC.
pub use beacon::pb;
