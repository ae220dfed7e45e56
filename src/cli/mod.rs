//! What nebcli's commands share: the session with a beacon, failures and their exit codes,
//! usage errors, argument parsing, tables and JSON. Each machine keeps its own commands in
//! its folder (`machines/<name>/cli`) as a [`Commands`] set; nebcli lists the sets, one line
//! each, and this module's [`beacon`] set (`show beacon`) is the core's.

pub mod beacon;
pub mod follow;
pub mod member;
pub mod table;

use std::fmt;

use crate::net::{Client, ClientError, Cluster, ConnectOptions};

/// A set of nebcli commands: parsed from a line of words, run against a session.
pub trait Commands: Sized {
    /// `(syntax, what it shows or does)` per command, for `help`.
    const HELP: &'static [(&'static str, &'static str)];
    /// The `show` subjects this set owns, for the message that lists them all.
    const SUBJECTS: &'static [&'static str];
    /// The command in `words`, if this set owns it (keywords are case-insensitive;
    /// `head` holds the first two words lowercased). `None` if not this set's.
    fn parse(head: &[&str], words: &[&str]) -> Option<Result<Self, UsageError>>;
    /// Runs the command; returns what to print.
    fn run(&self, session: &mut Session) -> impl Future<Output = Result<String, Failure>>;

    /// `line` parsed as nebcli's shell parses it, for a set's tests (it must be one of the
    /// set's commands).
    #[cfg(test)]
    fn parse_line(line: &str) -> Result<Self, UsageError> {
        parse_line(line)
    }
}

/// Exit status of a command whose output pipe closed (128 + SIGPIPE), as a shell reports
/// `etcdctl ... | head`.
pub const CLOSED_PIPE: i32 = 141;

/// Writes `text` to standard output now (flushed, for lines that follow a stream). When the
/// reader has gone (`nebcli -w json show nodes | head`), the command ends quietly with
/// [`CLOSED_PIPE`] instead of a panic and a backtrace; any other write error is said once.
pub fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("nebcli: cannot write the output: {e}");
            std::process::exit(1);
        }
        std::process::exit(CLOSED_PIPE);
    }
}

/// The first two words of a command line, lowercased: what [`Commands::parse`] matches
/// keywords against.
pub fn head(words: &[&str]) -> Vec<String> {
    words
        .iter()
        .take(2)
        .map(|w| w.to_ascii_lowercase())
        .collect()
}

/// The command of set `C` in `words`, if `C` owns it.
pub fn parse_words<C: Commands>(words: &[&str]) -> Option<Result<C, UsageError>> {
    let lower = head(words);
    let head: Vec<&str> = lower.iter().map(String::as_str).collect();
    C::parse(&head, words)
}

/// `line`, split at spaces, as command set `C` parses it (for tests: it must be `C`'s).
#[cfg(test)]
pub(crate) fn parse_line<C: Commands>(line: &str) -> Result<C, UsageError> {
    let words: Vec<&str> = line.split_whitespace().collect();
    parse_words::<C>(&words).expect("a line of this command set")
}

/// A line nebcli could not make sense of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; type `help` for the list of commands", self.0)
    }
}

impl std::error::Error for UsageError {}

pub fn usage(msg: impl Into<String>) -> UsageError {
    UsageError(msg.into())
}

/// What a command failure means for the exit code.
#[derive(Debug)]
pub enum Failure {
    Usage(UsageError),
    Beacon(ClientError),
    /// The command ran but its result is a failure (a benchmark found duplicates).
    Check(String),
    /// The command ran and printed `out`, and what it found is a failure (`endpoint health`
    /// of a cluster that cannot write): `out` goes to stdout, `why` to stderr, exit 1.
    Found {
        out: String,
        why: String,
    },
    /// The command waited for something that had not happened when its time ran out
    /// (`task submit --wait` of a task still running): `out` to stdout, `why` to stderr,
    /// exit 3, so a script can tell "not yet" from "failed".
    Unfinished {
        out: String,
        why: String,
    },
    /// A command nebcli ran for the user (`lock NAME -- CMD`) exited with this status:
    /// nebcli exits with it too, saying nothing more.
    Exit(u8),
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        Failure::Beacon(e)
    }
}

impl Failure {
    /// The message and the exit code: 2 for a command line not understood, 3 for a wait
    /// that ran out, 1 otherwise.
    pub fn report(&self) -> (String, u8) {
        match self {
            Failure::Usage(e) => (e.to_string(), 2),
            Failure::Beacon(e) => (e.to_string(), 1),
            Failure::Check(e) => (e.clone(), 1),
            Failure::Found { why, .. } => (why.clone(), 1),
            Failure::Unfinished { why, .. } => (why.clone(), 3),
            Failure::Exit(code) => (String::new(), *code),
        }
    }

    /// What the command printed before it failed, if anything.
    pub fn output(&self) -> Option<&str> {
        match self {
            Failure::Found { out, .. } | Failure::Unfinished { out, .. } => Some(out),
            _ => None,
        }
    }
}

/// Resolves when the process is asked to stop: SIGINT (Ctrl-C) or SIGTERM (how systemd,
/// Docker and `kill` stop a process). Commands that hold something on the cluster (a worker,
/// a kept registration, a lock) select on it to give it back before they exit; with no
/// handler, SIGTERM would end the process at once and leave its registration to its lease.
///
/// Both handlers are installed when this is called, not when the future is first polled: a
/// command that prints before it first waits (a watch whose first events are already
/// buffered) is never ended by a signal that comes right after its first lines. Call it
/// before starting what it guards; it needs the tokio runtime.
pub fn stop_signal() -> std::pin::Pin<Box<dyn std::future::Future<Output = &'static str> + Send>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            return Box::pin(async move {
                tokio::select! {
                    _ = int.recv() => "SIGINT",
                    _ = term.recv() => "SIGTERM",
                }
            });
        }
    }
    Box::pin(async {
        let _ = tokio::signal::ctrl_c().await;
        "SIGINT"
    })
}

/// One nebcli session: the options and a connection opened on first use.
pub struct Session {
    /// The beacon connected to (or to try first).
    pub server: String,
    /// Every beacon given (`-s a,b,c`), tried in turn.
    pub servers: Vec<String>,
    pub opts: ConnectOptions,
    pub json: bool,
    pub client: Option<Client>,
}

impl Session {
    /// A session with the beacons `servers` (at least one).
    pub fn new(servers: Vec<String>, opts: ConnectOptions, json: bool) -> Session {
        Session {
            server: servers.first().cloned().unwrap_or_default(),
            servers,
            opts,
            json,
            client: None,
        }
    }

    /// The connection, opened to the first of the beacons given that answers: the next is
    /// dialled while the one before is slow to answer, so a hung beacon first in `-s` costs
    /// a command a tenth of a second, not the handshake limit. Each attempt may take the
    /// command's whole time: the stagger leaves a hung beacon behind, so a short limit
    /// would only fail the one beacon there is on a loaded host that answers in 100 ms
    /// rather than 50.
    pub async fn client(&mut self) -> Result<&mut Client, ClientError> {
        if self.client.is_none() {
            let limit = self.opts.timeout.max(self.opts.handshake_timeout);
            let dialled = crate::net::first_to_answer(&self.servers, &self.opts, limit)
                .await
                .map_err(|failed| failed.error)?;
            self.server = self.servers[dialled.index].clone();
            self.client = Some(dialled.client);
        }
        Ok(self.client.as_mut().expect("just connected"))
    }

    /// Runs `f` on the connection; a failed connection is dropped so the next command
    /// reconnects.
    pub async fn with_client<T>(
        &mut self,
        f: impl AsyncFnOnce(&mut Client) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        let result = f(self.client().await?).await;
        if result.is_err() {
            self.client = None;
        }
        result
    }

    /// The cluster's leader, reached through the beacons given; for writes. A call looks
    /// for a leader for as long as `--timeout-ms` allows, no longer.
    pub fn cluster(&self) -> Cluster {
        Cluster::new(self.servers.clone(), self.opts.clone(), self.opts.timeout)
    }

    /// Asks a beacon with `ask` and prints its answer, as [`Session::print`] does.
    pub async fn show<T: serde::Serialize>(
        &mut self,
        ask: impl AsyncFnOnce(&mut Client) -> Result<T, ClientError>,
        table: impl FnOnce(&T) -> String,
    ) -> Result<String, ClientError> {
        let reply = self.with_client(ask).await?;
        Ok(self.print(&reply, table))
    }

    /// `value` as JSON with `--json`, else as `table` renders it.
    pub fn print<T: serde::Serialize>(
        &self,
        value: &T,
        table: impl FnOnce(&T) -> String,
    ) -> String {
        if self.json { json(value) } else { table(value) }
    }
}

/// `value` as pretty JSON, with a trailing newline.
pub fn json<T: serde::Serialize>(value: &T) -> String {
    let mut text = serde_json::to_string_pretty(value).expect("replies serialise");
    text.push('\n');
    text
}

/// No arguments after `cmd`.
pub fn none(cmd: &str, args: &[&str]) -> Result<(), UsageError> {
    match args {
        [] => Ok(()),
        _ => Err(usage(format!(
            "`{cmd}` takes no arguments (got `{}`)",
            args.join(" ")
        ))),
    }
}

/// At most one optional argument after `cmd`.
pub fn optional(cmd: &str, args: &[&str]) -> Result<Option<String>, UsageError> {
    match args {
        [] => Ok(None),
        [one] => Ok(Some((*one).to_owned())),
        _ => Err(usage(format!(
            "`{cmd}` takes at most one argument (got `{}`)",
            args.join(" ")
        ))),
    }
}

/// A page a list command asks the beacon for: `--limit N` entries from `--from NAME` on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Page {
    /// 0: every entry.
    pub limit: u32,
    pub from: String,
}

/// A list command's words: `[ARG] [--limit N] [--from NAME]` (`takes_arg`: whether it has
/// the optional argument).
pub fn list_args(
    cmd: &str,
    args: &[&str],
    takes_arg: bool,
) -> Result<(Option<String>, Page), UsageError> {
    let (mut arg, mut rest) = (None, args);
    if takes_arg
        && let [first, more @ ..] = args
        && !first.starts_with("--")
    {
        arg = Some((*first).to_owned());
        rest = more;
    }
    let mut page = Page::default();
    let mut limited = false;
    for (flag, value) in flags(cmd, rest)? {
        match flag.as_str() {
            "limit" => {
                page.limit = number(cmd, "limit", value)?;
                limited = true;
            }
            "from" => page.from = value.to_owned(),
            other => {
                return Err(usage(format!(
                    "`{cmd}`: unknown flag --{other} (it takes --limit N and --from NAME)"
                )));
            }
        }
    }
    if limited && page.limit == 0 {
        return Err(usage(format!(
            "`{cmd}`: --limit must be at least 1 (leave it out for every entry)"
        )));
    }
    Ok((arg, page))
}

/// The line under a table that is one page of a longer list ("" when it is the whole list).
pub fn page_note(shown: usize, total: u64, next: &str) -> String {
    if next.is_empty() && shown as u64 == total {
        return String::new();
    }
    let mut line = format!("{shown} of {total} shown");
    if !next.is_empty() {
        line.push_str(&format!(" · next page: --from {next}"));
    }
    line + "\n"
}

/// `--flag value` pairs (flag names lowercased).
pub fn flags<'a>(cmd: &str, args: &[&'a str]) -> Result<Vec<(String, &'a str)>, UsageError> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let Some(name) = flag.strip_prefix("--") else {
            return Err(usage(format!("`{cmd}`: expected a --flag, got `{flag}`")));
        };
        let value = it
            .next()
            .ok_or_else(|| usage(format!("`{cmd}`: --{name} needs a value")))?;
        out.push((name.to_ascii_lowercase(), *value));
    }
    Ok(out)
}

/// The number given to `--flag`.
pub fn number<T: std::str::FromStr>(cmd: &str, flag: &str, value: &str) -> Result<T, UsageError> {
    value
        .parse()
        .map_err(|_| usage(format!("`{cmd}`: --{flag} `{value}` is not a number")))
}
