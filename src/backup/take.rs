//! The client's side of `nebcli snapshot save`: the backup asked of the leader, its chunks
//! put together in order, and the whole checked before anyone writes it.

use super::{Backup, BackupError, decode};
use crate::net::{ClientError, Cluster};
use crate::pb;
use crate::wire::Cmd;

/// Why no backup came.
#[derive(Debug, thiserror::Error)]
pub enum TakeError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("the backup from {from} came broken: {why}")]
    Broken { from: String, why: String },
    #[error(transparent)]
    Backup(#[from] BackupError),
}

/// Takes a backup of the cluster `cluster` reaches (at its leader): the file's bytes, and
/// what they hold.
pub async fn take(cluster: &mut Cluster) -> Result<(Vec<u8>, Backup), TakeError> {
    let (mut conn, start): (_, pb::BackupStart) = cluster
        .open_stream(Cmd::Backup, &pb::BackupRequest {}, "the backup")
        .await?;
    let from = conn.addr().to_owned();
    let broken = |why: String| TakeError::Broken {
        from: from.clone(),
        why,
    };
    let size = usize::try_from(start.size).map_err(|_| broken("too large".into()))?;
    let mut file = Vec::with_capacity(size);
    while file.len() < size {
        let frame = conn.next_pushed("the backup").await?;
        if frame.cmd != Cmd::BackupChunk as u32 {
            return Err(broken(format!("cmd {} among its chunks", frame.cmd)));
        }
        let chunk: pb::BackupChunk = conn.decode(&frame)?;
        if chunk.offset != file.len() as u64 || file.len() + chunk.data.len() > size {
            return Err(broken(format!(
                "a chunk of {} bytes at offset {}, after {} of {size} bytes",
                chunk.data.len(),
                chunk.offset,
                file.len()
            )));
        }
        file.extend_from_slice(&chunk.data);
    }
    let backup = decode(&format!("the backup from {from}"), &file)?;
    if backup.position().index != start.index {
        return Err(broken(format!(
            "it stands at index {}, its start said {}",
            backup.position().index,
            start.index
        )));
    }
    Ok((file, backup))
}
