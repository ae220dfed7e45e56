//! The driver's channel for peer traffic: what a peer's link hands the driver (its
//! messages, and its connections coming and going) on a channel of its own, apart from the
//! requests of clients (`handle.rs`'s `Ask`), and what the driver hands each link
//! back (its messages, encoded, and our state for handshakes).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::consensus::Message;
use crate::machines::State;
use crate::machines::view::View;
use crate::pb;

/// What a peer's link tells the driver.
pub(crate) enum PeerEvent {
    Peer {
        from: SocketAddr,
        /// Boxed: a message is several times the size of the other events.
        msg: Box<Message<State>>,
        greeting: bool,
    },
    PeerConnected {
        peer: SocketAddr,
        conn: ConnId,
    },
    PeerDisconnected {
        peer: SocketAddr,
        conn: ConnId,
    },
}

/// Identifies one connection with a peer (either direction).
pub(crate) type ConnId = u64;

static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

/// A fresh connection id.
pub(crate) fn next_conn_id() -> ConnId {
    NEXT_CONN.fetch_add(1, Ordering::Relaxed)
}

/// A message to a peer, encoded, stamped with the driver round that sent it. A link that
/// comes up greets its peer with the state of some round (see [`Greeting`]) and then drops
/// what was queued in that round or before: the greeting already said it.
#[derive(Debug)]
pub(crate) struct Outgoing {
    /// The driver round that sent it.
    pub(crate) round: u64,
    pub(crate) body: Body,
}

/// A peer message's bytes: ready, or still being encoded elsewhere (a snapshot: encoding a
/// million registrations took the core thread long enough for its heartbeats to stop). The
/// link sends them in the order queued, waiting for a body still being encoded.
#[derive(Debug)]
pub(crate) enum Body {
    Ready(Bytes),
    Encoding(tokio::sync::oneshot::Receiver<Bytes>),
}

impl Body {
    /// The bytes, once encoded; `None` if the encoding was abandoned.
    pub(crate) async fn bytes(self) -> Option<Bytes> {
        match self {
            Body::Ready(b) => Some(b),
            Body::Encoding(rx) => rx.await.ok(),
        }
    }
}

/// Our state for handshakes, with the driver round it is as of. The driver replaces it at
/// the end of each round, once the round's log changes are stored: a greeting never claims
/// entries that are not on disk yet.
#[derive(Debug, Clone)]
pub(crate) struct Greeting {
    /// The driver round the state is as of.
    pub(crate) round: u64,
    pub(crate) election: pb::Election,
}

/// A link's handle on the driver's peer channel. Every call does nothing once the driver has
/// stopped.
#[derive(Clone)]
pub(crate) struct PeerHandle {
    tx: mpsc::Sender<PeerEvent>,
    /// The replica, read on the caller's task.
    view: Arc<View>,
}

impl PeerHandle {
    pub(crate) fn new(tx: mpsc::Sender<PeerEvent>, view: Arc<View>) -> PeerHandle {
        PeerHandle { tx, view }
    }

    pub(crate) async fn peer_message(&self, from: SocketAddr, msg: Message<State>) {
        self.peer(from, msg, false).await;
    }

    /// A peer's state from its answer to our handshake (see [`crate::consensus::Input`]).
    pub(crate) async fn peer_greeting(&self, from: SocketAddr, msg: Message<State>) {
        self.peer(from, msg, true).await;
    }

    async fn peer(&self, from: SocketAddr, msg: Message<State>, greeting: bool) {
        // Reads waiting for the commit this message tells answer now, not once the driver
        // has finished the fsync it may be in and stepped the message.
        if !greeting {
            let heard = self.view.read().commit_heard(from, &msg);
            if let Some(commit) = heard {
                self.view.release_commit(commit);
            }
        }
        let _ = self
            .tx
            .send(PeerEvent::Peer {
                from,
                msg: Box::new(msg),
                greeting,
            })
            .await;
    }

    pub(crate) async fn peer_connected(&self, peer: SocketAddr, conn: ConnId) {
        let _ = self.tx.send(PeerEvent::PeerConnected { peer, conn }).await;
    }

    pub(crate) async fn peer_disconnected(&self, peer: SocketAddr, conn: ConnId) {
        let _ = self
            .tx
            .send(PeerEvent::PeerDisconnected { peer, conn })
            .await;
    }
}
