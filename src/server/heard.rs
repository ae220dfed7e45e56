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
/// (the link goes on). A beacon no longer a member (a change removed it while it was linked,
/// perhaps while it was hung) is refused and its link closed: it dials again, and the
/// handshake tells it why, where its heartbeats would otherwise be ignored here every tick
/// for as long as it runs.
pub(super) async fn heartbeat(
    node: SocketAddr,
    frame: &Frame,
    shared: &Shared,
) -> Result<(), Reject> {
    if let Some(refused) = shared.driver.refuse_non_member(node, None) {
        return Err(refused);
    }
    let msg: pb::Election = frame.decode()?;
    let msg = message_from_pb::<State>(msg).map_err(Reject::malformed)?;
    shared.peers.peer_message(node, msg).await;
    Ok(())
}
