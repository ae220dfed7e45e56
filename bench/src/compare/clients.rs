//! One way to allocate a unique ID from each system, the way its users would:
//! a beacon registration (its node ID), an etcd put (the revision it created), a ZooKeeper
//! persistent sequential znode (its sequence number).

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, anyhow};
use beacon::client::ConnectOptions;
use beacon::machines::registry::RegistryCmd;
use beacon::pb;
use zookeeper_client as zk;

use super::h2_client::Connection;
use super::systems::{Kind, Via};

/// Parent of the sequential znodes.
pub const ZK_PARENT: &str = "/ids";
/// The key etcd allocations put.
const ETCD_KEY: &str = "bench/id";

/// The address of beacon registration `i`: distinct for every i below 2^24 * 60000.
pub fn service_addr(i: usize) -> SocketAddr {
    let host = (i / 60_000) as u32;
    let port = 1024 + (i % 60_000) as u16;
    SocketAddr::from((Ipv4Addr::from(0x0a00_0000 | (host & 0x00ff_ffff)), port))
}

/// A cluster's members over gRPC, any of which takes any call (a beacon or etcd follower
/// relays a write to its leader): one HTTP/2 connection to the member in use; a call that
/// fails moves on to the next.
pub struct GrpcEndpoints {
    endpoints: Vec<SocketAddr>,
    at: usize,
    connection: Option<Connection>,
    timeout: Duration,
}

impl GrpcEndpoints {
    pub fn new(endpoints: &[SocketAddr], timeout: Duration) -> anyhow::Result<GrpcEndpoints> {
        if endpoints.is_empty() {
            return Err(anyhow!("no members to call"));
        }
        Ok(GrpcEndpoints {
            endpoints: endpoints.to_vec(),
            at: 0,
            connection: None,
            timeout,
        })
    }

    /// The address of the member in use.
    pub fn endpoint(&self) -> SocketAddr {
        self.endpoints[self.at]
    }

    /// Moves on to the next member.
    pub fn next(&mut self) {
        self.at = (self.at + 1) % self.endpoints.len();
        self.connection = None;
    }

    /// Calls unary method `path` with `req` on the member in use, within the timeout; on an
    /// error, moves on.
    pub async fn unary<Req, Resp>(&mut self, path: &'static str, req: Req) -> anyhow::Result<Resp>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        let (timeout, at) = (self.timeout, self.endpoint());
        let slot = &mut self.connection;
        let result = tokio::time::timeout(timeout, async {
            let connection = match slot {
                Some(c) => c,
                None => slot.insert(Connection::open(at, timeout).await?),
            };
            connection.unary(path, &req).await
        })
        .await
        .unwrap_or_else(|_| Err(anyhow!("{path} at {at} timed out")));
        if result.is_err() {
            self.next();
        }
        result
    }
}

/// A connected client of one system.
pub enum Allocator {
    Beacon {
        cluster: Box<beacon::client::Cluster>,
        /// Numbers the registrations' addresses across all clients of a run.
        next: Arc<AtomicUsize>,
    },
    /// beacon through its gRPC API.
    BeaconGrpc {
        beacons: GrpcEndpoints,
        next: Arc<AtomicUsize>,
    },
    // Clients boxed: they differ in size (the etcd client is some 3.5 KB).
    Etcd(Box<etcd_client::Client>),
    /// etcd's `KV/Put` through the same HTTP/2 client as [`Allocator::BeaconGrpc`].
    EtcdGrpc(GrpcEndpoints),
    /// A session, replaced by a new one when it has ended (expired while the ensemble had
    /// no leader, as in a hung leader's failover), as Curator and its users do.
    ZooKeeper {
        client: Option<zk::Client>,
        endpoints: Vec<SocketAddr>,
        timeout: Duration,
    },
}

impl Allocator {
    /// A client of `kind` reaching the cluster through `endpoints`, with `timeout` for
    /// connecting and for each request.
    pub async fn connect(
        kind: Kind,
        via: Via,
        endpoints: &[SocketAddr],
        beacon: &ConnectOptions,
        timeout: Duration,
        next: Arc<AtomicUsize>,
    ) -> anyhow::Result<Allocator> {
        Ok(match kind {
            Kind::Beacon if via == Via::Grpc => Allocator::BeaconGrpc {
                beacons: GrpcEndpoints::new(endpoints, timeout)?,
                next,
            },
            Kind::Beacon => {
                let opts = ConnectOptions {
                    timeout,
                    ..beacon.clone()
                };
                let beacons = endpoints.iter().map(|a| a.to_string()).collect();
                Allocator::Beacon {
                    cluster: Box::new(beacon::client::Cluster::new(beacons, opts, timeout)),
                    next,
                }
            }
            Kind::Etcd if via == Via::Grpc => {
                Allocator::EtcdGrpc(GrpcEndpoints::new(endpoints, timeout)?)
            }
            Kind::Etcd => {
                let opts = etcd_client::ConnectOptions::new()
                    .with_connect_timeout(timeout)
                    .with_timeout(timeout);
                let urls: Vec<String> = endpoints.iter().map(|a| format!("http://{a}")).collect();
                Allocator::Etcd(Box::new(
                    etcd_client::Client::connect(urls, Some(opts))
                        .await
                        .context("connect to etcd")?,
                ))
            }
            Kind::ZooKeeper => Allocator::ZooKeeper {
                client: Some(zk_connect(endpoints, timeout).await?),
                endpoints: endpoints.to_vec(),
                timeout,
            },
        })
    }

    /// Allocates one ID.
    pub async fn allocate(&mut self) -> anyhow::Result<u64> {
        match self {
            Allocator::Beacon { cluster, next } => {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let req = pb::registry::RegisterRequest {
                    node_type: "bench".into(),
                    addr: service_addr(i).to_string(),
                    ..Default::default()
                };
                let reply: pb::registry::RegisterReply = cluster
                    .call(RegistryCmd::Register, &req, "the registration")
                    .await?;
                let node = reply.node.ok_or_else(|| anyhow!("reply without a node"))?;
                Ok(u64::from(node.node_id))
            }
            Allocator::BeaconGrpc { beacons, next } => {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let req = pb::registry::RegisterRequest {
                    node_type: "bench".into(),
                    addr: service_addr(i).to_string(),
                    ..Default::default()
                };
                let reply: pb::registry::RegisterReply = beacons
                    .unary("/beacon.v1.registry.Registry/Register", req)
                    .await?;
                let node = reply.node.ok_or_else(|| anyhow!("reply without a node"))?;
                Ok(u64::from(node.node_id))
            }
            Allocator::Etcd(client) => {
                let resp = client.put(ETCD_KEY, "", None).await?;
                let header = resp.header().ok_or_else(|| anyhow!("no header"))?;
                Ok(header.revision() as u64)
            }
            Allocator::EtcdGrpc(members) => {
                let req = EtcdPut {
                    key: ETCD_KEY.into(),
                    value: Vec::new(),
                };
                let reply: EtcdPutReply = members.unary("/etcdserverpb.KV/Put", req).await?;
                let header = reply.header.ok_or_else(|| anyhow!("no header"))?;
                Ok(header.revision as u64)
            }
            Allocator::ZooKeeper {
                client,
                endpoints,
                timeout,
            } => {
                let session = match client {
                    Some(c) => c,
                    None => client.insert(zk_connect(endpoints, *timeout).await?),
                };
                let opts = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
                match session.create(&format!("{ZK_PARENT}/n-"), b"", &opts).await {
                    Ok((_, seq)) => Ok(seq.into_i64() as u64),
                    Err(e) => {
                        // A session that has ended answers nothing again: start another.
                        if matches!(
                            e,
                            zk::Error::SessionExpired
                                | zk::Error::ClientClosed
                                | zk::Error::NoHosts
                        ) {
                            *client = None;
                        }
                        Err(e.into())
                    }
                }
            }
        }
    }
}

/// etcd's `PutRequest`, the fields the bench sets (etcd's `rpc.proto`).
#[derive(Clone, PartialEq, prost::Message)]
struct EtcdPut {
    #[prost(bytes = "vec", tag = "1")]
    key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

/// etcd's `PutResponse`, its header only.
#[derive(Clone, PartialEq, prost::Message)]
struct EtcdPutReply {
    #[prost(message, optional, tag = "1")]
    header: Option<EtcdHeader>,
}

/// etcd's `ResponseHeader`, its revision only.
#[derive(Clone, PartialEq, prost::Message)]
struct EtcdHeader {
    #[prost(int64, tag = "3")]
    revision: i64,
}

/// A ZooKeeper client of the ensemble at `endpoints` (a session of 10 s), with `timeout`
/// for connecting.
pub async fn zk_connect(endpoints: &[SocketAddr], timeout: Duration) -> anyhow::Result<zk::Client> {
    let hosts: Vec<String> = endpoints.iter().map(|a| a.to_string()).collect();
    zk::Client::connector()
        .with_connection_timeout(timeout)
        .with_session_timeout(Duration::from_secs(10))
        .connect(&hosts.join(","))
        .await
        .context("connect to ZooKeeper")
}

/// What a system needs before allocations start (ZooKeeper: the parent znode).
pub async fn prepare(kind: Kind, endpoints: &[SocketAddr]) -> anyhow::Result<()> {
    if kind != Kind::ZooKeeper {
        return Ok(());
    }
    let client = zk_connect(endpoints, Duration::from_secs(10)).await?;
    let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    match client.create(ZK_PARENT, b"", &opts).await {
        Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
        Err(e) => Err(e).context("create the parent znode"),
    }
}
