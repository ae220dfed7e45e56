//! nebcli's `watch` commands: a watch stream followed until Ctrl-C or SIGTERM, printed line
//! by line, and resumed after a failover from the log index after the last one heard.

use std::time::Duration;

use super::{Failure, Session};
use crate::net::{Client, ClientError};
use crate::wire::{Code, ErrorCode};

/// One kind of watch, as nebcli prints it.
pub trait Followed {
    type Request: prost::Message;
    type Reply: prost::Message + Default;
    type Notice: prost::Message + Default;
    /// Names the watch in errors ("the queue watch").
    const WHAT: &'static str;

    /// The command that starts the watch, and the one its notices come as.
    fn commands(&self) -> (u32, u32);
    /// The request starting at log index `from` (0: from the state as it is).
    fn request(&self, from: u64) -> Self::Request;
    /// The log index the first answer stands at, and whether it resumed (listed nothing).
    fn reply_index(reply: &Self::Reply) -> (u64, bool);
    fn notice_index(notice: &Self::Notice) -> u64;
    /// The lines of the first answer (its listing), and of a notice (none for a progress
    /// notice), as text or JSON lines.
    fn reply_lines(&self, reply: &Self::Reply, json: bool) -> String;
    fn notice_lines(&self, notice: &Self::Notice, json: bool) -> String;
}

/// A command code, as the cluster client takes it.
#[derive(Clone, Copy, Debug)]
struct Raw(u32);

impl Code for Raw {
    fn code(self) -> u32 {
        self.0
    }
}

/// Follows `watch` from log index `from` (0: from the current state) until stopped. After a
/// failover it resumes from the index after the last notice heard; when that index is no
/// longer kept it says so on stderr and starts again from the current state.
pub async fn follow<W: Followed>(
    session: &mut Session,
    watch: W,
    from: u64,
) -> Result<String, Failure> {
    let (open, pushed) = watch.commands();
    let mut cluster = session.cluster();
    let mut start = from;
    let stop = super::stop_signal();
    tokio::pin!(stop);
    // How long a failover may take before the watch gives up.
    let patience = session.opts.timeout.max(Duration::from_secs(10));
    loop {
        let req = watch.request(start);
        let opened: Result<(Client, W::Reply), ClientError> = tokio::select! {
            signal = &mut stop => return Ok(stopped(session, signal)),
            opened = tokio::time::timeout(patience, cluster.open_stream(Raw(open), &req, W::WHAT)) =>
                opened.unwrap_or_else(|_| Err(ClientError::Ended {
                    what: W::WHAT,
                    why: format!("no leader took it up within {patience:?}"),
                })),
        };
        let (mut conn, reply) = match opened {
            Ok(opened) => opened,
            Err(e) if e.is(ErrorCode::Compacted) && start != from => {
                eprintln!(
                    "warning: {e}: watching again from the current state (changes meanwhile are not shown)"
                );
                start = 0;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let (at, resumed) = W::reply_index(&reply);
        if !resumed {
            super::emit(&watch.reply_lines(&reply, session.json));
        }
        let mut heard = at;
        loop {
            let frame = tokio::select! {
                signal = &mut stop => return Ok(stopped(session, signal)),
                frame = conn.next_pushed(W::WHAT) => frame,
            };
            let notice = frame.and_then(|f| {
                if f.cmd != pushed {
                    return Err(ClientError::BadReply {
                        what: W::WHAT,
                        msg: format!("a pushed frame of cmd {}", f.cmd),
                    });
                }
                f.decode::<W::Notice>().map_err(|cause| ClientError::Frame {
                    addr: String::new(),
                    cause,
                })
            });
            match notice {
                Ok(notice) => {
                    heard = heard.max(W::notice_index(&notice));
                    super::emit(&watch.notice_lines(&notice, session.json));
                }
                Err(e) if e.is_retryable() => break,
                Err(e) => return Err(e.into()),
            }
        }
        // The stream ended (a failover, a broken connection): resume after what was heard.
        start = heard + 1;
    }
}

fn stopped(session: &Session, signal: &str) -> String {
    if session.json {
        String::new()
    } else {
        format!("{signal}: stopped\n")
    }
}
