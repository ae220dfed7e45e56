//! The follower's relay connections to its leader and the calls waiting on them.
//!
//! Kept apart from the code that dials (which needs the beacon's shared state) so that the
//! shared state can hold the pool.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use crate::machines::handle::Reject;
use crate::pb;
use crate::wire::{Cmd, Code, ErrorCode, FLAG_ONEWAY, Frame};

/// Frames queued for one relayed stream at the follower; a consumer that falls this far
/// behind loses the stream (it watches again).
pub(super) const STREAM_QUEUE: usize = 1024;

/// A follower's relay connections, one per leader it has relayed to (normally one); or,
/// made with [`Relays::to_followers`], a leader's to its followers, which it asks to vouch
/// for its reads.
#[derive(Default)]
pub(crate) struct Relays {
    /// The pool dials followers, not the leader: a dial goes on whoever leads.
    pub(super) to_followers: bool,
    pub(super) conns: tokio::sync::Mutex<HashMap<SocketAddr, Arc<RelayConn>>>,
    /// One dial at a time to each beacon, held apart from `conns`: a dial to a beacon that
    /// accepts and never answers (a hung one) takes up to its limit, and relays to the
    /// others go on meanwhile.
    pub(super) dialing: Mutex<HashMap<SocketAddr, Arc<tokio::sync::Mutex<()>>>>,
}

impl Relays {
    /// A leader's connections to its followers (see [`Relays`]).
    pub(crate) fn to_followers() -> Relays {
        Relays {
            to_followers: true,
            ..Relays::default()
        }
    }
}

/// A call relayed to the leader: its answer, and for a stream every frame after it. The
/// channel closing without an error frame means the relay connection was lost. Dropping it
/// while its stream runs tells the leader to end the stream.
pub(crate) struct RelayCall {
    pub(crate) frames: mpsc::Receiver<Frame>,
    pub(super) seq: u32,
    pub(super) stream: bool,
    pub(super) conn: Arc<RelayConn>,
}

impl Drop for RelayCall {
    fn drop(&mut self) {
        let known = self
            .conn
            .pending
            .lock()
            .expect("never poisoned")
            .remove(&self.seq);
        if self.stream && known.is_some() {
            let cancel = pb::Relayed {
                cancel: true,
                ..Default::default()
            };
            let frame = Frame::new(Cmd::Relayed.code(), self.seq, FLAG_ONEWAY, &cancel);
            let _ = self.conn.out.try_send(frame);
        }
    }
}

/// One relay connection: a writer and a reader task, and the calls waiting for answers.
pub(super) struct RelayConn {
    pub(super) out: mpsc::Sender<Frame>,
    pub(super) pending: Mutex<HashMap<u32, Pending>>,
    pub(super) seq: AtomicU32,
    pub(super) closed: tokio_util::sync::CancellationToken,
}

pub(super) struct Pending {
    pub(super) tx: mpsc::Sender<Frame>,
    pub(super) stream: bool,
}

/// The refusal when the relay connection went away before the answer came.
pub(crate) fn lost(leader: SocketAddr) -> Reject {
    Reject::new(
        ErrorCode::LeaderChanged,
        format!(
            "the connection to the leader {leader} was lost before the answer came: the call may or may not have taken effect; retry"
        ),
    )
}
