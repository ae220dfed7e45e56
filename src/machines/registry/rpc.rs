//! The registry's server handlers: register, report, unregister, watch, and the read-only
//! views (`show nodes`, `show ids`, `show subscription`); and its part of a peer's handshake.
//!
//! Every field that comes off the wire is checked here, before the request reaches the
//! driver, so a malformed registration is refused with the field at fault and changes
//! nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use super::service::{
    Caller, NodeFilter, RegisterRequest, RegistryError, RegistryService, Report, ReportedHealth,
    Request, Response, SetHealth, Target, Unregister, count_nodes, counts_by_type, first_nodes,
};
use super::state::{
    Change, FencingToken, HealthFilter, InvalidRequest, MAX_NOTE_BYTES, NodeId, NodeRecord,
    Registry, check_clock, check_metadata, check_type, parse_service_addr,
};
use super::wire::{
    RegistryCmd, RegistryErrorCode, filter_of, hello_part, hello_range, record_to_pb, status_of,
};
use crate::auth::Role;
use crate::machines::follow::{self, FirstAnswer};
use crate::machines::handle::{self, CoreExt, Ctx, Handled, Reject, reply, unexpected};
use crate::machines::{Part, Replica, Routes, Services, State};
use crate::pb::registry as pb;
use crate::time::wall_ms;
use crate::wire::{ErrorCode, Frame};

impl crate::machines::Commands for RegistryCmd {
    fn from_code(code: u32) -> Option<Self> {
        RegistryCmd::from_code(code)
    }

    /// The role a client needs to send it when authentication is on (see [`crate::auth`]).
    fn role(self) -> Role {
        match self {
            RegistryCmd::NodeReport | RegistryCmd::Register | RegistryCmd::Unregister => {
                Role::Service
            }
            RegistryCmd::FreeId | RegistryCmd::SetHealth => Role::Admin,
            RegistryCmd::Watch
            | RegistryCmd::Holds
            | RegistryCmd::Nodes
            | RegistryCmd::Ids
            | RegistryCmd::Subscriptions => Role::Read,
            // Pushed by beacons, never sent to one.
            RegistryCmd::NodeNotice => Role::Admin,
        }
    }

    /// Node reports queued back to back go to the driver together (a client renewing many
    /// registrations over one connection).
    fn batches(self) -> bool {
        self == RegistryCmd::NodeReport
    }
}

/// The registry's part of our `Hello` to a peer: the node-ID range.
fn hello_fields(settings: &super::RegistrySettings, buf: &mut Vec<u8>) {
    buf.extend(hello_part(settings.id_range));
}

/// Checks a peer's `Hello` (the whole message): beacons of one cluster allocate node IDs
/// from the same range.
fn check_hello(
    settings: &super::RegistrySettings,
    node: SocketAddr,
    hello: &[u8],
) -> Result<(), Reject> {
    let (first, last) = hello_range(hello).map_err(Reject::malformed)?;
    let range = settings.id_range;
    if (first, last) != (range.first, range.last) {
        return Err(Reject::close(
            ErrorCode::ConfigMismatch,
            format!(
                "beacon `{node}` allocates node IDs from {first}..={last} but this beacon from {range}; every beacon of a cluster needs the same `id_range`"
            ),
        ));
    }
    Ok(())
}

/// Serves one of the registry's requests.
pub(crate) async fn serve(frame: &Frame, ctx: &Ctx<'_>) -> Result<Handled, Reject> {
    let Some(cmd) = RegistryCmd::from_code(frame.cmd) else {
        unreachable!("routed here by `owns`");
    };
    match cmd {
        RegistryCmd::Register => reply(frame, &register(ctx, frame.decode()?).await?),
        RegistryCmd::NodeReport => reply(frame, &report(ctx, frame.decode()?).await?),
        RegistryCmd::Unregister => reply(frame, &unregister(ctx, frame.decode()?).await?),
        RegistryCmd::FreeId => reply(frame, &free_id(ctx, frame.decode()?).await?),
        RegistryCmd::SetHealth => reply(frame, &set_health(ctx, frame.decode()?).await?),
        RegistryCmd::Holds => reply(frame, &holds(ctx, frame.decode()?).await?),
        RegistryCmd::Nodes => reply(frame, &read_nodes(ctx, frame.decode()?).await?),
        RegistryCmd::Ids => {
            let _req: pb::IdsRequest = frame.decode()?;
            reply(frame, &ids(ctx).await?)
        }
        RegistryCmd::Subscriptions => reply(frame, &subscriptions(ctx, frame.decode()?)?),
        RegistryCmd::Watch => watch(frame, ctx).await,
        RegistryCmd::NodeNotice => Err(Reject::new(
            ErrorCode::UnknownCommand,
            "node notices (cmd 105) are sent by beacons to watchers, not to beacons",
        )),
    }
}

/// Submits a request to this machine's service; its refusals become replies.
async fn submit(ctx: &Ctx<'_>, request: Request) -> Result<Response, Reject> {
    handle::submit::<RegistryService>(ctx, request, reject).await
}

/// The code and text a registry refusal is sent with.
fn reject(e: RegistryError) -> Reject {
    let code: u32 = match &e {
        RegistryError::Invalid(_) => ErrorCode::InvalidRequest.into(),
        RegistryError::Exhausted(_) => RegistryErrorCode::IdsExhausted.into(),
        RegistryError::Conflict { .. } => RegistryErrorCode::Conflict.into(),
        RegistryError::NoLease { .. } => RegistryErrorCode::NoLease.into(),
        RegistryError::UnknownTarget(_) => RegistryErrorCode::UnknownTarget.into(),
        RegistryError::NotHolder { .. } => RegistryErrorCode::NotHolder.into(),
        RegistryError::IdInUse { .. } => RegistryErrorCode::IdInUse.into(),
        RegistryError::EndedBeforeCommit { .. } => ErrorCode::Unavailable.into(),
        RegistryError::NotOwner { .. } => ErrorCode::PermissionDenied.into(),
    };
    Reject::new(code, e.to_string())
}

fn invalid(e: InvalidRequest) -> Reject {
    reject(e.into())
}

fn optional_addr(field: &'static str, value: &str) -> Result<Option<SocketAddr>, InvalidRequest> {
    match value {
        "" => Ok(None),
        v => parse_service_addr(field, v).map(Some),
    }
}

/// Checks a registration.
pub(crate) fn register_request(
    req: pb::RegisterRequest,
    max_metadata: usize,
) -> Result<RegisterRequest, InvalidRequest> {
    check_type(&req.node_type)?;
    let addr = parse_service_addr("addr", &req.addr)?;
    let access_addr = optional_addr("access_addr", &req.access_addr)?;
    check_metadata(&req.metadata, max_metadata)?;
    Ok(RegisterRequest {
        node_type: req.node_type,
        addr,
        access_addr,
        worker_num: req.worker_num,
        metadata: req.metadata,
        wall_ms: wall_ms(),
        caller: Caller::default(),
    })
}

/// A `service` identity acting for registration `node_id` (fencing token `token`) must own
/// it; an admin may act for any, and an unknown registration is left to the machine's own
/// checks (which refuse it).
pub(crate) async fn check_owner(
    ctx: &Ctx<'_>,
    node_id: NodeId,
    token: FencingToken,
) -> Result<(), Reject> {
    let caller = caller(ctx);
    if !caller.restricted {
        return Ok(());
    }
    let record = ctx
        .driver
        .read(move |replica, _| {
            let (registry, _) = parts(replica);
            registry
                .get(node_id)
                .filter(|r| r.token() == token)
                .cloned()
        })
        .await?;
    match record {
        Some(record) => caller.may_act_on(&record).map_err(reject),
        None => Ok(()),
    }
}

/// Who sends the request: a `service` identity may act only on its own registrations.
fn caller(ctx: &Ctx<'_>) -> Caller {
    ctx.identity.map_or_else(Caller::default, |who| Caller {
        name: who.name.clone(),
        restricted: who.role < Role::Admin,
    })
}

async fn register(ctx: &Ctx<'_>, req: pb::RegisterRequest) -> Result<pb::RegisterReply, Reject> {
    let req = RegisterRequest {
        caller: caller(ctx),
        ..register_request(req, ctx.sections.registry.max_metadata_bytes).map_err(invalid)?
    };
    // NebulaBeacon's `ip_white`: only services at addresses the cluster admits register.
    ctx.driver.admit(req.addr.ip(), "service address")?;
    match submit(ctx, Request::Register(Box::new(req))).await? {
        Response::Registered {
            record,
            lease_ms,
            subscribe,
            clock_floor_ms,
            previous,
        } => Ok(pb::RegisterReply {
            warnings: type_warnings(&ctx.sections.registry, &record.node_type),
            node: Some(record_to_pb(&record)),
            previous: previous.as_deref().map(record_to_pb),
            lease_ms,
            beacons: ctx.beacons.to_vec(),
            leader: ctx.node.to_string(),
            subscribe,
            clock_floor_ms,
            id_first: ctx.sections.registry.id_range.first,
            id_last: ctx.sections.registry.id_range.last,
        }),
        other => Err(unexpected(other)),
    }
}

/// A word for a service whose node type the beacons are not configured with (when they are
/// configured with any): nothing subscribes to it, and a type that differs only in case is
/// most likely a typo.
fn type_warnings(settings: &super::RegistrySettings, node_type: &str) -> Vec<String> {
    let known = &settings.subscriptions;
    if known.is_empty() || known.contains_key(node_type) {
        return Vec::new();
    }
    let listed: Vec<&str> = known.keys().map(String::as_str).collect();
    match listed.iter().find(|t| t.eq_ignore_ascii_case(node_type)) {
        Some(close) => vec![format!(
            "node type `{node_type}` is not configured, but `{close}` is: node types are case-sensitive"
        )],
        None => vec![format!(
            "node type `{node_type}` is not configured (key node_type lists {}): no type subscribes to it",
            listed.join(", ")
        )],
    }
}

async fn free_id(ctx: &Ctx<'_>, req: pb::FreeIdRequest) -> Result<pb::FreeIdReply, Reject> {
    let (first, last) = (
        ctx.sections.registry.id_range.first,
        ctx.sections.registry.id_range.last,
    );
    if !(first..=last).contains(&req.node_id) {
        return Err(Reject::new(
            ErrorCode::InvalidRequest,
            format!(
                "node ID {} is outside the cluster's range {first}..={last}",
                req.node_id
            ),
        ));
    }
    match submit(ctx, Request::FreeId(req.node_id)).await? {
        Response::Freed(node_id, was) => Ok(pb::FreeIdReply {
            node_id,
            was: was.as_deref().map(record_to_pb),
        }),
        other => Err(unexpected(other)),
    }
}

/// Refuses a note over [`MAX_NOTE_BYTES`].
fn check_note(field: &'static str, note: &str) -> Result<(), Reject> {
    if note.len() > MAX_NOTE_BYTES {
        return Err(Reject::new(
            ErrorCode::InvalidRequest,
            format!(
                "{field} is {} bytes, over the limit of {MAX_NOTE_BYTES} bytes",
                note.len()
            ),
        ));
    }
    Ok(())
}

/// A wire value that does not parse, refused as an invalid request.
fn bad_value(e: crate::wire::WireError) -> Reject {
    Reject::new(ErrorCode::InvalidRequest, e.to_string())
}

async fn set_health(
    ctx: &Ctx<'_>,
    req: pb::SetHealthRequest,
) -> Result<pb::SetHealthReply, Reject> {
    if req.node_id == 0 {
        return Err(invalid(InvalidRequest::NoTarget));
    }
    check_note("note", &req.note)?;
    let status = req
        .status
        .map(|s| status_of("status", s))
        .transpose()
        .map_err(bad_value)?;
    let request = SetHealth {
        node_id: req.node_id,
        status,
        draining: req.draining,
        note: req.note,
        wall_ms: wall_ms(),
    };
    match submit(ctx, Request::SetHealth(request)).await? {
        Response::HealthSet(record) => Ok(pb::SetHealthReply {
            node: Some(record_to_pb(&record)),
        }),
        other => Err(unexpected(other)),
    }
}

async fn report(ctx: &Ctx<'_>, req: pb::NodeReport) -> Result<pb::NodeReportReply, Reject> {
    reported(submit(ctx, Request::Report(report_of(ctx, req, wall_ms())?)).await?)
}

/// Node reports that arrived together (a client renewing many registrations over one
/// connection), handed to the core together and answered in order: the cost of going
/// through the driver is paid once for all of them. A report that does not parse is
/// answered alone; the rest go on.
async fn reports(frames: &[Frame], ctx: &Ctx<'_>) -> Vec<Result<Handled, Reject>> {
    let mut requests = Vec::with_capacity(frames.len());
    // One read of the wall clock for reports that arrived together: reading it per report
    // was 2.4% of a leader under renewals.
    let now = wall_ms();
    let refused: Vec<Option<Reject>> = frames
        .iter()
        .map(|frame| {
            match frame
                .decode()
                .map_err(Reject::from)
                .and_then(|req| report_of(ctx, req, now))
            {
                Ok(report) => {
                    requests.push(Request::Report(report));
                    None
                }
                Err(refused) => Some(refused),
            }
        })
        .collect();
    let mut answers = handle::submit_each::<RegistryService>(ctx, requests, reject)
        .await
        .into_iter();
    frames
        .iter()
        .zip(refused)
        .map(|(frame, refused)| match refused {
            Some(refused) => Err(refused),
            None => {
                let answer = answers
                    .next()
                    .unwrap_or_else(|| Err(handle::shutting_down()));
                reply(frame, &reported(answer?)?)
            }
        })
        .collect()
}

/// The report `req` asks for, checked against the wall clock read as `now`.
fn report_of(ctx: &Ctx<'_>, req: pb::NodeReport, now: u64) -> Result<Report, Reject> {
    Ok(Report {
        node_id: req.node_id,
        addr: parse_service_addr("addr", &req.addr).map_err(invalid)?,
        token: FencingToken {
            term: req.term,
            index: req.index,
        },
        load: match (req.node.unwrap_or_default(), req.worker) {
            (node, workers) if node == pb::LoadStats::default() && workers.is_empty() => None,
            load => Some(Box::new(load)),
        },
        clock_ms: check_clock("clock_ms", req.clock_ms, now).map_err(invalid)?,
        health: match req.health {
            None => None,
            Some(status) => {
                check_note("health_note", &req.health_note)?;
                Some(Box::new(ReportedHealth {
                    status: status_of("health", status).map_err(bad_value)?,
                    note: req.health_note,
                    wall_ms: now,
                }))
            }
        },
        routine: req.routine,
        caller: caller(ctx),
    })
}

/// A report's reply, from the service's answer.
fn reported(response: Response) -> Result<pb::NodeReportReply, Reject> {
    match response {
        Response::Reported {
            node_id,
            lease_ms,
            token,
            clock_ms,
        } => Ok(pb::NodeReportReply {
            node_id,
            lease_ms,
            term: token.term,
            index: token.index,
            clock_ms,
        }),
        other => Err(unexpected(other)),
    }
}

async fn unregister(
    ctx: &Ctx<'_>,
    req: pb::UnregisterRequest,
) -> Result<pb::UnregisterReply, Reject> {
    let target = match (req.node_id, req.addr.as_str()) {
        (0, "") => return Err(invalid(InvalidRequest::NoTarget)),
        (0, addr) => Target::Addr(parse_service_addr("addr", addr).map_err(invalid)?),
        (id, _) => Target::Id(id),
    };
    let unregister = Unregister {
        target,
        token: FencingToken {
            term: req.term,
            index: req.index,
        },
        release: req.release,
        clock_ms: check_clock("clock_ms", req.clock_ms, wall_ms()).map_err(invalid)?,
        caller: caller(ctx),
    };
    match submit(ctx, Request::Unregister(unregister)).await? {
        Response::Unregistered(record) => Ok(pb::UnregisterReply {
            node: Some(record_to_pb(&record)),
        }),
        other => Err(unexpected(other)),
    }
}

/// The registry and its service within the replica.
fn parts(replica: &Replica) -> (&Registry, &RegistryService) {
    let registry = <State as Part<Registry>>::part(replica.state());
    let service = <Services as Routes<State, RegistryService>>::service(replica.service());
    (registry, service)
}

async fn read_nodes(ctx: &Ctx<'_>, req: pb::NodesRequest) -> Result<pb::NodesReply, Reject> {
    nodes_page(ctx, req, false).await.map(|(reply, _)| reply)
}

/// Live and quarantined registrations of one node type: what a status page shows of it.
pub(crate) type TypeCounts = BTreeMap<String, (usize, usize)>;

/// The registrations `req` names, a page of them by ID (`req.limit` from
/// `req.from_node_id`; limit 0: all), and (with `count`) how many of them there are by node
/// type, live and quarantined: read in the core without copying what the page does not
/// hold, so that a page, or a status page polling the counts, is cheap at any size of the
/// registry.
pub(crate) async fn nodes_page(
    ctx: &Ctx<'_>,
    req: pb::NodesRequest,
    count: bool,
) -> Result<(pb::NodesReply, TypeCounts), Reject> {
    let limit = match req.limit {
        0 => usize::MAX,
        n => n as usize,
    };
    let from = req.from_node_id;
    let node_type = match req.node_type.as_str() {
        "" => None,
        t => {
            check_type(t).map_err(invalid)?;
            Some(t.to_owned())
        }
    };
    let filter = NodeFilter {
        node_type,
        addr: optional_addr("addr", &req.addr).map_err(invalid)?,
        node_id: (req.node_id != 0).then_some(req.node_id),
        health: filter_of("health", req.health).map_err(bad_value)?,
    };
    ctx.read_of::<Registry, _>(move |replica, now| {
        let (registry, service) = parts(replica);
        let counts = if count {
            counts_by_type(registry, &filter)
        } else {
            TypeCounts::new()
        };
        let total = if count {
            counts.values().map(|(live, gone)| live + gone).sum()
        } else {
            count_nodes(registry, &filter)
        };
        let (page, next) = first_nodes(registry, service, now, &filter, from, limit);
        let reply = pb::NodesReply {
            node: replica.config().me.to_string(),
            is_leader: replica.is_leader(),
            index: replica.read_through(<State as Part<Registry>>::INDEX),
            next_node_id: next.unwrap_or(0),
            total: total as u64,
            nodes: page
                .into_iter()
                .map(|v| {
                    let (report, workers) = match v.report {
                        Some((node, workers)) => (Some(node), workers),
                        None => (None, Vec::new()),
                    };
                    pb::NodeEntry {
                        node: Some(record_to_pb(&v.record)),
                        is_online: v.is_online,
                        last_seen_ms: v.last_seen_ms,
                        report,
                        workers,
                        quarantine_ms: v.quarantine_ms,
                    }
                })
                .collect(),
            stale: replica.staleness(),
        };
        (reply, counts)
    })
    .await
}

/// `GET /v1/nodes`: a page of registrations (`limit`, default all, from node ID `from`)
/// with the counts by type and the next page's `from`, read without copying the rest of the
/// registry.
async fn nodes_view(
    ctx: &Ctx<'_>,
    params: &crate::machines::handle::ViewParams,
) -> Result<serde_json::Value, Reject> {
    use crate::machines::handle::{param, view_number};
    let limit = view_number(params, "limit")?;
    let health = match param(params, "health").as_str() {
        "" => HealthFilter::Any,
        word => HealthFilter::parse(word).ok_or_else(|| {
            Reject::new(
                ErrorCode::InvalidRequest,
                format!(
                    "health `{word}`: give any, serving, passing, warning, critical or draining"
                ),
            )
        })?,
    };
    let req = pb::NodesRequest {
        node_type: param(params, "type"),
        health: super::wire::filter_to_pb(health).into(),
        // `limit=0` is an empty page (the counts alone), as the status page asks for it.
        limit: limit.map_or(0, |n| n.max(1)),
        from_node_id: view_number(params, "from")?.unwrap_or(0),
        ..Default::default()
    };
    let empty_page = limit == Some(0);
    let (mut reply, counts) = nodes_page(ctx, req, true).await?;
    if empty_page {
        reply.next_node_id = reply
            .nodes
            .first()
            .map_or(0, |e| e.node.as_ref().map_or(0, |n| n.node_id));
        reply.nodes.clear();
    }
    let total = reply.total;
    let types: Vec<_> = counts
        .into_iter()
        .map(|(t, (online, offline))| {
            serde_json::json!({"node_type": t, "online": online, "offline": offline})
        })
        .collect();
    let mut v = super::cli::render::nodes_json(&reply);
    v["total"] = serde_json::json!(total);
    v["types"] = serde_json::json!(types);
    Ok(v)
}

/// What the live registration of a node ID holds, in every machine.
async fn holds(ctx: &Ctx<'_>, req: pb::HoldsRequest) -> Result<pb::HoldsReply, Reject> {
    if req.node_id == 0 {
        return Err(invalid(InvalidRequest::NoTarget));
    }
    ctx.read(move |replica, _| {
        let (registry, _) = parts(replica);
        let record = registry.get(req.node_id);
        pb::HoldsReply {
            holds: record.map_or_else(Vec::new, |r| {
                crate::machines::Dispatch::held_by(replica.state(), (r.node_id, r.token()))
            }),
            node: record.map(record_to_pb),
            index: replica.applied().index,
            stale: replica.staleness(),
        }
    })
    .await
}

async fn ids(ctx: &Ctx<'_>) -> Result<pb::IdsReply, Reject> {
    ctx.read_of::<Registry, _>(|replica, _| {
        let (registry, _) = parts(replica);
        let range = registry.range();
        let mut quarantined: Vec<u32> = registry.quarantined().map(|t| t.record.node_id).collect();
        quarantined.sort_unstable();
        pb::IdsReply {
            first: range.first,
            last: range.last,
            last_node_id: registry.last_node_id(),
            in_use: registry.len() as u32,
            quarantined,
            index: replica.read_through(<State as Part<Registry>>::INDEX),
            stale: replica.staleness(),
        }
    })
    .await
}

fn subscriptions(
    ctx: &Ctx<'_>,
    req: pb::SubscriptionsRequest,
) -> Result<pb::SubscriptionsReply, Reject> {
    if !req.node_type.is_empty() {
        check_type(&req.node_type).map_err(invalid)?;
    }
    let subscriptions = ctx
        .sections
        .registry
        .subscriptions
        .iter()
        .filter(|(t, _)| req.node_type.is_empty() || **t == req.node_type)
        .map(|(t, subscribe)| pb::Subscription {
            node_type: t.clone(),
            subscribe: subscribe.clone(),
        })
        .collect();
    Ok(pb::SubscriptionsReply { subscriptions })
}

/// Starts a watch (leader only): the current nodes of the types asked for as of the last log
/// position, then a notice for every change committed after it (or, resumed at an index,
/// every change from it on). Changes up to that position are already in the initial set, so
/// none is told twice.
async fn watch(frame: &Frame, ctx: &Ctx<'_>) -> Result<Handled, Reject> {
    let req: pb::WatchRequest = frame.decode()?;
    for t in &req.node_types {
        check_type(t).map_err(invalid)?;
    }
    let health = filter_of("health", req.health).map_err(bad_value)?;
    let types: BTreeSet<String> = req.node_types.into_iter().collect();
    // Watchers of the same types and the same health share each notice's bytes; another
    // health filter is told other things of the same change.
    let kind = follow::kind_of(&(&types, health));
    let follows = move |r: &NodeRecord| {
        (types.is_empty() || types.contains(r.node_type.as_str())) && health.admits(r.health())
    };
    follow::follow(
        frame,
        ctx,
        RegistryCmd::NodeNotice,
        "nodes",
        "this beacon stopped leading: watch again at the leader",
        req.start_index,
        Some(kind),
        move |registry: &Registry, start| {
            // Pointers to the registrations, as of the answer's index: the first page goes
            // in the answer, the rest is encoded by the connection as it sends it.
            let (nodes, rest) = match start {
                FirstAnswer::List(at) => {
                    let mut pages =
                        super::pages::NodePages::new(registry.nodes_copy(), follows.clone(), at);
                    let first = pages.take_first_page();
                    let rest = pages
                        .more()
                        .then(|| Box::new(pages) as Box<dyn crate::machines::watchers::Pages>);
                    (first, rest)
                }
                FirstAnswer::Resume(_) => (Vec::new(), None),
            };
            let notice = move |index, change: &Change| notice(index, change, &follows);
            let answer = pb::WatchReply {
                index: start.index(),
                nodes,
                resumed: start.resumed(),
                more: rest.is_some(),
            };
            Ok(follow::Listed {
                answer,
                notice,
                rest,
            })
        },
        |index| pb::NodeNotice {
            index,
            ..Default::default()
        },
    )
    .await
}

/// What a watcher following the registrations `follows` admits is told of a committed
/// change, if anything: an update that takes a registration into what it follows comes as
/// added, one that takes it out as removed.
fn notice(
    index: u64,
    change: &Change,
    follows: &impl Fn(&NodeRecord) -> bool,
) -> Option<pb::NodeNotice> {
    let mut notice = pb::NodeNotice {
        index,
        ..Default::default()
    };
    let info = || record_to_pb(change.record());
    match change {
        Change::Added(r) if follows(r) => notice.add_nodes.push(info()),
        Change::Removed(r) if follows(r) => notice.del_nodes.push(info()),
        Change::Updated { record, was } => match (follows(was), follows(record)) {
            (true, true) => notice.update_nodes.push(info()),
            (false, true) => notice.add_nodes.push(info()),
            (true, false) => notice.del_nodes.push(info()),
            (false, false) => return None,
        },
        _ => return None,
    }
    Some(notice)
}

impl crate::machines::Served for super::Registry {
    type Cmd = RegistryCmd;

    fn grpc() -> Option<&'static crate::wire::rpc::Service> {
        Some(&super::grpc::SERVICE)
    }

    fn views() -> Vec<crate::machines::handle::AdminView> {
        use crate::machines::handle::{AdminView, json_of};
        vec![
            AdminView::new(
                "/v1/nodes",
                "`?type=T&health=H&limit=N`: `show nodes` (`health`: any, serving, passing, warning, critical or draining), with `total` and, by node type, how many are online and in quarantine (`types`); `limit` keeps the first N rows (0: the counts alone, cheap to poll)",
                RegistryCmd::Nodes,
                |ctx, params| Box::pin(nodes_view(ctx, params)),
            ),
            AdminView::new("/v1/ids", "`show ids`", RegistryCmd::Ids, |ctx, _| {
                Box::pin(async move { Ok(json_of(&ids(ctx).await?)) })
            }),
        ]
    }

    fn dns(&self, labels: &[String]) -> Option<Vec<crate::machines::DnsInstance>> {
        super::dns::lookup(self, labels)
    }

    fn hello_fields(section: &Self::Section, buf: &mut Vec<u8>) {
        hello_fields(section, buf)
    }

    fn check_hello(section: &Self::Section, peer: SocketAddr, hello: &[u8]) -> Result<(), Reject> {
        check_hello(section, peer, hello)
    }

    fn serve<'a>(
        frame: &'a crate::wire::Frame,
        ctx: &'a Ctx<'a>,
    ) -> impl Future<Output = Result<Handled, Reject>> + Send + 'a {
        serve(frame, ctx)
    }

    fn serve_batch<'a>(
        frames: &'a [crate::wire::Frame],
        ctx: &'a Ctx<'a>,
    ) -> impl Future<Output = Vec<Result<Handled, Reject>>> + Send + 'a {
        reports(frames, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(node_type: &str, addr: &str, metadata: &str) -> pb::RegisterRequest {
        pb::RegisterRequest {
            node_type: node_type.into(),
            addr: addr.into(),
            metadata: metadata.into(),
            ..Default::default()
        }
    }

    #[test]
    fn registrations_are_checked_field_by_field() {
        let ok = register_request(req("LOGIC", "10.0.0.1:80", r#"{"a":1}"#), 64).unwrap();
        assert_eq!(ok.addr, "10.0.0.1:80".parse().unwrap());
        assert!(ok.wall_ms > 0);
        let err = |r| register_request(r, 16).unwrap_err().to_string();
        assert_eq!(err(req("", "10.0.0.1:80", "")), "node_type is empty");
        assert_eq!(
            err(req("LOGIC", "nowhere", "")),
            "addr `nowhere` is not an ip:port address (for example 10.0.0.5:8080)"
        );
        assert!(err(req("LOGIC", "0.0.0.0:80", "")).contains("wildcard"));
        assert_eq!(
            err(req("LOGIC", "10.0.0.1:80", &"x".repeat(17))),
            "metadata is 17 bytes, over the limit of 16 bytes"
        );
        assert!(
            err(req("LOGIC", "10.0.0.1:80", "{nope")).starts_with("metadata is not valid JSON")
        );
        let mut bad_access = req("LOGIC", "10.0.0.1:80", "");
        bad_access.access_addr = "x:1".into();
        assert!(err(bad_access).starts_with("access_addr `x:1`"));
    }

    #[test]
    fn refusals_keep_their_code() {
        assert_eq!(
            invalid(InvalidRequest::EmptyType).code,
            ErrorCode::InvalidRequest as u32
        );
        let lost = RegistryError::NoLease {
            node_id: 3,
            addr: "10.0.0.1:80".parse().unwrap(),
            token: FencingToken { term: 1, index: 2 },
        };
        assert_eq!(reject(lost).code, RegistryErrorCode::NoLease as u32);
        // The registry's codes never collide with the core's.
        for code in RegistryErrorCode::ALL {
            assert_eq!(ErrorCode::from_code(code as u32), None, "{code:?}");
        }
    }
}
