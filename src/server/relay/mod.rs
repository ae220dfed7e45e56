//! Relaying clients' calls from a follower to the leader, so that a gRPC client may call any
//! beacon (as etcd's followers forward to their leader).
//!
//! A follower that cannot answer a call itself (the handler said `NOT_LEADER`) carries the
//! request to the leader on a relay connection: a connection that proves it is a beacon of the
//! cluster as a heartbeat link does (the cluster's TLS certificate, or the peer token), with
//! `Hello.role` = relay. Each call goes as a `Relayed` frame (cmd 7) naming the request's
//! command and body and the identity the follower established, so that the leader applies the
//! same roles and records the same owner as if the client had called it. Calls on one
//! relay connection are answered as they finish, by `seq`, and a stream's pushed frames come
//! back under its request's `seq`, so one connection carries every call of a follower's
//! clients.
//!
//! The leader's side is [`serve`]; the follower's side is the pool of relay connections
//! ([`pool::Relays`], held by the beacon's shared state) and [`dial`], which opens them.

mod dial;
mod leader;
pub(crate) mod pool;

pub(super) use leader::serve;

use std::sync::Arc;

use super::shared::Shared;

/// Follows the leader this beacon knows, closing the relay connections to a beacon once
/// another leads (see [`pool::Relays::leader_is`]), until shutdown.
pub(super) async fn follow_leader(shared: Arc<Shared>) {
    let mut changes = shared.driver.leader_changes();
    loop {
        tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
        let leader = *changes.borrow_and_update();
        if let Some(leader) = leader {
            shared.relays.leader_is(leader).await;
        }
    }
}
