//! `nebcli`: the beacon admin shell.
//!
//! `nebcli -s 127.0.0.1:16000 show beacon` runs one command and exits; with no command it
//! opens the interactive `nebcli)` prompt (history, `help`, `quit`/`exit`).
//!
//! Exit codes: 0 success, 1 the beacon could not be reached or refused the request, 2 the
//! command line was not understood.

mod certs;
mod commands;
mod snapshot;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use beacon::cli::{Failure, Session, emit};
use beacon::client::ConnectOptions;
use clap::{CommandFactory, FromArgMatches, Parser};
use commands::Command;
use rustyline::error::ReadlineError;

#[derive(Debug, Parser)]
#[command(name = "nebcli", version, about = "Admin shell for beacon clusters")]
struct Args {
    /// Beacons to talk to, comma-separated, tried in turn (host:port).
    #[arg(
        short = 's',
        long = "server",
        value_name = "HOST:PORT,...",
        value_delimiter = ',',
        env = "BEACON_ENDPOINTS",
        default_value = "127.0.0.1:16000"
    )]
    servers: Vec<String>,
    /// Print results as JSON instead of tables (the same as `-w json`).
    #[arg(long)]
    json: bool,
    /// Output format.
    #[arg(short = 'w', long = "write-out", value_name = "FORMAT", value_parser = ["table", "json"])]
    write_out: Option<String>,
    /// Insist that the beacon serves this cluster.
    #[arg(long, value_name = "NAME")]
    cluster: Option<String>,
    /// Time allowed for connecting and for each command, writes included (finding a leader
    /// through an election too).
    #[arg(
        long,
        value_name = "MS",
        env = "BEACON_TIMEOUT_MS",
        default_value_t = 5000
    )]
    timeout_ms: u64,
    /// Reads: `l` (linearizable, the default: every write acknowledged before is seen, or
    /// the read fails) or `s` (serializable: the asked beacon's replica as it is, at once).
    #[arg(
        long,
        value_name = "l|s",
        env = "BEACON_CONSISTENCY",
        default_value = "l",
        value_parser = ["l", "s", "linearizable", "serializable"]
    )]
    consistency: String,
    /// Connect over TLS, verifying the beacon's certificate against this CA (PEM).
    #[arg(long, value_name = "FILE")]
    cacert: Option<PathBuf>,
    /// Client certificate (PEM) to present over TLS; with --key.
    #[arg(long, value_name = "FILE", requires = "key")]
    cert: Option<PathBuf>,
    /// The key of --cert (PEM).
    #[arg(long, value_name = "FILE", requires = "cert")]
    key: Option<PathBuf>,
    /// Token for a beacon that requires authentication (better: the BEACON_TOKEN
    /// environment variable, which other users cannot see in the process list).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "BEACON_TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
    /// Largest frame sent or taken, in bytes: the beacons' `max_frame_bytes` when it was
    /// raised (a larger request is refused here at once, saying so).
    #[arg(
        long,
        value_name = "BYTES",
        env = "BEACON_MAX_FRAME_BYTES",
        default_value_t = beacon::wire::frame::DEFAULT_MAX_FRAME
    )]
    max_frame_bytes: usize,
    /// The command, e.g. `show beacon`; none opens the interactive prompt.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<String>,
}

const AFTER_HELP: &str = "`nebcli COMMAND --help` explains one command. Without a command, the \
interactive `nebcli)` prompt (tab completes commands). Options may come before or after the \
command. Environment: BEACON_ENDPOINTS (as -s), BEACON_TIMEOUT_MS, BEACON_CONSISTENCY, BEACON_TOKEN, \
BEACON_MAX_FRAME_BYTES.";

/// Global options that take a value, and those that do not: nebcli's wherever they are
/// written (no command has an option of the same name, so `--timeout-ms` after `task submit
/// --wait` bounds the wait; a task's own limit is `--attempt-timeout-ms`).
pub(crate) const GLOBAL_WITH_VALUE: &[&str] = &[
    "-s",
    "--server",
    "-w",
    "--write-out",
    "--cluster",
    "--timeout-ms",
    "--consistency",
    "--cacert",
    "--cert",
    "--key",
    "--token",
    "--max-frame-bytes",
];
pub(crate) const GLOBAL_FLAGS: &[&str] = &["--json"];

/// Moves the global options written after the command in front of it, so that `nebcli
/// show beacon --json -s A` means what `nebcli --json -s A show beacon` does.
fn hoist_globals(argv: Vec<String>) -> Vec<String> {
    let mut front = vec![argv[0].clone()];
    let mut command: Vec<String> = Vec::new();
    let mut it = argv.into_iter().skip(1).peekable();
    while let Some(arg) = it.next() {
        // After `--` everything is the command's (`lock NAME -- curl -s ...`).
        if arg == "--" && !command.is_empty() {
            command.push(arg);
            command.extend(it.by_ref());
            break;
        }
        let name = arg
            .split_once('=')
            .map_or(arg.as_str(), |(n, _)| n)
            .to_owned();
        if GLOBAL_WITH_VALUE.contains(&name.as_str()) {
            front.push(arg.clone());
            if !arg.contains('=')
                && let Some(value) = it.next()
            {
                front.push(value);
            }
        } else if GLOBAL_FLAGS.contains(&name.as_str()) {
            front.push(arg);
        } else if command.is_empty() && arg.starts_with('-') {
            // An option before the command (`--help`, `--version`, a wrong one): clap says.
            front.push(arg);
        } else {
            command.push(arg);
        }
    }
    front.extend(command);
    front
}

/// Checks that each of `servers` is a host:port: a usage error, not a network one.
fn check_servers(servers: &[String]) -> Result<(), String> {
    for s in servers {
        let ok = s.rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
        });
        if !ok {
            return Err(format!(
                "-s `{s}` is not host:port (for example 127.0.0.1:16000)"
            ));
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    // `nebcli --help` lists the commands after the options.
    let after = format!("{}\n\n{AFTER_HELP}", commands::help_text().trim_end());
    let matches = Args::command()
        .after_help(after)
        .get_matches_from(hoist_globals(std::env::args().collect()));
    let args = match Args::from_arg_matches(&matches) {
        Ok(args) => args,
        Err(e) => e.exit(),
    };
    if let Err(e) = check_servers(&args.servers) {
        eprintln!("nebcli: {e}");
        return ExitCode::from(2);
    }
    let json = args.json || args.write_out.as_deref() == Some("json");
    // Local: needs no beacon.
    if args.command.first().is_some_and(|c| c == "certs") {
        return match certs::run(&args.command[1..]) {
            Ok(out) => {
                emit(&format!("{out}\n"));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("nebcli: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nebcli: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    // A beacon that stops answering during a command (a stopped process) is probed every
    // quarter of the command's time, at most a second, and left when the probe's handshake
    // gets no answer in as long, so that the next beacon of `-s` is tried in time. The first
    // dial needs no such limit: it dials the next beacon after 100 ms anyway.
    let timeout = Duration::from_millis(args.timeout_ms);
    let liveness = (timeout / 4).clamp(
        Duration::from_millis(50),
        beacon::net::DEFAULT_HANDSHAKE_TIMEOUT,
    );
    let mut opts = ConnectOptions {
        cluster: args.cluster,
        timeout,
        handshake_timeout: liveness,
        ping_interval: liveness,
        consistency: beacon::wire::Consistency::named(&args.consistency).unwrap_or_default(),
        max_frame_bytes: args.max_frame_bytes,
        ..ConnectOptions::default()
    };
    if let Some(token) = args.token.filter(|t| !t.is_empty()) {
        opts = opts.with_token(token);
    }
    match (&args.cacert, &args.cert) {
        (None, None) => {}
        (None, Some(_)) => {
            eprintln!(
                "nebcli: --cert needs --cacert (the CA that signed the beacons' certificates)"
            );
            return ExitCode::from(2);
        }
        (Some(ca), _) => {
            let identity = args.cert.as_deref().zip(args.key.as_deref());
            opts = match opts.with_tls(ca, identity) {
                Ok(opts) => opts,
                Err(e) => {
                    eprintln!("nebcli: {e}");
                    return ExitCode::from(2);
                }
            };
        }
    }
    let mut session = Session::new(args.servers, opts, json);
    if args.command.is_empty() {
        interactive(&runtime, &mut session)
    } else {
        let words: Vec<&str> = args.command.iter().map(String::as_str).collect();
        one_shot(&runtime, &mut session, &words)
    }
}

fn one_shot(runtime: &tokio::runtime::Runtime, session: &mut Session, words: &[&str]) -> ExitCode {
    let result = match commands::parse(words) {
        Ok(Some(cmd)) => runtime.block_on(cmd.run(session)),
        Ok(None) => Ok(String::new()),
        Err(e) => Err(Failure::Usage(e)),
    };
    match result {
        Ok(out) => {
            emit(&out);
            ExitCode::SUCCESS
        }
        Err(f) => {
            emit(f.output().unwrap_or_default());
            let (msg, code) = f.report();
            if !msg.is_empty() {
                eprintln!("nebcli: {msg}");
            }
            ExitCode::from(code)
        }
    }
}

fn history_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".nebcli_history"))
}

/// Lines of output a person at the prompt gets without a pager.
const PAGE_LINES: usize = 40;

/// Prints `out`, through `$PAGER` (default `less -FRX`, which quits when it fits the screen)
/// when it is longer than [`PAGE_LINES`] (23,026 rows of `show nodes` scroll off otherwise).
fn page(out: &str) {
    use std::io::Write;
    if out.lines().count() <= PAGE_LINES {
        emit(out);
        return;
    }
    let pager = std::env::var("PAGER").unwrap_or_else(|_| "less -FRX".into());
    let mut words = pager.split_whitespace();
    let Some(program) = words.next() else {
        emit(out);
        return;
    };
    let spawned = std::process::Command::new(program)
        .args(words)
        .stdin(std::process::Stdio::piped())
        .spawn();
    match spawned {
        Ok(mut child) => {
            if let Some(mut stdin) = child.stdin.take() {
                // A pager quit early closes its input: nothing to report.
                let _ = stdin.write_all(out.as_bytes());
            }
            let _ = child.wait();
        }
        Err(_) => emit(out),
    }
}

/// Takes `--json` and `-w json|table` out of a prompt line: `Some(true)` for JSON,
/// `Some(false)` for a table, `None` when the line does not say.
fn output_option(words: &[String]) -> (Vec<String>, Option<bool>) {
    let mut rest = Vec::new();
    let mut json = None;
    let mut it = words.iter();
    while let Some(w) = it.next() {
        match w.as_str() {
            "--json" => json = Some(true),
            "-w" | "--write-out" => match it.next().map(String::as_str) {
                Some("json") => json = Some(true),
                Some("table") => json = Some(false),
                other => {
                    // Left for the command's parser to refuse.
                    rest.push(w.clone());
                    rest.extend(other.map(str::to_owned));
                }
            },
            _ => rest.push(w.clone()),
        }
    }
    (rest, json)
}

/// Tab completion in the prompt: the first word from the commands, the second from what
/// follows it.
struct Completion;

impl rustyline::completion::Completer for Completion {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let before = &line[..pos];
        let start = before.rfind(' ').map_or(0, |i| i + 1);
        let done: Vec<&str> = before[..start].split_whitespace().collect();
        let word = &before[start..];
        let options = match done.as_slice() {
            [] => commands::command_words(),
            [first] => commands::second_words(&first.to_ascii_lowercase()),
            _ => Vec::new(),
        };
        let found = options
            .into_iter()
            .filter(|o| o.starts_with(&word.to_ascii_lowercase()))
            .collect();
        Ok((start, found))
    }
}

impl rustyline::hint::Hinter for Completion {
    type Hint = String;
}
impl rustyline::highlight::Highlighter for Completion {}
impl rustyline::validate::Validator for Completion {}
impl rustyline::Helper for Completion {}

fn interactive(runtime: &tokio::runtime::Runtime, session: &mut Session) -> ExitCode {
    // Connect first, so an unreachable beacon is one clear line rather than a prompt that
    // fails on every command.
    if let Err(e) = runtime.block_on(session.client()) {
        eprintln!("nebcli: {e}");
        return ExitCode::from(1);
    }
    let mut editor =
        match rustyline::Editor::<Completion, rustyline::history::DefaultHistory>::new() {
            Ok(editor) => editor,
            Err(e) => {
                eprintln!("nebcli: cannot open the terminal: {e}");
                return ExitCode::from(1);
            }
        };
    editor.set_helper(Some(Completion));
    // History is a person's: lines piped in are neither read from it nor added to it.
    let tty = std::io::stdin().is_terminal();
    let history = history_path().filter(|_| tty);
    if let Some(path) = &history {
        let _ = editor.load_history(path);
    }
    if tty {
        let client = session.client.as_ref().expect("connected above");
        println!(
            "connected to beacon {} (cluster {}); type `help` for commands, `quit` to leave",
            client.node(),
            client.cluster()
        );
    }
    // Piped input that had a failing command exits 1, as a shell script with `set -e` would.
    let mut failed = false;
    let mut code = None;
    loop {
        let line = match editor.readline("nebcli) ") {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                eprintln!("nebcli: cannot read input: {e}");
                failed = true;
                break;
            }
        };
        // Quotes and escapes as a shell has them: --metadata '{"zone": "b"}' is one word.
        let words = match shell_words::split(&line) {
            Ok(words) => words,
            Err(e) => {
                eprintln!("error: {e}: close the quote");
                failed = true;
                continue;
            }
        };
        if words.is_empty() {
            continue;
        }
        if tty {
            let _ = editor.add_history_entry(line.trim());
        }
        // `--json` / `-w json|table` on one line is for that command alone.
        let (words, json) = output_option(&words);
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let json_before = session.json;
        session.json = json.unwrap_or(json_before);
        let result = commands::parse(&words);
        let result = match result {
            Ok(Some(Command::Quit(exit))) => Err(exit),
            Ok(Some(cmd)) => {
                match runtime.block_on(cmd.run(session)) {
                    Ok(out) if tty => page(&out),
                    Ok(out) => emit(&out),
                    Err(f) => {
                        emit(f.output().unwrap_or_default());
                        let (msg, code) = f.report();
                        if msg.is_empty() {
                            eprintln!("error: exit status {code}");
                        } else {
                            eprintln!("error: {msg}");
                        }
                        failed = true;
                    }
                }
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => {
                eprintln!("error: {e}");
                failed = true;
                Ok(())
            }
        };
        session.json = json_before;
        if let Err(exit) = result {
            code = exit;
            break;
        }
    }
    if let Some(path) = &history {
        let _ = editor.save_history(path);
    }
    match code {
        Some(code) => ExitCode::from(code),
        None if failed && !tty => ExitCode::from(1),
        None => ExitCode::SUCCESS,
    }
}
