//! The leader's side of `nebcli snapshot save`: every machine's state at one committed
//! index, written as a backup file ([`crate::backup`]) and sent in chunks after the first
//! answer, without stopping the cluster.

use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use tracing::info;

use super::shared::Shared;
use crate::backup::{self, Taken};
use crate::data_dir::identity_of;
use crate::machines::handle::{CoreExt, Handled, Reject, StreamEnd};
use crate::pb;
use crate::wire::{Cmd, FLAG_ONEWAY, Frame, response_code};

/// The largest chunk of the file one frame carries (less when `max_frame_bytes` is less).
const CHUNK: usize = 1 << 20;

/// Chunks queued for the connection before the sender waits for it.
const QUEUED: usize = 4;

/// Serves a `BackupRequest`: at the leader only (a follower's refusal names it, and the
/// client goes there), the state read between two of the driver's steps, answered once
/// everything it holds is committed.
pub(super) async fn serve(frame: &Frame, shared: &Shared) -> Result<Handled, Reject> {
    let _req: pb::BackupRequest = frame.decode()?;
    // The copy is taken under the replica's read lock (the driver waits for it: some tens of
    // milliseconds for a million registrations); the file is encoded after.
    let snapshot = shared
        .driver
        .leader_read(None, |replica, now| replica.snapshot(now), shared)
        .await?;
    let identity = serde_json::to_value(identity_of(&shared.config)).expect("serialises");
    let taken_at_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let node = shared.config.node.to_string();
    let cluster = shared.config.cluster.clone();
    // Encoding a large state is bulk work: on the bulk thread, below the core and the
    // requests (`machines/bulk.rs`), and so are the chunks.
    let position = snapshot.position;
    let (encoded, file) = tokio::sync::oneshot::channel();
    crate::machines::bulk::spawn(async move {
        let file = backup::encode(
            &Taken {
                cluster: &cluster,
                node: &node,
                taken_at_ms,
                identity: &identity,
            },
            &snapshot,
        );
        let _ = encoded.send(file);
    });
    // Dropped unsent only when the process is on its way out.
    let file = file
        .await
        .map_err(|_| crate::machines::handle::shutting_down())?;
    info!(
        index = position.index,
        bytes = file.len(),
        "backup taken for a client"
    );
    let start = pb::BackupStart {
        index: position.index,
        term: position.term,
        size: file.len() as u64,
    };
    // Room for the chunk's own fields in the frame.
    let chunk = CHUNK.min(shared.config.max_frame_bytes.saturating_sub(64).max(1));
    let (tx, rx) = mpsc::channel(QUEUED);
    crate::machines::bulk::spawn(async move {
        for (i, part) in file.chunks(chunk).enumerate() {
            let body = pb::BackupChunk {
                offset: (i * chunk) as u64,
                data: part.to_vec(),
            };
            let frame = Frame::new(Cmd::BackupChunk as u32, 0, FLAG_ONEWAY, &body);
            if tx.send(frame).await.is_err() {
                return;
            }
        }
    });
    Ok(Handled::Stream {
        reply: Frame::new(response_code(frame.cmd), frame.seq, 0, &start),
        pushes: crate::machines::handle::Pushes::plain(rx),
        ended: StreamEnd::finished("the backup was sent whole"),
    })
}
