//! The registry's nebcli commands: `show nodes`, `show node_detail`, `show node_report`,
//! `show ids`, `show subscription`, `register`, `unregister`, `bench register`.
//!
//! Keywords are case-insensitive; arguments (node types, addresses, metadata) are kept as
//! typed, since node types are case-sensitive.

pub mod bench;
pub mod render;

use crate::cli::{self, Commands, Failure, Session, UsageError, flags, number, optional, usage};
use crate::client::{Client, ClientError};
use crate::machines::registry::RegistryCmd;
use crate::pb;

/// One parsed registry command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `show nodes [TYPE]`
    /// `show nodes [TYPE] [--type T] [--limit N]`.
    ShowNodes(Option<String>, Option<usize>),
    /// `show node_detail TYPE [ip:port]`
    ShowNodeDetail(String, Option<String>),
    /// `show node_report TYPE [ip:port]`
    ShowNodeReport(String, Option<String>),
    ShowIds,
    /// `show subscription [TYPE]`
    ShowSubscription(Option<String>),
    Register(Registration),
    /// `unregister ID|ip:port [--free]`
    Unregister {
        target: String,
        free: bool,
    },
    /// `bench register --clients C --count N [--type T]`
    BenchRegister {
        clients: usize,
        count: usize,
        node_type: String,
    },
}

/// `register --type T --addr ip:port [--access ip:port] [--workers N] [--metadata JSON]`
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Registration {
    pub node_type: String,
    pub addr: String,
    pub access_addr: String,
    pub worker_num: u32,
    pub metadata: String,
}

/// A type and an optional address after `cmd`.
fn type_and_addr(cmd: &str, args: &[&str]) -> Result<(String, Option<String>), UsageError> {
    match args {
        [t] => Ok(((*t).to_owned(), None)),
        [t, a] => Ok(((*t).to_owned(), Some((*a).to_owned()))),
        _ => Err(usage(format!("usage: `{cmd} TYPE [IP:PORT]`"))),
    }
}

fn parse_register(args: &[&str]) -> Result<Command, UsageError> {
    let mut r = Registration::default();
    for (flag, value) in flags("register", args)? {
        match flag.as_str() {
            "type" => r.node_type = value.to_owned(),
            "addr" => r.addr = value.to_owned(),
            "access" => r.access_addr = value.to_owned(),
            "workers" => r.worker_num = number("register", "workers", value)?,
            "metadata" => r.metadata = value.to_owned(),
            other => return Err(usage(format!("`register`: unknown flag --{other}"))),
        }
    }
    if r.node_type.is_empty() || r.addr.is_empty() {
        return Err(usage("usage: `register --type T --addr IP:PORT`"));
    }
    Ok(Command::Register(r))
}

fn parse_show_nodes(args: &[&str]) -> Result<Command, UsageError> {
    let (mut node_type, mut rest) = (None, args);
    if let [first, more @ ..] = args
        && !first.starts_with("--")
    {
        node_type = Some((*first).to_owned());
        rest = more;
    }
    let mut limit = None;
    for (flag, value) in flags("show nodes", rest)? {
        match flag.as_str() {
            "type" => node_type = Some(value.to_owned()),
            "limit" => limit = Some(number("show nodes", "limit", value)?),
            other => {
                return Err(usage(format!(
                    "`show nodes`: unknown flag --{other}; usage: `show nodes [TYPE] [--type T] [--limit N]`"
                )));
            }
        }
    }
    Ok(Command::ShowNodes(node_type, limit))
}

fn parse_unregister(args: &[&str]) -> Result<Command, UsageError> {
    // A node ID (1..) or an ip:port, checked here: a typo is a usage error, not a request.
    let target_ok = |t: &str| {
        t.parse::<u32>().is_ok_and(|id| id > 0) || t.parse::<std::net::SocketAddr>().is_ok()
    };
    if let Some(bad) = args
        .iter()
        .find(|a| !a.eq_ignore_ascii_case("--free") && !target_ok(a))
    {
        return Err(usage(format!(
            "`unregister`: `{bad}` is neither a node ID (1 or more) nor an ip:port; usage: `unregister ID|IP:PORT [--free]`"
        )));
    }
    match args {
        [target] => Ok(Command::Unregister {
            target: (*target).to_owned(),
            free: false,
        }),
        [target, flag] | [flag, target] if flag.eq_ignore_ascii_case("--free") => {
            Ok(Command::Unregister {
                target: (*target).to_owned(),
                free: true,
            })
        }
        _ => Err(usage("usage: `unregister ID|IP:PORT [--free]`")),
    }
}

fn parse_bench(args: &[&str]) -> Result<Command, UsageError> {
    let (mut clients, mut count, mut node_type) = (16, 1000, "BENCH".to_owned());
    for (flag, value) in flags("bench register", args)? {
        match flag.as_str() {
            "clients" => clients = number("bench register", "clients", value)?,
            "count" => count = number("bench register", "count", value)?,
            "type" => node_type = value.to_owned(),
            other => return Err(usage(format!("`bench register`: unknown flag --{other}"))),
        }
    }
    if clients == 0 || count == 0 {
        return Err(usage(
            "`bench register`: --clients and --count must be at least 1",
        ));
    }
    Ok(Command::BenchRegister {
        clients,
        count,
        node_type,
    })
}

/// Registrations as the leader sees them (reports and last_seen are kept there alone),
/// filtered by type, address and node ID (empty or 0: any).
async fn leader_nodes(
    session: &mut Session,
    node_type: &str,
    addr: &str,
    node_id: u32,
) -> Result<pb::registry::NodesReply, ClientError> {
    let req = pb::registry::NodesRequest {
        node_type: node_type.to_owned(),
        addr: addr.to_owned(),
        node_id,
    };
    let reply = session
        .with_client(async |c| c.nodes_matching(&req).await)
        .await?;
    if reply.is_leader {
        return Ok(reply);
    }
    let status = session
        .with_client(async |c| c.beacon_status().await)
        .await?;
    match status.leader {
        Some(leader) => {
            let mut c = Client::connect(&leader, &session.opts).await?;
            c.nodes_matching(&req).await
        }
        None => Ok(reply),
    }
}

impl Commands for Command {
    const HELP: &'static [(&'static str, &'static str)] = &[
        (
            "show nodes [TYPE] [--type T] [--limit N]",
            "registered services: node_id, node_type, address, is_online, last_seen_ms; a summary line with counts",
        ),
        (
            "show node_detail TYPE [IP:PORT]",
            "node_id, address, access address, worker_num, registered time, fencing token, metadata",
        ),
        (
            "show node_report TYPE [IP:PORT]",
            "the latest reports (asks the leader): load connect recv_num recv_byte send_num send_byte",
        ),
        (
            "show ids",
            "the node-ID allocator: range, last_node_id, in use, quarantined",
        ),
        (
            "show subscription [TYPE]",
            "which node types each type is told about",
        ),
        (
            "register --type T --addr IP:PORT [--access IP:PORT] [--workers N] [--metadata JSON]",
            "register a service (at the leader) and print its node ID; it lasts one lease unless the service reports",
        ),
        (
            "unregister ID|IP:PORT [--free]",
            "end the registration found there (named by its fencing token, so a registration that replaced it meanwhile is left alone); its ID goes to quarantine, since its holder may still be using it, or with --free is free at once",
        ),
        (
            "bench register --clients C --count N [--type T]",
            "register N services from C concurrent clients; print allocations/s, latency, uniqueness",
        ),
    ];
    const SUBJECTS: &'static [&'static str] =
        &["nodes", "node_detail", "node_report", "ids", "subscription"];

    fn parse(head: &[&str], words: &[&str]) -> Option<Result<Self, UsageError>> {
        let args = words.get(2..).unwrap_or_default();
        Some(match head {
            ["show", "nodes"] => parse_show_nodes(args),
            ["show", "node_detail"] => {
                type_and_addr("show node_detail", args).map(|(t, a)| Command::ShowNodeDetail(t, a))
            }
            ["show", "node_report"] => {
                type_and_addr("show node_report", args).map(|(t, a)| Command::ShowNodeReport(t, a))
            }
            ["show", "ids"] => match args {
                [] => Ok(Command::ShowIds),
                _ => Err(usage("`show ids` takes no arguments")),
            },
            ["show", "subscription"] => {
                optional("show subscription", args).map(Command::ShowSubscription)
            }
            ["register", ..] => parse_register(&words[1..]),
            ["unregister", ..] => parse_unregister(&words[1..]),
            ["bench", "register"] => parse_bench(args),
            ["bench", ..] => Err(usage("usage: `bench register --clients C --count N`")),
            _ => return None,
        })
    }

    async fn run(&self, session: &mut Session) -> Result<String, Failure> {
        let out = match self {
            Command::ShowNodes(node_type, limit) => {
                let t = node_type.as_deref().unwrap_or("");
                let reply = session.with_client(async |c| c.nodes(t, "").await).await?;
                if session.json {
                    cli::json(&render::nodes_json(&reply))
                } else {
                    render::nodes_limited(&reply, *limit)
                }
            }
            Command::ShowNodeDetail(t, addr) => {
                let a = addr.as_deref().unwrap_or("");
                let reply = session.with_client(async |c| c.nodes(t, a).await).await?;
                if session.json {
                    cli::json(&render::nodes_json(&reply))
                } else {
                    render::node_detail(&reply)
                }
            }
            Command::ShowNodeReport(t, addr) => {
                let reply = leader_nodes(session, t, addr.as_deref().unwrap_or(""), 0).await?;
                session.print(&reply, render::node_report)
            }
            Command::ShowIds => {
                let reply = session.with_client(async |c| c.ids().await).await?;
                session.print(&reply, render::ids)
            }
            Command::ShowSubscription(t) => {
                let t = t.as_deref().unwrap_or("");
                let reply = session
                    .with_client(async |c| c.subscriptions(t).await)
                    .await?;
                session.print(&reply, render::subscriptions)
            }
            Command::Register(r) => {
                let req = pb::registry::RegisterRequest {
                    node_type: r.node_type.clone(),
                    addr: r.addr.clone(),
                    access_addr: r.access_addr.clone(),
                    worker_num: r.worker_num,
                    metadata: r.metadata.clone(),
                };
                let reply: pb::registry::RegisterReply = session
                    .cluster()
                    .call(RegistryCmd::Register, &req, "the registration")
                    .await?;
                match &reply.node {
                    Some(node) if session.json => cli::json(node),
                    _ => render::registered(&reply),
                }
            }
            Command::Unregister { target, free } => {
                // The registration is named by the fencing token seen at the leader: if it
                // ends and its ID goes to someone else before this arrives, the beacon
                // refuses (NOT_HOLDER) instead of ending the newcomer's.
                let (id, addr) = match target.parse::<u32>() {
                    Ok(id) => (id, ""),
                    Err(_) => (0, target.as_str()),
                };
                let seen = leader_nodes(session, "", addr, id).await?;
                let Some(node) = seen
                    .nodes
                    .iter()
                    .filter(|e| e.is_online)
                    .find_map(|e| e.node.clone())
                else {
                    return Err(Failure::Check(format!(
                        "no live registration at {target} (see `show nodes`)"
                    )));
                };
                let req = pb::registry::UnregisterRequest {
                    node_id: node.node_id,
                    addr: String::new(),
                    term: node.term,
                    index: node.index,
                    release: *free,
                    clock_ms: 0,
                };
                let reply: pb::registry::UnregisterReply = session
                    .cluster()
                    .call(RegistryCmd::Unregister, &req, "the unregistration")
                    .await?;
                let node = reply.node.unwrap_or_default();
                if session.json {
                    cli::json(&node)
                } else {
                    let id = if *free {
                        "the ID is free"
                    } else {
                        "the ID is in quarantine (its holder may still be using it; --free frees it at once)"
                    };
                    format!(
                        "unregistered node_id {} ({} at {}, fencing token {}.{}); {id}\n",
                        node.node_id, node.node_type, node.addr, node.term, node.index
                    )
                }
            }
            Command::BenchRegister {
                clients,
                count,
                node_type,
            } => {
                // More registrations than free IDs cannot all succeed: say so before starting.
                let ids = session.with_client(async |c| c.ids().await).await?;
                let free = render::free_ids(&ids);
                if *count as u64 > free {
                    return Err(Failure::Check(format!(
                        "--count {count} is more than the {free} free node IDs of the cluster's range {}..={} ({} in use, {} quarantined): count fewer, or start the beacons with a wider range (--id-range 1-100000)",
                        ids.first,
                        ids.last,
                        ids.in_use,
                        ids.quarantined.len()
                    )));
                }
                let report =
                    bench::register(&session.server, &session.opts, *clients, *count, node_type)
                        .await;
                let out = session.print(&report, bench::Report::render);
                if report.duplicates > 0
                    || report.failed > 0
                    || report.lost > 0
                    || report.cleanup_failed > 0
                {
                    return Err(Failure::Found {
                        out,
                        why: format!(
                            "benchmark failed: {} duplicate IDs, {} failed registrations, {} lost their lease, {} not unregistered",
                            report.duplicates, report.failed, report.lost, report.cleanup_failed
                        ),
                    });
                }
                out
            }
        };
        Ok(out)
    }
}
