//! Client side of the beacon protocol: connect, handshake, request/response.
//!
//! Used by `nebcli`, by the integration tests, and by services.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

use crate::pb;
use crate::wire::{Cmd, ErrorCode, Frame, FrameCodec, FrameError, PROTOCOL_VERSION};

/// Default time allowed for connecting and for each request.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach beacon at {addr}: {cause}")]
    Connect { addr: String, cause: std::io::Error },
    #[error("beacon at {addr} did not answer {what} within {timeout:?}")]
    Timeout {
        addr: String,
        what: &'static str,
        timeout: Duration,
    },
    #[error("beacon at {addr} refused {what}: {msg}")]
    Refused {
        addr: String,
        what: &'static str,
        /// `None` when the code is one this client does not know.
        code: Option<ErrorCode>,
        msg: String,
    },
    #[error("beacon at {addr} closed the connection")]
    Closed { addr: String },
    #[error("beacon at {addr}: {cause}")]
    Frame { addr: String, cause: FrameError },
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
}

impl ClientError {
    /// The server's error code, when the server refused the request.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Refused { code, .. } => *code,
            _ => None,
        }
    }
}

/// How to connect.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Cluster to insist on; `None` accepts whatever cluster the beacon serves.
    pub cluster: Option<String>,
    /// Limit for connecting and for each request.
    pub timeout: Duration,
    /// Largest frame accepted.
    pub max_frame_bytes: usize,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            cluster: None,
            timeout: DEFAULT_TIMEOUT,
            max_frame_bytes: crate::wire::frame::DEFAULT_MAX_FRAME,
        }
    }
}

/// A handshaken client connection to one beacon.
#[derive(Debug)]
pub struct Client {
    framed: Framed<TcpStream, FrameCodec>,
    addr: String,
    seq: u32,
    timeout: Duration,
    cluster: String,
    node: String,
}

impl Client {
    /// Connects to `addr` (`ip:port` or `host:port`) and performs the client handshake.
    pub async fn connect(addr: &str, opts: &ConnectOptions) -> Result<Client, ClientError> {
        let stream = tokio::time::timeout(opts.timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| ClientError::Timeout {
                addr: addr.to_owned(),
                what: "connect",
                timeout: opts.timeout,
            })?
            .map_err(|cause| ClientError::Connect {
                addr: addr.to_owned(),
                cause,
            })?;
        stream.set_nodelay(true).ok();
        let mut client = Client {
            framed: Framed::new(stream, FrameCodec::new(opts.max_frame_bytes)),
            addr: addr.to_owned(),
            seq: 0,
            timeout: opts.timeout,
            cluster: String::new(),
            node: String::new(),
        };
        let hello = pb::Hello {
            cluster: opts.cluster.clone().unwrap_or_default(),
            role: pb::Role::Client as i32,
            node: String::new(),
            version: PROTOCOL_VERSION,
            ..Default::default()
        };
        let ack: pb::HelloAck = client.request(Cmd::Hello, &hello, "the handshake").await?;
        client.cluster = ack.cluster;
        client.node = ack.node;
        Ok(client)
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

    /// Sends request `cmd` and waits for its response.
    pub async fn request<Req, Resp>(
        &mut self,
        cmd: Cmd,
        req: &Req,
        what: &'static str,
    ) -> Result<Resp, ClientError>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let frame = Frame::new(cmd.code(), seq, 0, req);
        let exchange = async {
            self.framed.send(frame).await?;
            self.framed.next().await.transpose()
        };
        let reply = tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| ClientError::Timeout {
                addr: self.addr.clone(),
                what,
                timeout: self.timeout,
            })?
            .map_err(|cause| ClientError::Frame {
                addr: self.addr.clone(),
                cause,
            })?
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
        let decode_err = |cause| ClientError::Frame {
            addr: self.addr.clone(),
            cause,
        };
        if reply.is_error() {
            let err: pb::ErrorReply = reply.decode().map_err(decode_err)?;
            return Err(ClientError::Refused {
                addr: self.addr.clone(),
                what,
                code: ErrorCode::from_code(err.code),
                msg: err.msg,
            });
        }
        reply.decode().map_err(decode_err)
    }
}
