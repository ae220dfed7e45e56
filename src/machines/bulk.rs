//! The bulk pool: work that may wait, on a thread of its own at a lower priority.
//!
//! Listing pages and the history a resumed watch is owed are bulk: a herd of watchers
//! coming back at once asks for megabytes of encoding each. Made on the connections' own
//! tasks, that encoding took the edges' threads from every other request (the writes' p99
//! during a herd of listings was four times its idle value), and on two cores from the core
//! too. Made here, on one thread whose priority is lowered (nice 5: about a quarter of a
//! core while anything else wants it, all of an idle one), it takes what the rest leaves:
//! renewals, writes and reads go first, bulk after, with a bounded share. A connection
//! takes the pages from a channel of two and writes them out as before. A snapshot encoded
//! for a follower runs on a thread of its own at the same priority.

use std::future::Future;
use std::sync::OnceLock;

/// The nice value of the bulk thread: below every other thread of the process.
const BULK_NICE: i32 = 5;

static BULK: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();

/// Lowers the calling thread's priority to [`BULK_NICE`] (a thread may always lower its own):
/// for bulk work on a thread of its own, such as a snapshot encoded for a follower.
pub fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority on the calling thread's own ID, with no pointer passed.
    unsafe {
        let tid = libc::gettid();
        if libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, BULK_NICE) != 0 {
            tracing::debug!(
                "the bulk thread keeps its priority: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

fn pool() -> Option<&'static tokio::runtime::Runtime> {
    BULK.get_or_init(|| {
        match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("beacon-bulk")
            .on_thread_start(lower_priority)
            .enable_all()
            .build()
        {
            Ok(runtime) => Some(runtime),
            Err(e) => {
                tracing::warn!("no bulk thread ({e}): bulk work runs with everything else");
                None
            }
        }
    })
    .as_ref()
}

/// Runs `work` on the bulk thread (or, where it could not be made, on the caller's runtime).
pub fn spawn<F>(work: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    match pool() {
        Some(runtime) => {
            runtime.spawn(work);
        }
        None => {
            tokio::spawn(work);
        }
    }
}
