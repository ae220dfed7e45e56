//! The JSON views of the admin API: the same facts as nebcli's `--json`. The core's are
//! here; each machine declares its own ([`crate::machines::handle::AdminView`], in its
//! `rpc.rs`), answered by the machine's own request handlers in process, with the role check
//! a client's request over the wire gets. The status page reads these.
//!
//! * `GET /v1/beacon`: `show beacon` (with each beacon's admin URL).
//! * `GET /v1/leaders`: the leader changes this beacon has seen, with their time and term.
//! * every machine's views: [`views`] lists them with what they show (`GET /v1/nodes`,
//!   `GET /v1/ids`, `GET /v1/sequences`, `GET /v1/resources`, `GET /v1/slots`,
//!   `GET /v1/queues`, `GET /v1/configs`, ...).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Extension, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use serde_json::json;

use super::AdminState;
use super::access::Caller;
use crate::machines::Dispatch;
use crate::machines::handle::{AdminView, Consistency, Reject};
use crate::time::wall_ms;
use crate::wire::ErrorCode;

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

/// Whether the caller may send `cmd`, as over the wire.
fn permitted(caller: &Caller, cmd: u32) -> Result<(), Reject> {
    match &caller.0 {
        Some(who) => crate::server::dispatch::permit(cmd, who),
        None => Ok(()),
    }
}

/// Every machine's views, as routes of `router` (behind the access layer added after).
pub(super) fn views(mut router: Router<AdminState>) -> Router<AdminState> {
    for view in Dispatch::views() {
        let view = Arc::new(view);
        let path = view.path;
        router = router.route(
            path,
            get(
                move |State(state): State<AdminState>,
                      Extension(caller): Extension<Caller>,
                      Query(params): Query<HashMap<String, String>>| {
                    let view = view.clone();
                    async move { answer(&view, &state, &caller, params).await }
                },
            ),
        );
    }
    router
}

async fn answer(
    view: &AdminView,
    state: &AdminState,
    caller: &Caller,
    params: HashMap<String, String>,
) -> Response {
    if let Err(r) = permitted(caller, view.cmd) {
        return refused(r);
    }
    let consistency = match params.get("consistency").map(String::as_str) {
        None => Consistency::Linearizable,
        Some(named) => match Consistency::named(named) {
            Some(c) => c,
            None => {
                return refused(Reject::new(
                    ErrorCode::InvalidRequest,
                    format!(
                        "consistency `{named}` is neither `linearizable` (the default) nor `serializable`"
                    ),
                ));
            }
        },
    };
    let ctx = state.shared.ctx(caller.0.as_ref(), consistency, true);
    let params = params.into_iter().collect();
    match (view.answer)(&ctx, &params).await {
        Ok(v) => Json(v).into_response(),
        Err(r) => refused(r),
    }
}

pub(super) async fn beacon(State(state): State<AdminState>) -> Response {
    match super::status(&state.shared).await {
        Ok(status) => Json(status).into_response(),
        Err(why) => super::unavailable(why),
    }
}

pub(super) async fn leaders(State(state): State<AdminState>) -> Response {
    Json(json!({
        "node": state.shared.config.node.to_string(),
        "now_ms": wall_ms(),
        "changes": state.shared.metrics.leaders.changes(),
    }))
    .into_response()
}
