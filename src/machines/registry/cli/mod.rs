//! The registry's nebcli commands: `show nodes`, `show node_detail`, `show node_report`,
//! `show ids`, `show subscription`, `register [--keep]`, `unregister`, `watch nodes`,
//! `node health`, `node drain`, `node undrain`, `bench register`.
//!
//! Keywords are case-insensitive; arguments (node types, addresses, metadata) are kept as
//! typed, since node types are case-sensitive.

pub mod bench;
pub mod render;

use crate::cli::{self, Commands, Failure, Session, UsageError, flags, number, optional, usage};
use crate::machines::registry::wire::{filter_to_pb, status_to_pb};
use crate::machines::registry::{HealthFilter, RegistryCmd, Status};
use crate::net::{Client, ClientError};
use crate::pb;

/// One parsed registry command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `show nodes [TYPE] [--type T] [--health H] [--limit N] [--from NODE_ID]`.
    ShowNodes {
        node_type: Option<String>,
        health: HealthFilter,
        /// A page size, cut on the beacon.
        limit: Option<u32>,
        /// The node ID the page starts at.
        from: u32,
    },
    /// `show node_detail TYPE [ip:port]`
    ShowNodeDetail(String, Option<String>),
    /// `show node_report TYPE [ip:port]`
    ShowNodeReport(String, Option<String>),
    ShowIds,
    /// `show subscription [TYPE]`
    ShowSubscription(Option<String>),
    Register(Registration),
    /// `watch nodes [TYPE...] [--health H] [--from INDEX]`: changes as lines until stopped.
    WatchNodes {
        types: Vec<String>,
        health: HealthFilter,
        from: Option<u64>,
    },
    /// `node health ID|IP:PORT passing|warning|critical [--note TEXT]`, `node drain
    /// ID|IP:PORT [--note TEXT]`, `node undrain ID|IP:PORT`: an operator's change to a
    /// registration's health.
    SetHealth {
        /// A node ID or the service's `ip:port`.
        target: String,
        status: Option<Status>,
        draining: Option<bool>,
        note: String,
        /// `node drain --wait`: then wait, at most this long, until it holds nothing.
        wait: Option<std::time::Duration>,
    },
    /// `ids free ID`: ends a quarantine early.
    FreeId(u32),
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

/// `register --type T --addr ip:port [--access ip:port] [--workers N] [--metadata JSON]
/// [--keep]`
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Registration {
    pub node_type: String,
    pub addr: String,
    pub access_addr: String,
    pub worker_num: u32,
    pub metadata: String,
    /// Renew until stopped, then unregister (etcdctl's `lease keep-alive`).
    pub keep: bool,
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
    // --keep takes no value: taken out before the flag pairs.
    let mut r = Registration {
        keep: args.iter().any(|a| a.eq_ignore_ascii_case("--keep")),
        ..Registration::default()
    };
    let args: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| !a.eq_ignore_ascii_case("--keep"))
        .collect();
    for (flag, value) in flags("register", &args)? {
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
    // Checked here, so a missing port is a usage error (exit 2), not a beacon's refusal.
    for (flag, value) in [("addr", &r.addr), ("access", &r.access_addr)] {
        if !value.is_empty() && value.parse::<std::net::SocketAddr>().is_err() {
            return Err(usage(format!(
                "`register`: --{flag} `{value}` is not IP:PORT (for example 10.0.0.5:8080)"
            )));
        }
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
    let (mut limit, mut from, mut health) = (None, 0, HealthFilter::Any);
    for (flag, value) in flags("show nodes", rest)? {
        match flag.as_str() {
            "type" => node_type = Some(value.to_owned()),
            "limit" => limit = Some(number("show nodes", "limit", value)?),
            "from" => from = number("show nodes", "from", value)?,
            "health" => health = health_filter("show nodes", value)?,
            other => {
                return Err(usage(format!(
                    "`show nodes`: unknown flag --{other}; usage: `show nodes [TYPE] [--type T] [--health H] [--limit N] [--from NODE_ID]`"
                )));
            }
        }
    }
    if limit == Some(0) {
        return Err(usage(
            "`show nodes`: --limit must be at least 1 (leave it out for every entry)",
        ));
    }
    Ok(Command::ShowNodes {
        node_type,
        health,
        limit,
        from,
    })
}

/// `--health H` of `cmd`.
fn health_filter(cmd: &str, value: &str) -> Result<HealthFilter, UsageError> {
    HealthFilter::parse(value).ok_or_else(|| {
        usage(format!(
            "`{cmd}`: --health `{value}` is not one of any, serving, passing, warning, critical, draining"
        ))
    })
}

/// `node health ID STATUS [--note T]`, `node drain ID [--note T]`, `node undrain ID`.
fn parse_node(words: &[&str]) -> Result<Command, UsageError> {
    const USAGE: &str = "usage: `node health ID|IP:PORT passing|warning|critical [--note TEXT]`, `node drain ID|IP:PORT [--note TEXT] [--wait [--wait-ms MS]]` or `node undrain ID|IP:PORT`";
    let (verb, rest) = match words {
        [verb, rest @ ..] => (verb.to_ascii_lowercase(), rest),
        [] => return Err(usage(USAGE)),
    };
    let target = match rest.first() {
        Some(t)
            if t.parse::<u32>().is_ok_and(|id| id > 0)
                || t.parse::<std::net::SocketAddr>().is_ok() =>
        {
            (*t).to_owned()
        }
        Some(t) => {
            return Err(usage(format!(
                "`node {verb}`: `{t}` is neither a node ID (1 or more) nor an ip:port; {USAGE}"
            )));
        }
        None => return Err(usage(USAGE)),
    };
    let (status, rest) = match (verb.as_str(), &rest[1..]) {
        ("health", [word, rest @ ..]) => {
            let status = Status::parse(word).ok_or_else(|| {
                usage(format!(
                    "`node health`: `{word}` is not passing, warning or critical"
                ))
            })?;
            (Some(status), rest)
        }
        ("health", []) => return Err(usage(USAGE)),
        (_, rest) => (None, rest),
    };
    let mut note = String::new();
    // --wait takes no value: taken out before the flag pairs.
    let mut wait = rest
        .iter()
        .any(|a| a.eq_ignore_ascii_case("--wait"))
        .then_some(DRAIN_WAIT);
    let rest: Vec<&str> = rest
        .iter()
        .copied()
        .filter(|a| !a.eq_ignore_ascii_case("--wait"))
        .collect();
    for (flag, value) in flags(&format!("node {verb}"), &rest)? {
        match flag.as_str() {
            "note" => note = value.to_owned(),
            "wait-ms" if wait.is_some() => {
                let ms: u64 = crate::cli::number(&format!("node {verb}"), "wait-ms", value)?;
                wait = Some(std::time::Duration::from_millis(ms));
            }
            "wait-ms" => return Err(usage("`--wait-ms` bounds `--wait`: give both")),
            other => {
                return Err(usage(format!(
                    "`node {verb}`: unknown flag --{other}; {USAGE}"
                )));
            }
        }
    }
    let draining = match verb.as_str() {
        "health" => None,
        "drain" => Some(true),
        "undrain" if note.is_empty() => Some(false),
        "undrain" => return Err(usage("`node undrain` takes no note")),
        _ => return Err(usage(USAGE)),
    };
    if wait.is_some() && verb != "drain" {
        return Err(usage(format!(
            "`node {verb}`: --wait is for `node drain` (it waits until nothing is left on it)"
        )));
    }
    Ok(Command::SetHealth {
        target,
        status,
        draining,
        note,
        wait,
    })
}

/// How long `node drain --wait` waits by default: a service gets time to stop its work.
const DRAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// `node drain --wait`: asks what the registration still holds until it holds nothing, the
/// registration ends, or `limit` runs out (exit 3, with what is left). Each change of what
/// it holds is a line as it comes.
async fn wait_drained(
    session: &mut Session,
    node_id: u32,
    limit: std::time::Duration,
) -> Result<String, Failure> {
    use std::io::Write as _;
    let start = std::time::Instant::now();
    let mut last: Option<Vec<String>> = None;
    loop {
        let req = pb::registry::HoldsRequest { node_id };
        let reply: pb::registry::HoldsReply = session
            .cluster()
            .call(RegistryCmd::Holds, &req, "the holdings read")
            .await?;
        let elapsed = start.elapsed().as_millis();
        let done = match &reply.node {
            None => Some(format!(
                "node_id {node_id}: no live registration: nothing is left on it ({elapsed} ms)"
            )),
            Some(_) if reply.holds.is_empty() => Some(format!(
                "node_id {node_id} holds nothing: drained ({elapsed} ms)"
            )),
            Some(_) => None,
        };
        if let Some(line) = done {
            return Ok(if session.json {
                cli::json(&serde_json::json!({
                    "node_id": node_id,
                    "drained": true,
                    "live": reply.node.is_some(),
                    "waited_ms": elapsed as u64,
                }))
            } else {
                format!("{line}\n")
            });
        }
        let holds = reply.holds.join(", ");
        if start.elapsed() >= limit {
            let why = format!(
                "node_id {node_id} still holds {holds} after {} ms (--wait-ms); the drain goes on: a resource or slot moves once a service in rotation can take it and its holder lets it go, and a running task finishes",
                limit.as_millis()
            );
            let out = if session.json {
                cli::json(&serde_json::json!({
                    "node_id": node_id,
                    "drained": false,
                    "holds": reply.holds,
                }))
            } else {
                format!("node_id {node_id} still holds: {holds}\n")
            };
            return Err(Failure::Unfinished { out, why });
        }
        if !session.json && last.as_ref() != Some(&reply.holds) {
            println!("node_id {node_id} still holds: {holds}");
            let _ = std::io::stdout().flush();
        }
        last = Some(reply.holds);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
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
        ..Default::default()
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

/// A lookup of one address that found nothing: exit 1, saying what was looked for.
fn no_such_node(node_type: &str, addr: &str) -> Failure {
    Failure::Check(format!(
        "no {node_type} registration at {addr} (node types are case-sensitive; `show nodes` lists them)"
    ))
}

/// `register ... --keep`: registers through the client library, which renews the lease in
/// the background and follows leader changes, until Ctrl-C or SIGTERM; then unregisters, so
/// the ID is free at once. A lease lost meanwhile (the cluster unreachable for a lease, or
/// an operator's unregister) ends the command with exit 1.
async fn keep_registered(session: &mut Session, r: &Registration) -> Result<String, Failure> {
    use crate::machines::registry::client::{RegisterOptions, Registration as Live};
    let addr = r.addr.parse().map_err(|_| {
        Failure::Usage(usage(format!(
            "`register`: --addr `{}` is not IP:PORT",
            r.addr
        )))
    })?;
    let mut options = RegisterOptions::new(r.node_type.clone(), addr);
    options.access_addr = r.access_addr.parse().ok();
    options.worker_num = r.worker_num;
    options.metadata = r.metadata.clone();
    options.connect = session.opts.clone();
    options.retry_for = session.opts.timeout.max(std::time::Duration::from_secs(10));
    // Installed before the first line (see cli::stop_signal).
    let stop = cli::stop_signal();
    let live = Live::register(session.servers.clone(), options).await?;
    for w in &live.reply().warnings {
        eprintln!("nebcli: warning: {w}");
    }
    let node = live.node().clone();
    if session.json {
        cli::emit(&cli::json(&node));
    } else {
        cli::emit(&format!(
            "{}renewing the lease of node_id {} until Ctrl-C or SIGTERM\n",
            render::registered(live.reply()),
            node.node_id
        ));
    }
    tokio::select! {
        signal = stop => {
            let gone = live.unregister().await?;
            Ok(if session.json {
                cli::json(&serde_json::json!({"unregistered": gone, "signal": signal}))
            } else {
                format!("{signal}: unregistered node_id {} (the ID is free)\n", gone.node_id)
            })
        }
        lost = live.lost() => Err(Failure::Check(format!(
            "the lease of node_id {} is lost: {lost}",
            node.node_id
        ))),
    }
}

/// `watch nodes [TYPE...] [--health H] [--from INDEX]`.
fn parse_watch_nodes(args: &[&str]) -> Result<Command, UsageError> {
    const USAGE: &str = "usage: `watch nodes [TYPE...] [--health H] [--from INDEX]`";
    let mut types = Vec::new();
    let mut from = None;
    let mut health = HealthFilter::Any;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match *a {
            "--from" => {
                let index = it
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .filter(|i| *i > 0)
                    .ok_or_else(|| {
                        usage(format!(
                            "`watch nodes --from` takes a log index (1 or more); {USAGE}"
                        ))
                    })?;
                from = Some(index);
            }
            "--health" => {
                let value = it.next().ok_or_else(|| {
                    usage(format!("`watch nodes --health` takes a value; {USAGE}"))
                })?;
                health = health_filter("watch nodes", value)?;
            }
            flag if flag.starts_with("--") => {
                return Err(usage(format!(
                    "`watch nodes`: unknown flag {flag}; {USAGE}"
                )));
            }
            t => types.push(t.to_owned()),
        }
    }
    Ok(Command::WatchNodes {
        types,
        health,
        from,
    })
}

/// `watch nodes [TYPE...] [--health H] [--from INDEX]`: the current set (or, from an
/// index, nothing), then each change with its log index, as lines (JSON lines with `-w
/// json`), until Ctrl-C or SIGTERM. Follows leader changes: each change once.
async fn watch_nodes(
    session: &mut Session,
    types: &[String],
    health: HealthFilter,
    from: Option<u64>,
) -> Result<String, Failure> {
    use crate::machines::registry::client::{Watch, WatchEvent};
    let retry_for = session.opts.timeout.max(std::time::Duration::from_secs(10));
    let (servers, types, opts) = (
        session.servers.clone(),
        types.to_vec(),
        session.opts.clone(),
    );
    // Installed before anything is printed (see cli::stop_signal).
    let mut stop = cli::stop_signal();
    let mut watch = match from {
        Some(from) => Watch::resume(servers, types, health, from, opts, retry_for).await?,
        None => Watch::start_with(servers, types, health, opts, retry_for).await?,
    };
    let line = |event: &str, n: &pb::registry::NodeInfo, index: u64, json: bool| {
        if json {
            format!(
                "{}\n",
                serde_json::json!({"event": event, "index": index, "node": n})
            )
        } else {
            format!(
                "{event} {} {} {} {} index={index}\n",
                n.node_id,
                n.node_type,
                n.addr,
                render::health(n)
            )
        }
    };
    let present: String = watch
        .nodes()
        .map(|n| line("present", n, watch.index(), session.json))
        .collect();
    cli::emit(&present);
    loop {
        tokio::select! {
            signal = &mut stop => return Ok(if session.json { String::new() } else { format!("{signal}: stopped\n") }),
            event = watch.next() => {
                let (what, n) = match event? {
                    WatchEvent::Added(n) => ("added", n),
                    WatchEvent::Updated(n) => ("updated", n),
                    WatchEvent::Removed(n) => ("removed", n),
                };
                cli::emit(&line(what, &n, watch.index(), session.json));
            }
        }
    }
}

impl Commands for Command {
    const HELP: &'static [(&'static str, &'static str)] = &[
        (
            "show nodes [TYPE] [--type T] [--health H] [--limit N] [--from NODE_ID]",
            "registered services: node_id, node_type, address, is_online, health, last_seen_ms; a summary line with counts; --health keeps those that are passing, warning, critical, draining or serving (passing or warning, not draining); --limit cuts the list on the beacon, and the summary (or `next_node_id` in JSON) says the --from of the next page",
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
            "register ... --keep",
            "register, then renew the lease until Ctrl-C or SIGTERM, and unregister then (exit 1 if the lease is lost)",
        ),
        (
            "watch nodes [TYPE...] [--health H] [--from INDEX]",
            "the registered services of these types (all when none; with --health only those it admits, a service leaving or entering it told as removed or added), then every change as a line (`added`, `updated`, `removed`, with its log index; JSON lines with -w json) until Ctrl-C or SIGTERM; follows leader changes, each change once; `--from` lists nothing and starts at that log index (refused COMPACTED when the beacons keep no changes that old)",
        ),
        (
            "node health ID|IP:PORT passing|warning|critical [--note TEXT]",
            "set a registration's health (role admin): discovery leaves a critical one out and work stops going to it; the service's own reports set it too, the latest wins",
        ),
        (
            "node drain ID|IP:PORT [--note TEXT] [--wait [--wait-ms MS]]",
            "take a registration out of rotation for maintenance (role admin): it keeps its ID and its lease, discovery leaves it out, it gets no new work, and its resources and slots go to others once it lets them go; --wait then prints what it still holds until nothing is left (exit 3 after --wait-ms, 300000 by default)",
        ),
        (
            "node undrain ID|IP:PORT",
            "put a drained registration back into rotation (role admin)",
        ),
        (
            "ids free ID",
            "end node ID's quarantine now, so it may be allocated again (its last holder has certainly stopped using it; refused while a live registration holds it; role admin)",
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
            ["ids", "free"] => match args {
                [id] => id
                    .parse::<u32>()
                    .ok()
                    .filter(|id| *id > 0)
                    .map(Command::FreeId)
                    .ok_or_else(|| {
                        usage(format!("`ids free`: `{id}` is not a node ID (1 or more)"))
                    }),
                _ => Err(usage("usage: `ids free ID`")),
            },
            ["ids", ..] => Err(usage("usage: `ids free ID`")),
            ["watch", "nodes"] => parse_watch_nodes(args),
            ["node", ..] => parse_node(&words[1..]),
            ["unregister", ..] => parse_unregister(&words[1..]),
            ["bench", "register"] => parse_bench(args),
            ["bench", ..] => Err(usage("usage: `bench register --clients C --count N`")),
            _ => return None,
        })
    }

    async fn run(&self, session: &mut Session) -> Result<String, Failure> {
        let out = match self {
            Command::ShowNodes {
                node_type,
                health,
                limit,
                from,
            } => {
                let req = pb::registry::NodesRequest {
                    node_type: node_type.clone().unwrap_or_default(),
                    limit: limit.unwrap_or(0),
                    from_node_id: *from,
                    health: filter_to_pb(*health).into(),
                    ..Default::default()
                };
                let reply = session
                    .with_client(async |c| c.nodes_matching(&req).await)
                    .await?;
                if session.json {
                    cli::json(&render::nodes_json(&reply))
                } else {
                    render::nodes(&reply)
                }
            }
            Command::ShowNodeDetail(t, addr) => {
                let a = addr.as_deref().unwrap_or("");
                let reply = session.with_client(async |c| c.nodes(t, a).await).await?;
                if !a.is_empty() && reply.nodes.is_empty() {
                    return Err(no_such_node(t, a));
                }
                if session.json {
                    cli::json(&render::nodes_json(&reply))
                } else {
                    render::node_detail(&reply)
                }
            }
            Command::ShowNodeReport(t, addr) => {
                let a = addr.as_deref().unwrap_or("");
                let reply = leader_nodes(session, t, a, 0).await?;
                if !a.is_empty() && reply.nodes.is_empty() {
                    return Err(no_such_node(t, a));
                }
                session.print(&reply, render::node_report)
            }
            Command::ShowIds => session.show(async |c| c.ids().await, render::ids).await?,
            Command::ShowSubscription(t) => {
                let t = t.as_deref().unwrap_or("");
                session
                    .show(async |c| c.subscriptions(t).await, render::subscriptions)
                    .await?
            }
            Command::Register(r) if r.keep => keep_registered(session, r).await?,
            Command::WatchNodes {
                types,
                health,
                from,
            } => watch_nodes(session, types, *health, *from).await?,
            Command::SetHealth {
                target,
                status,
                draining,
                note,
                wait,
            } => {
                let node_id = match target.parse::<u32>() {
                    Ok(id) => id,
                    Err(_) => {
                        let seen = leader_nodes(session, "", target, 0).await?;
                        seen.nodes
                            .iter()
                            .filter(|e| e.is_online)
                            .find_map(|e| e.node.as_ref().map(|n| n.node_id))
                            .ok_or_else(|| {
                                Failure::Check(format!(
                                    "no live registration at {target} (see `show nodes`)"
                                ))
                            })?
                    }
                };
                let req = pb::registry::SetHealthRequest {
                    node_id,
                    status: status.map(|s| status_to_pb(s).into()),
                    draining: *draining,
                    note: note.clone(),
                };
                let reply: pb::registry::SetHealthReply = session
                    .cluster()
                    .call(RegistryCmd::SetHealth, &req, "the health change")
                    .await?;
                let node = reply.node.unwrap_or_default();
                let set = if session.json {
                    cli::json(&render::node_json(&node))
                } else {
                    format!(
                        "node_id {} ({} at {}): {}\n",
                        node.node_id,
                        node.node_type,
                        node.addr,
                        render::health(&node)
                    )
                };
                match wait {
                    None => set,
                    Some(limit) => {
                        if !session.json {
                            use std::io::Write as _;
                            print!("{set}");
                            let _ = std::io::stdout().flush();
                        }
                        wait_drained(session, node_id, *limit).await?
                    }
                }
            }
            Command::FreeId(id) => {
                let req = pb::registry::FreeIdRequest { node_id: *id };
                let reply: pb::registry::FreeIdReply = session
                    .cluster()
                    .call(RegistryCmd::FreeId, &req, "the ID release")
                    .await?;
                match (&reply.was, session.json) {
                    (_, true) => cli::json(&reply),
                    (Some(was), false) => format!(
                        "node ID {id} is free: the quarantine of its last holder ({} at {}) ended early\n",
                        was.node_type, was.addr
                    ),
                    (None, false) => format!("node ID {id} was free already\n"),
                }
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
                for w in &reply.warnings {
                    eprintln!("nebcli: warning: {w}");
                }
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
                // A serializable read is enough for that guard, and answers where writes
                // cannot (the bench then says what the writes met).
                let consistency = session.opts.consistency;
                let ids = session
                    .with_client(async |c| {
                        c.set_consistency(crate::wire::Consistency::Serializable);
                        let ids = c.ids().await;
                        c.set_consistency(consistency);
                        ids
                    })
                    .await?;
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
