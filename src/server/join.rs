//! `beacon --join HOST:PORT[,...]`: a new beacon asks a running cluster to add it, as a
//! learner the leader promotes once it has kept up, and starts with the membership the
//! cluster answered. It needs no list of every beacon: the members are in the cluster's log.
//!
//! Only a beacon with an empty data directory asks. One that joined before restarts from
//! what it stored: its stored membership wins (`server::load`), as it does for any beacon.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tracing::info;

use crate::cli::member;
use crate::config::Config;
use crate::consensus::Mode;
use crate::data_dir::DataDir;
use crate::net::{ClientError, ConnectOptions};
use crate::pb;

/// Why a beacon could not join.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("--join: cannot read this beacon's data directory: {0}")]
    DataDir(#[from] crate::data_dir::DataDirError),
    #[error("--join: TLS to the cluster: {0}")]
    Tls(#[from] crate::transport::tls::TlsError),
    #[error("--join: the cluster did not add {node}: {cause}")]
    Refused {
        node: SocketAddr,
        cause: Box<ClientError>,
    },
    #[error("--join: `{0}` in the cluster's answer is not an ip:port address")]
    BadAnswer(String),
    #[error("--join names no beacon to ask")]
    NoSeeds,
}

/// The configuration to start with after joining the cluster of the beacons `seeds`:
/// quorum mode, and the members as the cluster answered (this beacon among the learners).
/// `token`: a client token of role admin, for a cluster that authenticates clients.
pub async fn join(
    mut config: Config,
    seeds: &[String],
    token: Option<String>,
) -> Result<Config, JoinError> {
    if seeds.is_empty() {
        return Err(JoinError::NoSeeds);
    }
    config.mode = Mode::Quorum;
    let me = config.node;
    let data_dir = DataDir::open(&config.data_dir)?;
    if data_dir.load_identity()?.is_some() {
        info!(
            data_dir = %config.data_dir.display(),
            "--join: this beacon has state already: it restarts from it (its stored membership wins)"
        );
        return Ok(config);
    }
    drop(data_dir);
    let tls = match &config.tls {
        Some(files) => match &files.ca {
            Some(ca) => Some(Arc::new(crate::transport::tls::client_config(
                ca,
                Some((&files.cert, &files.key)),
            )?)),
            None => None,
        },
        None => None,
    };
    let opts = ConnectOptions {
        cluster: Some(config.cluster.clone()),
        timeout: Duration::from_secs(5),
        tls,
        token: token.map(crate::net::Token::new),
        ..ConnectOptions::default()
    };
    let req = pb::ChangeMembersRequest {
        action: pb::change_members_request::Action::Add as i32,
        node: me.to_string(),
        learner: false,
    };
    let members = match member::change(&opts, seeds, &req).await {
        Ok(changed) => {
            config.members_index = changed.reply.index;
            changed.reply.members.unwrap_or_default()
        }
        Err(ClientError::Refused { ref msg, .. }) if msg.contains("already a member") => {
            info!("--join: {me} is a member already: starting with the cluster's membership");
            let (members, index) = current_members(&opts, seeds).await?;
            config.members_index = index;
            members
        }
        Err(cause) => {
            return Err(JoinError::Refused {
                node: me,
                cause: Box::new(cause),
            });
        }
    };
    config.beacons = parse_all(&members.voters)?;
    config.learners = parse_all(&members.learners)?;
    if !config.beacons.contains(&me) && !config.learners.contains(&me) {
        config.learners.push(me);
    }
    info!(
        voters = ?config.beacons,
        learners = ?config.learners,
        "--join: added to the cluster as a learner"
    );
    Ok(config)
}

/// The membership as the first of `seeds` to answer shows it, and the log index of the
/// change that made it: no older membership may replace it here.
async fn current_members(
    opts: &ConnectOptions,
    seeds: &[String],
) -> Result<(pb::Members, u64), JoinError> {
    let mut last = None;
    for seed in seeds {
        match crate::net::Client::connect(seed, opts).await {
            Ok(mut c) => match c.beacon_status().await {
                Ok(status) => {
                    let of = |role: &str| {
                        status
                            .beacons
                            .iter()
                            .filter(|b| b.role == role && !b.leaving)
                            .map(|b| b.node.clone())
                            .collect()
                    };
                    let members = pb::Members {
                        voters: of("voter"),
                        learners: of("learner"),
                        promoting: Vec::new(),
                    };
                    return Ok((members, status.members_index));
                }
                Err(e) => last = Some(e),
            },
            Err(e) => last = Some(e),
        }
    }
    Err(JoinError::Refused {
        node: SocketAddr::from(([0, 0, 0, 0], 0)),
        cause: Box::new(last.expect("at least one seed")),
    })
}

fn parse_all(names: &[String]) -> Result<Vec<SocketAddr>, JoinError> {
    names
        .iter()
        .map(|n| n.parse().map_err(|_| JoinError::BadAnswer(n.clone())))
        .collect()
}
