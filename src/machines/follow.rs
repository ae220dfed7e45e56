//! A watch's life at the leader: its first answer (a listing, or nothing on a resume), the
//! changes the history owes a resume, then every change committed after them.
//!
//! A resume that is owed a long replay (a herd of watchers coming back after a stall) gets
//! its replay and no live subscriber behind it: the notices committed while it is sent
//! would otherwise queue behind it, reach the watcher's limits and drop it, and its client
//! would resume and be replayed again, and again. Once the replay is sent, the watch
//! subscribes again from the index after it (a shorter replay now, out of the same shared
//! history), and only a replay short enough to send at once leaves a live subscriber.

// The machines' handlers are compiled in every build, the daemon that calls them only with
// the `server` feature: without it (`beacon-client`) part of this module has no caller.
#![cfg_attr(not(feature = "server"), allow(dead_code))]

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::future::BoxFuture;

use crate::consensus::Machine;
use crate::machines::handle::{
    Committed, Core, CoreExt, Ctx, Handled, Reject, Replay, StartPoint, StreamEnd, Subscriber,
};
use crate::machines::watchers::{Pages, Pushed, Pushes, Queue, Watchers};
use crate::machines::{Change, Part, State};
use crate::wire::{Code, ErrorCode, FLAG_ONEWAY, Frame, response_code};

/// A replay of more notices than this is sent with no live subscriber behind it (see the
/// module's doc); a shorter one is sent ahead of what commits meanwhile.
pub(crate) const LIVE_BEHIND_REPLAY: usize = 1_000;
/// Where a watch's first answer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FirstAnswer {
    /// List the state as of this log position; notices follow from after it.
    List(u64),
    /// Resumed at this log index: list nothing, the changes from it on follow (the
    /// answer's index is the one before it, where the watcher stands).
    Resume(u64),
}

impl FirstAnswer {
    /// The log position the first answer stands at.
    pub(crate) fn index(self) -> u64 {
        match self {
            FirstAnswer::List(at) => at,
            FirstAnswer::Resume(from) => from.saturating_sub(1),
        }
    }

    pub(crate) fn resumed(self) -> bool {
        matches!(self, FirstAnswer::Resume(_))
    }
}

/// Follows machine `M`'s committed changes for one watcher (leader only). `from` is the log
/// index to resume at (0: from the state as it is): `start` reads `M` and gives the first
/// answer (a listing as of the last log position, or nothing on a resume) and a `notice`
/// that turns each later change of `M` into the frame body pushed (or nothing, when the
/// change does not concern this watcher; `what` names it in a warning). A listing holds
/// every change up to its position and a resume gets every change from its index, so none
/// is missed or told twice. While idle the watcher gets `progress(commit)`, an empty
/// notice with the index the log is committed through. The stream ends with `ended` when
/// this beacon stops leading; a resume from before the oldest change kept is refused
/// `COMPACTED`.
///
/// `kind`: watchers of the same kind (the same filter) get the same notice for a change, so
/// its bytes are made once and shared by all of them ([`kind_of`]); `None` for a watch of
/// its own (a holder's assignments).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn follow<M, A, N, F>(
    frame: &Frame,
    ctx: &Ctx<'_>,
    pushed: impl Code,
    what: &'static str,
    ended: &'static str,
    from: u64,
    kind: Option<u64>,
    start: impl FnOnce(&M, FirstAnswer) -> Result<Listed<A, F>, Reject> + Send + 'static,
    progress: fn(u64) -> N,
) -> Result<Handled, Reject>
where
    M: Machine + 'static,
    State: Part<M>,
    A: prost::Message + Send + 'static,
    N: prost::Message + 'static,
    F: FnMut(u64, &M::Change) -> Option<N> + Send + 'static,
{
    let watchers = ctx.driver.watchers().clone();
    let ended = StreamEnd::watching(ended);
    // A listing large enough to go in pages waits for its turn (a herd lists a few at a
    // time); a resume lists nothing and waits for none.
    let turn = match from {
        0 => Some(watchers.listing_turn().await),
        _ => None,
    };
    let behind = ended.behind();
    let pushed = pushed.code();
    let started = ctx
        .driver
        .subscribe(from, move |replica, _, since, replay| {
            let begin = match since {
                StartPoint::Now => FirstAnswer::List(replica.applied().index),
                StartPoint::Replay { from, .. } => FirstAnswer::Resume(from),
                StartPoint::Compacted { asked, oldest } => {
                    return (Err(compacted(asked, oldest)), None);
                }
            };
            let Listed {
                answer,
                notice,
                rest,
            } = match start(<State as Part<M>>::part(replica.state()), begin) {
                Ok(started) => started,
                Err(e) => return (Err(e), None),
            };
            let follower = Follower::<M, F, N> {
                // The replay (on this watch's task) and the subscriber (on the core's) both
                // make notices of changes; each watch has its own notice, taken by turns.
                notice: Arc::new(Mutex::new(notice)),
                kind,
                pushed,
                what,
                progress,
                watchers,
                behind,
                machine: PhantomData,
            };
            let (pushes, subscriber, next) = follower.tail(begin.index(), replay);
            (Ok((answer, pushes, rest, follower, next)), subscriber)
        })
        .await?;
    let (answer, mut pushes, rest, follower, next) = started?;
    if let (Some(rest), Some(turn)) = (rest, turn) {
        pushes.listing_first(rest, follower.pushed, Some(turn));
    }
    if let Some(next) = next {
        pushes.then(follower.subscribe_again(ctx.driver.owned(), next));
    }
    Ok(Handled::Stream {
        reply: Frame::new(response_code(frame.cmd), frame.seq, 0, &answer),
        pushes,
        ended,
    })
}

/// What a watch needs to follow the log past its first answer, again and again: its
/// notice, and where its frames go.
struct Follower<M: Machine, F, N> {
    notice: Arc<Mutex<F>>,
    kind: Option<u64>,
    pushed: u32,
    what: &'static str,
    progress: fn(u64) -> N,
    watchers: Arc<Watchers>,
    /// Set when the watcher falls behind, whichever of its queues it was: the stream's end
    /// says so.
    behind: Arc<AtomicBool>,
    machine: PhantomData<fn() -> M>,
}

impl<M: Machine, F, N> Clone for Follower<M, F, N> {
    fn clone(&self) -> Self {
        Follower {
            notice: self.notice.clone(),
            watchers: self.watchers.clone(),
            behind: self.behind.clone(),
            ..*self
        }
    }
}

impl<M, F, N> Follower<M, F, N>
where
    M: Machine + 'static,
    State: Part<M>,
    N: prost::Message + 'static,
    F: FnMut(u64, &M::Change) -> Option<N> + Send + 'static,
{
    /// The frames of a watch that stands at log index `at` and is owed `replay`: the
    /// replay, then (unless it is long) what its subscriber is told of what commits after
    /// it. With no subscriber, the index to subscribe again from once the replay is sent.
    /// Runs on the core's thread, between two steps.
    fn tail(
        &self,
        at: u64,
        replay: Option<Replay<Change>>,
    ) -> (Pushes, Option<Subscriber>, Option<u64>) {
        let (mut queue, mut pushes) = self.watchers.queue(self.behind.clone());
        // What the history owes a resume is sent before anything queued: a subscriber is
        // told only what commits after it.
        let owed = replay.filter(|r| !r.owed().is_empty());
        let after = owed
            .as_ref()
            .and_then(|r| r.owed().last().map(|(index, _)| *index))
            .unwrap_or(0)
            .max(at);
        let long = owed
            .as_ref()
            .is_some_and(|r| r.owed().len() > LIVE_BEHIND_REPLAY);
        if let Some(owed) = owed {
            let noticed = self.clone();
            let mut next = 0;
            let pages = PagesFn(move || {
                let changes = owed.owed();
                while let Some((index, change)) = changes.get(next) {
                    next += 1;
                    if let Some(body) = noticed.notice(*index, change, true) {
                        return Some(body);
                    }
                }
                None
            });
            pushes.listing_first(Box::new(pages), self.pushed, None);
        }
        if long {
            return (pushes, None, Some(after + 1));
        }
        let (follower, mut busy) = (self.clone(), false);
        let subscriber: Subscriber = Box::new(move |told| match told {
            Committed::Change(index, change) => {
                if index <= after {
                    return !queue.is_closed();
                }
                match follower.notice(index, change, false) {
                    Some(body) => {
                        // Something was pushed since the last progress call: the watcher
                        // is not idle.
                        busy = true;
                        follower.send(&mut queue, body)
                    }
                    None => !queue.is_closed(),
                }
            }
            Committed::Progress(commit) => {
                if std::mem::take(&mut busy) {
                    return !queue.is_closed();
                }
                let body = (follower.progress)(commit.max(after));
                follower.send(&mut queue, prost::Message::encode_to_vec(&body).into())
            }
        });
        (pushes, Some(subscriber), None)
    }

    /// The notice of the change at `index` for this watch (its bytes made once for every
    /// watch of its kind), or `None` when the change does not concern it.
    fn notice(&self, index: u64, change: &Change, replay: bool) -> Option<Bytes> {
        let make = || {
            let mut notice = self.notice.lock().unwrap_or_else(|e| e.into_inner());
            <State as Part<M>>::change(change)
                .and_then(|change| (*notice)(index, change))
                .map(|body| Bytes::from(prost::Message::encode_to_vec(&body)))
        };
        // Replayed notices in a cache of their own (the bulk thread's), live ones in the
        // core's.
        match self.kind {
            Some(kind) if replay => self.watchers.replayed(self.pushed, kind, index, make),
            Some(kind) => self.watchers.shared(self.pushed, kind, index, make),
            None => make(),
        }
    }

    /// Queues a notice; false once the watcher is gone or dropped.
    fn send(&self, queue: &mut Queue, body: Bytes) -> bool {
        let frame = Frame {
            cmd: self.pushed,
            seq: 0,
            flags: FLAG_ONEWAY,
            body,
        };
        queue.push(frame, self.what) == Pushed::Queued
    }

    /// The watch's frames from log index `from` on, once a long replay is sent: subscribed
    /// again through `core`, with what the history holds from `from` replayed first.
    /// Nothing when this beacon no longer serves (the stream ends: its client goes to the
    /// leader) or the history no longer holds `from` (it ends as fallen behind: its client
    /// resumes, is refused `COMPACTED` with the oldest index kept, and lists again).
    fn subscribe_again(self, core: Arc<dyn Core>, from: u64) -> BoxFuture<'static, Option<Pushes>> {
        Box::pin(async move {
            let follower = self.clone();
            let subscribed = core
                .subscribe(from, move |_, _, since, replay| match since {
                    StartPoint::Replay { .. } => {
                        let (pushes, subscriber, next) = follower.tail(from - 1, replay);
                        (Some((pushes, next)), subscriber)
                    }
                    StartPoint::Now | StartPoint::Compacted { .. } => (None, None),
                })
                .await;
            match subscribed {
                Ok(Some((mut pushes, next))) => {
                    if let Some(next) = next {
                        pushes.then(self.subscribe_again(core, next));
                    }
                    Some(pushes)
                }
                Ok(None) => {
                    self.behind.store(true, Ordering::Relaxed);
                    None
                }
                Err(e) => {
                    tracing::debug!(
                        from,
                        "a watch after its replay is not subscribed again: {}",
                        e.msg
                    );
                    None
                }
            }
        })
    }
}

/// Pages made by a function: the next page, or `None` after the last.
struct PagesFn<F>(F);

impl<F: FnMut() -> Option<Bytes> + Send> Pages for PagesFn<F> {
    fn next_page(&mut self) -> Option<Bytes> {
        (self.0)()
    }
}

/// What a watch's `start` gives: its first answer, what turns each later change into a
/// notice, and the rest of its listing when the first answer holds only a page of it.
pub(crate) struct Listed<A, F> {
    pub(crate) answer: A,
    pub(crate) notice: F,
    pub(crate) rest: Option<Box<dyn Pages>>,
}

impl<A, F> Listed<A, F> {
    /// A first answer that holds the whole listing.
    pub(crate) fn whole(answer: A, notice: F) -> Listed<A, F> {
        Listed {
            answer,
            notice,
            rest: None,
        }
    }
}

/// The kind of a watch whose notices depend on `filter` alone (the node types, the
/// prefixes followed): watches of one kind share their notices' bytes.
pub(crate) fn kind_of(filter: &impl std::hash::Hash) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(filter)
}

/// The refusal of a resume from before the oldest change kept.
fn compacted(asked: u64, oldest: u64) -> Reject {
    Reject::new(
        ErrorCode::Compacted,
        format!(
            "log index {asked} is compacted: the oldest index a watch can resume from is {oldest} (key `watch.history`); list again and watch from there"
        ),
    )
}
