//! Work assignment: resources run by live services, at most one owner at a time, moved when
//! their holder's registration ends and rebalanced on request.
//!
//! * [`state`]: the replicated resources and their holders (fencing tokens rising with each
//!   holder; a rebalancing move revokes first).
//! * [`placement`]: the leader's rules as pure functions: least load for new and orphaned
//!   resources, sticky holders, bounded rebalancing.
//!
//! This machine is not composed into what beacons replicate yet: its leader-side service,
//! wire part, handlers, client and nebcli commands come next, as the sequence issuer's did.

pub mod placement;
pub mod state;
