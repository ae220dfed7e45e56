//! Admin HTTP API: a status page, JSON views of the beacon for monitoring and scripts,
//! health probes and metrics.
//!
//! * `GET /`: the status page ([`page`]): the cluster at a glance, refreshing itself.
//! * `GET /health`: 200 when a write sent to this beacon now would succeed (it leads and sees
//!   a majority, or follows a leader that does, in quorum mode); 503 with the reason
//!   otherwise. A lone beacon of a three-beacon cluster is not healthy, however well it runs.
//! * `GET /livez`: 200 while the beacon's core answers (Kubernetes' liveness probe: restart
//!   it when this fails); `GET /readyz`: 200 when it can write and, as a follower, lacks at
//!   most [`READY_LAG`] committed entries (Kubernetes' readiness probe). Both answer `ok` or
//!   the reason as plain text.
//! * `GET /metrics`: Prometheus metrics ([`super::metrics`]).
//! * `GET /v1/...`: the JSON views ([`api`]), the same facts as nebcli's `--json`.
//!
//! With `auth` configured, everything but the probes needs a `read` identity ([`access`]).
//! Unknown paths are 404 and wrong methods 405, each with a JSON body saying why. With `tls`
//! configured it is served over TLS (HTTPS) with the beacon's certificate.

mod access;
mod api;
mod http;
mod page;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::shared::Shared;
use crate::transport::tls::Reloading;

/// What the admin handlers read.
#[derive(Clone)]
pub(crate) struct AdminState {
    pub(crate) shared: Arc<Shared>,
}

pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<Arc<Reloading<rustls::ServerConfig>>>,
    state: AdminState,
    shutdown: CancellationToken,
) {
    let guarded = Router::new()
        .route("/", get(page::serve))
        .route("/metrics", get(metrics))
        .route("/v1/beacon", get(api::beacon))
        .route("/v1/leaders", get(api::leaders));
    let guarded = api::views(guarded).route_layer(axum::middleware::from_fn_with_state(
        state.clone(),
        access::require_read,
    ));
    let app = Router::new()
        .route("/health", get(health))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .merge(guarded)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed);
    let shared = state.shared.clone();
    let app = app.with_state(state);
    http::serve(listener, tls, app, shared, shutdown).await;
}

/// A follower further behind its leader than this many committed entries (just restarted,
/// installing a snapshot) is not ready.
pub const READY_LAG: u64 = 1_000;

/// How long a probe waits for the core: a core that takes longer is not alive.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

fn unavailable(why: &str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({"health": false, "reason": why})),
    )
        .into_response()
}

/// The core's status (with each beacon's admin URL), or why there is none (shutting down,
/// or not answering in time).
async fn status(shared: &Shared) -> Result<crate::pb::BeaconStatus, &'static str> {
    match tokio::time::timeout(PROBE_TIMEOUT, shared.status()).await {
        Ok(Ok(status)) => Ok(status),
        Ok(Err(_)) => Err("beacon is shutting down"),
        Err(_) => Err("the beacon's core did not answer within 2 s"),
    }
}

async fn health(State(state): State<AdminState>) -> Response {
    let status = match status(&state.shared).await {
        Ok(status) => status,
        Err(why) => return unavailable(why),
    };
    let mut body = json!({
        "health": status.cannot_write.is_none(),
        "leader": status.leader,
        "term": status.term,
        "version": status.version,
    });
    match &status.cannot_write {
        None => Json(body).into_response(),
        Some(why) => {
            body["reason"] = json!(why);
            (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
        }
    }
}

fn probe(result: Result<(), String>) -> Response {
    match result {
        Ok(()) => (StatusCode::OK, "ok\n").into_response(),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")).into_response(),
    }
}

async fn livez(State(state): State<AdminState>) -> Response {
    probe(
        status(&state.shared)
            .await
            .map(|_| ())
            .map_err(str::to_owned),
    )
}

async fn readyz(State(state): State<AdminState>) -> Response {
    probe(match status(&state.shared).await {
        Err(why) => Err(why.to_owned()),
        Ok(s) => match s.cannot_write {
            Some(why) => Err(why),
            None if s.lag > READY_LAG => Err(format!(
                "{} committed entries behind the leader (ready at {READY_LAG} or fewer)",
                s.lag
            )),
            None => Ok(()),
        },
    })
}

/// The metrics in the text format Prometheus scrapes (OpenMetrics).
async fn metrics(State(state): State<AdminState>) -> Response {
    // The state gauges are set by the core; without it (stuck, shutting down) the
    // counters still go out, and `beacon_server_can_write` keeps its last value.
    let _ = tokio::time::timeout(PROBE_TIMEOUT, state.shared.driver.refresh_metrics()).await;
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.shared.metrics.encode(),
    )
        .into_response()
}

async fn not_found(uri: Uri) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({"error": format!("no endpoint {}; try / (the status page), /health, /livez, /readyz, /metrics or /v1/beacon", uri.path())})),
    )
        .into_response()
}

/// A method the path does not take: 405 with a JSON reason naming the method (the admin API
/// reads only).
async fn method_not_allowed(method: axum::http::Method, uri: Uri) -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(axum::http::header::ALLOW, "GET, HEAD")],
        Json(json!({"error": format!("{} {} is not served: the admin API answers GET (and HEAD)", method, uri.path())})),
    )
        .into_response()
}
