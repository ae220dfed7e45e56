//! One request handled, whichever way it came: a native connection ([`super::conn`]), a
//! gRPC call ([`super::grpc`]) or a call a follower relayed ([`super::relay`]). Each of them
//! hands a [`Frame`] and who sent it to [`dispatch`], which checks the sender's role and
//! runs the core's command here or the owning machine's handler, and then [`record`]s the
//! answer in the metrics. Kept apart from the connection code so that the three ways in
//! depend on it, not on each other.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use super::admission::{Class, ClientShare, Ticket};
use super::shared::Shared;
use crate::auth::{Identity, Role};
use crate::machines;
use crate::machines::handle::{Consistency, Core, CoreExt, Handled, Reject, reply};
use crate::pb;
use crate::wire::{Cmd, ErrorCode, Frame};

/// Who is on the other end, once the handshake is done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Peer {
    Beacon(SocketAddr),
    /// A client, and who it is when this beacon requires authentication (key `auth`).
    Client(Option<Arc<Identity>>),
    /// A beacon relaying its gRPC clients' calls (see `relay`).
    Relay(SocketAddr),
}

/// Records one answered request in the metrics: its command, its result and how long it
/// took; a refused credential or permission is counted apart as well.
pub(super) fn record(
    shared: &Shared,
    cmd: u32,
    result: &Result<Handled, Reject>,
    started: Instant,
) {
    record_n(shared, cmd, result, started.elapsed(), 1);
}

/// Records the answers to a batch of requests (`frames`, answered by `results`), all
/// started at `started`: a run of the same command with the same result is recorded at
/// once.
pub(super) fn record_batch(
    shared: &Shared,
    frames: &[Frame],
    results: &[Result<Handled, Reject>],
    started: Instant,
) {
    let took = started.elapsed();
    let code = |r: &Result<Handled, Reject>| r.as_ref().err().map(|reject| reject.code);
    let mut at = 0;
    while at < results.len().min(frames.len()) {
        let (cmd, first) = (frames[at].cmd, &results[at]);
        let run = frames[at..]
            .iter()
            .zip(&results[at..])
            .take_while(|(f, r)| f.cmd == cmd && code(r) == code(first))
            .count();
        record_n(shared, cmd, first, took, run as u64);
        at += run;
    }
}

/// Records `n` answers of command `cmd` like `result`, each of which took `took`.
fn record_n(
    shared: &Shared,
    cmd: u32,
    result: &Result<Handled, Reject>,
    took: std::time::Duration,
    n: u64,
) {
    if let Err(reject) = result {
        for _ in 0..n {
            count_refusal(shared, reject.code);
        }
    }
    let code = result.as_ref().err().map(|reject| reject.code);
    shared.metrics.requests(cmd, code, took, n, || {
        let command = machines::Dispatch::name(cmd)
            .or_else(|| Cmd::from_code(cmd).map(|c| format!("{c:?}")))
            .unwrap_or_else(|| "unknown".into());
        (command, result_code(result))
    });
}

/// Counts a refusal of credentials or permissions in the metrics.
pub(super) fn count_refusal(shared: &Shared, code: u32) {
    if code == ErrorCode::Unauthenticated as u32 {
        shared.metrics.refused("unauthenticated");
    } else if code == ErrorCode::PermissionDenied as u32 {
        shared.metrics.refused("permission_denied");
    }
}

/// The result label of an answer: `OK`, or its error code's name (a machine's own codes by
/// number).
fn result_code(result: &Result<Handled, Reject>) -> String {
    match result {
        Ok(_) => "OK".into(),
        Err(reject) => match ErrorCode::from_code(reject.code) {
            Some(code) => format!("{code:?}"),
            None => reject.code.to_string(),
        },
    }
}

/// Who a client is for admission control: its token's name where the beacon
/// authenticates clients (all the connections of one token count together), else its
/// connection (`conn`, which names it uniquely).
pub(super) fn client_key(peer: &Peer, conn: impl std::fmt::Display) -> String {
    match peer {
        Peer::Client(Some(who)) => format!("identity {}", who.name),
        _ => format!("connection {conn}"),
    }
}

/// How urgent `cmd` is: renewals of live leases (the requests the machines batch) and reads
/// of the cluster's own status keep going when new work is refused.
fn class_of(cmd: u32) -> Class {
    let keeps = matches!(
        Cmd::from_code(cmd),
        Some(Cmd::BeaconStatus | Cmd::ReadIndex | Cmd::Vouch | Cmd::LeaderElection)
    ) || machines::Dispatch::batches(cmd);
    if keeps { Class::Keep } else { Class::New }
}

/// Admits a request to this beacon ([`super::admission`]); beacons' own messages always.
fn admit(
    frame: &Frame,
    peer: &Peer,
    client: Option<&Arc<ClientShare>>,
    shared: &Shared,
) -> Result<Option<Ticket>, Reject> {
    admit_many(frame, 1, peer, client, shared)
}

/// Admits `count` requests like `frame` at once (a batch).
fn admit_many(
    frame: &Frame,
    count: usize,
    peer: &Peer,
    client: Option<&Arc<ClientShare>>,
    shared: &Shared,
) -> Result<Option<Ticket>, Reject> {
    if matches!(peer, Peer::Beacon(_)) {
        return Ok(None);
    }
    shared
        .admission
        .admit_many(client, class_of(frame.cmd), count)
        .map(Some)
}

/// Handles one request: the core's commands here, every other by the machine that owns it.
/// `client`: who the request counts against ([`client_key`]); `None` for a call a follower
/// relays (its client was admitted there).
pub(super) async fn dispatch(
    frame: &Frame,
    peer: &Peer,
    client: Option<&Arc<ClientShare>>,
    shared: &Shared,
) -> Result<Handled, Reject> {
    if let Peer::Client(Some(who)) = peer {
        permit(frame.cmd, who)?;
    }
    let _admitted = admit(frame, peer, client, shared)?;
    handle(frame, peer, shared).await
}

/// Handles one request that was admitted and whose sender may send it.
async fn handle(frame: &Frame, peer: &Peer, shared: &Shared) -> Result<Handled, Reject> {
    let identity = match peer {
        Peer::Client(Some(who)) => Some(who.as_ref()),
        _ => None,
    };
    match Cmd::from_code(frame.cmd) {
        // A peer's heartbeats never come here: its link hands them to the driver
        // (`heard.rs`). Anyone else sending one is refused.
        Some(Cmd::LeaderElection) => Err(Reject::new(
            ErrorCode::UnknownCommand,
            "heartbeats (cmd 113) are accepted from beacons only, on their links",
        )),
        Some(Cmd::BeaconStatus) => {
            let _req: pb::BeaconStatusRequest = frame.decode()?;
            reply(frame, &shared.status().await?)
        }
        Some(Cmd::TransferLeader) => {
            let req: pb::TransferLeaderRequest = frame.decode()?;
            let to = match req.to.as_str() {
                "" => None,
                to => Some(to.parse().map_err(|_| {
                    Reject::new(
                        ErrorCode::InvalidRequest,
                        format!("`{to}` is not the ip:port of a beacon"),
                    )
                })?),
            };
            let previous = shared.config.node;
            match shared.transfer(to).await? {
                Ok(leader) => reply(
                    frame,
                    &pb::TransferLeaderReply {
                        leader: leader.to_string(),
                        previous: previous.to_string(),
                    },
                ),
                Err(crate::consensus::TransferError::Consensus(e)) => Err(e.into()),
                Err(e @ crate::consensus::TransferError::TimedOut { .. })
                | Err(e @ crate::consensus::TransferError::WentElsewhere { .. })
                | Err(e @ crate::consensus::TransferError::InProgress(_)) => {
                    Err(Reject::new(ErrorCode::Unavailable, e.to_string()))
                }
                Err(e) => Err(Reject::new(ErrorCode::InvalidRequest, e.to_string())),
            }
        }
        Some(Cmd::ReadIndex) => {
            let req: pb::ReadIndexRequest = frame.decode()?;
            let asker = match req.asker.as_str() {
                "" => None,
                named => Some(crate::consensus::Asker {
                    from: named.parse().map_err(|_| {
                        Reject::new(
                            ErrorCode::InvalidRequest,
                            format!("ReadIndex: asker {named:?} is not IP:PORT"),
                        )
                    })?,
                    term: req.term,
                }),
            };
            let index = shared.driver.read_index(asker).await?;
            let machines = shared
                .driver
                .read(move |replica, _| crate::machines::machine_indexes(replica, index))
                .await?;
            reply(
                frame,
                &pb::ReadIndexReply {
                    index,
                    leader: shared.config.node.to_string(),
                    machines,
                },
            )
        }
        Some(Cmd::Vouch) => vouch(frame, frame.decode()?, shared),
        Some(Cmd::ChangeMembers) => {
            let req: pb::ChangeMembersRequest = frame.decode()?;
            change_members(frame, req, shared).await
        }
        Some(Cmd::Backup) => super::backup::serve(frame, shared).await,
        Some(Cmd::BackupChunk) => Err(Reject::new(
            ErrorCode::UnknownCommand,
            "BackupChunk (cmd 13) is pushed by a beacon after a BackupStart; it is not a request",
        )),
        Some(Cmd::Relayed) => Err(Reject::new(
            ErrorCode::UnknownCommand,
            "Relayed (cmd 7) is taken on relay connections from beacons only",
        )),
        Some(Cmd::Hello | Cmd::HelloProof) => Err(Reject::new(
            ErrorCode::MalformedBody,
            "duplicate Hello: this connection has already completed its handshake",
        )),
        None => match machines::Dispatch::serve(
            frame,
            &shared.ctx(
                identity,
                Consistency::of_flags(frame.flags),
                class_of(frame.cmd) == Class::New,
            ),
        )
        .await
        {
            Some(handled) => handled,
            None if frame.cmd.is_multiple_of(2) => Err(Reject::new(
                ErrorCode::UnknownCommand,
                format!(
                    "cmd {} (seq {}) is a response code; requests use odd codes",
                    frame.cmd, frame.seq
                ),
            )),
            None => Err(Reject::new(
                ErrorCode::UnknownCommand,
                format!("unknown command {} (seq {})", frame.cmd, frame.seq),
            )),
        },
    }
}

/// Handles requests of one code that batches (node reports), arrived together on one
/// connection: each sender's permission checked as [`dispatch`] does, then the owning
/// machine serves them together, answering each in order. They read nothing, so the first
/// request's consistency flags serve for all.
pub(super) async fn dispatch_batch(
    frames: &[Frame],
    peer: &Peer,
    client: Option<&Arc<ClientShare>>,
    shared: &Shared,
) -> Vec<Result<Handled, Reject>> {
    let identity = match peer {
        Peer::Client(Some(who)) => Some(who.as_ref()),
        _ => None,
    };
    let Some(first) = frames.first() else {
        return Vec::new();
    };
    if let Some(who) = identity
        && let Err(refused) = permit(first.cmd, who)
    {
        // One code, one sender: each request is refused alike.
        return frames.iter().map(|_| Err(refused.clone())).collect();
    }
    // The batch is admitted as the many requests it is, in one step: all of it, or none
    // (each answered BUSY) when it does not fit.
    let _admitted = match admit_many(first, frames.len(), peer, client, shared) {
        Ok(ticket) => ticket,
        Err(busy) => return frames.iter().map(|_| Err(busy.clone())).collect(),
    };
    let ctx = shared.ctx(
        identity,
        Consistency::of_flags(first.flags),
        class_of(first.cmd) == Class::New,
    );
    match machines::Dispatch::serve_batch(frames, &ctx).await {
        Some(handled) => handled,
        None => {
            let mut out = Vec::with_capacity(frames.len());
            for frame in frames {
                out.push(handle(frame, peer, shared).await);
            }
            out
        }
    }
}

/// Whether `who` may send `cmd`: the role the command needs (each machine names its own).
pub(crate) fn permit(cmd: u32, who: &Identity) -> Result<(), Reject> {
    let needs = match Cmd::from_code(cmd) {
        Some(Cmd::BeaconStatus | Cmd::Hello | Cmd::ReadIndex | Cmd::Vouch) => Role::Read,
        Some(_) => Role::Admin,
        None => machines::Dispatch::role(cmd).unwrap_or(Role::Read),
    };
    if who.role >= needs {
        return Ok(());
    }
    let what = Cmd::from_code(cmd)
        .map(|c| format!("{c:?}"))
        .or_else(|| machines::Dispatch::name(cmd))
        .map_or_else(
            || format!("cmd {cmd}"),
            |name| format!("{name} (cmd {cmd})"),
        );
    Err(Reject::new(
        ErrorCode::PermissionDenied,
        format!("{who} may not send {what}: it needs role `{needs}`"),
    ))
}

/// `Vouch` (cmd 17): whether this beacon follows the leader asking in its term, answered
/// from the replica as the core's last step left it (no step: the leader's reads wait on
/// this answer, not on the writes queued for this beacon's core).
fn vouch(frame: &Frame, req: pb::VouchRequest, shared: &Shared) -> Result<Handled, Reject> {
    let leader: SocketAddr = req.leader.parse().map_err(|_| {
        Reject::new(
            ErrorCode::InvalidRequest,
            format!("Vouch: leader {:?} is not IP:PORT", req.leader),
        )
    })?;
    if !shared.driver.vouches_for(leader, req.term) {
        let (known, term) = shared.driver.known_leader();
        let view = match known {
            Some(l) => format!("it knows {l} as the leader, in term {term}"),
            None => format!("it knows no leader, in term {term}"),
        };
        return Err(Reject {
            leader: known,
            ..Reject::new(
                ErrorCode::NotLeader,
                format!(
                    "{} does not follow {leader} in term {}: {view}",
                    shared.config.node, req.term
                ),
            )
        });
    }
    reply(frame, &pb::VouchReply { term: req.term })
}

/// `ChangeMembers` (cmd 15): one change of membership, made by the leader and answered once
/// committed. Refused while a member is known to speak a protocol older than 3: it could
/// not read the entry that carries the change.
async fn change_members(
    frame: &Frame,
    req: pb::ChangeMembersRequest,
    shared: &Shared,
) -> Result<Handled, Reject> {
    use crate::consensus::{Change, ChangeError};
    use pb::change_members_request::Action;
    let node: std::net::SocketAddr = req.node.parse().map_err(|_| {
        Reject::new(
            ErrorCode::InvalidRequest,
            format!(
                "ChangeMembers: `{}` is not the ip:port of a beacon",
                req.node
            ),
        )
    })?;
    let change = match Action::try_from(req.action) {
        Ok(Action::Add) => Change::AddLearner {
            node,
            promote: !req.learner,
        },
        Ok(Action::Promote) => Change::Promote(node),
        Ok(Action::Remove) => Change::Remove(node),
        Err(_) => {
            return Err(Reject::new(
                ErrorCode::InvalidRequest,
                format!(
                    "ChangeMembers: action {} is not one of ADD (0), PROMOTE (1), REMOVE (2)",
                    req.action
                ),
            ));
        }
    };
    let members: Vec<std::net::SocketAddr> = shared
        .driver
        .read(|core, _| core.members().all().collect())
        .await?;
    let older = shared.older_than(&members, crate::wire::PROTOCOL_VERSION);
    if let Some((peer, version)) = older.first() {
        return Err(Reject::new(
            ErrorCode::Unavailable,
            format!(
                "member {peer} speaks protocol version {version}: a change of membership needs every member at version {} or later, which reads it; upgrade {peer} first",
                crate::wire::PROTOCOL_VERSION
            ),
        ));
    }
    match shared.driver.change_members(change).await? {
        // The index of the change's own entry: what a joiner records as the membership's.
        Ok(changed) => reply(
            frame,
            &pb::ChangeMembersReply {
                members: Some(crate::wire::envelope::members_to_pb(&changed.members)),
                index: changed.index,
                leader: shared.config.node.to_string(),
            },
        ),
        Err(ChangeError::Consensus(e)) => Err(e.into()),
        Err(e @ (ChangeError::InProgress(_) | ChangeError::NotYet)) => {
            Err(Reject::new(ErrorCode::Unavailable, e.to_string()))
        }
        Err(e) => Err(Reject::new(ErrorCode::InvalidRequest, e.to_string())),
    }
}
