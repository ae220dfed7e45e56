//! The config store's server handlers: the write (checks and changes), and the reads (a
//! document or a prefix; a document's history), linearizable unless asked otherwise.

use super::service::{ConfigError, ConfigService, Request, Response};
use super::state::{Change, ConfigStore, MAX_KEY_LEN, check_key, check_prefix};
use super::wire::{
    ConfigCmd, ConfigErrorCode, document_to_pb, get_reply_json, op_from_pb, past_to_pb,
};
use crate::auth::Role;
use crate::machines::follow;
use crate::machines::handle::{self, Ctx, Handled, Reject, reply};
use crate::machines::{Part, State};
use crate::pb::configs as pb;
use crate::time::wall_ms;
use crate::wire::ErrorCode;

impl crate::machines::Commands for ConfigCmd {
    fn from_code(code: u32) -> Option<Self> {
        ConfigCmd::from_code(code)
    }

    /// Reading config and writing it are separate permissions: `read` reads, `admin` writes.
    fn role(self) -> Role {
        match self {
            ConfigCmd::Write => Role::Admin,
            ConfigCmd::Get | ConfigCmd::History | ConfigCmd::Watch => Role::Read,
            // Pushed by beacons, never sent to one.
            ConfigCmd::Notice => Role::Admin,
        }
    }
}

pub(crate) async fn serve(frame: &crate::wire::Frame, ctx: &Ctx<'_>) -> Result<Handled, Reject> {
    let Some(cmd) = ConfigCmd::from_code(frame.cmd) else {
        unreachable!("routed here by `owns`");
    };
    match cmd {
        ConfigCmd::Write => {
            let req: pb::WriteRequest = frame.decode()?;
            let request = Request::Write {
                checks: req
                    .checks
                    .into_iter()
                    .map(|c| (c.key, c.revision))
                    .collect(),
                ops: req.ops.into_iter().map(op_from_pb).collect(),
                wall_ms: wall_ms(),
            };
            match handle::submit::<ConfigService>(ctx, request, reject).await? {
                Response::Written { revision, deleted } => {
                    reply(frame, &pb::WriteReply { revision, deleted })
                }
                other => Err(handle::unexpected(other)),
            }
        }
        ConfigCmd::Get => reply(frame, &get(ctx, frame.decode()?).await?),
        ConfigCmd::History => {
            let req: pb::HistoryRequest = frame.decode()?;
            check_key(&req.key).map_err(|e| reject(e.into()))?;
            let key = req.key.clone();
            let found = ctx
                .read_of::<ConfigStore, _>(move |replica, _| {
                    let store = <State as Part<ConfigStore>>::part(replica.state());
                    store.get(&key).map(|d| {
                        let mut history = vec![pb::Past {
                            revision: d.revision,
                            value: d.value.clone(),
                            wall_ms: d.wall_ms,
                        }];
                        history.extend(d.history.iter().map(past_to_pb));
                        pb::HistoryReply {
                            history,
                            index: replica.read_through(<State as Part<ConfigStore>>::INDEX),
                        }
                    })
                })
                .await?;
            reply(frame, &found.ok_or_else(|| unknown(&req.key))?)
        }
        ConfigCmd::Watch => watch(frame, ctx).await,
        ConfigCmd::Notice => Err(Reject::new(
            ErrorCode::UnknownCommand,
            "config notices (cmd 709) are sent by beacons to watchers, not to beacons",
        )),
    }
}

/// Most prefixes one watch follows.
const MAX_PREFIXES: usize = 64;

/// Which documents a watch follows: those under one of its prefixes (none: all).
#[derive(Debug, Clone)]
struct Watched(Vec<String>);

impl Watched {
    /// The prefixes of `req`: its own, or those of the documents that concern its service
    /// (`cluster/`, `type/TYPE/`, `node/ADDR/`, `file/`, and `id/NODE_ID/` when it names
    /// one).
    fn of(req: &pb::WatchRequest) -> Result<Watched, Reject> {
        let Some(service) = &req.service else {
            if req.prefixes.len() > MAX_PREFIXES {
                return Err(invalid(format!(
                    "a config watch follows at most {MAX_PREFIXES} prefixes, not {}",
                    req.prefixes.len()
                )));
            }
            if let Some(long) = req.prefixes.iter().find(|p| p.len() > MAX_KEY_LEN) {
                return Err(invalid(format!(
                    "a config watch prefix is at most {MAX_KEY_LEN} bytes, not {}",
                    long.len()
                )));
            }
            for prefix in &req.prefixes {
                check_prefix(prefix).map_err(|e| reject(e.into()))?;
            }
            return Ok(Watched(req.prefixes.clone()));
        };
        if !req.prefixes.is_empty() {
            return Err(invalid(
                "a config watch names prefixes or a service, not both",
            ));
        }
        if service.node_type.is_empty() || service.node_type.contains('/') {
            return Err(invalid(format!(
                "`{}` is not a node type (non-empty, without `/`)",
                service.node_type
            )));
        }
        let addr: std::net::SocketAddr = service.addr.parse().map_err(|_| {
            invalid(format!(
                "`{}` is not the IP:PORT of a service",
                service.addr
            ))
        })?;
        let mut prefixes = vec![
            "cluster/".into(),
            format!("type/{}/", service.node_type),
            format!("node/{addr}/"),
            "file/".into(),
        ];
        if service.node_id > 0 {
            prefixes.push(format!("id/{}/", service.node_id));
        }
        Ok(Watched(prefixes))
    }

    fn follows(&self, key: &str) -> bool {
        self.0.is_empty() || self.0.iter().any(|p| key.starts_with(p.as_str()))
    }
}

fn invalid(why: impl Into<String>) -> Reject {
    Reject::new(ErrorCode::InvalidRequest, why)
}

/// Starts a watch (leader only): the documents followed as of the last log position, then a
/// notice for every committed write that changed one of them after it (or, resumed at an
/// index, for every such write from it on), so none is missed or told twice.
async fn watch(frame: &crate::wire::Frame, ctx: &Ctx<'_>) -> Result<Handled, Reject> {
    let req: pb::WatchRequest = frame.decode()?;
    let watched = Watched::of(&req)?;
    let kind = follow::kind_of(&watched.0);
    follow::follow(
        frame,
        ctx,
        ConfigCmd::Notice,
        "config documents",
        "this beacon stopped leading: watch again at the leader",
        req.start_index,
        Some(kind),
        move |store: &ConfigStore, start| {
            let documents = match start {
                follow::FirstAnswer::List(_) => store
                    .with_prefix("")
                    .filter(|d| watched.follows(&d.key))
                    .map(|d| document_to_pb(d, false))
                    .collect(),
                follow::FirstAnswer::Resume(_) => Vec::new(),
            };
            let answer = pb::WatchReply {
                documents,
                index: start.index(),
                resumed: start.resumed(),
            };
            let notice = move |index, change: &Change| {
                let mut notice = pb::ConfigNotice {
                    index,
                    ..Default::default()
                };
                for (key, now) in &change.changed {
                    if !watched.follows(key) {
                        continue;
                    }
                    match now {
                        Some(d) => notice.put.push(document_to_pb(d, false)),
                        None => notice.deleted.push(key.clone()),
                    }
                }
                (!notice.put.is_empty() || !notice.deleted.is_empty()).then_some(notice)
            };
            Ok(follow::Listed::whole(answer, notice))
        },
        |index| pb::ConfigNotice {
            index,
            ..Default::default()
        },
    )
    .await
}

async fn get(ctx: &Ctx<'_>, req: pb::GetRequest) -> Result<pb::GetReply, Reject> {
    if req.prefix {
        check_prefix(&req.key).map_err(|e| reject(e.into()))?;
    } else {
        check_key(&req.key).map_err(|e| reject(e.into()))?;
    }
    let (prefix, key) = (req.prefix, req.key.clone());
    let answer = ctx
        .read_of::<ConfigStore, _>(move |replica, _| {
            let store = <State as Part<ConfigStore>>::part(replica.state());
            let documents = if prefix {
                store
                    .with_prefix(&key)
                    .map(|d| document_to_pb(d, false))
                    .collect()
            } else {
                store
                    .get(&key)
                    .map(|d| document_to_pb(d, false))
                    .into_iter()
                    .collect()
            };
            pb::GetReply {
                documents,
                index: replica.read_through(<State as Part<ConfigStore>>::INDEX),
                node: replica.config().me.to_string(),
            }
        })
        .await?;
    if !req.prefix && answer.documents.is_empty() {
        return Err(unknown(&req.key));
    }
    Ok(answer)
}

fn unknown(key: &str) -> Reject {
    Reject::new(
        ConfigErrorCode::UnknownDocument,
        format!("no config document `{key}`"),
    )
}

/// The code and text a refusal is sent with.
fn reject(e: ConfigError) -> Reject {
    let code: u32 = match &e {
        ConfigError::InvalidKey(_)
        | ConfigError::Empty
        | ConfigError::TooManyOps { .. }
        | ConfigError::NotJson { .. }
        | ConfigError::BadPath { .. }
        | ConfigError::BadAllowlist { .. }
        | ConfigError::Refused => ErrorCode::InvalidRequest.into(),
        ConfigError::TooLarge { .. } | ConfigError::Full { .. } => {
            ConfigErrorCode::ConfigTooLarge.into()
        }
        ConfigError::RevisionMismatch { .. } => ConfigErrorCode::RevisionMismatch.into(),
    };
    Reject::new(code, e.to_string())
}

impl crate::machines::Served for ConfigStore {
    type Cmd = ConfigCmd;

    fn grpc() -> Option<&'static crate::wire::rpc::Service> {
        Some(&super::grpc::SERVICE)
    }

    fn allowlist(&self) -> Option<&std::sync::Arc<crate::allow::Allowlist>> {
        ConfigStore::allowlist(self)
    }

    fn views() -> Vec<crate::machines::handle::AdminView> {
        use crate::machines::handle::AdminView;
        vec![AdminView::new(
            "/v1/configs",
            "`?prefix=P&values=0`: `config get --prefix` (every document when no prefix); `values=0` leaves the values out (each document's `bytes` says its size), as the status page reads it",
            ConfigCmd::Get,
            |ctx, params| {
                Box::pin(async move {
                    let req = pb::GetRequest {
                        key: params.get("prefix").cloned().unwrap_or_default(),
                        prefix: true,
                    };
                    let reply = get(ctx, req).await?;
                    let values = params.get("values").is_none_or(|v| v != "0");
                    Ok(get_reply_json(&reply, values))
                })
            },
        )]
    }

    fn serve<'a>(
        frame: &'a crate::wire::Frame,
        ctx: &'a Ctx<'a>,
    ) -> impl Future<Output = Result<Handled, Reject>> + Send + 'a {
        serve(frame, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(node_type: &str, addr: &str, node_id: u32) -> pb::WatchRequest {
        pb::WatchRequest {
            service: Some(pb::ServiceScope {
                node_type: node_type.into(),
                addr: addr.into(),
                node_id,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_watch_follows_what_concerns_its_service_and_refuses_what_names_nothing() {
        let w = Watched::of(&service("LOGIC", "10.0.0.1:80", 7)).unwrap();
        for key in [
            "cluster/a",
            "type/LOGIC/a",
            "node/10.0.0.1:80/a",
            "id/7/a",
            "file/game",
        ] {
            assert!(w.follows(key), "{key}");
        }
        for key in [
            "type/GATE/a",
            "node/10.0.0.2:80/a",
            "id/70/a",
            "beacon/ip_white",
        ] {
            assert!(!w.follows(key), "{key}");
        }
        assert!(
            !Watched::of(&service("LOGIC", "10.0.0.1:80", 0))
                .unwrap()
                .follows("id/0/a")
        );
        let all = Watched::of(&pb::WatchRequest::default()).unwrap();
        assert!(all.follows("beacon/ip_white") && all.follows("type/GATE/a"));

        let refused = |req: pb::WatchRequest| Watched::of(&req).unwrap_err().msg;
        assert!(refused(service("", "10.0.0.1:80", 0)).contains("not a node type"));
        assert!(refused(service("A/B", "10.0.0.1:80", 0)).contains("not a node type"));
        assert!(refused(service("LOGIC", "host:80", 0)).contains("not the IP:PORT"));
        let mut both = service("LOGIC", "10.0.0.1:80", 0);
        both.prefixes = vec!["cluster/".into()];
        assert!(refused(both).contains("prefixes or a service, not both"));
        let many = pb::WatchRequest {
            prefixes: vec!["cluster/".into(); MAX_PREFIXES + 1],
            ..Default::default()
        };
        assert!(refused(many).contains("at most 64 prefixes"));
        let long = pb::WatchRequest {
            prefixes: vec!["x".repeat(MAX_KEY_LEN + 1)],
            ..Default::default()
        };
        assert!(refused(long).contains("at most 512 bytes"));
    }
}
