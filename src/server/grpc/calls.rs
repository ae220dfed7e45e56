//! A gRPC call in native terms: who calls (the token in `authorization` metadata, or the
//! connection's client certificate, checked as a native `Hello` is), and the call run here
//! through the same handlers a native frame reaches, or at the leader through a relay when
//! only the leader can answer.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tonic::Status;
use tonic::metadata::MetadataMap;
use tracing::warn;

use super::super::dispatch::{self, Peer};
use super::super::relay;
use super::super::shared::Shared;
use super::status;
use crate::auth::Identity;
use crate::machines::handle::{CoreExt, Handled, Reject};
use crate::pb;
use crate::wire::rpc::{NOTICE, START, wrap};
use crate::wire::{ErrorCode, Frame};

/// The frame flags a call's metadata asks for: `beacon-consistency: serializable` (or `s`)
/// reads this beacon's replica as it is, not linearizably; any other value than those and
/// `linearizable` (`l`) is refused.
pub(super) fn flags(metadata: &MetadataMap) -> Result<u8, Status> {
    let Some(value) = metadata.get("beacon-consistency") else {
        return Ok(0);
    };
    value
        .to_str()
        .ok()
        .and_then(crate::wire::Consistency::named)
        .map(crate::wire::Consistency::flags)
        .ok_or_else(|| {
            Status::invalid_argument(format!(
                "metadata beacon-consistency is {value:?}: `linearizable` (the default) or `serializable`"
            ))
        })
}

/// A stream's events, as the gRPC response sends them.
pub(super) type Events = Pin<Box<dyn Stream<Item = Result<Bytes, Status>> + Send>>;

/// How many leaders a call follows before it gives up (leadership moving under it).
const HOPS: usize = 3;

/// One gRPC connection's side of things: the beacon, and what the connection says of the
/// client.
pub(super) struct Edge {
    pub(super) shared: Arc<Shared>,
    pub(super) remote: SocketAddr,
    pub(super) tls: bool,
    /// The verified client certificate's name, if one was presented.
    pub(super) certificate: Option<String>,
    /// This connection's share of the beacon's admission, for calls with no token.
    pub(super) share: std::sync::OnceLock<Arc<crate::server::admission::ClientShare>>,
}

impl Edge {
    /// Who is calling, when the cluster authenticates clients (key `auth`): a token in
    /// `authorization: Bearer TOKEN`, else the connection's certificate.
    pub(super) fn identify(&self, metadata: &MetadataMap) -> Result<Option<Arc<Identity>>, Status> {
        if let Err(reject) = self.shared.driver.admit(self.remote.ip(), "client address") {
            return Err(self.not_admitted(reject));
        }
        let auth = self.shared.auth.load();
        if !auth.enabled() {
            return Ok(None);
        }
        let token = match metadata.get("authorization").map(|v| v.to_str()) {
            None => "",
            Some(Ok(value)) => value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("bearer "))
                .ok_or_else(|| {
                    self.refused("authorization metadata is not `Bearer TOKEN`".to_owned())
                })?,
            Some(Err(_)) => {
                return Err(self.refused("authorization metadata is not text".to_owned()));
            }
        };
        auth.authenticate(
            token,
            self.tls,
            self.certificate.as_deref(),
            self.shared.config.node,
        )
        .map(|who| Some(Arc::new(who)))
        .map_err(|e| self.refused(e.to_string()))
    }

    /// A `PERMISSION_DENIED` status for a client the allowlist does not admit, logged and
    /// counted as a refused native connection is.
    fn not_admitted(&self, reject: Reject) -> Status {
        super::super::framed::refused_connection(
            &self.shared,
            self.remote,
            "ip_not_allowed",
            &reject.msg,
        );
        status::status(reject.code, &reject.msg, "")
    }

    /// An `UNAUTHENTICATED` status, audited and counted as a native refusal is.
    fn refused(&self, why: String) -> Status {
        warn!(remote = %self.remote, audit = true, "access refused (gRPC): {why}");
        self.shared.metrics.refused("unauthenticated");
        status::status(ErrorCode::Unauthenticated as u32, &why, "")
    }

    /// Runs request `cmd` with `body` and returns its answer's body: here, or at the leader
    /// when this beacon cannot answer it.
    pub(super) async fn unary(
        &self,
        who: Option<Arc<Identity>>,
        flags: u8,
        cmd: u32,
        body: Bytes,
    ) -> Result<Bytes, pb::ErrorReply> {
        let leader = match self.local(&who, flags, cmd, body.clone()).await {
            Ok(Handled::Reply(reply)) => return Ok(reply.body),
            Ok(Handled::OneWay) => return Ok(Bytes::new()),
            Ok(Handled::Stream { .. }) => {
                return Err(reply_of(&Reject::new(
                    ErrorCode::Unavailable,
                    format!("internal error: cmd {cmd} answered with a stream"),
                )));
            }
            Err(reject) => redirect(reject)?,
        };
        let (_, _, answer) = self.at_leader(leader, &who, cmd, body, false).await?;
        Ok(answer.body)
    }

    /// Carries request `cmd` to `leader`, and on to the leader it names while leadership
    /// moves (at most [`HOPS`] times): the leader that answered, the call and its first frame,
    /// which is not an error.
    async fn at_leader(
        &self,
        mut leader: SocketAddr,
        who: &Option<Arc<Identity>>,
        cmd: u32,
        body: Bytes,
        stream: bool,
    ) -> Result<(SocketAddr, relay::pool::RelayCall, Frame), pb::ErrorReply> {
        for _ in 0..HOPS {
            let (call, first) = self
                .shared
                .relays
                .ask(
                    &self.shared,
                    leader,
                    who.as_deref(),
                    cmd,
                    body.clone(),
                    stream,
                )
                .await
                .map_err(|r| reply_of(&r))?;
            if !first.is_error() {
                return Ok((leader, call, first));
            }
            leader = moved(error_reply(&first))?;
        }
        Err(too_many_hops())
    }

    /// Starts stream `cmd` with `body`: its first answer and its notices, as events, here or
    /// at the leader.
    pub(super) async fn open(
        &self,
        who: Option<Arc<Identity>>,
        cmd: u32,
        body: Bytes,
    ) -> Result<Events, pb::ErrorReply> {
        let leader = match self.local(&who, 0, cmd, body.clone()).await {
            Ok(Handled::Stream {
                reply,
                pushes,
                ended,
            }) => {
                let shared = self.shared.clone();
                let first = futures_util::stream::once(async move { Ok(wrap(START, &reply.body)) });
                let counted = shared.clone();
                let notices = pushes.map(move |f| {
                    counted.metrics.pushed(f.cmd);
                    Ok(wrap(NOTICE, &f.body))
                });
                // The stream ended: this beacon stopped leading, or the watcher fell behind.
                let tail = futures_util::stream::once(async move {
                    let (code, why) = ended.why();
                    let leader = shared
                        .core_status()
                        .await
                        .ok()
                        .and_then(|s| s.leader)
                        .unwrap_or_default();
                    Err(status::status(code as u32, why, &leader))
                });
                return Ok(Box::pin(first.chain(notices).chain(tail)));
            }
            Ok(_) => {
                return Err(reply_of(&Reject::new(
                    ErrorCode::Unavailable,
                    format!("internal error: cmd {cmd} did not answer with a stream"),
                )));
            }
            Err(reject) => redirect(reject)?,
        };
        let (leader, call, first) = self.at_leader(leader, &who, cmd, body, true).await?;
        let start = futures_util::stream::once(async move { Ok(wrap(START, &first.body)) });
        let rest = futures_util::stream::unfold(Some(call), move |call| async move {
            let mut call = call?;
            match call.frames.recv().await {
                Some(frame) if frame.is_error() => {
                    Some((Err(status::of_error_frame(&frame)), None))
                }
                Some(frame) => Some((Ok(wrap(NOTICE, &frame.body)), Some(call))),
                None => Some((Err(status::of_reject(&relay::pool::lost(leader))), None)),
            }
        });
        Ok(Box::pin(start.chain(rest)))
    }

    /// Runs the request on this beacon, through the handlers a native frame reaches, and
    /// counts it as the native connections do.
    async fn local(
        &self,
        who: &Option<Arc<Identity>>,
        flags: u8,
        cmd: u32,
        body: Bytes,
    ) -> Result<Handled, Reject> {
        let frame = Frame {
            cmd,
            seq: 0,
            flags,
            body,
        };
        let started = Instant::now();
        let peer = Peer::Client(who.clone());
        // The connection's own share, taken once; a token's, looked up by its name.
        let client = match who {
            Some(_) => self
                .shared
                .admission
                .client(&dispatch::client_key(&peer, self.remote)),
            None => self
                .share
                .get_or_init(|| {
                    self.shared.admission.client(&dispatch::client_key(
                        &peer,
                        format_args!("gRPC from {}", self.remote),
                    ))
                })
                .clone(),
        };
        let result = dispatch::dispatch(&frame, &peer, Some(&client), &self.shared).await;
        dispatch::record(&self.shared, cmd, &result, started);
        result
    }
}

/// The leader to carry a call to, when `reject` says this beacon is not it; any other
/// refusal is the answer.
fn redirect(reject: Reject) -> Result<SocketAddr, pb::ErrorReply> {
    match reject.leader {
        Some(leader) if reject.code == ErrorCode::NotLeader as u32 => Ok(leader),
        _ => Err(reply_of(&reject)),
    }
}

/// The next leader, when the one a call was carried to says leadership moved on.
fn moved(refused: pb::ErrorReply) -> Result<SocketAddr, pb::ErrorReply> {
    match refused.leader.parse() {
        Ok(leader) if refused.code == ErrorCode::NotLeader as u32 => Ok(leader),
        _ => Err(refused),
    }
}

fn too_many_hops() -> pb::ErrorReply {
    reply_of(&Reject::new(
        ErrorCode::LeaderChanged,
        format!("leadership moved {HOPS} times while the call was carried to it; retry"),
    ))
}

pub(super) fn reply_of(reject: &Reject) -> pb::ErrorReply {
    reject.to_reply()
}

fn error_reply(frame: &Frame) -> pb::ErrorReply {
    frame.decode().unwrap_or_else(|e| pb::ErrorReply {
        code: ErrorCode::Unavailable as u32,
        msg: format!("the leader's error answer did not decode: {e}"),
        leader: String::new(),
        retry_after_ms: 0,
    })
}
