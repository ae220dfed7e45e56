//! The gRPC edge: the API every language can call, on each beacon's client port.
//!
//! A connection that opens with the HTTP/2 preface (or, under TLS, negotiated ALPN `h2`) is
//! served here; every other stays the native protocol. Each method is a native command (see
//! [`crate::wire::rpc`]): its bytes go to the handler a native frame reaches, under the same
//! identity checks and roles, and a call only the leader can answer is relayed to it
//! ([`super::relay`]), so a client may call any beacon. Beside beacon's services:
//! `grpc.health.v1.Health` (a service is `SERVING` while this beacon can answer it) and server
//! reflection (v1 and v1alpha), so grpcurl, grpcui, Postman and Evans work without the
//! `.proto` files.
//!
//! Bounds, per connection: [`MAX_STREAMS`] concurrent calls, a message no larger than
//! `max_frame_bytes`, [`MAX_HEADERS`] bytes of metadata; a stream whose client does not read
//! is ended once its queue reaches `watch.queue_bytes` or `watch.queue_notices`
//! ([`crate::machines::watchers`]).

mod calls;
mod cluster;
mod codec;
mod methods;
pub(crate) mod standard;
pub(crate) mod status;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};
use tonic::Status;
use tonic::server::NamedService;
use tonic_health::ServingStatus;
use tower::ServiceExt;
use tracing::{debug, info};

use super::shared::Shared;
use crate::wire::rpc::Service;

pub(crate) use cluster::SERVICE as CLUSTER;

/// Concurrent calls (HTTP/2 streams) one connection may have open.
pub(crate) const MAX_STREAMS: u32 = 1024;

/// Bytes of metadata (headers) a call may carry.
pub(crate) const MAX_HEADERS: u32 = 16 * 1024;

/// beacon's gRPC services: the core's and each machine's.
pub(crate) fn services() -> Vec<&'static Service> {
    let mut all = vec![&CLUSTER];
    all.extend(crate::machines::Dispatch::grpc_services());
    all
}

/// Serves one gRPC connection until it closes or the beacon shuts down.
pub(super) async fn serve<S>(
    io: S,
    remote: SocketAddr,
    tls: bool,
    certificate: Option<String>,
    shared: Arc<Shared>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    debug!(%remote, "gRPC connection");
    let edge = Arc::new(calls::Edge {
        shared: shared.clone(),
        remote,
        tls,
        certificate,
        share: Default::default(),
    });
    let service = hyper::service::service_fn(move |req| {
        // Boxed: the call's future is several kilobytes, and hyper moves it into a task of
        // its own; moving a pointer instead saves copying it on every call.
        let call = Box::pin(route(edge.clone(), req));
        async move { Ok::<_, Infallible>(call.await) }
    });
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .max_concurrent_streams(MAX_STREAMS)
        .max_header_list_size(MAX_HEADERS)
        // gRPC has no use for a `date` header; leaving it out saves formatting and encoding
        // it on every response.
        .auto_date_header(false)
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(20));
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(e) = result {
                debug!(%remote, "gRPC connection ended: {e}");
            }
        }
        _ = shared.shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(2), connection).await;
        }
    }
}

/// Every method by its path, `/SERVICE/METHOD`.
fn methods_by_path() -> &'static std::collections::HashMap<String, &'static crate::wire::rpc::Method>
{
    static PATHS: std::sync::OnceLock<
        std::collections::HashMap<String, &'static crate::wire::rpc::Method>,
    > = std::sync::OnceLock::new();
    PATHS.get_or_init(|| {
        services()
            .into_iter()
            .flat_map(|s| {
                s.methods
                    .iter()
                    .map(move |m| (format!("/{}/{}", s.name, m.name), m))
            })
            .collect()
    })
}

/// Routes a call by its path, `/SERVICE/METHOD`.
async fn route(
    edge: Arc<calls::Edge>,
    req: http::Request<hyper::body::Incoming>,
) -> http::Response<tonic::body::Body> {
    if let Some(m) = methods_by_path().get(req.uri().path()) {
        return methods::serve(edge, m, req).await;
    }
    let path = req.uri().path().to_owned();
    let (service, method) = path
        .trim_start_matches('/')
        .split_once('/')
        .unwrap_or((path.as_str(), ""));
    let standard = &edge.shared.grpc;
    let svc = match service {
        tonic_health::pb::health_server::HealthServer::<()>::NAME => &standard.health,
        "grpc.reflection.v1.ServerReflection" => &standard.reflection,
        "grpc.reflection.v1alpha.ServerReflection" => &standard.reflection_alpha,
        _ => {
            let known = services().iter().any(|s| s.name == service);
            let msg = if known {
                format!("{service} has no method `{method}`")
            } else {
                format!(
                    "no service `{service}` here: beacon serves {}, grpc.health.v1.Health and reflection",
                    services()
                        .iter()
                        .map(|s| s.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            return Status::unimplemented(msg).into_http();
        }
    };
    match svc.clone().oneshot(req).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// Keeps `grpc.health.v1.Health` true: every beacon service is `SERVING` while this beacon
/// can answer it (a write sent here would succeed: it leads, or follows a leader with a
/// majority, to which it relays); `beacon.v1.Cluster` (a beacon's own view) always.
pub(super) async fn report_health(shared: Arc<Shared>) {
    let reporter = shared.grpc.reporter.clone();
    let mut writable = shared.driver.writable();
    let mut last: Option<bool> = None;
    reporter
        .set_service_status(CLUSTER.name, ServingStatus::Serving)
        .await;
    loop {
        let can = *writable.borrow_and_update();
        if last != Some(can) {
            set_beacon_services(&reporter, can).await;
            if last.is_some() {
                info!(serving = can, "gRPC health changed");
            }
            last = Some(can);
        }
        tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            changed = writable.changed() => if changed.is_err() {
                // The core stopped: nothing here is served any more.
                set_beacon_services(&reporter, false).await;
                return;
            },
        }
    }
}

/// Sets the whole server's status (`""`) and every beacon service's.
async fn set_beacon_services(reporter: &tonic_health::server::HealthReporter, serving: bool) {
    let status = if serving {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    };
    reporter.set_service_status("", status).await;
    for s in crate::machines::Dispatch::grpc_services() {
        reporter.set_service_status(s.name, status).await;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use prost::Message;
    use prost_types::FileDescriptorSet;

    use super::*;
    use crate::wire::rpc::{Kind, NOTICE, REFUSED, REPORTED, START};

    fn descriptors() -> FileDescriptorSet {
        FileDescriptorSet::decode(standard::DESCRIPTORS).expect("the descriptors decode")
    }

    /// The fields of message `full` (`.beacon.v1.registry.NodeEvent`): number and name.
    fn fields(set: &FileDescriptorSet, full: &str) -> Vec<(i32, String)> {
        for file in &set.file {
            let package = file.package();
            for m in &file.message_type {
                if format!(".{package}.{}", m.name()) == full {
                    return m
                        .field
                        .iter()
                        .map(|f| (f.number(), f.name().to_owned()))
                        .collect();
                }
            }
        }
        panic!("no message {full} in proto/");
    }

    /// What the edge serves is what `proto/` declares: the same services and methods, each
    /// streaming as its kind says, and each stream's events with the fields the edge writes.
    #[test]
    fn the_declared_services_are_the_proto_services() {
        let set = descriptors();
        let mut in_proto = Vec::new();
        for file in &set.file {
            for s in &file.service {
                let full = format!("{}.{}", file.package(), s.name());
                let declared = services()
                    .into_iter()
                    .find(|d| d.name == full)
                    .unwrap_or_else(|| panic!("{full} is in proto/ but no machine serves it"));
                // The same names; the declarations list them by kind, proto/ as it reads.
                let names: BTreeSet<&str> = s.method.iter().map(|m| m.name()).collect();
                let served: BTreeSet<&str> = declared.methods.iter().map(|m| m.name).collect();
                assert_eq!(names, served, "{full}: the methods differ");
                assert_eq!(
                    served.len(),
                    declared.methods.len(),
                    "{full}: a method twice"
                );
                for m in &s.method {
                    let kind = declared.method(m.name()).unwrap().kind;
                    let what = format!("{full}/{}", m.name());
                    assert_eq!(m.client_streaming(), kind.client_streams(), "{what}");
                    assert_eq!(m.server_streaming(), kind.server_streams(), "{what}");
                    if kind.server_streams() {
                        let events = fields(&set, m.output_type());
                        let numbers: Vec<i32> = events.iter().map(|(n, _)| *n).collect();
                        let mut want = vec![START as i32, NOTICE as i32];
                        if matches!(kind, Kind::Mux(_)) {
                            want.extend([REPORTED as i32, REFUSED as i32]);
                        }
                        if !matches!(kind, Kind::Each(_)) {
                            assert_eq!(numbers, want, "{what}: its events' fields");
                        }
                    }
                    if let Kind::Mux(cmds) = kind {
                        let requests = fields(&set, m.input_type());
                        assert_eq!(requests.len(), cmds.len(), "{what}: one field per command");
                    }
                }
                in_proto.push(full);
            }
        }
        for d in services() {
            assert!(
                in_proto.contains(&d.name.to_owned()),
                "{} is served but not in proto/",
                d.name
            );
        }
    }

    /// docs/grpc.md gives every error code its status, as the code does.
    #[test]
    fn the_grpc_page_gives_every_error_its_status() {
        let page = include_str!("../../../docs/grpc.md");
        let shouted = |name: String| crate::wire::shouted(&name);
        let mut missing = Vec::new();
        for s in services() {
            for (code, name, grpc) in s.errors {
                let row = format!("| {code} | `{name}` | `{}` |", shouted(format!("{grpc:?}")));
                if !page.contains(&row) {
                    missing.push(row);
                }
            }
        }
        assert!(missing.is_empty(), "docs/grpc.md lacks {missing:#?}");
        // The README's table groups them by status.
        let readme = include_str!("../../../README.md");
        for s in services() {
            for (_, name, grpc) in s.errors {
                let status = format!("| `{}` |", shouted(format!("{grpc:?}")));
                let row = readme.lines().find(|l| l.starts_with(&status));
                assert!(
                    row.is_some_and(|r| r.contains(&format!("`{name}`"))),
                    "README.md: the row of {status} lacks `{name}`"
                );
            }
        }
    }

    /// Every error code has its gRPC status, named as the protocol page names it.
    #[test]
    fn every_error_code_has_a_status() {
        for code in crate::wire::ErrorCode::ALL {
            assert!(status::lookup(code as u32).is_some(), "{code:?}");
        }
        let st = status::status(18, "no quorum", "");
        assert_eq!(st.code(), tonic::Code::Unavailable);
        assert_eq!(st.metadata().get("beacon-code").unwrap(), "18");
        let st = status::status(19, "not the holder", "");
        assert_eq!(st.code(), tonic::Code::FailedPrecondition);
        let st = status::status(12, "exhausted", "");
        assert_eq!(st.code(), tonic::Code::ResourceExhausted);
    }
}
