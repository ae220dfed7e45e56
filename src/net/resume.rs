//! A watch stream at the leader that outlives leaders and connections.
//!
//! A machine's watch (the registry's nodes, the config store's documents) opens with a
//! listing as of a log index, then hears one notice per committed change, each with its
//! index. When the stream ends (leadership moved, the connection broke), [`Resuming`]
//! opens it again at the next leader from the index after the last one heard, so that every
//! change comes once; only when that beacon no longer keeps changes that old (`COMPACTED`)
//! does it list again, and the machine's watch turns the difference into events. What the
//! listing and the notices hold is the machine's; this module knows their log index alone.

use super::{Client, ClientError, Cluster};
use crate::wire::{Code, ErrorCode};

/// A watch's first answer: the items listed (none on a resume) as of a log index.
pub trait Listing: prost::Message + Default {
    type Item;
    fn index(&self) -> u64;
    fn items(self) -> Vec<Self::Item>;

    /// Whether more of the listing follows, in pages pushed before any notice (a listing
    /// larger than one frame).
    fn more(&self) -> bool {
        false
    }

    /// A page of the listing, pushed after the answer: its items and whether another
    /// follows; `None` when the frame is not a page.
    fn page(_body: bytes::Bytes) -> Option<(Vec<Self::Item>, bool)> {
        None
    }
}

/// A notice pushed on a watch: the log index it brings the watcher to.
pub trait Notice: prost::Message + Default {
    fn index(&self) -> u64;
}

/// What [`Resuming::next`] heard.
pub enum Heard<N, I> {
    /// The next notice.
    Notice(N),
    /// The stream was taken up again from a fresh listing (the index it had reached was
    /// compacted): the items as they are now.
    Relisted(Vec<I>),
}

/// A watch request and the stream it holds, resumed across leader changes.
pub struct Resuming<Q> {
    cluster: Cluster,
    request: Q,
    /// Sets the request's start index (0: from a listing).
    start_at: fn(&mut Q, u64),
    cmd: u32,
    notice: u32,
    what: &'static str,
    conn: Option<Client>,
    index: u64,
    resumes: u64,
    resyncs: u64,
}

impl<Q: prost::Message + Clone> Resuming<Q> {
    /// A stream not opened yet: `request` (command `cmd`) at the leader reached through
    /// `cluster`, whose notices come as frames of command `notice`.
    pub fn new(
        cluster: Cluster,
        request: Q,
        start_at: fn(&mut Q, u64),
        cmd: impl Code,
        notice: impl Code,
        what: &'static str,
    ) -> Resuming<Q> {
        Resuming {
            cluster,
            request,
            start_at,
            cmd: cmd.code(),
            notice: notice.code(),
            what,
            conn: None,
            index: 0,
            resumes: 0,
            resyncs: 0,
        }
    }

    /// The request asked at every (re)start, its start index aside.
    pub fn request(&self) -> &Q {
        &self.request
    }

    /// The log index heard through (the listing's, then each notice's).
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Times the stream was taken up again from its index.
    pub fn resumes(&self) -> u64 {
        self.resumes
    }

    /// Times it had to be listed again (its index was compacted).
    pub fn resyncs(&self) -> u64 {
        self.resyncs
    }

    /// Opens the stream at the leader from log index `from` (0: from a listing, whose
    /// items it returns).
    pub async fn open<L: Listing>(&mut self, from: u64) -> Result<Vec<L::Item>, ClientError> {
        let mut req = self.request.clone();
        (self.start_at)(&mut req, from);
        let (mut conn, reply): (Client, L) = self
            .cluster
            .open_stream(RawCode(self.cmd), &req, self.what)
            .await?;
        let index = reply.index();
        let mut more = reply.more();
        let mut items = reply.items();
        while more {
            let frame = conn.next_pushed(self.what).await?;
            let Some((page, next)) = L::page(frame.body.clone()) else {
                return Err(ClientError::BadReply {
                    what: self.what,
                    msg: format!(
                        "a page of the listing was announced, cmd {} came instead",
                        frame.cmd
                    ),
                });
            };
            items.extend(page);
            more = next;
        }
        self.conn = Some(conn);
        self.index = index;
        Ok(items)
    }

    /// The next notice, or a fresh listing when the stream had to start over. Waits as long
    /// as nothing comes; rides out failovers for the cluster's `retry_for`, then fails.
    pub async fn next<L: Listing, N: Notice>(&mut self) -> Result<Heard<N, L::Item>, ClientError> {
        loop {
            let heard = match self.conn.as_mut() {
                Some(conn) => next_notice::<N>(conn, self.cmd, self.notice, self.what).await,
                None => Err(ClientError::Closed {
                    addr: String::new(),
                }),
            };
            match heard {
                Ok(notice) => {
                    self.index = self.index.max(notice.index());
                    return Ok(Heard::Notice(notice));
                }
                Err(e) if e.is_retryable() => self.conn = None,
                Err(e) => return Err(e),
            }
            match self.open::<L>(self.index + 1).await {
                Ok(_) => self.resumes += 1,
                Err(e) if e.is(ErrorCode::Compacted) => {
                    let fresh = self.open::<L>(0).await?;
                    self.resyncs += 1;
                    return Ok(Heard::Relisted(fresh));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// A command code as it came.
#[derive(Debug, Clone, Copy)]
struct RawCode(u32);

impl Code for RawCode {
    fn code(self) -> u32 {
        self.0
    }
}

/// The next frame pushed on `conn`, which must be a notice (`notice`) of the stream started
/// with `cmd`.
async fn next_notice<N: Notice>(
    conn: &mut Client,
    cmd: u32,
    notice: u32,
    what: &'static str,
) -> Result<N, ClientError> {
    let frame = conn.next_pushed(what).await?;
    if frame.cmd != notice {
        return Err(ClientError::Mismatch {
            addr: conn.addr().to_owned(),
            sent: cmd,
            sent_seq: 0,
            got: frame.cmd,
            got_seq: frame.seq,
        });
    }
    conn.decode(&frame)
}
