//! Admin HTTP API: JSON views of the beacon for monitoring and scripts.
//!
//! * `GET /health`: 200 when this beacon knows a leader, 503 otherwise.
//! * `GET /v1/beacon`: the same view as `nebcli show beacon --json`.
//!
//! Unknown paths are 404 and wrong methods 405, each with a JSON body saying why. With `tls`
//! configured it is served over TLS (HTTPS) with the beacon's certificate.

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
use crate::transport::Stream;
use crate::transport::tls::{self, Reloading};

pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<Arc<Reloading<rustls::ServerConfig>>>,
    driver: DriverHandle,
    shutdown: CancellationToken,
) {
    let app = Router::new()
        .route("/health", get(health))
        .route("/v1/beacon", get(beacon))
        .fallback(not_found)
        .with_state(driver);
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
