//! The config store's client API: its calls on a [`Cluster`] (writes, at the leader,
//! followed across failovers) and on a [`Client`] (reads, at one beacon), and
//! [`ConfigWatch`]: documents (or a service's effective configuration, [`Effective`]) and
//! every change after, resumed across failovers.

mod watch;

/// The codes a refusal of this machine carries ([`ClientError::is`]).
pub use super::wire::ConfigErrorCode;
pub use watch::{ConfigEvent, ConfigWatch, Effective};

use super::wire::ConfigCmd as Cmd;
use crate::net::{Client, ClientError, Cluster};
use crate::pb::configs as pb;

/// A compare-and-set condition: `key` must be at `revision` (0: must not exist).
pub fn config_check(key: &str, revision: u64) -> pb::Check {
    pb::Check {
        key: key.to_owned(),
        revision,
    }
}

/// A put of `value` at `key` (`json`: checked as JSON by the leader).
pub fn config_put(key: &str, value: Vec<u8>, json: bool) -> pb::Op {
    pb::Op {
        key: key.to_owned(),
        value,
        json,
        ..Default::default()
    }
}

/// A delete of `key`.
pub fn config_delete(key: &str) -> pb::Op {
    pb::Op {
        key: key.to_owned(),
        delete: true,
        ..Default::default()
    }
}

impl Cluster {
    /// Writes `ops` if every one of `checks` holds, all at one revision, or nothing.
    pub async fn config_write(
        &mut self,
        checks: Vec<pb::Check>,
        ops: Vec<pb::Op>,
    ) -> Result<pb::WriteReply, ClientError> {
        let req = pb::WriteRequest { checks, ops };
        self.call(Cmd::Write, &req, "the config write").await
    }
}

impl Client {
    /// The document `key`, or (`prefix`) every document whose key starts with it.
    pub async fn config_get(
        &mut self,
        key: &str,
        prefix: bool,
    ) -> Result<pb::GetReply, ClientError> {
        let req = pb::GetRequest {
            key: key.to_owned(),
            prefix,
        };
        self.request(Cmd::Get, &req, "the config read").await
    }

    /// The values `key` held, newest first.
    pub async fn config_history(&mut self, key: &str) -> Result<pb::HistoryReply, ClientError> {
        let req = pb::HistoryRequest {
            key: key.to_owned(),
        };
        self.request(Cmd::History, &req, "the config history").await
    }
}
