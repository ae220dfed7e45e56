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

/// `nebcli -s AT register --type TYPE --addr ADDR`, which must succeed.
pub fn nebcli_register(nebcli: &std::path::Path, at: SocketAddr, node_type: &str, addr: &str) {
    let at = at.to_string();
    let (ok, out) = beacon_testkit::run_nebcli(
        nebcli,
        &["-s", &at, "register", "--type", node_type, "--addr", addr],
    );
    assert!(ok, "nebcli register at {at}: {out}");
}

/// Whether `at` lists a registration at service address `addr`; panics if `at` cannot be
/// asked.
pub async fn lists_service(at: SocketAddr, addr: &str) -> bool {
    let reply = nodes(at).await.unwrap_or_else(|| panic!("nodes at {at}"));
    reply
        .nodes
        .iter()
        .any(|n| n.node.as_ref().is_some_and(|i| i.addr == addr))
}
