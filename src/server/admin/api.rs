//! The JSON views of the admin API: the same facts as nebcli's `--json`, read from this
//! beacon's own replicated state through the machines' own request handlers (a request made
//! in process, as a client's would be over the wire). The status page reads these.
//!
//! * `GET /v1/beacon`: `show beacon` (with each beacon's admin URL).
//! * `GET /v1/leaders`: the leader changes this beacon has seen, with their time and term.
//! * `GET /v1/nodes[?type=T][&limit=N]`: `show nodes`, with `total` and, by node type, how
//!   many are online and in quarantine (`types`); `limit` keeps the first N rows (0: the
//!   counts alone, cheap to poll).
//! * `GET /v1/ids`: `show ids`.
//! * `GET /v1/sequences`: `show sequences`.
//! * `GET /v1/resources[?type=T]`: `show resources`.
//! * `GET /v1/slots[?group=G]`: `show slots`.
//! * `GET /v1/queues`: `show queues`.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Json, Response};
use serde::Serialize;
use serde_json::json;

use super::AdminState;
use super::access::identify;
use crate::auth::Identity;
use crate::machines::registry::rpc as registry_rpc;
use crate::machines::{
    assign::AssignCmd, registry::RegistryCmd, sequence::SequenceCmd, tasks::TasksCmd,
};
use crate::pb;
use crate::server::handle::{Handled, Reject};
use crate::server::leaders::LeaderHistory;
use crate::wire::{Code, ErrorCode, Frame};

type Params = Query<HashMap<String, String>>;

/// An error as JSON: `status` with what went wrong and, for a refused request, its code.
fn error(status: StatusCode, msg: &str, code: Option<u32>) -> Response {
    (status, Json(json!({"error": msg, "code": code}))).into_response()
}

/// A refusal from a handler: the beacon cannot answer now (no leader, shutting down) is
/// 503, a permission 403, a bad parameter (a node type that cannot be one) 400, anything
/// else 500.
fn refused(r: Reject) -> Response {
    let status = match ErrorCode::from_code(r.code) {
        Some(ErrorCode::PermissionDenied) => StatusCode::FORBIDDEN,
        Some(ErrorCode::InvalidRequest) => StatusCode::BAD_REQUEST,
        Some(
            ErrorCode::NotLeader
            | ErrorCode::LeaderChanged
            | ErrorCode::Unavailable
            | ErrorCode::NoQuorum,
        ) => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, &r.msg, Some(r.code))
}

/// The request's identity (`None` when the beacon requires none), if it may send `cmd`.
fn permitted(
    state: &AdminState,
    headers: &HeaderMap,
    cmd: u32,
) -> Result<Option<Identity>, Box<Response>> {
    let who = identify(state, headers)
        .map_err(|why| Box::new(error(StatusCode::UNAUTHORIZED, &why, None)))?;
    if let Some(who) = &who {
        crate::server::conn::permit(cmd, who).map_err(|r| Box::new(refused(r)))?;
    }
    Ok(who)
}

/// Asks this beacon's machines `req` (command `cmd`) as the request's identity would over
/// the wire: the same role check, the same handler, the same answer.
async fn ask<Req, Resp>(
    state: &AdminState,
    headers: &HeaderMap,
    cmd: impl Code,
    req: &Req,
) -> Result<Resp, Response>
where
    Req: prost::Message,
    Resp: prost::Message + Default,
{
    let frame = Frame::new(cmd.code(), 0, 0, req);
    let who = permitted(state, headers, frame.cmd).map_err(|r| *r)?;
    let handled = crate::machines::rpc::serve(&frame, &state.shared.ctx(who.as_ref())).await;
    match handled {
        Some(Ok(Handled::Reply(reply))) => reply
            .decode()
            .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None)),
        Some(Ok(_)) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the request was answered with a stream",
            None,
        )),
        Some(Err(r)) => Err(refused(r)),
        None => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "no machine serves this request",
            None,
        )),
    }
}

/// Answers `req` as JSON (the reply as nebcli's `--json` prints it).
async fn view<Req, Resp>(
    state: &AdminState,
    headers: &HeaderMap,
    cmd: impl Code,
    req: Req,
) -> Response
where
    Req: prost::Message,
    Resp: prost::Message + Default + Serialize,
{
    match ask::<Req, Resp>(state, headers, cmd, &req).await {
        Ok(reply) => Json(reply).into_response(),
        Err(response) => response,
    }
}

fn param(params: &Params, name: &str) -> String {
    params.get(name).cloned().unwrap_or_default()
}

pub(super) async fn beacon(State(state): State<AdminState>) -> Response {
    match tokio::time::timeout(super::PROBE_TIMEOUT, state.shared.status()).await {
        Ok(Ok(status)) => Json(status).into_response(),
        Ok(Err(r)) => refused(r),
        Err(_) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the beacon's core did not answer within 2 s",
            None,
        ),
    }
}

pub(super) async fn leaders(State(state): State<AdminState>) -> Response {
    Json(json!({
        "node": state.shared.config.node.to_string(),
        "now_ms": LeaderHistory::now_ms(),
        "changes": state.shared.metrics.leaders.changes(),
    }))
    .into_response()
}

pub(super) async fn nodes(
    State(state): State<AdminState>,
    headers: HeaderMap,
    params: Params,
) -> Response {
    let limit = match params.get("limit").map(|l| l.parse::<usize>()) {
        None => None,
        Some(Ok(n)) => Some(n),
        Some(Err(_)) => {
            return error(
                StatusCode::BAD_REQUEST,
                "limit must be a whole number",
                None,
            );
        }
    };
    let req = pb::registry::NodesRequest {
        node_type: param(&params, "type"),
        ..Default::default()
    };
    let who = match permitted(&state, &headers, RegistryCmd::Nodes.code()) {
        Ok(who) => who,
        Err(response) => return *response,
    };
    let ctx = state.shared.ctx(who.as_ref());
    let limit = limit.unwrap_or(usize::MAX);
    let (reply, counts) = match registry_rpc::nodes_page(&ctx, req, limit, true).await {
        Ok(answer) => answer,
        Err(r) => return refused(r),
    };
    let total: usize = counts
        .values()
        .map(|(online, offline)| online + offline)
        .sum();
    let types: Vec<_> = counts
        .into_iter()
        .map(|(t, (online, offline))| json!({"node_type": t, "online": online, "offline": offline}))
        .collect();
    let mut v = crate::machines::registry::cli::render::nodes_json(&reply);
    v["total"] = json!(total);
    v["types"] = json!(types);
    Json(v).into_response()
}

pub(super) async fn ids(State(state): State<AdminState>, headers: HeaderMap) -> Response {
    view::<_, pb::registry::IdsReply>(
        &state,
        &headers,
        RegistryCmd::Ids,
        pb::registry::IdsRequest {},
    )
    .await
}

pub(super) async fn sequences(State(state): State<AdminState>, headers: HeaderMap) -> Response {
    let req = pb::sequence::SequencesRequest::default();
    view::<_, pb::sequence::SequencesReply>(&state, &headers, SequenceCmd::List, req).await
}

pub(super) async fn resources(
    State(state): State<AdminState>,
    headers: HeaderMap,
    params: Params,
) -> Response {
    let req = pb::assign::ResourcesRequest {
        node_type: param(&params, "type"),
    };
    view::<_, pb::assign::ResourcesReply>(&state, &headers, AssignCmd::List, req).await
}

pub(super) async fn slots(
    State(state): State<AdminState>,
    headers: HeaderMap,
    params: Params,
) -> Response {
    let req = pb::assign::GroupsRequest {
        name: param(&params, "group"),
    };
    view::<_, pb::assign::GroupsReply>(&state, &headers, AssignCmd::Groups, req).await
}

pub(super) async fn queues(State(state): State<AdminState>, headers: HeaderMap) -> Response {
    view::<_, pb::tasks::QueuesReply>(
        &state,
        &headers,
        TasksCmd::Queues,
        pb::tasks::QueuesRequest {},
    )
    .await
}
