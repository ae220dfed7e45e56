//! `lock NAME [-- CMD ...]` and `elect NAME`: a named lock or leadership held from the shell
//! (etcdctl's `lock` and `elect`), over [`crate::client::Lock`].

use std::net::SocketAddr;
use std::time::Duration;

use super::super::client::{Lock, LockOptions};
use crate::cli::{self, Failure, Session, UsageError, usage};

/// One parsed lock or election command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `lock NAME [--addr A] [-- CMD [ARG...]]`
    Lock {
        name: String,
        addr: Option<SocketAddr>,
        exec: Vec<String>,
    },
    /// `elect NAME [--addr A] [--proposal TEXT]`, or `elect NAME --observe`.
    Elect {
        name: String,
        addr: Option<SocketAddr>,
        proposal: String,
        observe: bool,
    },
}

const HELP: &[(&str, &str)] = &[
    (
        "lock NAME [--addr IP:PORT] [-- CMD [ARG...]]",
        "wait for lock NAME, then run CMD holding it (BEACON_LOCK_TOKEN=term.index in its environment; the lock goes when CMD ends, and CMD is stopped if the lock is lost) and exit with its status; without CMD, hold it until Ctrl-C or SIGTERM",
    ),
    (
        "elect NAME [--addr IP:PORT] [--proposal TEXT] | elect NAME --observe",
        "campaign for leadership NAME and hold it until Ctrl-C or SIGTERM (exit 1 if lost); --observe prints each leader as it changes",
    ),
];

impl cli::Commands for Command {
    const HELP: &'static [(&'static str, &'static str)] = HELP;
    const SUBJECTS: &'static [&'static str] = &[];

    fn parse(head: &[&str], words: &[&str]) -> Option<Result<Self, UsageError>> {
        match head.first() {
            Some(&"lock") => Some(parse_args(false, &words[1..])),
            Some(&"elect") => Some(parse_args(true, &words[1..])),
            _ => None,
        }
    }

    async fn run(&self, session: &mut Session) -> Result<String, Failure> {
        self.run_it(session).await
    }
}

/// Parses the words after `lock` or `elect`.
fn parse_args(elect: bool, args: &[&str]) -> Result<Command, UsageError> {
    let cmd = if elect { "elect" } else { "lock" };
    let (own, exec) = match args.iter().position(|a| *a == "--") {
        Some(at) => (
            &args[..at],
            args[at + 1..].iter().map(|w| (*w).to_owned()).collect(),
        ),
        None => (args, Vec::new()),
    };
    let Some((name, mut rest)) = own.split_first().filter(|(n, _)| !n.starts_with("--")) else {
        return Err(usage(format!("`{cmd}` needs a name")));
    };
    let (mut addr, mut proposal, mut observe) = (None, String::new(), false);
    while let Some((flag, more)) = rest.split_first() {
        rest = more;
        let mut value = || {
            let (v, more) = rest
                .split_first()
                .ok_or_else(|| usage(format!("`{cmd}`: {flag} needs a value")))?;
            rest = more;
            Ok::<_, UsageError>(*v)
        };
        match flag.to_ascii_lowercase().as_str() {
            "--addr" => {
                let v = value()?;
                addr = Some(
                    v.parse()
                        .map_err(|_| usage(format!("`{cmd}`: --addr `{v}` is not IP:PORT")))?,
                );
            }
            "--proposal" if elect => proposal = value()?.to_owned(),
            "--observe" if elect => observe = true,
            other => return Err(usage(format!("`{cmd}`: unknown flag {other}"))),
        }
    }
    if elect && !exec.is_empty() {
        return Err(usage("`elect` runs no command; `lock NAME -- CMD` does"));
    }
    Ok(if elect {
        Command::Elect {
            name: (*name).to_owned(),
            addr,
            proposal,
            observe,
        }
    } else {
        Command::Lock {
            name: (*name).to_owned(),
            addr,
            exec,
        }
    })
}

/// The contender's address: one of 127.0.0.0/8 named after this process, so two contenders
/// on one machine are two registrations.
fn own_addr() -> SocketAddr {
    let pid = std::process::id();
    SocketAddr::from(([127, (pid >> 16) as u8, (pid >> 8) as u8, pid as u8], 9))
}

fn options(session: &Session, addr: Option<SocketAddr>, metadata: String) -> LockOptions {
    LockOptions {
        metadata,
        connect: session.opts.clone(),
        retry_for: session.opts.timeout.max(Duration::from_secs(10)),
        ..LockOptions::new(addr.unwrap_or_else(own_addr))
    }
}

/// Prints `line`, or with `-w json` the event as a JSON line, at once (the command goes on).
fn say(json: bool, line: &str, event: serde_json::Value) {
    let shown = if json {
        event.to_string()
    } else {
        line.to_owned()
    };
    cli::emit(&(shown + "\n"));
}

/// The last words of a command, as a line or a JSON line.
fn end(json: bool, line: String, event: serde_json::Value) -> String {
    if json { format!("{event}\n") } else { line }
}

impl Command {
    async fn run_it(&self, session: &mut Session) -> Result<String, Failure> {
        match self {
            Command::Lock { name, addr, exec } => lock(session, name, *addr, exec).await,
            Command::Elect {
                name,
                observe: true,
                ..
            } => observe(session, name).await,
            Command::Elect {
                name,
                addr,
                proposal,
                ..
            } => {
                let metadata = if proposal.is_empty() {
                    String::new()
                } else {
                    serde_json::json!({ "proposal": proposal }).to_string()
                };
                let opts = options(session, *addr, metadata);
                // Installed before the first line (see cli::stop_signal).
                let stop = cli::stop_signal();
                let mut lock = Lock::acquire(session.servers.clone(), name, opts).await?;
                let (term, index) = lock.fencing_token();
                let json = session.json;
                say(
                    json,
                    &format!(
                        "elected: {name} (fencing token {term}.{index}); Ctrl-C or SIGTERM to resign"
                    ),
                    serde_json::json!({"event": "elected", "name": name, "token": format!("{term}.{index}")}),
                );
                tokio::select! {
                    signal = stop => {
                        lock.release().await?;
                        Ok(end(
                            json,
                            format!("{signal}: resigned {name}\n"),
                            serde_json::json!({"event": "resigned", "name": name, "signal": signal}),
                        ))
                    }
                    why = lock.lost() => Err(Failure::Check(format!("leadership {name} lost: {why}"))),
                }
            }
        }
    }
}

async fn lock(
    session: &mut Session,
    name: &str,
    addr: Option<SocketAddr>,
    exec: &[String],
) -> Result<String, Failure> {
    // Installed before the first line (see cli::stop_signal).
    let stop = cli::stop_signal();
    let mut lock = Lock::acquire(
        session.servers.clone(),
        name,
        options(session, addr, String::new()),
    )
    .await?;
    let (term, index) = lock.fencing_token();
    let json = session.json;
    let Some((program, args)) = exec.split_first() else {
        say(
            json,
            &format!("locked: {name} (fencing token {term}.{index}); Ctrl-C or SIGTERM to unlock"),
            serde_json::json!({"event": "locked", "name": name, "token": format!("{term}.{index}")}),
        );
        return tokio::select! {
            signal = stop => {
                lock.release().await?;
                Ok(end(
                    json,
                    format!("{signal}: unlocked {name}\n"),
                    serde_json::json!({"event": "unlocked", "name": name, "signal": signal}),
                ))
            }
            why = lock.lost() => Err(Failure::Check(format!("lock {name} lost: {why}"))),
        };
    };
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .env("BEACON_LOCK_NAME", name)
        .env("BEACON_LOCK_TOKEN", format!("{term}.{index}"))
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Failure::Check(format!("cannot run `{program}`: {e}")))?;
    let outcome = tokio::select! {
        status = child.wait() => Ok(status),
        why = lock.lost() => Err(why),
        signal = stop => Err(format!("{signal} received")),
    };
    match outcome {
        Ok(status) => {
            lock.release().await?;
            let status = status.map_err(|e| Failure::Check(format!("`{program}`: {e}")))?;
            match status.code() {
                Some(0) => Ok(String::new()),
                Some(code) => Err(Failure::Exit(code as u8)),
                None => Err(Failure::Check(format!(
                    "`{program}` ended by a signal: {status}"
                ))),
            }
        }
        Err(why) => {
            // The command must not go on without the lock.
            let _ = child.start_kill();
            let _ = child.wait().await;
            let _ = lock.release().await;
            Err(Failure::Check(format!(
                "lock {name}: {why}; `{program}` was stopped"
            )))
        }
    }
}

/// Prints the holder of `name` each time it changes, until Ctrl-C or SIGTERM.
async fn observe(session: &mut Session, name: &str) -> Result<String, Failure> {
    let mut cluster = session.cluster();
    let stop = cli::stop_signal();
    tokio::pin!(stop);
    // What was printed last (`Some(None)`: that nobody leads).
    let mut last: Option<Option<(u32, u64, u64)>> = None;
    loop {
        let now = super::super::client::lock_holder(&mut cluster, name).await?;
        let seen = now.as_ref().map(|h| (h.node_id, h.term, h.index));
        if last != Some(seen) {
            let json = session.json;
            match &now {
                Some(h) => say(
                    json,
                    &format!(
                        "leader of {name}: node {} at {} (fencing token {}.{})",
                        h.node_id, h.addr, h.term, h.index
                    ),
                    serde_json::json!({
                        "event": "leader", "name": name, "node_id": h.node_id,
                        "addr": h.addr, "token": format!("{}.{}", h.term, h.index),
                    }),
                ),
                None => say(
                    json,
                    &format!("leader of {name}: none"),
                    serde_json::json!({"event": "leader", "name": name, "node_id": null}),
                ),
            }
            last = Some(seen);
        }
        tokio::select! {
            signal = &mut stop => return Ok(format!("{signal}: stopped\n")),
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}
