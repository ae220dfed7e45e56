//! Requests from services and admins: register, report, unregister, and the read-only views
//! (`show nodes`, `show ids`, `show subscription`).
//!
//! Every field that comes off the wire is checked here, before the request reaches the
//! driver, so a malformed registration is refused with the field at fault and changes
//! nothing.

use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use super::Shared;
use super::conn::Reject;
use crate::coordinator::{
    NodeFilter, RegisterRequest, Report, Request, RequestError, Response, Target, Unregister,
};
use crate::pb;
use crate::registry::{
    FencingToken, InvalidRequest, check_metadata, check_type, parse_service_addr,
};
use crate::wire::ErrorCode;
use crate::wire::convert::record_to_pb;

impl From<RequestError> for Reject {
    fn from(e: RequestError) -> Reject {
        let code = match &e {
            RequestError::NotLeader { .. } => ErrorCode::NotLeader,
            RequestError::Invalid(_) => ErrorCode::InvalidRequest,
            RequestError::Exhausted(_) => ErrorCode::IdsExhausted,
            RequestError::Conflict { .. } => ErrorCode::Conflict,
            RequestError::NoLease { .. } => ErrorCode::NoLease,
            RequestError::UnknownTarget(_) => ErrorCode::UnknownTarget,
            RequestError::LeaderChanged => ErrorCode::LeaderChanged,
            RequestError::NoQuorum { .. } => ErrorCode::NoQuorum,
            RequestError::NotReady | RequestError::EndedBeforeCommit { .. } => {
                ErrorCode::Unavailable
            }
            RequestError::NotHolder { .. } => ErrorCode::NotHolder,
        };
        let leader = match &e {
            RequestError::NotLeader { leader } => *leader,
            _ => None,
        };
        Reject::keep(code, e.to_string()).with_leader(leader)
    }
}

impl From<InvalidRequest> for Reject {
    fn from(e: InvalidRequest) -> Reject {
        RequestError::Invalid(e).into()
    }
}

fn shutting_down() -> Reject {
    Reject::close(ErrorCode::Unavailable, "beacon is shutting down")
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn optional_addr(field: &'static str, value: &str) -> Result<Option<SocketAddr>, InvalidRequest> {
    match value {
        "" => Ok(None),
        v => parse_service_addr(field, v).map(Some),
    }
}

/// Checks a registration.
pub(crate) fn register_request(
    req: pb::RegisterRequest,
    max_metadata: usize,
) -> Result<RegisterRequest, InvalidRequest> {
    check_type(&req.node_type)?;
    let addr = parse_service_addr("addr", &req.addr)?;
    let access_addr = optional_addr("access_addr", &req.access_addr)?;
    check_metadata(&req.metadata, max_metadata)?;
    Ok(RegisterRequest {
        node_type: req.node_type,
        addr,
        access_addr,
        worker_num: req.worker_num,
        metadata: req.metadata,
        wall_ms: wall_ms(),
    })
}

async fn submit(shared: &Shared, request: Request) -> Result<Response, Reject> {
    Ok(shared
        .driver
        .request(request)
        .await
        .ok_or_else(shutting_down)??)
}

pub(crate) async fn register(
    shared: &Shared,
    req: pb::RegisterRequest,
) -> Result<pb::RegisterReply, Reject> {
    let req = register_request(req, shared.config.max_metadata_bytes)?;
    match submit(shared, Request::Register(req)).await? {
        Response::Registered {
            record,
            lease_ms,
            subscribe,
        } => Ok(pb::RegisterReply {
            node: Some(record_to_pb(&record)),
            lease_ms,
            beacons: shared.config.beacon_names(),
            leader: shared.config.node.to_string(),
            subscribe,
        }),
        other => Err(unexpected(other)),
    }
}

pub(crate) async fn report(
    shared: &Shared,
    req: pb::NodeReport,
) -> Result<pb::NodeReportReply, Reject> {
    let report = Report {
        node_id: req.node_id,
        addr: parse_service_addr("addr", &req.addr)?,
        token: FencingToken {
            term: req.term,
            index: req.index,
        },
        node: req.node.unwrap_or_default(),
        workers: req.worker,
    };
    match submit(shared, Request::Report(report)).await? {
        Response::Reported {
            node_id,
            lease_ms,
            token,
        } => Ok(pb::NodeReportReply {
            node_id,
            lease_ms,
            term: token.term,
            index: token.index,
        }),
        other => Err(unexpected(other)),
    }
}

pub(crate) async fn unregister(
    shared: &Shared,
    req: pb::UnregisterRequest,
) -> Result<pb::UnregisterReply, Reject> {
    let target = match (req.node_id, req.addr.as_str()) {
        (0, "") => return Err(InvalidRequest::NoTarget.into()),
        (0, addr) => Target::Addr(parse_service_addr("addr", addr)?),
        (id, _) => Target::Id(id),
    };
    let unregister = Unregister {
        target,
        token: FencingToken {
            term: req.term,
            index: req.index,
        },
        release: req.release,
    };
    match submit(shared, Request::Unregister(unregister)).await? {
        Response::Unregistered(record) => Ok(pb::UnregisterReply {
            node: Some(record_to_pb(&record)),
        }),
        other => Err(unexpected(other)),
    }
}

/// The core answered a request with the response of another kind: a bug, reported as such.
fn unexpected(response: Response) -> Reject {
    Reject::keep(
        ErrorCode::Unavailable,
        format!("internal error: unexpected response {response:?}"),
    )
}

pub(crate) async fn nodes(
    shared: &Shared,
    req: pb::NodesRequest,
) -> Result<pb::NodesReply, Reject> {
    let node_type = match req.node_type.as_str() {
        "" => None,
        t => {
            check_type(t)?;
            Some(t.to_owned())
        }
    };
    let filter = NodeFilter {
        node_type,
        addr: optional_addr("addr", &req.addr)?,
        node_id: (req.node_id != 0).then_some(req.node_id),
    };
    shared.driver.nodes(filter).await.ok_or_else(shutting_down)
}

pub(crate) async fn ids(shared: &Shared) -> Result<pb::IdsReply, Reject> {
    shared.driver.ids().await.ok_or_else(shutting_down)
}

pub(crate) fn subscriptions(
    shared: &Shared,
    req: pb::SubscriptionsRequest,
) -> Result<pb::SubscriptionsReply, Reject> {
    if !req.node_type.is_empty() {
        check_type(&req.node_type)?;
    }
    let subscriptions = shared
        .config
        .subscriptions
        .iter()
        .filter(|(t, _)| req.node_type.is_empty() || **t == req.node_type)
        .map(|(t, subscribe)| pb::Subscription {
            node_type: t.clone(),
            subscribe: subscribe.clone(),
        })
        .collect();
    Ok(pb::SubscriptionsReply { subscriptions })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(node_type: &str, addr: &str, metadata: &str) -> pb::RegisterRequest {
        pb::RegisterRequest {
            node_type: node_type.into(),
            addr: addr.into(),
            metadata: metadata.into(),
            ..Default::default()
        }
    }

    #[test]
    fn registrations_are_checked_field_by_field() {
        let ok = register_request(req("LOGIC", "10.0.0.1:80", r#"{"a":1}"#), 64).unwrap();
        assert_eq!(ok.addr, "10.0.0.1:80".parse().unwrap());
        assert!(ok.wall_ms > 0);
        let err = |r| register_request(r, 16).unwrap_err().to_string();
        assert_eq!(err(req("", "10.0.0.1:80", "")), "node_type is empty");
        assert_eq!(
            err(req("LOGIC", "nowhere", "")),
            "addr `nowhere` is not an ip:port address (for example 10.0.0.5:8080)"
        );
        assert!(err(req("LOGIC", "0.0.0.0:80", "")).contains("wildcard"));
        assert_eq!(
            err(req("LOGIC", "10.0.0.1:80", &"x".repeat(17))),
            "metadata is 17 bytes, over the limit of 16 bytes"
        );
        assert!(
            err(req("LOGIC", "10.0.0.1:80", "{nope")).starts_with("metadata is not valid JSON")
        );
        let mut bad_access = req("LOGIC", "10.0.0.1:80", "");
        bad_access.access_addr = "x:1".into();
        assert!(err(bad_access).starts_with("access_addr `x:1`"));
    }

    #[test]
    fn request_errors_keep_their_code_and_leader() {
        let leader: SocketAddr = "127.0.0.1:17000".parse().unwrap();
        let r = Reject::from(RequestError::NotLeader {
            leader: Some(leader),
        });
        assert_eq!(r.code, ErrorCode::NotLeader);
        assert_eq!(r.leader, Some(leader));
        assert!(r.msg.contains("the leader is 127.0.0.1:17000"));
        assert_eq!(
            Reject::from(InvalidRequest::EmptyType).code,
            ErrorCode::InvalidRequest
        );
    }
}
