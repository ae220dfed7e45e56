//! Tables for the registry's `show` commands, in the style of the original nebcli.

use crate::cli::table::{self, opt_ms, or_dash, stale_warning, yes_no};
use crate::machines::registry::Status;
use crate::machines::registry::wire::status_from_pb;
use crate::pb;

fn entries(
    reply: &pb::registry::NodesReply,
) -> impl Iterator<Item = (&pb::registry::NodeEntry, &pb::registry::NodeInfo)> {
    reply
        .nodes
        .iter()
        .filter_map(|e| e.node.as_ref().map(|n| (e, n)))
}

/// `show nodes`: the rows of the page, and a summary: counts by type when the page holds
/// the whole list, else which part of the list it is and where the next page starts.
pub fn nodes(reply: &pb::registry::NodesReply) -> String {
    let all: Vec<_> = entries(reply).collect();
    let rows: Vec<Vec<String>> = all
        .iter()
        .map(|(e, n)| {
            vec![
                n.node_id.to_string(),
                n.node_type.clone(),
                n.addr.clone(),
                yes_no(e.is_online),
                if e.is_online {
                    health(n)
                } else {
                    "-".to_owned()
                },
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
            "health",
            "last_seen_ms",
        ],
        &rows,
    );
    let mut by_type: std::collections::BTreeMap<&str, usize> = Default::default();
    for (_, n) in &all {
        *by_type.entry(n.node_type.as_str()).or_default() += 1;
    }
    let online = all.iter().filter(|(e, _)| e.is_online).count();
    let types: Vec<String> = by_type.iter().map(|(t, n)| format!("{t} {n}")).collect();
    let whole = reply.next_node_id == 0 && all.len() as u64 == reply.total;
    let mut summary = if whole {
        format!("{} nodes, {online} online", all.len())
    } else {
        format!(
            "{} of {} nodes shown, {online} of them online",
            all.len(),
            reply.total
        )
    };
    if !types.is_empty() {
        summary.push_str(&format!(" · {}", types.join(", ")));
    }
    if reply.next_node_id != 0 {
        summary.push_str(&format!(" · next page: --from {}", reply.next_node_id));
    }
    table + &summary + "\n" + &stale_warning(reply.stale.as_deref(), Some(reply.index))
}

/// A registration's health in a few words: `passing`, `critical (db down)`, `warning,
/// draining since 2026-11-27 10:00:00 (upgrade)`.
pub fn health(n: &pb::registry::NodeInfo) -> String {
    let Some(h) = &n.health else {
        return Status::Passing.name().to_owned();
    };
    let mut s = status_name(h.status).to_owned();
    if h.draining {
        s.push_str(", draining");
    }
    if h.since_ms > 0 {
        s.push_str(&format!(" since {}", table::when(h.since_ms)));
    }
    if !h.note.is_empty() {
        s.push_str(&format!(" ({})", h.note));
    }
    s
}

/// The name of a status on the wire (`status N` for one this nebcli does not know).
fn status_name(status: i32) -> String {
    pb::registry::HealthStatus::try_from(status)
        .map(|s| status_from_pb(s).name().to_owned())
        .unwrap_or_else(|_| format!("status {status}"))
}

/// A registration as JSON: its metadata as the JSON object it is (not a string holding
/// one), and its health spelt out (`status` by name), present when nothing was said of it.
pub fn node_json(n: &pb::registry::NodeInfo) -> serde_json::Value {
    let mut v = serde_json::to_value(n).expect("replies serialise");
    spell_out(&mut v);
    v
}

/// Spells out a registration's metadata and health in place (see [`node_json`]).
fn spell_out(node: &mut serde_json::Value) {
    if let Some(meta) = node.get_mut("metadata")
        && let Some(text) = meta.as_str()
    {
        *meta = if text.is_empty() {
            serde_json::json!({})
        } else {
            serde_json::from_str(text).unwrap_or_else(|_| serde_json::json!(text))
        };
    }
    if let Some(obj) = node.as_object_mut() {
        let h = obj
            .get("health")
            .cloned()
            .unwrap_or(serde_json::Value::Null);
        let status = h.get("status").and_then(|s| s.as_i64()).unwrap_or(0);
        obj.insert(
            "health".into(),
            serde_json::json!({
                "status": status_name(status as i32),
                "draining": h.get("draining").and_then(|d| d.as_bool()).unwrap_or(false),
                "note": h.get("note").and_then(|d| d.as_str()).unwrap_or(""),
                "since_ms": h.get("since_ms").and_then(|d| d.as_u64()).unwrap_or(0),
            }),
        );
    }
}

/// A nodes reply as JSON, each registration spelt out as [`node_json`] does.
pub fn nodes_json(reply: &pb::registry::NodesReply) -> serde_json::Value {
    let mut v = serde_json::to_value(reply).expect("replies serialise");
    if let Some(nodes) = v.get_mut("nodes").and_then(|n| n.as_array_mut()) {
        for entry in nodes {
            if let Some(node) = entry.get_mut("node") {
                spell_out(node);
            }
        }
    }
    v
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
                table::when(n.registered_ms),
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
            "registered",
            "fencing_token",
            "owner",
            "metadata",
        ],
        &rows,
    );
    table + &stale_warning(reply.stale.as_deref(), Some(reply.index))
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
    table + &stale_warning(reply.stale.as_deref(), Some(reply.index))
}

/// Node IDs of the range neither in use nor in quarantine.
pub fn free_ids(reply: &pb::registry::IdsReply) -> u64 {
    let total = u64::from(reply.last - reply.first) + 1;
    total - u64::from(reply.in_use) - reply.quarantined.len() as u64
}

pub fn ids(reply: &pb::registry::IdsReply) -> String {
    let free = free_ids(reply);
    let table = table::render(
        &["range", "last_node_id", "in_use", "free", "quarantined"],
        &[vec![
            format!("{}..={}", reply.first, reply.last),
            reply.last_node_id.to_string(),
            reply.in_use.to_string(),
            free.to_string(),
            reply.quarantined.len().to_string(),
        ]],
    );
    // Counts in the table; which IDs as ranges below it (every one with --json).
    let mut quarantined = reply.quarantined.clone();
    quarantined.sort_unstable();
    let list = if quarantined.is_empty() {
        String::new()
    } else {
        format!("quarantined: {}\n", table::ranges(&quarantined, 20))
    };
    table + &list + &stale_warning(reply.stale.as_deref(), Some(reply.index))
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
    let mut out = format!(
        "node_id {} ({} at {}), lease {} ms, fencing token {}.{}, leader {}\n",
        n.node_id, n.node_type, n.addr, reply.lease_ms, n.term, n.index, reply.leader
    );
    // Registering a live address again replaces its details: say what changed.
    if let Some(before) = &reply.previous {
        let shown = |s: &str| {
            if s.is_empty() {
                "(none)".to_owned()
            } else {
                s.to_owned()
            }
        };
        let mut changes = Vec::new();
        if before.access_addr != n.access_addr {
            changes.push(format!(
                "access address {} -> {}",
                shown(&before.access_addr),
                shown(&n.access_addr)
            ));
        }
        if before.worker_num != n.worker_num {
            changes.push(format!("workers {} -> {}", before.worker_num, n.worker_num));
        }
        if before.metadata != n.metadata {
            changes.push(format!(
                "metadata {} -> {}",
                shown(&before.metadata),
                shown(&n.metadata)
            ));
        }
        out.push_str(&format!(
            "updated the live registration of {}: {} (a registration states the whole record: give every flag to keep a value)\n",
            n.addr,
            changes.join(", ")
        ));
    }
    out
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
            quarantined: vec![7, 2, 3],
            index: 9,
            stale: None,
        });
        assert_eq!(
            out,
            "range     last_node_id    in_use    free    quarantined\n\
             1..=10    4               3         4       3\n\
             quarantined: 2-3, 7\n"
        );
    }
}
