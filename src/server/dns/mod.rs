//! DNS, an edge like gRPC and the admin API: with key `dns` (`--dns IP:PORT`) a beacon
//! answers DNS over UDP and TCP from its own replica, so nginx, HAProxy, Envoy or a C++
//! service finds instances with no client library. What a name stands for is the machines'
//! to say (`Dispatch::dns`); how a query is answered is [`answer`]'s.
//!
//! Every beacon answers, leader or not, from what it has applied (as a serializable read):
//! a follower is at most a heartbeat behind. An answer is worked out once per name and log
//! position and then served from a small cache until the log moves, so a busy resolver
//! costs a lookup in a map, not a walk of the registry.

pub mod answer;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug, error_span, info, warn};

use self::answer::{Instance, Transport};
use super::shared::Shared;
use crate::machines::Dispatch;
use crate::machines::handle::CoreExt;

/// The largest query taken over UDP (a query is a name and a few bytes).
const UDP_BUFFER: usize = 4096;

/// How long a TCP connection may sit idle between queries (RFC 7766 suggests seconds).
const TCP_IDLE: Duration = Duration::from_secs(10);

/// How many names' answers are kept at most; past it the cache starts over.
const CACHE_NAMES: usize = 4096;

/// The sockets of the DNS edge, bound at start so that a taken port fails the start.
pub(crate) struct Listeners {
    udp: UdpSocket,
    tcp: TcpListener,
}

impl Listeners {
    pub(crate) async fn bind(addr: SocketAddr) -> std::io::Result<Listeners> {
        Ok(Listeners {
            udp: UdpSocket::bind(addr).await?,
            tcp: TcpListener::bind(addr).await?,
        })
    }

    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        self.udp.local_addr().ok()
    }
}

/// The instances a name stands for (`None`: no such name), shared by the answers.
type Found = Option<Arc<Vec<Instance>>>;

/// What each name (lower case) stood for, as of a log position.
#[derive(Default)]
struct Cache {
    names: HashMap<String, (u64, Found)>,
}

/// What the edge shares between its tasks.
struct Edge {
    shared: Arc<Shared>,
    ttl: u32,
    cache: Mutex<Cache>,
}

/// Answers DNS on `listeners` until `token` is cancelled.
pub(crate) async fn serve(
    listeners: Listeners,
    shared: Arc<Shared>,
    tracker: TaskTracker,
    token: CancellationToken,
) {
    let Listeners { udp, tcp } = listeners;
    if let Ok(addr) = udp.local_addr() {
        info!(%addr, "answering DNS for `beacon.` over UDP and TCP");
    }
    let edge = Arc::new(Edge {
        ttl: shared.config.dns_ttl_s,
        shared,
        cache: Mutex::new(Cache::default()),
    });
    let udp = Arc::new(udp);
    // A task per core on the one socket: each answer is a few microseconds of work.
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    for _ in 0..workers {
        let (udp, edge, token) = (udp.clone(), edge.clone(), token.clone());
        tracker.spawn(
            async move {
                tokio::select! {
                    _ = udp_loop(&udp, &edge) => {}
                    _ = token.cancelled() => {}
                }
            }
            .in_current_span(),
        );
    }
    loop {
        let accepted = tokio::select! {
            a = tcp.accept() => a,
            _ = token.cancelled() => return,
        };
        match accepted {
            Ok((stream, remote)) => {
                let (edge, token) = (edge.clone(), token.clone());
                let span = error_span!("dns", %remote);
                tracker.spawn(
                    async move {
                        tokio::select! {
                            _ = tcp_conn(stream, &edge) => {}
                            _ = token.cancelled() => {}
                        }
                    }
                    .instrument(span),
                );
            }
            Err(e) => {
                warn!("DNS accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn udp_loop(udp: &UdpSocket, edge: &Edge) {
    let mut buf = vec![0u8; UDP_BUFFER];
    loop {
        let (n, from) = match udp.recv_from(&mut buf).await {
            Ok(got) => got,
            Err(e) => {
                // An ICMP error from an earlier answer's asker, typically: not fatal.
                debug!("DNS receive failed: {e}");
                continue;
            }
        };
        if let Some(reply) = edge.answer(&buf[..n], Transport::Udp).await
            && let Err(e) = udp.send_to(&reply, from).await
        {
            debug!(%from, "DNS answer not sent: {e}");
        }
    }
}

/// Queries over one TCP connection, each with its two-byte length, until the asker closes
/// it or stays quiet for [`TCP_IDLE`].
async fn tcp_conn(mut stream: TcpStream, edge: &Edge) {
    loop {
        let mut len = [0u8; 2];
        match tokio::time::timeout(TCP_IDLE, stream.read_exact(&mut len)).await {
            Ok(Ok(_)) => {}
            _ => return,
        }
        let mut query = vec![0u8; usize::from(u16::from_be_bytes(len))];
        if tokio::time::timeout(TCP_IDLE, stream.read_exact(&mut query))
            .await
            .map_or(true, |r| r.is_err())
        {
            return;
        }
        let Some(reply) = edge.answer(&query, Transport::Tcp).await else {
            return;
        };
        let Ok(len) = u16::try_from(reply.len()) else {
            return;
        };
        let mut out = Vec::with_capacity(reply.len() + 2);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&reply);
        if stream.write_all(&out).await.is_err() {
            return;
        }
    }
}

impl Edge {
    /// The answer to one query, counted by how it went; `None` for what is not a query.
    async fn answer(&self, query: &[u8], transport: Transport) -> Option<Vec<u8>> {
        let asked = hickory_proto::op::Message::from_vec(query)
            .ok()
            .and_then(|m| m.queries().first().map(|q| q.name().clone()))
            .and_then(|name| answer::labels(&name));
        let found = match asked {
            Some(labels) => self.instances(labels).await,
            None => None,
        };
        let (bytes, outcome) = answer::answer(query, transport, self.ttl, |_| found)?;
        self.shared.metrics.dns_query(outcome.label());
        Some(bytes)
    }

    /// The instances `labels` stand for in this replica as it is now: from the cache while
    /// the log has not moved since they were worked out.
    async fn instances(&self, labels: Vec<String>) -> Found {
        let key = labels.join(".").to_ascii_lowercase();
        let driver = &self.shared.driver;
        let now = driver
            .read(|replica, _| replica.applied().index)
            .await
            .ok()?;
        if let Some(found) = self.cached(&key, now) {
            return found;
        }
        let (at, found) = driver
            .read(move |replica, _| {
                let found = Dispatch::dns(replica.state(), &labels).map(Arc::new);
                (replica.applied().index, found)
            })
            .await
            .ok()?;
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.names.len() >= CACHE_NAMES && !cache.names.contains_key(&key) {
            cache.names.clear();
        }
        cache.names.insert(key, (at, found.clone()));
        found
    }

    /// The cached instances of name `key` as of log position `index`, if kept.
    fn cached(&self, key: &str, index: u64) -> Option<Found> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .names
            .get(key)
            .filter(|(at, _)| *at == index)
            .map(|(_, found)| found.clone())
    }
}
