//! The machines' server handlers, by command code: one line per machine in each function.
//!
//! The server serves the core's own commands (handshake, heartbeats, beacon status) and hands
//! every other request to the machine that owns its code.

use std::net::SocketAddr;

use super::{assign, registry, sequence, tasks};
use crate::auth::Role;
use crate::config::Config;
use crate::server::handle::{Ctx, Handled, Reject};
use crate::wire::Frame;

/// Serves `frame` if a machine owns its command; `None` if none does.
pub(crate) async fn serve(frame: &Frame, ctx: &Ctx<'_>) -> Option<Result<Handled, Reject>> {
    if registry::rpc::owns(frame.cmd) {
        return Some(registry::rpc::serve(frame, ctx).await);
    }
    if sequence::rpc::owns(frame.cmd) {
        return Some(sequence::rpc::serve(frame, ctx).await);
    }
    if assign::rpc::owns(frame.cmd) {
        return Some(assign::rpc::serve(frame, ctx).await);
    }
    if tasks::rpc::owns(frame.cmd) {
        return Some(tasks::rpc::serve(frame, ctx).await);
    }
    None
}

/// The role a client needs to send `cmd` (when authentication is on); `None` if no
/// machine owns it.
pub(crate) fn role(cmd: u32) -> Option<Role> {
    registry::rpc::role(cmd)
        .or_else(|| sequence::rpc::role(cmd))
        .or_else(|| assign::rpc::role(cmd))
        .or_else(|| tasks::rpc::role(cmd))
}

/// The name of request `cmd` (a metric's label), or `None` for a code no machine knows.
pub(crate) fn name(cmd: u32) -> Option<String> {
    use super::{assign::wire::AssignCmd, registry::wire::RegistryCmd};
    use super::{sequence::wire::SequenceCmd, tasks::wire::TasksCmd};
    RegistryCmd::from_code(cmd)
        .map(|c| format!("{c:?}"))
        .or_else(|| SequenceCmd::from_code(cmd).map(|c| format!("{c:?}")))
        .or_else(|| AssignCmd::from_code(cmd).map(|c| format!("{c:?}")))
        .or_else(|| TasksCmd::from_code(cmd).map(|c| format!("{c:?}")))
}

/// Whether requests `cmd` queued back to back go to the driver together.
pub(crate) fn batches(cmd: u32) -> bool {
    registry::rpc::batches(cmd) || sequence::rpc::batches(cmd) || tasks::rpc::batches(cmd)
}

/// Adds every machine's part to our `Hello` to a peer.
pub(crate) fn hello_fields(config: &Config, buf: &mut Vec<u8>) {
    registry::rpc::hello_fields(config, buf);
}

/// Checks every machine's part of a peer's `Hello` (the whole message).
pub(crate) fn check_hello(config: &Config, peer: SocketAddr, hello: &[u8]) -> Result<(), Reject> {
    registry::rpc::check_hello(config, peer, hello)
}
