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
mod page;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{error, warn};

use super::handle::DriverHandle;
use super::shared::Shared;
use crate::transport::Stream;
use crate::transport::tls::{self, Reloading};

/// What the admin handlers read.
#[derive(Clone)]
pub(crate) struct AdminState {
    pub(crate) shared: Arc<Shared>,
    /// Whether the admin API is served over TLS (a token may then cross any network).
    pub(crate) tls: bool,
}

impl axum::extract::FromRef<AdminState> for DriverHandle {
    fn from_ref(state: &AdminState) -> DriverHandle {
        state.shared.driver.clone()
    }
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
        .route("/v1/leaders", get(api::leaders))
        .route("/v1/nodes", get(api::nodes))
        .route("/v1/ids", get(api::ids))
        .route("/v1/sequences", get(api::sequences))
        .route("/v1/resources", get(api::resources))
        .route("/v1/slots", get(api::slots))
        .route("/v1/queues", get(api::queues))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            access::require_read,
        ));
    let app = Router::new()
        .route("/health", get(health))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .merge(guarded)
        .fallback(not_found)
        .with_state(state);
    let served = match tls {
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown.cancelled_owned())
                .await
        }
        Some(tls) => {
            axum::serve(TlsListener::start(listener, tls), app)
                .with_graceful_shutdown(shutdown.cancelled_owned())
                .await
        }
    };
    if let Err(e) = served {
        error!("admin HTTP API stopped: {e}");
    }
}

/// Accepts TLS connections: each handshake runs on its own task, so a slow or broken one
/// holds up no other; failures are logged with the remote address.
struct TlsListener {
    addr: std::io::Result<SocketAddr>,
    ready: mpsc::Receiver<(Stream, SocketAddr)>,
}

impl TlsListener {
    fn start(listener: TcpListener, tls: Arc<Reloading<rustls::ServerConfig>>) -> TlsListener {
        let addr = listener.local_addr();
        let (tx, ready) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (tcp, remote) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        error!("admin accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (handed, config) = (tx.clone(), tls.current());
                tokio::spawn(async move {
                    let handshake = tls::accept(tcp, config);
                    match tokio::time::timeout(Duration::from_secs(5), handshake).await {
                        Ok(Ok(stream)) => {
                            let _ = handed.send((stream, remote)).await;
                        }
                        Ok(Err(e)) => warn!(%remote, "admin TLS handshake failed: {e}"),
                        Err(_) => warn!(%remote, "admin TLS handshake not finished within 5 s"),
                    }
                });
                if tx.is_closed() {
                    return;
                }
            }
        });
        TlsListener { addr, ready }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = Stream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Stream, SocketAddr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The accepting task ended: nothing will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        match &self.addr {
            Ok(a) => Ok(*a),
            Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
        }
    }
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

/// The core's status, or why there is none (shutting down, or not answering in time).
async fn status(driver: &DriverHandle) -> Result<crate::pb::BeaconStatus, &'static str> {
    match tokio::time::timeout(PROBE_TIMEOUT, driver.status()).await {
        Ok(Ok(status)) => Ok(status),
        Ok(Err(_)) => Err("beacon is shutting down"),
        Err(_) => Err("the beacon's core did not answer within 2 s"),
    }
}

async fn health(State(driver): State<DriverHandle>) -> Response {
    let status = match status(&driver).await {
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

async fn livez(State(driver): State<DriverHandle>) -> Response {
    probe(status(&driver).await.map(|_| ()).map_err(str::to_owned))
}

async fn readyz(State(driver): State<DriverHandle>) -> Response {
    probe(match status(&driver).await {
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
