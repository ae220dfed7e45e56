//! Tables for the registry's `show` commands, in the style of the original nebcli.

use crate::cli::table::{self, opt_ms, or_dash, stale_warning, yes_no};
use crate::pb;

fn entries(
    reply: &pb::registry::NodesReply,
) -> impl Iterator<Item = (&pb::registry::NodeEntry, &pb::registry::NodeInfo)> {
    reply
        .nodes
        .iter()
        .filter_map(|e| e.node.as_ref().map(|n| (e, n)))
}

pub fn nodes(reply: &pb::registry::NodesReply) -> String {
    let rows: Vec<Vec<String>> = entries(reply)
        .map(|(e, n)| {
            vec![
                n.node_id.to_string(),
                n.node_type.clone(),
                n.addr.clone(),
                yes_no(e.is_online),
                opt_ms(e.last_seen_ms),
            ]
        })
        .collect();
    let table = table::render(
        &[
            "node_id",
            "node_type",
            "address",
            "is_online",
            "last_seen_ms",
        ],
        &rows,
    );
    table + &stale_warning(reply.stale.as_deref())
}

pub fn node_detail(reply: &pb::registry::NodesReply) -> String {
    let rows: Vec<Vec<String>> = entries(reply)
        .map(|(_, n)| {
            vec![
                n.node_id.to_string(),
                n.node_type.clone(),
                n.addr.clone(),
                or_dash(&n.access_addr),
                n.worker_num.to_string(),
                n.registered_ms.to_string(),
                format!("{}.{}", n.term, n.index),
                or_dash(&n.owner),
                or_dash(&n.metadata),
            ]
        })
        .collect();
    let table = table::render(
        &[
            "node_id",
            "node_type",
            "address",
            "access_address",
            "worker_num",
            "registered_ms",
            "fencing_token",
            "owner",
            "metadata",
        ],
        &rows,
    );
    table + &stale_warning(reply.stale.as_deref())
}

pub fn node_report(reply: &pb::registry::NodesReply) -> String {
    let rows: Vec<Vec<String>> = entries(reply)
        .filter(|(e, _)| e.is_online)
        .map(|(e, n)| {
            let r = e.report.unwrap_or_default();
            let seen = e.report.is_some();
            let cell = |v: u64| if seen { v.to_string() } else { "-".into() };
            vec![
                n.node_id.to_string(),
                n.addr.clone(),
                cell(r.load.into()),
                cell(r.connect.into()),
                cell(r.recv_num),
                cell(r.recv_byte),
                cell(r.send_num),
                cell(r.send_byte),
                e.workers.len().to_string(),
                opt_ms(e.last_seen_ms),
            ]
        })
        .collect();
    let table = table::render(
        &[
            "node_id",
            "address",
            "load",
            "connect",
            "recv_num",
            "recv_byte",
            "send_num",
            "send_byte",
            "workers",
            "last_seen_ms",
        ],
        &rows,
    );
    table + &stale_warning(reply.stale.as_deref())
}

pub fn ids(reply: &pb::registry::IdsReply) -> String {
    let total = u64::from(reply.last - reply.first) + 1;
    let quarantined = reply
        .quarantined
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let free = total - u64::from(reply.in_use) - reply.quarantined.len() as u64;
    let table = table::render(
        &["range", "last_node_id", "in_use", "free", "quarantined"],
        &[vec![
            format!("{}..={}", reply.first, reply.last),
            reply.last_node_id.to_string(),
            reply.in_use.to_string(),
            free.to_string(),
            if quarantined.is_empty() {
                "-".into()
            } else {
                quarantined
            },
        ]],
    );
    table + &stale_warning(reply.stale.as_deref())
}

pub fn subscriptions(reply: &pb::registry::SubscriptionsReply) -> String {
    let rows: Vec<Vec<String>> = reply
        .subscriptions
        .iter()
        .map(|s| vec![s.node_type.clone(), or_dash(&s.subscribe.join(","))])
        .collect();
    table::render(&["node_type", "subscribe"], &rows)
}

pub fn registered(reply: &pb::registry::RegisterReply) -> String {
    let n = reply.node.clone().unwrap_or_default();
    format!(
        "node_id {} ({} at {}), lease {} ms, fencing token {}.{}, leader {}\n",
        n.node_id, n.node_type, n.addr, reply.lease_ms, n.term, n.index, reply.leader
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_count_free_ones() {
        let out = ids(&pb::registry::IdsReply {
            first: 1,
            last: 10,
            last_node_id: 4,
            in_use: 3,
            quarantined: vec![2],
            index: 9,
            stale: None,
        });
        assert_eq!(
            out,
            "range     last_node_id    in_use    free    quarantined\n\
             1..=10    4               3         6       2\n"
        );
    }
}
