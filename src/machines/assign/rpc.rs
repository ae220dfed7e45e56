//! Work assignment's server handlers: add, delete, rebalance, release, and the read-only
//! list (`show resources`).

use super::service::{AssignError, AssignService, Request, Response};
use super::state::{Assignments, Change, Resource, SlotGroup, SlotName};
use super::wire::{AssignCmd, AssignErrorCode, group_to_pb, resource_to_pb};
use crate::auth::Role;
use crate::machines::follow::{self, FirstAnswer};
use crate::machines::handle::{self, CoreExt, Ctx, Handled, Reject, reply, unexpected};
use crate::machines::registry::{self, FencingToken, Registry};
use crate::machines::{Part, State};
use crate::pb::assign as pb;
use crate::time::wall_ms;
use crate::wire::{ErrorCode, Frame};

impl crate::machines::Commands for AssignCmd {
    fn from_code(code: u32) -> Option<Self> {
        AssignCmd::from_code(code)
    }

    /// The role a client needs to send it when authentication is on (see [`crate::auth`]).
    fn role(self) -> Role {
        match self {
            AssignCmd::Add
            | AssignCmd::Delete
            | AssignCmd::Rebalance
            | AssignCmd::CreateGroup
            | AssignCmd::DeleteGroup
            | AssignCmd::Reassign
            | AssignCmd::Notice => Role::Admin,
            AssignCmd::Release | AssignCmd::ReleaseSlot | AssignCmd::Watch | AssignCmd::Claim => {
                Role::Service
            }
            AssignCmd::List | AssignCmd::Groups => Role::Read,
        }
    }
}

/// Serves one of work assignment's requests.
pub(crate) async fn serve(frame: &Frame, ctx: &Ctx<'_>) -> Result<Handled, Reject> {
    let Some(cmd) = AssignCmd::from_code(frame.cmd) else {
        unreachable!("routed here by `owns`");
    };
    match cmd {
        AssignCmd::Add => {
            let req: pb::AddResource = frame.decode()?;
            let request = Request::Add {
                name: req.name,
                node_type: req.node_type,
                weight: if req.weight == 0 { 1 } else { req.weight },
                labels: req.labels.into_iter().collect(),
                slot: (!req.slot_group.is_empty()).then_some((req.slot_group, req.slot)),
                wall_ms: wall_ms(),
            };
            reply(frame, &resource_reply(submit(ctx, request).await?)?)
        }
        AssignCmd::Delete => {
            let req: pb::DeleteResource = frame.decode()?;
            let answer = submit(ctx, Request::Delete(req.name)).await?;
            reply(frame, &resource_reply(answer)?)
        }
        AssignCmd::Rebalance => {
            let req: pb::Rebalance = frame.decode()?;
            let node_type = (!req.node_type.is_empty()).then_some(req.node_type);
            match submit(ctx, Request::Rebalance(node_type)).await? {
                Response::Moves(moves) => reply(
                    frame,
                    &pb::RebalanceReply {
                        moves: moves
                            .into_iter()
                            .map(|(name, from, to)| pb::Move { name, from, to })
                            .collect(),
                    },
                ),
                other => Err(unexpected(other)),
            }
        }
        AssignCmd::Release => {
            let req: pb::Release = frame.decode()?;
            check_holder(ctx, &req.name).await?;
            let request = Request::Release {
                name: req.name,
                token: FencingToken {
                    term: req.term,
                    index: req.index,
                },
                wall_ms: wall_ms(),
            };
            reply(frame, &resource_reply(submit(ctx, request).await?)?)
        }
        AssignCmd::ReleaseSlot => {
            let req: pb::ReleaseSlot = frame.decode()?;
            let slot = SlotName {
                group: req.group,
                slot: req.slot,
            };
            check_slot_holder(ctx, &slot).await?;
            let request = Request::ReleaseSlot {
                slot,
                token: FencingToken {
                    term: req.term,
                    index: req.index,
                },
                wall_ms: wall_ms(),
            };
            reply(frame, &group_reply(submit(ctx, request).await?)?)
        }
        AssignCmd::List => reply(frame, &list(ctx, frame.decode()?).await?),
        AssignCmd::Watch => watch(frame, ctx).await,
        AssignCmd::CreateGroup => {
            let req: pb::CreateGroup = frame.decode()?;
            let request = Request::CreateGroup {
                name: req.name,
                node_type: req.node_type,
                count: req.count,
                wall_ms: wall_ms(),
            };
            reply(frame, &group_reply(submit(ctx, request).await?)?)
        }
        AssignCmd::DeleteGroup => {
            let req: pb::DeleteGroup = frame.decode()?;
            reply(
                frame,
                &group_reply(submit(ctx, Request::DeleteGroup(req.name)).await?)?,
            )
        }
        AssignCmd::Claim => {
            let req: pb::Claim = frame.decode()?;
            let registration = FencingToken {
                term: req.term,
                index: req.index,
            };
            registry::rpc::check_owner(ctx, req.node_id, registration).await?;
            let request = Request::Claim {
                group: req.group,
                slot: req.slot,
                version: req.version,
                node: (
                    req.node_id,
                    FencingToken {
                        term: req.term,
                        index: req.index,
                    },
                ),
                wall_ms: wall_ms(),
            };
            reply(frame, &group_reply(submit(ctx, request).await?)?)
        }
        AssignCmd::Groups => reply(frame, &groups(ctx, frame.decode()?).await?),
        AssignCmd::Reassign => {
            let req: pb::Reassign = frame.decode()?;
            let node_type = (!req.node_type.is_empty()).then_some(req.node_type);
            submit(ctx, Request::ReassignNow(node_type)).await?;
            reply(frame, &pb::RebalanceReply { moves: Vec::new() })
        }
        AssignCmd::Notice => Err(Reject::new(
            ErrorCode::UnknownCommand,
            "assignment notices (cmd 513) are sent by beacons to watchers, not to beacons",
        )),
    }
}

/// Starts a watch of one registration's assignments (leader only): what it holds as of the
/// last log position, then a notice for every committed change after it that concerns it.
async fn watch(frame: &Frame, ctx: &Ctx<'_>) -> Result<Handled, Reject> {
    let req: pb::WatchAssignments = frame.decode()?;
    let me = (
        req.node_id,
        FencingToken {
            term: req.term,
            index: req.index,
        },
    );
    if !me.1.is_given() {
        return Err(Reject::new(
            ErrorCode::InvalidRequest,
            "name the registration: give its node ID and fencing token (term, index)",
        ));
    }
    registry::rpc::check_owner(ctx, me.0, me.1).await?;
    let mine = move |r: &Resource| {
        r.holder
            .as_ref()
            .is_some_and(|h| (h.node_id, h.registration) == me)
    };
    // The slots of `g` this registration holds.
    let my_slots = move |g: &SlotGroup| -> Vec<pb::SlotHeld> {
        g.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let h = s.holder.as_ref()?;
                ((h.node_id, h.registration) == me).then(|| pb::SlotHeld {
                    group: g.name.clone(),
                    slot: i as u32,
                    version: s.version,
                    term: h.token.term,
                    index: h.token.index,
                    revoking: s.revoking,
                })
            })
            .collect()
    };
    follow::follow(
        frame,
        ctx,
        AssignCmd::Notice,
        "assignments",
        "this beacon stopped leading: watch again at the leader",
        req.start_index,
        None,
        move |resources: &Assignments, start| {
            let (held, slots) = match start {
                FirstAnswer::List(_) => (
                    resources
                        .iter()
                        .filter(|r| mine(r))
                        .map(resource_to_pb)
                        .collect(),
                    resources.groups().flat_map(my_slots).collect(),
                ),
                FirstAnswer::Resume(_) => Default::default(),
            };
            let notice = move |index, changes: &Vec<Change>| {
                let mut notice = pb::AssignmentNotice {
                    index,
                    ..Default::default()
                };
                for c in changes {
                    match c {
                        Change::Added(r) if mine(r) => notice.held.push(resource_to_pb(r)),
                        Change::Deleted(r) if mine(r) => notice.gone.push(resource_to_pb(r)),
                        Change::Moved { to, .. } if mine(to) => {
                            notice.held.push(resource_to_pb(to))
                        }
                        Change::Moved { from, .. } if mine(from) => {
                            notice.gone.push(resource_to_pb(from))
                        }
                        Change::Group { before, now, .. } => {
                            let held = now.as_ref().map(my_slots).unwrap_or_default();
                            let before = before.as_ref().map(my_slots).unwrap_or_default();
                            for s in &before {
                                if !held.iter().any(|h| h.slot == s.slot) {
                                    notice.slots_gone.push(s.clone());
                                }
                            }
                            // Newly held, or still held and now being revoked.
                            for s in &held {
                                let was = before.iter().find(|b| b.slot == s.slot);
                                if was.is_none_or(|b| s.revoking && !b.revoking) {
                                    notice.slots_held.push(s.clone());
                                }
                            }
                        }
                        _ => {}
                    }
                }
                let quiet = notice.held.is_empty()
                    && notice.gone.is_empty()
                    && notice.slots_held.is_empty()
                    && notice.slots_gone.is_empty();
                (!quiet).then_some(notice)
            };
            let answer = pb::WatchAssignmentsReply {
                index: start.index(),
                held,
                slots,
                resumed: start.resumed(),
            };
            Ok(follow::Listed::whole(answer, notice))
        },
        |index| pb::AssignmentNotice {
            index,
            ..Default::default()
        },
    )
    .await
}

/// A `service` identity releases only what its own registrations hold.
async fn check_holder(ctx: &Ctx<'_>, name: &str) -> Result<(), Reject> {
    let name = name.to_owned();
    check_holder_of(ctx, move |a| a.get(&name).and_then(|r| r.holder.as_ref())).await
}

/// A `service` identity releases only the slots its own registrations hold.
async fn check_slot_holder(ctx: &Ctx<'_>, slot: &SlotName) -> Result<(), Reject> {
    let (group, number) = (slot.group.clone(), slot.slot as usize);
    check_holder_of(ctx, move |a| {
        a.group(&group)
            .and_then(|g| g.slots.get(number))
            .and_then(|s| s.holder.as_ref())
    })
    .await
}

/// Refuses a `service` identity that is not the holder `find` names (none: nothing to check).
async fn check_holder_of(
    ctx: &Ctx<'_>,
    find: impl for<'a> FnOnce(&'a Assignments) -> Option<&'a super::state::Holder> + Send + 'static,
) -> Result<(), Reject> {
    if ctx.identity.is_none() {
        return Ok(());
    }
    let holder = ctx
        .driver
        .read(move |replica, _| {
            find(<State as Part<Assignments>>::part(replica.state()))
                .map(|h| (h.node_id, h.registration))
        })
        .await?;
    match holder {
        Some((node_id, registration)) => {
            registry::rpc::check_owner(ctx, node_id, registration).await
        }
        None => Ok(()),
    }
}

/// Submits a request to this machine's service; its refusals become replies.
async fn submit(ctx: &Ctx<'_>, request: Request) -> Result<Response, Reject> {
    handle::submit::<AssignService>(ctx, request, reject).await
}

/// The code and text a refusal is sent with.
fn reject(e: AssignError) -> Reject {
    let code: u32 = match &e {
        AssignError::Invalid(_)
        | AssignError::InvalidType(_)
        | AssignError::WeightTooLarge { .. } => ErrorCode::InvalidRequest.into(),
        AssignError::Conflict { .. } => AssignErrorCode::ResourceConflict.into(),
        AssignError::Unknown(_) => AssignErrorCode::UnknownResource.into(),
        AssignError::NotHolder { .. } => AssignErrorCode::NotResourceHolder.into(),
        AssignError::NotSlotHolder { .. } => AssignErrorCode::NotSlotHolder.into(),
        AssignError::TooMany { .. } => AssignErrorCode::TooManyResources.into(),
        AssignError::UnknownGroup(_) | AssignError::NoSlot { .. } => {
            AssignErrorCode::UnknownGroup.into()
        }
        AssignError::GroupConflict { .. } => AssignErrorCode::GroupConflict.into(),
        AssignError::SlotTaken { .. } => AssignErrorCode::SlotTaken.into(),
        AssignError::GroupInUse { .. } => AssignErrorCode::GroupInUse.into(),
        AssignError::SlotCount { .. }
        | AssignError::NotEligible(_)
        | AssignError::BoundToSlot { .. } => ErrorCode::InvalidRequest.into(),
    };
    Reject::new(code, e.to_string())
}

fn group_reply(answer: Response) -> Result<pb::GroupReply, Reject> {
    match answer {
        Response::Group(g) => Ok(pb::GroupReply {
            group: g.as_deref().map(group_to_pb),
        }),
        other => Err(unexpected(other)),
    }
}

/// The slot groups with their standbys: live services of the group's type holding no slot
/// of it, oldest registration first (the order they get freed slots in).
async fn groups(ctx: &Ctx<'_>, req: pb::GroupsRequest) -> Result<pb::GroupsReply, Reject> {
    if !req.name.is_empty() {
        super::state::check_name(&req.name)
            .map_err(|e| Reject::new(ErrorCode::InvalidRequest, e.to_string()))?;
    }
    ctx.read(move |replica, _| {
        let state = replica.state();
        let assignments = <State as Part<Assignments>>::part(state);
        let registry = <State as Part<Registry>>::part(state);
        let (groups, next, total) = crate::machines::handle::page(
            assignments
                .groups()
                .filter(|g| req.name.is_empty() || g.name == req.name),
            |g| &g.name,
            &req.from,
            req.limit,
            |g| {
                let mut standbys: Vec<_> = registry
                    .nodes()
                    .filter(|n| n.node_type == g.node_type)
                    .filter(|n| {
                        !g.slots.iter().any(|s| {
                            s.holder.as_ref().is_some_and(|h| {
                                (h.node_id, h.registration) == (n.node_id, n.token())
                            })
                        })
                    })
                    .map(|n| (n.token(), n.node_id))
                    .collect();
                standbys.sort_unstable();
                pb::GroupView {
                    group: Some(group_to_pb(g)),
                    standbys: standbys.into_iter().map(|(_, id)| id).collect(),
                }
            },
        );
        pb::GroupsReply {
            node: replica.config().me.to_string(),
            is_leader: replica.is_leader(),
            index: replica.applied().index,
            groups,
            now_ms: wall_ms(),
            stale: replica.staleness(),
            next,
            total,
        }
    })
    .await
}

fn resource_reply(answer: Response) -> Result<pb::ResourceReply, Reject> {
    match answer {
        Response::Resource(r) => Ok(pb::ResourceReply {
            resource: r.as_deref().map(resource_to_pb),
        }),
        other => Err(unexpected(other)),
    }
}

async fn list(ctx: &Ctx<'_>, req: pb::ResourcesRequest) -> Result<pb::ResourcesReply, Reject> {
    if !req.node_type.is_empty() {
        crate::machines::registry::check_type(&req.node_type)
            .map_err(|e| Reject::new(ErrorCode::InvalidRequest, e.to_string()))?;
    }
    ctx.read_of::<Assignments, _>(move |replica, _| {
        let resources = <State as Part<Assignments>>::part(replica.state());
        let (resources, next, total) = crate::machines::handle::page(
            resources
                .iter()
                .filter(|r| req.node_type.is_empty() || r.node_type == req.node_type),
            |r| &r.name,
            &req.from,
            req.limit,
            resource_to_pb,
        );
        pb::ResourcesReply {
            node: replica.config().me.to_string(),
            is_leader: replica.is_leader(),
            index: replica.read_through(<State as Part<Assignments>>::INDEX),
            resources,
            now_ms: wall_ms(),
            stale: replica.staleness(),
            next,
            total,
        }
    })
    .await
}

impl crate::machines::Served for super::Assignments {
    type Cmd = AssignCmd;

    fn held_by(&self, node: (u32, FencingToken)) -> Vec<String> {
        Assignments::held_by(self, node)
    }

    fn grpc() -> Option<&'static crate::wire::rpc::Service> {
        Some(&super::grpc::SERVICE)
    }

    fn views() -> Vec<crate::machines::handle::AdminView> {
        use crate::machines::handle::{AdminView, json_of, param};
        vec![
            AdminView::new(
                "/v1/resources",
                "`?type=T`: `show resources`",
                AssignCmd::List,
                |ctx, params| {
                    Box::pin(async move {
                        let (limit, from) = crate::machines::handle::view_page(params)?;
                        let req = pb::ResourcesRequest {
                            node_type: param(params, "type"),
                            limit,
                            from,
                        };
                        Ok(json_of(&list(ctx, req).await?))
                    })
                },
            ),
            AdminView::new(
                "/v1/slots",
                "`?group=G`: `show slots`",
                AssignCmd::Groups,
                |ctx, params| {
                    Box::pin(async move {
                        let (limit, from) = crate::machines::handle::view_page(params)?;
                        let req = pb::GroupsRequest {
                            name: param(params, "group"),
                            limit,
                            from,
                        };
                        Ok(json_of(&groups(ctx, req).await?))
                    })
                },
            ),
        ]
    }

    fn serve<'a>(
        frame: &'a crate::wire::Frame,
        ctx: &'a Ctx<'a>,
    ) -> impl Future<Output = Result<Handled, Reject>> + Send + 'a {
        serve(frame, ctx)
    }
}
