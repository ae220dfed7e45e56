//! Work assignment's server handlers: add, delete, rebalance, release, and the read-only
//! list (`show resources`).

use super::service::{AssignError, AssignService, Request, Response};
use super::state::Assignments;
use super::wire::{AssignCmd, AssignErrorCode, resource_to_pb};
use crate::machines::registry::FencingToken;
use crate::machines::{Part, State};
use crate::pb::assign as pb;
use crate::server::handle::{Ctx, Handled, Reject, reply};
use crate::time::wall_ms;
use crate::wire::{ErrorCode, Frame};

/// Whether `cmd` is one of work assignment's requests.
pub(crate) fn owns(cmd: u32) -> bool {
    AssignCmd::from_code(cmd).is_some()
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
        AssignCmd::List => reply(frame, &list(ctx, frame.decode()?).await?),
    }
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
        AssignError::TooMany { .. } => AssignErrorCode::TooManyResources.into(),
    };
    Reject::keep(code, e.to_string())
}

async fn submit(ctx: &Ctx<'_>, request: Request) -> Result<Response, Reject> {
    ctx.driver
        .submit::<AssignService>(request)
        .await?
        .map_err(reject)
}

fn unexpected(response: Response) -> Reject {
    Reject::keep(
        ErrorCode::Unavailable,
        format!("internal error: unexpected response {response:?}"),
    )
}

fn resource_reply(answer: Response) -> Result<pb::ResourceReply, Reject> {
    match answer {
        Response::Resource(r) => Ok(pb::ResourceReply {
            resource: r.as_ref().map(resource_to_pb),
        }),
        other => Err(unexpected(other)),
    }
}

async fn list(ctx: &Ctx<'_>, req: pb::ResourcesRequest) -> Result<pb::ResourcesReply, Reject> {
    if !req.node_type.is_empty() {
        crate::machines::registry::check_type(&req.node_type)
            .map_err(|e| Reject::keep(ErrorCode::InvalidRequest, e.to_string()))?;
    }
    ctx.driver
        .read(move |replica, _| {
            let resources = <State as Part<Assignments>>::part(replica.state());
            pb::ResourcesReply {
                node: replica.config().me.to_string(),
                is_leader: replica.is_leader(),
                index: replica.position().index,
                resources: resources
                    .iter()
                    .filter(|r| req.node_type.is_empty() || r.node_type == req.node_type)
                    .map(resource_to_pb)
                    .collect(),
                now_ms: wall_ms(),
                stale: replica.staleness(),
            }
        })
        .await
}
