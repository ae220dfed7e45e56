//! Tokens and certificate roles reloaded without a restart, as TLS certificates are: on
//! SIGHUP, or when the configuration file or a token file changes (looked at every
//! [`POLL`]). Only key `auth` is taken from the file read again (its tokens and `certs`);
//! everything else needs a restart and is left as it is. A file that does not load is
//! reported and the tokens in use stay, so a bad edit never locks everyone out.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::shared::Shared;
use crate::config::Config;

/// How often the files are looked at.
const POLL: Duration = Duration::from_secs(2);

/// The files whose change reloads the tokens, with their modification times.
fn fingerprint(shared: &Shared) -> Vec<(PathBuf, Option<SystemTime>)> {
    let mut files: Vec<PathBuf> = shared
        .config
        .source
        .iter()
        .map(|(p, _)| p.clone())
        .collect();
    files.extend(
        shared
            .auth
            .load()
            .tokens
            .iter()
            .filter_map(|t| t.file.clone()),
    );
    files
        .into_iter()
        .map(|f| {
            let modified = std::fs::metadata(&f).and_then(|m| m.modified()).ok();
            (f, modified)
        })
        .collect()
}

/// Reads the configuration again and takes its `auth` (but the peer token, which the other
/// beacons hold too). Returns what changed, in words, or why nothing did.
pub(crate) fn reload_auth(shared: &Shared) -> Result<Option<String>, String> {
    let Some((path, overrides)) = &shared.config.source else {
        return Err("this beacon runs on the embedded default: no file to read again".into());
    };
    let fresh = Config::load(Some(path), overrides).map_err(|e| e.to_string())?;
    let mut auth = fresh.auth;
    auth.peer_token = shared.config.auth.peer_token.clone();
    let old = shared.auth.load();
    if **old == auth {
        return Ok(None);
    }
    let said = format!(
        "{} tokens and {} certificate names (were {} and {})",
        auth.tokens.len(),
        auth.certs.len(),
        old.tokens.len(),
        old.certs.len()
    );
    shared.auth.store(Arc::new(auth));
    Ok(Some(said))
}

/// Runs until `stop`: reloads on SIGHUP and when a file changes.
pub(crate) async fn run(shared: Arc<Shared>, stop: CancellationToken) {
    #[cfg(unix)]
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let mut seen = fingerprint(&shared);
    let mut poll = tokio::time::interval(POLL);
    loop {
        #[cfg(unix)]
        let hangup = async {
            match hup.as_mut() {
                Some(h) => h.recv().await,
                None => std::future::pending().await,
            }
        };
        #[cfg(not(unix))]
        let hangup = std::future::pending::<Option<()>>();
        let why = tokio::select! {
            _ = stop.cancelled() => return,
            _ = hangup => "SIGHUP",
            _ = poll.tick() => {
                let now = fingerprint(&shared);
                if now == seen {
                    continue;
                }
                "a changed file"
            }
        };
        match reload_auth(&shared) {
            Ok(Some(what)) => info!("tokens reloaded on {why}: {what}"),
            Ok(None) => info!("tokens read again on {why}: unchanged"),
            Err(e) => warn!("tokens not reloaded on {why}, the previous ones stay in use: {e}"),
        }
        seen = fingerprint(&shared);
    }
}
