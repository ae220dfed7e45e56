//! Inbound peer traffic: a peer's heartbeats (cmd 113, which carry the log) go from its
//! link straight to the driver. They are not requests: no admission, no role, no request
//! metrics, and no client path (`dispatch.rs`) on the way. Outbound links are `peer.rs`.

use std::net::SocketAddr;

use super::shared::Shared;
use crate::machines::State;
use crate::machines::handle::Reject;
use crate::pb;
use crate::wire::Frame;
use crate::wire::envelope::message_from_pb;

/// Hands `frame`, a heartbeat from beacon `node`, to the driver; a malformed one is refused
/// (the link goes on).
pub(super) async fn heartbeat(
    node: SocketAddr,
    frame: &Frame,
    shared: &Shared,
) -> Result<(), Reject> {
    let msg: pb::Election = frame.decode()?;
    let msg = message_from_pb::<State>(msg).map_err(Reject::malformed)?;
    shared.peers.peer_message(node, msg).await;
    Ok(())
}
