//! Serving the admin router over HTTP or HTTPS with hyper, bounded: a request's head may
//! take at most [`HEAD_TIMEOUT`] to arrive and be at most [`MAX_HEAD`] bytes (431 beyond,
//! over TLS as over plain TCP), so a slow or oversized request never holds a connection
//! open; every refusal is counted and logged in summary (`server::refusals`). Each
//! connection's TLS client certificate, if the cluster's CA verified one, is handed to the
//! handlers ([`PeerCert`]) as an identity.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, error, warn};

use super::super::refusals::Said;
use super::super::shared::Shared;
use crate::transport::Stream;
use crate::transport::tls::{self, Reloading};

/// The most a request's head (request line and headers) may take, in bytes.
pub(crate) const MAX_HEAD: usize = 64 * 1024;
/// The most time a request's head may take to arrive once its first byte has.
pub(crate) const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The most time a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The name of the TLS client certificate a connection presented and the CA verified.
#[derive(Debug, Clone, Default)]
pub(crate) struct PeerCert(pub(crate) Option<String>);

/// Accepts connections until `shutdown`, each served on its own task.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<Arc<Reloading<rustls::ServerConfig>>>,
    app: Router,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
) {
    loop {
        let (tcp, remote) = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    error!("admin accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        tcp.set_nodelay(true).ok();
        let (app, shared, shutdown) = (app.clone(), shared.clone(), shutdown.clone());
        let tls = tls.as_ref().map(|t| t.current());
        tokio::spawn(
            async move {
                let stream = match tls {
                    None if opens_http2(&tcp).await => {
                        return grpc_client(tcp, remote, &shared).await;
                    }
                    None => Stream::Plain(tcp),
                    Some(config) => {
                        match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls::accept(tcp, config))
                            .await
                        {
                            Ok(Ok(stream)) => stream,
                            Ok(Err(e)) => {
                                let why = format!("admin TLS handshake failed: {e}");
                                let kind = match super::super::refusals::tls_kind(&why) {
                                    "tls_certificate_expired" => "admin_tls_certificate_expired",
                                    "tls_unknown_issuer" => "admin_tls_unknown_issuer",
                                    "tls_bad_certificate" => "admin_tls_bad_certificate",
                                    _ => "admin_tls_handshake",
                                };
                                return refused(&shared, remote, kind, &why);
                            }
                            Err(_) => {
                                let why = format!(
                                    "admin TLS handshake not finished within {HANDSHAKE_TIMEOUT:?}"
                                );
                                return refused(&shared, remote, "admin_tls_timeout", &why);
                            }
                        }
                    }
                };
                connection(stream, remote, app, &shared, shutdown).await;
            }
            .in_current_span(),
        );
    }
}

/// Serves one connection's requests until it closes or the beacon shuts down.
async fn connection(
    stream: Stream,
    remote: SocketAddr,
    app: Router,
    shared: &Shared,
    shutdown: CancellationToken,
) {
    let cert = PeerCert(
        stream
            .peer_verified()
            .then(|| stream.peer_certificate_name())
            .flatten(),
    );
    let app = app.layer(axum::Extension(cert));
    let service = TowerToHyperService::new(app);
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        _ = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            match tokio::time::timeout(Duration::from_secs(2), conn.as_mut()).await {
                Ok(result) => result,
                Err(_) => return,
            }
        }
    };
    let Err(e) = result else {
        return;
    };
    if e.is_parse_too_large() {
        let why = format!("admin request head over {MAX_HEAD} bytes: answered 431 and closed");
        refused(shared, remote, "admin_head_too_large", &why);
    } else if e.is_timeout() {
        let why =
            format!("admin request head not complete within {HEAD_TIMEOUT:?}: connection closed");
        refused(shared, remote, "admin_slow_request", &why);
    } else if e.is_parse() {
        refused(
            shared,
            remote,
            "admin_bad_request",
            &format!("admin request refused: {e}"),
        );
    } else {
        debug!(%remote, "admin connection ended: {e}");
    }
}

/// Whether the connection opens with HTTP/2's preface (a gRPC client, which speaks HTTP/2
/// with prior knowledge), waiting at most [`HEAD_TIMEOUT`] for its first bytes.
async fn opens_http2(tcp: &tokio::net::TcpStream) -> bool {
    const PREFACE: &[u8] = b"PRI * HTTP/2.0";
    let mut head = [0u8; PREFACE.len()];
    let peeked = tokio::time::timeout(HEAD_TIMEOUT, async {
        loop {
            match tcp.peek(&mut head).await {
                Ok(0) | Err(_) => return 0,
                Ok(n) if n == head.len() || !PREFACE.starts_with(&head[..n]) => return n,
                Ok(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    })
    .await
    .unwrap_or(0);
    peeked == PREFACE.len() && head == *PREFACE
}

/// A gRPC client that dialled the admin port: every call is answered `FAILED_PRECONDITION`
/// naming the client port, so that the client says what is wrong instead of "socket
/// closed".
async fn grpc_client(tcp: tokio::net::TcpStream, remote: SocketAddr, shared: &Shared) {
    let node = shared.config.node;
    let why = format!(
        "this is beacon {node}'s admin HTTP API, not its client port: gRPC (and beacon's own protocol) is served on {node}"
    );
    refused(
        shared,
        remote,
        "admin_grpc",
        &format!("a gRPC client called the admin port: {why}"),
    );
    let service = hyper::service::service_fn(move |_req| {
        let status = tonic::Status::failed_precondition(why.clone());
        async move { Ok::<_, std::convert::Infallible>(status.into_http::<tonic::body::Body>()) }
    });
    let conn = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
        .timer(TokioTimer::new())
        .max_concurrent_streams(16)
        .serve_connection(TokioIo::new(tcp), service);
    if let Err(e) = tokio::time::timeout(HEAD_TIMEOUT, conn).await {
        debug!(%remote, "a gRPC client on the admin port stayed past {e}");
    }
}

/// Logs a refused admin connection in summary and counts it.
fn refused(shared: &Shared, remote: SocketAddr, kind: &'static str, why: &str) {
    match shared.refused_conns.note(kind, remote.ip()) {
        Said::InFull => warn!(%remote, "{why}"),
        Said::Counted => debug!(%remote, "{why}"),
        Said::Summary(line) => warn!("{line}"),
    }
    shared.metrics.connection_refused(kind);
}
