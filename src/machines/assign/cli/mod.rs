//! Work assignment's nebcli commands: `show resources`, `resource add|delete|rebalance`.
//!
//! Keywords are case-insensitive; names, node types and labels are kept as typed.

use std::collections::BTreeMap;

use crate::cli::table::{or_dash, render, stale_warning, yes_no};
use crate::cli::{Commands, Failure, Session, UsageError, flags, number, optional, usage};
use crate::pb::assign as pb;

/// One parsed work-assignment command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `show resources [TYPE]`
    Show(Option<String>),
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
}

const USAGE: &str = "usage: `resource add NAME --type T [--weight N] [--label k=v]`, `resource delete NAME`, `resource rebalance [TYPE]`";

fn parse_add(args: &[&str]) -> Result<Command, UsageError> {
    let Some((name, rest)) = args.split_first().filter(|(n, _)| !n.starts_with("--")) else {
        return Err(usage("`resource add` needs a resource name"));
    };
    let (mut node_type, mut weight, mut labels) = (String::new(), 1, BTreeMap::new());
    for (flag, value) in flags("resource add", rest)? {
        match flag.as_str() {
            "type" => node_type = value.to_owned(),
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
    if node_type.is_empty() {
        return Err(usage(
            "`resource add` needs --type T (the node type that runs it)",
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
        _ => Err(usage(USAGE)),
    }
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
    let mut out = stale_warning(reply.stale.as_deref());
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
            "show resources [TYPE]",
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
            "resource rebalance [TYPE]",
            "move resources from the most to the least loaded services, a bounded number at a time; each holder lets go before the next one gets it",
        ),
    ];
    const SUBJECTS: &'static [&'static str] = &["resources"];

    fn parse(head: &[&str], words: &[&str]) -> Option<Result<Self, UsageError>> {
        Some(match head {
            ["show", "resources"] => {
                optional("show resources", words.get(2..).unwrap_or_default()).map(Command::Show)
            }
            ["resource", ..] => parse_resource(&words[1..]),
            _ => return None,
        })
    }

    async fn run(&self, session: &mut Session) -> Result<String, Failure> {
        let out = match self {
            Command::Show(t) => {
                let t = t.as_deref().unwrap_or("");
                let reply = session.with_client(async |c| c.resources(t).await).await?;
                session.print(&reply, resources_table)
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
            Command::Delete(name) => match session.cluster().delete_resource(name).await? {
                Some(r) => session.print(&r, |r| resource_line("deleted", r)),
                None => session.print(&serde_json::Value::Null, |_| {
                    format!("no resource named {name}: nothing to delete\n")
                }),
            },
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
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Command, UsageError> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let lower: Vec<String> = words
            .iter()
            .take(2)
            .map(|w| w.to_ascii_lowercase())
            .collect();
        let head: Vec<&str> = lower.iter().map(String::as_str).collect();
        Command::parse(&head, &words).expect("owned")
    }

    #[test]
    fn commands_parse_with_their_flags() {
        assert_eq!(
            parse("resource add site-1 --type CRAWLER --weight 3 --label zone=b"),
            Ok(Command::Add {
                name: "site-1".into(),
                node_type: "CRAWLER".into(),
                weight: 3,
                labels: BTreeMap::from([("zone".into(), "b".into())]),
            })
        );
        assert!(parse("resource add site-1").is_err(), "needs a type");
        assert!(parse("resource add --type X").is_err(), "needs a name");
        assert!(parse("resource add a --type X --weight 0").is_err());
        assert!(parse("resource add a --type X --weight -1").is_err());
        assert!(parse("resource add a --type X --label nokey").is_err());
        assert_eq!(parse("resource delete a"), Ok(Command::Delete("a".into())));
        assert_eq!(
            parse("RESOURCE rebalance CRAWLER"),
            Ok(Command::Rebalance(Some("CRAWLER".into())))
        );
        assert_eq!(parse("show resources"), Ok(Command::Show(None)));
        assert!(parse("resource frob").is_err());
    }
}
