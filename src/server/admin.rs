//! Admin HTTP API: JSON views of the beacon for monitoring and scripts.
//!
//! * `GET /health`: 200 when this beacon knows a leader, 503 otherwise.
//! * `GET /v1/beacon`: the same view as `nebcli show beacon --json`.
//!
//! Unknown paths are 404 and wrong methods 405, each with a JSON body saying why.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::error;

use super::handle::DriverHandle;

pub(crate) async fn serve(
    listener: TcpListener,
    driver: DriverHandle,
    shutdown: CancellationToken,
) {
    let app = Router::new()
        .route("/health", get(health))
        .route("/v1/beacon", get(beacon))
        .fallback(not_found)
        .with_state(driver);
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await;
    if let Err(e) = served {
        error!("admin HTTP API stopped: {e}");
    }
}

fn unavailable() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({"error": "beacon is shutting down"})),
    )
        .into_response()
}

async fn health(State(driver): State<DriverHandle>) -> Response {
    let Ok(status) = driver.status().await else {
        return unavailable();
    };
    match status.leader {
        Some(leader) => {
            Json(json!({"health": true, "leader": leader, "term": status.term})).into_response()
        }
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"health": false, "reason": "no leader known", "term": status.term})),
        )
            .into_response(),
    }
}

async fn beacon(State(driver): State<DriverHandle>) -> Response {
    match driver.status().await {
        Ok(status) => Json(status).into_response(),
        Err(_) => unavailable(),
    }
}

async fn not_found(uri: Uri) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({"error": format!("no endpoint {}; try /health or /v1/beacon", uri.path())})),
    )
        .into_response()
}
