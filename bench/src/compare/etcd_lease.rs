//! etcd lease keep-alives over one gRPC stream for many leases, as etcd's own Go client
//! does (its lessor sends every lease's keep-alive on a single stream). The Rust client
//! opens one stream per lease, which would put 100k streams on the server; this speaks the
//! `etcdserverpb.Lease/LeaseKeepAlive` call directly with the two messages it needs.

use std::net::SocketAddr;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use futures_util::StreamExt;
use tokio::sync::{Semaphore, mpsc};

/// `etcdserverpb.LeaseKeepAliveRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeepAliveRequest {
    #[prost(int64, tag = "1")]
    pub id: i64,
}

/// `etcdserverpb.LeaseKeepAliveResponse` (the header, field 1, is skipped).
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeepAliveResponse {
    #[prost(int64, tag = "2")]
    pub id: i64,
    #[prost(int64, tag = "3")]
    pub ttl: i64,
}

/// Where renewals' answers are counted (an etcd stream's here, a beacon connection's in
/// the liveness part's renewer).
#[derive(Clone)]
pub struct Counters {
    /// The lease lives on.
    pub renewed: Arc<AtomicU64>,
    /// Refused (beacon) or answered as lapsed (etcd).
    pub failed: Arc<AtomicU64>,
    /// Given a permit per answer, when the sender bounds what it has outstanding.
    pub answered: Option<Arc<Semaphore>>,
}

impl Counters {
    /// Counts one answer: a renewal (`renewed`) or a failure.
    pub fn count(&self, renewed: bool) {
        let counter = if renewed { &self.renewed } else { &self.failed };
        counter.fetch_add(1, Ordering::Relaxed);
        if let Some(window) = &self.answered {
            window.add_permits(1);
        }
    }
}

/// Opens a keep-alive stream to `member` and returns where to send lease IDs. Answers are
/// counted into `counters` by a task of its own: etcd sends the stream's response headers
/// only with its first answer, so the call completes only once a request has gone out.
pub async fn open(
    member: SocketAddr,
    counters: Counters,
) -> anyhow::Result<mpsc::Sender<KeepAliveRequest>> {
    let channel = tonic::transport::Channel::from_shared(format!("http://{member}"))
        .context("etcd endpoint")?
        .connect()
        .await
        .with_context(|| format!("connect to etcd at {member}"))?;
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.context("etcd channel not ready")?;
    let (tx, mut rx) = mpsc::channel::<KeepAliveRequest>(4096);
    let outbound = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed();
    let path = http::uri::PathAndQuery::from_static("/etcdserverpb.Lease/LeaseKeepAlive");
    tokio::spawn(async move {
        let call = grpc
            .streaming(
                tonic::Request::new(outbound),
                path,
                tonic_prost::ProstCodec::<KeepAliveRequest, KeepAliveResponse>::default(),
            )
            .await;
        let mut responses = match call {
            Ok(r) => r.into_inner(),
            Err(e) => {
                eprintln!("etcd keep-alive stream to {member} failed: {e}");
                return;
            }
        };
        while let Ok(Some(r)) = responses.message().await {
            counters.count(r.ttl > 0);
        }
    });
    Ok(tx)
}
