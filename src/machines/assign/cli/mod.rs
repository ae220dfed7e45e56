//! Work assignment's nebcli commands: `show resources`, `resource add|delete|rebalance`.
//!
//! Keywords are case-insensitive; names, node types and labels are kept as typed.

pub mod lock;

use std::collections::BTreeMap;

use crate::cli::table::{or_dash, render, stale_warning, yes_no};
use crate::cli::{Commands, Failure, Session, UsageError, flags, number, optional, usage};
use crate::pb::assign as pb;

/// One parsed work-assignment command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `show resources [TYPE]`
    Show(Option<String>, crate::cli::Page),
    /// `resource add NAME --type T [--weight N] [--label k=v]...`
    Add {
        name: String,
        node_type: String,
        weight: u32,
        labels: BTreeMap<String, String>,
    },
    /// `resource delete NAME`
    Delete(String),
    /// `resource rebalance [TYPE]`
    Rebalance(Option<String>),
    /// `resource reassign [TYPE]`
    Reassign(Option<String>),
    /// `resource add NAME --slot GROUP/N [--weight N]`
    AddToSlot {
        name: String,
        group: String,
        slot: u32,
        weight: u32,
    },
    /// `show slots [GROUP]`
    ShowSlots(Option<String>, crate::cli::Page),
    /// `slots create GROUP --type T --count M`
    CreateSlots {
        name: String,
        node_type: String,
        count: u32,
    },
    /// `slots delete GROUP`
    DeleteSlots(String),
    /// `watch assignments NODE_ID [--from INDEX]`: what a registration holds, as lines.
    Watch { node_id: u32, from: u64 },
}

/// `watch assignments NODE_ID [--from INDEX]`.
fn parse_watch(args: &[&str]) -> Result<Command, UsageError> {
    const CMD: &str = "watch assignments";
    const USE: &str = "usage: `watch assignments NODE_ID [--from INDEX]`";
    let [id, rest @ ..] = args else {
        return Err(usage(USE));
    };
    let node_id = id.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
        usage(format!(
            "`{CMD}`: `{id}` is not a node ID (1 or more); {USE}"
        ))
    })?;
    let mut from = 0;
    for (flag, value) in flags(CMD, rest)? {
        match flag.as_str() {
            "from" => from = number(CMD, "from", value)?,
            other => return Err(usage(format!("`{CMD}`: unknown flag --{other}; {USE}"))),
        }
    }
    Ok(Command::Watch { node_id, from })
}

/// One registration's assignments, followed (`watch assignments`).
struct AssignmentWatch {
    node_id: u32,
    token: (u64, u64),
}

/// A JSON line or a text line about a resource or a slot.
fn event_line(
    event: &str,
    index: u64,
    json: bool,
    what: serde_json::Value,
    text: String,
) -> String {
    if json {
        format!(
            "{}\n",
            serde_json::json!({"event": event, "index": index, "item": what})
        )
    } else {
        format!("{event} {text} index={index}\n")
    }
}

fn slot_text(s: &pb::SlotHeld) -> String {
    format!("slot {}/{} (version {})", s.group, s.slot, s.version)
}

impl crate::cli::follow::Followed for AssignmentWatch {
    type Request = pb::WatchAssignments;
    type Reply = pb::WatchAssignmentsReply;
    type Notice = pb::AssignmentNotice;
    const WHAT: &'static str = "the assignment watch";

    fn commands(&self) -> (u32, u32) {
        use crate::machines::assign::AssignCmd;
        use crate::wire::Code;
        (AssignCmd::Watch.code(), AssignCmd::Notice.code())
    }

    fn request(&self, from: u64) -> pb::WatchAssignments {
        pb::WatchAssignments {
            node_id: self.node_id,
            term: self.token.0,
            index: self.token.1,
            start_index: from,
        }
    }

    fn reply_index(reply: &pb::WatchAssignmentsReply) -> (u64, bool) {
        (reply.index, reply.resumed)
    }

    fn notice_index(notice: &pb::AssignmentNotice) -> u64 {
        notice.index
    }

    fn reply_lines(&self, reply: &pb::WatchAssignmentsReply, json: bool) -> String {
        let at = reply.index;
        let resources = reply
            .held
            .iter()
            .map(|r| event_line("present", at, json, serde_json::json!(r), resource_text(r)));
        let slots = reply
            .slots
            .iter()
            .map(|s| event_line("present", at, json, serde_json::json!(s), slot_text(s)));
        resources.chain(slots).collect()
    }

    fn notice_lines(&self, n: &pb::AssignmentNotice, json: bool) -> String {
        let at = n.index;
        let held = n.held.iter().map(|r| {
            let event = if r.revoking { "revoking" } else { "held" };
            event_line(event, at, json, serde_json::json!(r), resource_text(r))
        });
        let gone = n
            .gone
            .iter()
            .map(|r| event_line("gone", at, json, serde_json::json!(r), resource_text(r)));
        let granted = n.slots_held.iter().map(|s| {
            let event = if s.revoking {
                "slot_revoking"
            } else {
                "granted"
            };
            event_line(event, at, json, serde_json::json!(s), slot_text(s))
        });
        let lost = n
            .slots_gone
            .iter()
            .map(|s| event_line("slot_gone", at, json, serde_json::json!(s), slot_text(s)));
        held.chain(gone).chain(granted).chain(lost).collect()
    }
}

fn resource_text(r: &pb::ResourceInfo) -> String {
    format!("resource {} ({}, weight {})", r.name, r.node_type, r.weight)
}

/// `watch assignments`: the registration's fencing token (from the registry), then the watch.
async fn watch(session: &mut Session, node_id: u32, from: u64) -> Result<String, Failure> {
    let req = crate::pb::registry::NodesRequest {
        node_id,
        ..Default::default()
    };
    let reply = session
        .with_client(async |c| c.nodes_matching(&req).await)
        .await?;
    let Some(node) = reply
        .nodes
        .iter()
        .filter(|e| e.is_online)
        .find_map(|e| e.node.as_ref())
    else {
        return Err(Failure::Check(format!(
            "no live registration holds node_id {node_id}"
        )));
    };
    let watch = AssignmentWatch {
        node_id,
        token: (node.term, node.index),
    };
    crate::cli::follow::follow(session, watch, from).await
}

const USAGE: &str = "usage: `resource add NAME --type T [--weight N] [--label k=v]`, `resource delete NAME`, `resource rebalance [TYPE]`";

fn parse_add(args: &[&str]) -> Result<Command, UsageError> {
    let Some((name, rest)) = args.split_first().filter(|(n, _)| !n.starts_with("--")) else {
        return Err(usage("`resource add` needs a resource name"));
    };
    let (mut node_type, mut weight, mut labels) = (String::new(), 1, BTreeMap::new());
    let mut slot = None;
    for (flag, value) in flags("resource add", rest)? {
        match flag.as_str() {
            "type" => node_type = value.to_owned(),
            "slot" => {
                let parsed = value
                    .rsplit_once('/')
                    .and_then(|(g, n)| Some((g.to_owned(), n.parse::<u32>().ok()?)));
                let Some(parsed) = parsed else {
                    return Err(usage(format!(
                        "`resource add`: --slot `{value}` is not GROUP/N (a slot number from 0)"
                    )));
                };
                slot = Some(parsed);
            }
            "weight" => {
                weight = number("resource add", "weight", value)?;
                if weight == 0 {
                    return Err(usage("`resource add`: --weight must be at least 1"));
                }
            }
            "label" => {
                let Some((k, v)) = value.split_once('=') else {
                    return Err(usage(format!(
                        "`resource add`: --label `{value}` is not key=value"
                    )));
                };
                labels.insert(k.to_owned(), v.to_owned());
            }
            other => return Err(usage(format!("`resource add`: unknown flag --{other}"))),
        }
    }
    if let Some((group, slot)) = slot {
        if !node_type.is_empty() || !labels.is_empty() {
            return Err(usage(
                "`resource add`: a resource bound to a slot takes its group's type; give --slot or --type, not both, and no labels",
            ));
        }
        return Ok(Command::AddToSlot {
            name: (*name).to_owned(),
            group,
            slot,
            weight,
        });
    }
    if node_type.is_empty() {
        return Err(usage(
            "`resource add` needs --type T (the node type that runs it) or --slot GROUP/N",
        ));
    }
    Ok(Command::Add {
        name: (*name).to_owned(),
        node_type,
        weight,
        labels,
    })
}

fn parse_resource(words: &[&str]) -> Result<Command, UsageError> {
    let Some(sub) = words.first() else {
        return Err(usage(USAGE));
    };
    let args = &words[1..];
    match sub.to_ascii_lowercase().as_str() {
        "add" => parse_add(args),
        "delete" => match args {
            [name] => Ok(Command::Delete((*name).to_owned())),
            _ => Err(usage("usage: `resource delete NAME`")),
        },
        "rebalance" => optional("resource rebalance", args).map(Command::Rebalance),
        "reassign" => optional("resource reassign", args).map(Command::Reassign),
        _ => Err(usage(USAGE)),
    }
}

fn parse_slots(words: &[&str]) -> Result<Command, UsageError> {
    const SLOTS_USAGE: &str =
        "usage: `slots create GROUP --type T --count M`, `slots delete GROUP`";
    let Some(sub) = words.first() else {
        return Err(usage(SLOTS_USAGE));
    };
    let args = &words[1..];
    match sub.to_ascii_lowercase().as_str() {
        "create" => {
            let Some((name, rest)) = args.split_first().filter(|(n, _)| !n.starts_with("--"))
            else {
                return Err(usage("`slots create` needs a group name"));
            };
            let (mut node_type, mut count) = (String::new(), 0u32);
            for (flag, value) in flags("slots create", rest)? {
                match flag.as_str() {
                    "type" => node_type = value.to_owned(),
                    "count" => count = number("slots create", "count", value)?,
                    other => return Err(usage(format!("`slots create`: unknown flag --{other}"))),
                }
            }
            if node_type.is_empty() || count == 0 {
                return Err(usage(
                    "`slots create` needs --type T and --count M (at least 1)",
                ));
            }
            Ok(Command::CreateSlots {
                name: (*name).to_owned(),
                node_type,
                count,
            })
        }
        "delete" => match args {
            [name] => Ok(Command::DeleteSlots((*name).to_owned())),
            _ => Err(usage("usage: `slots delete GROUP`")),
        },
        _ => Err(usage(SLOTS_USAGE)),
    }
}

/// `show slots` as a table: one row per slot.
fn slots_table(reply: &pb::GroupsReply) -> String {
    let mut rows = Vec::new();
    for view in &reply.groups {
        let Some(g) = &view.group else { continue };
        let standbys: Vec<String> = view.standbys.iter().map(u32::to_string).collect();
        for (i, slot) in g.slots.iter().enumerate() {
            let (holder, addr, since, token) = match &slot.holder {
                Some(h) => (
                    h.node_id.to_string(),
                    h.addr.clone(),
                    reply.now_ms.saturating_sub(h.since_ms).to_string(),
                    format!("{}.{}", h.term, h.index),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            rows.push(vec![
                g.name.clone(),
                g.node_type.clone(),
                i.to_string(),
                holder,
                addr,
                since,
                token,
                slot.version.to_string(),
                yes_no(slot.revoking),
                or_dash(&standbys.join(",")),
            ]);
        }
    }
    let mut out = stale_warning(reply.stale.as_deref(), Some(reply.index));
    out.push_str(&render(
        &[
            "group",
            "node_type",
            "slot",
            "holder",
            "address",
            "since_ms",
            "token",
            "version",
            "revoking",
            "standbys",
        ],
        &rows,
    ));
    out.push_str(&crate::cli::page_note(
        reply.groups.len(),
        reply.total,
        &reply.next,
    ));
    out
}

fn holder_cells(r: &pb::ResourceInfo, now_ms: u64) -> [String; 4] {
    match &r.holder {
        Some(h) => [
            h.node_id.to_string(),
            h.addr.clone(),
            now_ms.saturating_sub(h.since_ms).to_string(),
            format!("{}.{}", h.term, h.index),
        ],
        None => ["-".into(), "-".into(), "-".into(), "-".into()],
    }
}

/// `show resources` as a table.
fn resources_table(reply: &pb::ResourcesReply) -> String {
    let rows: Vec<Vec<String>> = reply
        .resources
        .iter()
        .map(|r| {
            let [id, addr, since, token] = holder_cells(r, reply.now_ms);
            let labels: Vec<String> = r.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            vec![
                r.name.clone(),
                r.node_type.clone(),
                id,
                addr,
                r.weight.to_string(),
                since,
                token,
                yes_no(r.revoking),
                or_dash(&labels.join(",")),
            ]
        })
        .collect();
    let mut out = stale_warning(reply.stale.as_deref(), Some(reply.index));
    out.push_str(&render(
        &[
            "name",
            "node_type",
            "holder",
            "address",
            "weight",
            "since_ms",
            "token",
            "revoking",
            "labels",
        ],
        &rows,
    ));
    out.push_str(&crate::cli::page_note(
        reply.resources.len(),
        reply.total,
        &reply.next,
    ));
    out
}

fn resource_line(what: &str, r: &pb::ResourceInfo) -> String {
    let held = match &r.holder {
        Some(h) => format!(
            "held by node {} at {} (token {}.{})",
            h.node_id, h.addr, h.term, h.index
        ),
        None => format!("not held: no live {} service is eligible yet", r.node_type),
    };
    format!(
        "{what} resource {} ({}, weight {}): {held}\n",
        r.name, r.node_type, r.weight
    )
}

impl Commands for Command {
    const HELP: &'static [(&'static str, &'static str)] = &[
        (
            "show resources [TYPE] [--limit N] [--from NAME]",
            "resources: name, node_type, holder node ID and address, weight, since_ms, fencing token, revoking, labels",
        ),
        (
            "resource add NAME --type T [--weight N] [--label k=v]",
            "add a resource for services of type T (with the labels in their metadata); it goes to the least loaded one at once; adding it again as it is returns it",
        ),
        (
            "resource delete NAME",
            "delete a resource (deleting one that does not exist changes nothing)",
        ),
        (
            "resource add NAME --slot GROUP/N [--weight N]",
            "add a resource bound to slot N of a slot group: it runs wherever that slot's holder is, and moves with the slot",
        ),
        (
            "show slots [GROUP] [--limit N] [--from GROUP]",
            "slot groups: group, node_type, slot, holder, address, since_ms, token, version, revoking (its holder drains and was asked to let it go), standbys (oldest first)",
        ),
        (
            "slots create GROUP --type T --count M",
            "M slots for services of type T; each live service holds at most one, the others stand by and take a slot the moment its holder's registration ends",
        ),
        (
            "slots delete GROUP",
            "delete a slot group (refused while resources are bound to it)",
        ),
        (
            "resource reassign [TYPE]",
            "move now the resources waiting for their ended holder to come back (assign.delay_ms)",
        ),
        (
            "watch assignments NODE_ID [--from INDEX]",
            "what the registration holding NODE_ID holds (`present`), then each change as a line with its log index (`held`, `revoking`, `gone`, `granted`, `slot_revoking`, `slot_gone`; JSON lines with -w json) until Ctrl-C or SIGTERM; follows leader changes, each once; `--from` lists nothing and starts at that log index",
        ),
        (
            "resource rebalance [TYPE]",
            "move resources from the most to the least loaded services, a bounded number at a time; each holder lets go before the next one gets it",
        ),
    ];
    const SUBJECTS: &'static [&'static str] = &["resources", "slots"];

    fn parse(head: &[&str], words: &[&str]) -> Option<Result<Self, UsageError>> {
        Some(match head {
            ["show", "resources"] => {
                crate::cli::list_args("show resources", words.get(2..).unwrap_or_default(), true)
                    .map(|(node_type, page)| Command::Show(node_type, page))
            }
            ["resource", ..] => parse_resource(&words[1..]),
            ["show", "slots"] => {
                crate::cli::list_args("show slots", words.get(2..).unwrap_or_default(), true)
                    .map(|(group, page)| Command::ShowSlots(group, page))
            }
            ["slots", ..] => parse_slots(&words[1..]),
            ["watch", "assignments"] => parse_watch(words.get(2..).unwrap_or_default()),
            _ => return None,
        })
    }

    async fn run(&self, session: &mut Session) -> Result<String, Failure> {
        let out = match self {
            Command::Show(t, page) => {
                let req = pb::ResourcesRequest {
                    node_type: t.clone().unwrap_or_default(),
                    limit: page.limit,
                    from: page.from.clone(),
                };
                session
                    .show(async |c| c.resources_matching(&req).await, resources_table)
                    .await?
            }
            Command::Add {
                name,
                node_type,
                weight,
                labels,
            } => {
                let r = session
                    .cluster()
                    .add_resource(name, node_type, *weight, labels.clone())
                    .await?;
                session.print(&r, |r| resource_line("added", r))
            }
            Command::AddToSlot {
                name,
                group,
                slot,
                weight,
            } => {
                let r = session
                    .cluster()
                    .add_slot_resource(name, group, *slot, *weight)
                    .await?;
                session.print(&r, |r| resource_line("added", r))
            }
            Command::ShowSlots(g, page) => {
                let req = pb::GroupsRequest {
                    name: g.clone().unwrap_or_default(),
                    limit: page.limit,
                    from: page.from.clone(),
                };
                session
                    .show(async |c| c.slot_groups_matching(&req).await, slots_table)
                    .await?
            }
            Command::CreateSlots {
                name,
                node_type,
                count,
            } => {
                let g = session
                    .cluster()
                    .create_slots(name, node_type, *count)
                    .await?;
                session.print(&g, |g| {
                    format!(
                        "slot group {} of {} slots for {} services; free slots go to the oldest of them at the next tick\n",
                        g.name,
                        g.slots.len(),
                        g.node_type
                    )
                })
            }
            Command::DeleteSlots(name) => match session.cluster().delete_slots(name).await? {
                Some(g) => session.print(&g, |g| format!("deleted slot group {}\n", g.name)),
                None => session.print(&serde_json::Value::Null, |_| {
                    format!("no slot group named {name}: nothing to delete\n")
                }),
            },
            Command::Watch { node_id, from } => watch(session, *node_id, *from).await?,
            Command::Delete(name) => match session.cluster().delete_resource(name).await? {
                Some(r) => session.print(&r, |r| resource_line("deleted", r)),
                None => session.print(&serde_json::Value::Null, |_| {
                    format!("no resource named {name}: nothing to delete\n")
                }),
            },
            Command::Reassign(t) => {
                session
                    .cluster()
                    .reassign_now(t.as_deref().unwrap_or(""))
                    .await?;
                session.print(&serde_json::Value::Null, |_| {
                    "resources waiting for their holder to come back move at the next tick\n".into()
                })
            }
            Command::Rebalance(t) => {
                let moves = session
                    .cluster()
                    .rebalance(t.as_deref().unwrap_or(""))
                    .await?;
                session.print(&moves, |moves| {
                    if moves.is_empty() {
                        return "balanced: nothing to move\n".to_owned();
                    }
                    let rows: Vec<Vec<String>> = moves
                        .iter()
                        .map(|m| vec![m.name.clone(), m.from.to_string(), m.to.to_string()])
                        .collect();
                    format!(
                        "{} moves begun (each holder lets go first):\n{}",
                        moves.len(),
                        render(&["name", "from", "to"], &rows)
                    )
                })
            }
        };
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
