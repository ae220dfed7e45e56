//! The client side of the beacon protocol: connections to beacons, for the core's commands
//! and any machine's. It names no machine; [`crate::client`] puts it together with every
//! machine's client API for services.
//!
//! - [`Client`]: one handshaken connection to one beacon, request/response.
//! - [`Cluster`]: the cluster's leader, found and followed across failovers (redirects,
//!   retries), for writes.
//! - [`Resuming`]: a watch's stream at the leader, taken up again from the index after the
//!   last one heard when leadership moves.
//!
//! Each machine adds its own calls (the registry: `register`, `report`, ..., and its
//! `Registration` and `Watch`; see [`crate::machines`]). Used by `nebcli`, by the
//! integration tests, and by services.

mod cluster;
mod dial;
mod resume;
mod suspects;

pub use cluster::Cluster;
pub use dial::{DialFailed, Dialled, first_to_answer};
pub use resume::{Heard, Listing, Notice, Resuming};
pub use suspects::{SUSPECT_FOR, SUSPECT_HINT_GRACE, is_suspect};

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

use crate::pb;
use crate::transport::{Stream, tls};
use crate::wire::{Cmd, Code, ErrorCode, Frame, FrameCodec, FrameError, PROTOCOL_VERSION};

/// Default time allowed for each request.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Default time allowed for connecting and the handshake, and the default interval at which
/// a beacon silent on a request or a stream is probed: a beacon that answers neither within
/// this is taken for hung (see [`ConnectOptions::ping_interval`]).
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(1);

/// Default delay before a fresh connection also dials the next beacon while the ones before
/// it have not answered (see [`ConnectOptions::attempt_delay`]): a beacon on the same network
/// completes a handshake in a few milliseconds, so one silent this long is likely hung, and
/// a fresh client past a hung first beacon answers within a tenth of a second or so.
pub const DEFAULT_ATTEMPT_DELAY: Duration = Duration::from_millis(100);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach beacon at {addr}: {cause}")]
    Connect { addr: String, cause: std::io::Error },
    /// The TLS handshake failed on what was said in it (a certificate that does not
    /// verify, a name it does not carry), or TLS cannot be set up for this address.
    #[error("beacon at {addr}: TLS: {cause}")]
    Tls { addr: String, cause: String },
    #[error("beacon at {addr} did not answer {what} within {} ms", timeout.as_millis())]
    Timeout {
        addr: String,
        what: &'static str,
        timeout: Duration,
    },
    #[error("beacon at {addr} refused {what}: {msg}")]
    Refused {
        addr: String,
        what: &'static str,
        /// A core [`ErrorCode`] or a machine's.
        code: u32,
        msg: String,
        /// With `NotLeader`: the leader to ask instead, when the beacon knows it.
        leader: Option<String>,
        /// With `Busy`: how long the beacon asks to wait before trying again.
        retry_after: Option<Duration>,
    },
    #[error("no leader answered {what} within {} ms; last error: {last}", waited.as_millis())]
    NoLeader {
        what: &'static str,
        waited: Duration,
        last: Box<ClientError>,
    },
    #[error("beacon at {addr} closed the connection")]
    Closed { addr: String },
    /// The beacon stopped answering: a request (or a stream) waited `silent` and a fresh
    /// handshake, the liveness probe, got no answer either (a stopped or frozen process).
    #[error(
        "beacon at {addr} stopped answering {what}: silent for {} ms, and a fresh handshake got no answer within {} ms",
        silent.as_millis(),
        probe.as_millis()
    )]
    Hung {
        addr: String,
        what: &'static str,
        silent: Duration,
        probe: Duration,
    },
    #[error("beacon at {addr}: {cause}")]
    Frame { addr: String, cause: FrameError },
    /// A request (or its answer) over the frame limit: sending it again never helps.
    #[error(
        "{} is {len} bytes, over the frame limit of {max} bytes (`max_frame_bytes`, 4 MiB by default on every beacon and client): send less, or raise `max_frame_bytes` on the beacons and this client's limit (nebcli --max-frame-bytes, ConnectOptions::max_frame_bytes)",
        if *request { "the request" } else { "the answer" }
    )]
    TooLarge {
        addr: String,
        /// The request was (else the answer).
        request: bool,
        len: usize,
        max: usize,
    },
    /// An HTTP server answered where a beacon's client port was expected.
    #[error(
        "{addr} speaks HTTP, not beacon's protocol: it is likely a beacon's admin HTTP API; point the client at the beacon's client port (its `node` address{})",
        client_port.as_ref().map(|p| format!("; the admin API defaults to that port + 88, so perhaps {p}")).unwrap_or_default()
    )]
    NotABeacon {
        addr: String,
        client_port: Option<String>,
    },
    #[error(
        "beacon at {addr} answered cmd {got} seq {got_seq} to request cmd {sent} seq {sent_seq}"
    )]
    Mismatch {
        addr: String,
        sent: u32,
        sent_seq: u32,
        got: u32,
        got_seq: u32,
    },
    #[error("the answer to {what} makes no sense: {msg}")]
    BadReply { what: &'static str, msg: String },
    #[error("{what} has ended: {why}")]
    Ended { what: &'static str, why: String },
}

impl ClientError {
    /// The server's error code, when the server refused the request.
    pub fn code(&self) -> Option<u32> {
        match self {
            ClientError::Refused { code, .. } => Some(*code),
            ClientError::NoLeader { last, .. } => last.code(),
            _ => None,
        }
    }

    /// Whether the server refused the request with `code` (a core [`ErrorCode`] or a
    /// machine's).
    pub fn is(&self, code: impl Into<u32>) -> bool {
        self.code() == Some(code.into())
    }

    /// Whether trying again (at the leader, a moment later) may succeed: the connection
    /// failed or is in doubt, or the beacon was not the leader or lost leadership meanwhile.
    pub fn is_retryable(&self) -> bool {
        match self {
            ClientError::Connect { .. }
            | ClientError::Timeout { .. }
            | ClientError::Hung { .. }
            | ClientError::Closed { .. }
            | ClientError::Frame { .. }
            | ClientError::Mismatch { .. } => true,
            ClientError::Refused { code, .. } => matches!(
                ErrorCode::from_code(*code),
                Some(
                    ErrorCode::NotLeader
                        | ErrorCode::LeaderChanged
                        | ErrorCode::Unavailable
                        | ErrorCode::NoQuorum
                        | ErrorCode::Busy
                )
            ),
            ClientError::NoLeader { .. }
            | ClientError::TooLarge { .. }
            | ClientError::NotABeacon { .. }
            | ClientError::Tls { .. }
            | ClientError::BadReply { .. }
            | ClientError::Ended { .. } => false,
        }
    }

    /// With `Busy`: how long the beacon asked to wait.
    pub fn busy_for(&self) -> Option<Duration> {
        match self {
            ClientError::Refused {
                code, retry_after, ..
            } if *code == ErrorCode::Busy as u32 => {
                Some(retry_after.unwrap_or(Duration::from_millis(10)))
            }
            ClientError::NoLeader { last, .. } => last.busy_for(),
            _ => None,
        }
    }

    /// Whether the beacon did not answer in time (hung, or slower than the attempt allows):
    /// worth avoiding for a while, and not worth following when another names it leader.
    pub fn is_silence(&self) -> bool {
        match self {
            ClientError::Timeout { .. } | ClientError::Hung { .. } => true,
            ClientError::NoLeader { last, .. } => last.is_silence(),
            _ => false,
        }
    }

    /// Whether the beacon answered cleanly, so the connection is as good as before. After
    /// any other error (a timeout, a broken or confused stream) the connection is in doubt
    /// and is best dropped.
    pub fn leaves_connection_usable(&self) -> bool {
        matches!(self, ClientError::Refused { .. })
    }
}

impl ClientError {
    /// What `cause`, met on the connection to `addr` while request `cmd` was under way,
    /// says to a caller: over the frame limit and HTTP where a beacon was expected are
    /// errors of their own, never worth a retry.
    pub fn of_frame(addr: &str, cmd: u32, cause: FrameError) -> ClientError {
        match cause {
            FrameError::TooLarge {
                cmd: sent,
                len,
                max,
                ..
            } => ClientError::TooLarge {
                addr: addr.to_owned(),
                request: sent == cmd,
                len,
                max,
            },
            FrameError::BadMagic { found, .. } if found.to_be_bytes() == *b"HT" => {
                ClientError::NotABeacon {
                    addr: addr.to_owned(),
                    client_port: admin_to_client(addr),
                }
            }
            cause => ClientError::Frame {
                addr: addr.to_owned(),
                cause,
            },
        }
    }
}

/// The client port a beacon whose admin API is on `addr` has by default (admin = port +
/// 88), when `addr` is host:port.
fn admin_to_client(addr: &str) -> Option<String> {
    let (host, port) = addr.rsplit_once(':')?;
    let port = port.parse::<u16>().ok()?.checked_sub(88)?;
    Some(format!("{host}:{port}"))
}

/// Whether `a` was sent before `b` on one connection (sequence numbers wrap).
fn is_before(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) > 0
}

/// How to connect.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Cluster to insist on; `None` accepts whatever cluster the beacon serves.
    pub cluster: Option<String>,
    /// Limit for each request (one attempt at one beacon; [`Cluster`] tries the next beacon
    /// after it, within its own `retry_for`).
    pub timeout: Duration,
    /// Limit for connecting and the handshake: a beacon that accepts the connection but
    /// does not answer its `Hello` (a stopped process whose socket the kernel still
    /// accepts on) is left after this.
    pub handshake_timeout: Duration,
    /// How long a fresh connection waits for a beacon's handshake before it also dials the
    /// next beacon, keeping both attempts and taking the first to answer (happy eyeballs,
    /// RFC 8305, over beacons): a hung first beacon costs a fresh client this, not the
    /// handshake limit. At most `handshake_timeout` is used.
    pub attempt_delay: Duration,
    /// While a request or a stream has heard nothing from its beacon for this long, the
    /// client probes the beacon with a fresh handshake (bounded by `handshake_timeout`): a
    /// beacon that answers is slow and kept waiting for; one that does not is hung, and
    /// the call moves on to the next beacon at once ([`ClientError::Hung`]).
    pub ping_interval: Duration,
    /// Largest frame accepted.
    pub max_frame_bytes: usize,
    /// TLS to the beacons (see [`crate::transport::tls::client_config`]); `None`: plain TCP.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// The token sent in the handshake to a beacon that requires authentication.
    pub token: Option<Token>,
    /// How fresh reads must be: linearizable (the default), or serializable (the answering
    /// beacon's replica as it is, at once).
    pub consistency: crate::wire::Consistency,
    /// The local address to connect from (a host with several, where the cluster's
    /// allowlist admits one); `None`: the system's choice.
    pub source: Option<std::net::IpAddr>,
}

impl ConnectOptions {
    /// TLS to beacons whose certificates the CA in `ca` (PEM) signed, presenting
    /// `identity` (certificate and key, PEM) when given: nebcli's `--cacert`, `--cert`,
    /// `--key`.
    pub fn with_tls(
        self,
        ca: &std::path::Path,
        identity: Option<(&std::path::Path, &std::path::Path)>,
    ) -> Result<ConnectOptions, crate::transport::tls::TlsError> {
        Ok(ConnectOptions {
            tls: Some(Arc::new(tls::client_config(ca, identity)?)),
            ..self
        })
    }

    /// These options with the liveness knobs a lease of `lease` needs: a report renews the
    /// lease at least twice through a healthy beacon before it could lapse, however the
    /// beacon it used stopped. The handshake limit and the ping interval are an eighth of
    /// the lease (50 ms to the defaults), a request's limit a quarter (to `timeout`): a hung
    /// beacon costs a report at most a quarter of the lease, reports go every quarter, and
    /// a new leader is in place within half a second at the default tick.
    pub fn for_lease(self, lease: Duration) -> ConnectOptions {
        let eighth = (lease / 8).clamp(Duration::from_millis(50), self.handshake_timeout);
        ConnectOptions {
            handshake_timeout: eighth,
            ping_interval: eighth.min(self.ping_interval),
            timeout: (lease / 4).clamp(Duration::from_millis(100), self.timeout),
            ..self
        }
    }

    /// The token sent in the handshake: nebcli's `--token` (or `BEACON_TOKEN`).
    pub fn with_token(self, token: impl Into<String>) -> ConnectOptions {
        ConnectOptions {
            token: Some(Token::new(token)),
            ..self
        }
    }
}

/// A token, kept out of debug output and logs.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    pub fn new(token: impl Into<String>) -> Token {
        Token(token.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            cluster: None,
            timeout: DEFAULT_TIMEOUT,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            attempt_delay: DEFAULT_ATTEMPT_DELAY,
            ping_interval: DEFAULT_HANDSHAKE_TIMEOUT,
            max_frame_bytes: crate::wire::frame::DEFAULT_MAX_FRAME,
            tls: None,
            token: None,
            consistency: Default::default(),
            source: None,
        }
    }
}

/// A TCP connection to `addr`, from `source` when given.
async fn dial(addr: &str, source: Option<std::net::IpAddr>) -> std::io::Result<TcpStream> {
    let Some(source) = source else {
        return TcpStream::connect(addr).await;
    };
    let mut last = None;
    for to in tokio::net::lookup_host(addr).await? {
        let socket = match to {
            std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
            std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
        };
        socket.bind(std::net::SocketAddr::new(source, 0))?;
        match socket.connect(to).await {
            Ok(tcp) => return Ok(tcp),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("`{addr}` resolves to nothing"),
        )
    }))
}

/// A handshaken client connection to one beacon.
#[derive(Debug)]
pub struct Client {
    framed: Framed<Stream, FrameCodec>,
    addr: String,
    seq: u32,
    timeout: Duration,
    cluster: String,
    node: String,
    /// The flags every request carries (its reads' consistency).
    flags: u8,
    /// How it connected: what a liveness probe dials with.
    opts: ConnectOptions,
    /// Probe the beacon while a request waits (off for the handshake's own request).
    probing: bool,
}

impl Client {
    /// The request limit and liveness knobs of `opts` from now on (the rest of how it
    /// connected stays).
    pub fn set_limits(&mut self, opts: &ConnectOptions) {
        self.timeout = opts.timeout;
        self.opts.timeout = opts.timeout;
        self.opts.handshake_timeout = opts.handshake_timeout;
        self.opts.ping_interval = opts.ping_interval;
    }

    /// How fresh this connection's reads must be from now on (see
    /// [`ConnectOptions::consistency`]).
    pub fn set_consistency(&mut self, consistency: crate::wire::Consistency) {
        self.flags = consistency.flags();
    }

    /// Connects to `addr` (`ip:port` or `host:port`) and performs the client handshake,
    /// within [`ConnectOptions::handshake_timeout`].
    pub async fn connect(addr: &str, opts: &ConnectOptions) -> Result<Client, ClientError> {
        Client::connect_within(addr, opts, opts.handshake_timeout).await
    }

    /// [`Client::connect`] with this handshake allowed `limit` (what is left of a call's
    /// budget, say); the connection's later probes keep the options' handshake limit.
    pub async fn connect_within(
        addr: &str,
        opts: &ConnectOptions,
        limit: Duration,
    ) -> Result<Client, ClientError> {
        let timed_out = |what| ClientError::Timeout {
            addr: addr.to_owned(),
            what,
            timeout: limit,
        };
        let tcp = tokio::time::timeout(limit, dial(addr, opts.source))
            .await
            .map_err(|_| timed_out("connect"))?
            .map_err(|cause| ClientError::Connect {
                addr: addr.to_owned(),
                cause,
            })?;
        tcp.set_nodelay(true).ok();
        let stream = match &opts.tls {
            None => Stream::Plain(tcp),
            Some(config) => {
                let name = tls::server_name(addr).map_err(|e| ClientError::Tls {
                    addr: addr.to_owned(),
                    cause: e.to_string(),
                })?;
                let dialled = tokio::time::timeout(limit, tls::dial(tcp, config.clone(), name))
                    .await
                    .map_err(|_| timed_out("the TLS handshake"))?;
                dialled.map_err(|cause| match cause.kind() {
                    // What the other end said did not verify: trying again will not help.
                    std::io::ErrorKind::InvalidData => ClientError::Tls {
                        addr: addr.to_owned(),
                        cause: cause.to_string(),
                    },
                    _ => ClientError::Connect {
                        addr: addr.to_owned(),
                        cause,
                    },
                })?
            }
        };
        let mut client = Client {
            framed: Framed::new(stream, FrameCodec::new(opts.max_frame_bytes)),
            addr: addr.to_owned(),
            seq: 0,
            timeout: limit,
            cluster: String::new(),
            node: String::new(),
            flags: opts.consistency.flags(),
            opts: opts.clone(),
            probing: false,
        };
        let hello = pb::Hello {
            cluster: opts.cluster.clone().unwrap_or_default(),
            role: pb::Role::Client as i32,
            node: String::new(),
            version: PROTOCOL_VERSION,
            token: opts
                .token
                .as_ref()
                .map(|t| t.expose().to_owned())
                .unwrap_or_default(),
            ..Default::default()
        };
        let ack: pb::HelloAck = client.request(Cmd::Hello, &hello, "the handshake").await?;
        client.cluster = ack.cluster;
        client.node = ack.node;
        client.timeout = opts.timeout;
        client.probing = true;
        Ok(client)
    }

    /// Whether the beacon at `addr` answers a fresh handshake within the handshake limit:
    /// the liveness probe of a beacon silent on a request or a stream.
    pub async fn answers(addr: &str, opts: &ConnectOptions) -> bool {
        match Client::connect(addr, opts).await {
            Ok(_) => true,
            // It answered, if only to refuse (an older protocol, a wrong cluster).
            Err(e) => e.leaves_connection_usable(),
        }
    }
}

/// Resolves once the beacon at `addr` has been silent for a ping interval and then failed a
/// probe, with the error that says so; never while it answers probes.
async fn hung(addr: &str, opts: &ConnectOptions, what: &'static str) -> ClientError {
    let started = tokio::time::Instant::now();
    let every = opts.ping_interval.max(Duration::from_millis(10));
    loop {
        tokio::time::sleep(every).await;
        if !Client::answers(addr, opts).await {
            return ClientError::Hung {
                addr: addr.to_owned(),
                what,
                silent: started.elapsed(),
                probe: opts.handshake_timeout,
            };
        }
    }
}

impl Client {
    /// The handshaken connection itself, for a client that pipelines requests (many
    /// registrations reporting over one connection, say): it sends frames without waiting
    /// and matches replies to requests by `seq`. The beacon answers a connection's requests
    /// in the order they were sent.
    pub fn into_framed(self) -> Framed<Stream, FrameCodec> {
        self.framed
    }

    /// The address this client dialled.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The cluster the beacon announced in its handshake.
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// The beacon's identity as it announced it.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The beacon's view of the beacon cluster.
    pub async fn beacon_status(&mut self) -> Result<pb::BeaconStatus, ClientError> {
        self.request(
            Cmd::BeaconStatus,
            &pb::BeaconStatusRequest {},
            "the status request",
        )
        .await
    }

    /// Waits for the next frame a beacon pushes on this connection after a request that
    /// started a stream (a watch), with no timeout: a quiet cluster sends none. Ends with an
    /// error when the beacon ends the stream (it stopped leading) or the connection fails.
    ///
    /// A beacon that stays silent is probed every ping interval: one that no longer answers
    /// a handshake ends the wait with [`ClientError::Hung`], so that a stream resumes at
    /// another beacon rather than wait on a stopped one.
    pub async fn next_pushed(&mut self, what: &'static str) -> Result<Frame, ClientError> {
        let addr = self.addr.clone();
        let Client {
            framed,
            addr: at,
            opts,
            ..
        } = self;
        let next = tokio::select! {
            next = framed.next() => next,
            hung = hung(at, opts, what) => return Err(hung),
        };
        let frame = next
            .ok_or_else(|| ClientError::Closed { addr: addr.clone() })?
            .map_err(|cause| ClientError::Frame {
                addr: addr.clone(),
                cause,
            })?;
        if frame.is_error() {
            return Err(self.refusal(&frame, what));
        }
        Ok(frame)
    }

    /// The refusal an error frame carries.
    fn refusal(&self, frame: &Frame, what: &'static str) -> ClientError {
        match frame.decode::<pb::ErrorReply>() {
            Ok(err) => ClientError::Refused {
                addr: self.addr.clone(),
                what,
                code: err.code,
                msg: err.msg,
                leader: Some(err.leader).filter(|l| !l.is_empty()),
                retry_after: (err.retry_after_ms > 0)
                    .then(|| Duration::from_millis(err.retry_after_ms)),
            },
            Err(cause) => ClientError::Frame {
                addr: self.addr.clone(),
                cause,
            },
        }
    }

    /// Decodes a frame's body, naming this beacon when it does not decode.
    pub fn decode<M: prost::Message + Default>(&self, frame: &Frame) -> Result<M, ClientError> {
        frame.decode().map_err(|cause| ClientError::Frame {
            addr: self.addr.clone(),
            cause,
        })
    }

    /// Sends request `cmd` and waits for its response.
    ///
    /// Replies are matched to requests by `seq`. A request given up earlier on this
    /// connection (it timed out, or the caller dropped the future) may still be answered:
    /// that late reply comes first (the beacon answers in order) and is dropped, never taken
    /// for this request's answer.
    pub async fn request<Req, Resp>(
        &mut self,
        cmd: impl Code,
        req: &Req,
        what: &'static str,
    ) -> Result<Resp, ClientError>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        let limit = self.timeout;
        self.request_within(cmd, req, what, limit).await
    }

    /// [`Client::request`] allowed `limit` rather than the connection's request limit (a
    /// watch's first answer may wait for its turn to list while the beacon answers probes).
    pub async fn request_within<Req, Resp>(
        &mut self,
        cmd: impl Code,
        req: &Req,
        what: &'static str,
        limit: Duration,
    ) -> Result<Resp, ClientError>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let frame = Frame::new(cmd.code(), seq, self.flags, req);
        let Client {
            framed,
            addr,
            opts,
            probing,
            ..
        } = self;
        let timeout = &limit;
        let exchange = async {
            framed.send(frame).await?;
            loop {
                let Some(reply) = framed.next().await.transpose()? else {
                    return Ok(None);
                };
                // An answer to an earlier request of this connection, given up since.
                if reply.seq != seq && is_before(reply.seq, seq) {
                    tracing::debug!(
                        beacon = %addr,
                        cmd = reply.cmd,
                        seq = reply.seq,
                        "dropped a late reply to a request given up earlier"
                    );
                    continue;
                }
                return Ok(Some(reply));
            }
        };
        // A request that waits is raced against probes of its beacon: a slow beacon is
        // waited for (up to the limit), a hung one left at once.
        let liveness = async {
            if *probing {
                // Boxed: a probe is a handshake, itself a request (that does not probe).
                Box::pin(hung(addr, opts, what)).await
            } else {
                std::future::pending().await
            }
        };
        let answered = tokio::select! {
            answered = tokio::time::timeout(*timeout, exchange) => answered,
            hung = liveness => return Err(hung),
        };
        let reply = answered
            .map_err(|_| ClientError::Timeout {
                addr: addr.clone(),
                what,
                timeout: *timeout,
            })?
            .map_err(|cause| ClientError::of_frame(addr, cmd.code(), cause))?
            .ok_or_else(|| ClientError::Closed {
                addr: self.addr.clone(),
            })?;
        if reply.cmd != cmd.response() || reply.seq != seq {
            return Err(ClientError::Mismatch {
                addr: self.addr.clone(),
                sent: cmd.code(),
                sent_seq: seq,
                got: reply.cmd,
                got_seq: reply.seq,
            });
        }
        if reply.is_error() {
            return Err(self.refusal(&reply, what));
        }
        self.decode(&reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_compare_across_the_wrap() {
        assert!(is_before(1, 2));
        assert!(!is_before(2, 1));
        assert!(!is_before(5, 5));
        assert!(is_before(u32::MAX, 0), "0 follows the wrap");
        assert!(is_before(u32::MAX - 3, 2));
        assert!(!is_before(2, u32::MAX - 3));
    }
}
