//! The sequence issuer's server handlers: create, change, delete, next segment, give back,
//! and the read-only list (`show sequences`). Names and numbers are checked by the service
//! against the state; what only the wire can get wrong (a missing field) is checked here.

use super::service::{Request, Response, SequenceError, SequenceService};
use super::state::Sequences;
use super::wire::{SequenceCmd, SequenceErrorCode, record_to_pb, segment_from_pb, segment_to_pb};
use crate::auth::Role;
use crate::machines::handle::{self, Ctx, Handled, Reject, reply, unexpected};
use crate::machines::{Part, State};
use crate::pb::sequence as pb;
use crate::time::wall_ms;
use crate::wire::ErrorCode;

impl crate::machines::Commands for SequenceCmd {
    fn from_code(code: u32) -> Option<Self> {
        SequenceCmd::from_code(code)
    }

    /// The role a client needs to send it when authentication is on (see [`crate::auth`]).
    fn role(self) -> Role {
        match self {
            SequenceCmd::Create | SequenceCmd::Change | SequenceCmd::Delete => Role::Admin,
            SequenceCmd::Next | SequenceCmd::GiveBack => Role::Service,
            SequenceCmd::List => Role::Read,
        }
    }

    /// Segment requests queued back to back on one connection go to the driver together.
    fn batches(self) -> bool {
        self == SequenceCmd::Next
    }
}

/// Serves one of the sequence issuer's requests.
pub(crate) async fn serve(frame: &crate::wire::Frame, ctx: &Ctx<'_>) -> Result<Handled, Reject> {
    let Some(cmd) = SequenceCmd::from_code(frame.cmd) else {
        unreachable!("routed here by `owns`");
    };
    match cmd {
        SequenceCmd::Create => {
            let req: pb::CreateSequence = frame.decode()?;
            let request = Request::Create {
                name: req.name,
                start: (req.start != 0).then_some(req.start),
                step: (req.step != 0).then_some(req.step),
                wall_ms: wall_ms(),
            };
            reply(frame, &sequence_reply(submit(ctx, request).await?)?)
        }
        SequenceCmd::Change => {
            let req: pb::ChangeSequence = frame.decode()?;
            if req.step == 0 && req.start == 0 {
                return Err(Reject::new(
                    ErrorCode::InvalidRequest,
                    "a change names a new step, a new start, or both",
                ));
            }
            let request = Request::Change {
                name: req.name,
                step: (req.step != 0).then_some(req.step),
                start: (req.start != 0).then_some(req.start),
            };
            reply(frame, &sequence_reply(submit(ctx, request).await?)?)
        }
        SequenceCmd::Delete => {
            let req: pb::DeleteSequence = frame.decode()?;
            let answer = submit(ctx, Request::Delete(req.name)).await?;
            reply(frame, &sequence_reply(answer)?)
        }
        SequenceCmd::Next => {
            let req: pb::NextSegment = frame.decode()?;
            let request = Request::Next {
                name: req.name,
                count: req.count,
                wall_ms: wall_ms(),
            };
            reply(frame, &segment_reply(submit(ctx, request).await?)?)
        }
        SequenceCmd::GiveBack => {
            let req: pb::GiveBack = frame.decode()?;
            let tail = segment_from_pb(pb::Segment {
                name: req.name,
                start: req.start,
                end: req.end,
                index: req.index,
                wall_ms: 0,
            });
            reply(
                frame,
                &segment_reply(submit(ctx, Request::GiveBack(tail)).await?)?,
            )
        }
        SequenceCmd::List => reply(frame, &list(ctx, frame.decode()?).await?),
    }
}

/// Submits a request to this machine's service; its refusals become replies.
async fn submit(ctx: &Ctx<'_>, request: Request) -> Result<Response, Reject> {
    handle::submit::<SequenceService>(ctx, request, reject).await
}

/// The code and text a refusal is sent with.
fn reject(e: SequenceError) -> Reject {
    let code: u32 = match &e {
        SequenceError::Invalid(_) | SequenceError::Backward { .. } => {
            ErrorCode::InvalidRequest.into()
        }
        SequenceError::Unknown(_) => SequenceErrorCode::UnknownSequence.into(),
        SequenceError::Exists { .. } => SequenceErrorCode::SequenceExists.into(),
        SequenceError::Exhausted { .. } => SequenceErrorCode::SequenceExhausted.into(),
        SequenceError::NotLast { .. } => SequenceErrorCode::NotLastSegment.into(),
        SequenceError::TooMany { .. } => SequenceErrorCode::TooManySequences.into(),
    };
    Reject::new(code, e.to_string())
}

fn sequence_reply(answer: Response) -> Result<pb::SequenceReply, Reject> {
    match answer {
        Response::Sequence(record) => Ok(pb::SequenceReply {
            sequence: Some(record_to_pb(&record)),
        }),
        other => Err(unexpected(other)),
    }
}

fn segment_reply(answer: Response) -> Result<pb::SegmentReply, Reject> {
    match answer {
        Response::Segment {
            segment,
            step,
            max_step,
        } => Ok(pb::SegmentReply {
            segment: Some(segment_to_pb(&segment)),
            step,
            max_step,
        }),
        Response::GaveBack(tail) => Ok(pb::SegmentReply {
            segment: Some(segment_to_pb(&tail)),
            ..Default::default()
        }),
        other => Err(unexpected(other)),
    }
}

async fn list(ctx: &Ctx<'_>, req: pb::SequencesRequest) -> Result<pb::SequencesReply, Reject> {
    if !req.name.is_empty() {
        super::state::check_name(&req.name).map_err(|e| reject(e.into()))?;
    }
    ctx.read_of::<Sequences, _>(move |replica, _| {
        let sequences = <State as Part<Sequences>>::part(replica.state());
        let (sequences, next, total) = crate::machines::handle::page(
            sequences
                .iter()
                .filter(|r| req.name.is_empty() || r.name == req.name),
            |r| &r.name,
            &req.from,
            req.limit,
            record_to_pb,
        );
        pb::SequencesReply {
            node: replica.config().me.to_string(),
            is_leader: replica.is_leader(),
            index: replica.read_through(<State as Part<Sequences>>::INDEX),
            sequences,
            now_ms: wall_ms(),
            stale: replica.staleness(),
            next,
            total,
        }
    })
    .await
}

impl crate::machines::Served for super::Sequences {
    type Cmd = SequenceCmd;

    fn grpc() -> Option<&'static crate::wire::rpc::Service> {
        Some(&super::grpc::SERVICE)
    }

    fn views() -> Vec<crate::machines::handle::AdminView> {
        use crate::machines::handle::{AdminView, json_of};
        vec![AdminView::new(
            "/v1/sequences",
            "`show sequences`",
            SequenceCmd::List,
            |ctx, params| {
                Box::pin(async move {
                    let (limit, from) = crate::machines::handle::view_page(params)?;
                    let req = pb::SequencesRequest {
                        limit,
                        from,
                        ..Default::default()
                    };
                    Ok(json_of(&list(ctx, req).await?))
                })
            },
        )]
    }

    fn serve<'a>(
        frame: &'a crate::wire::Frame,
        ctx: &'a Ctx<'a>,
    ) -> impl Future<Output = Result<Handled, Reject>> + Send + 'a {
        serve(frame, ctx)
    }
}
