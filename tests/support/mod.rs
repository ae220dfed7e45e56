//! Helpers the integration tests share that name a machine (the testkit names none).
//! Each test binary includes the module and uses what it needs of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use beacon::client::{Client, ConnectOptions};
use beacon::pb;

/// `addr`'s registrations (what `nebcli --json show nodes` prints), or `None` if it cannot
/// be asked.
pub async fn nodes(addr: SocketAddr) -> Option<pb::registry::NodesReply> {
    let opts = ConnectOptions {
        timeout: Duration::from_secs(5),
        ..ConnectOptions::default()
    };
    let mut client = Client::connect(&addr.to_string(), &opts).await.ok()?;
    client.nodes("", "").await.ok()
}

/// The node report (a renewal) of the registration `node`, as its service sends it.
pub fn report_of(node: &pb::registry::NodeInfo) -> pb::registry::NodeReport {
    pb::registry::NodeReport {
        node_id: node.node_id,
        addr: node.addr.clone(),
        term: node.term,
        index: node.index,
        ..Default::default()
    }
}
