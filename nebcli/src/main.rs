//! `nebcli`: the beacon admin shell.
//!
//! `nebcli -s 127.0.0.1:16000 show beacon` runs one command and exits; with no command it
//! opens the interactive `nebcli)` prompt (history, `help`, `quit`/`exit`).
//!
//! Exit codes: 0 success, 1 the beacon could not be reached or refused the request, 2 the
//! command line was not understood.

mod certs;
mod commands;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use beacon::cli::{Failure, Session};
use beacon::client::ConnectOptions;
use clap::Parser;
use commands::Command;
use rustyline::error::ReadlineError;

#[derive(Debug, Parser)]
#[command(
    name = "nebcli",
    version,
    about = "Admin shell for beacon clusters",
    after_help = "Run without a command for the interactive `nebcli)` prompt; type `help` there."
)]
struct Args {
    /// Beacon to talk to.
    #[arg(
        short = 's',
        long = "server",
        value_name = "IP:PORT",
        default_value = "127.0.0.1:16000"
    )]
    server: String,
    /// Print results as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Insist that the beacon serves this cluster.
    #[arg(long, value_name = "NAME")]
    cluster: Option<String>,
    /// Time allowed for connecting and for each request.
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    timeout_ms: u64,
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
    /// The command, e.g. `show beacon`; none opens the interactive prompt.
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    command: Vec<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    // Local: needs no beacon.
    if args.command.first().is_some_and(|c| c == "certs") {
        return match certs::run(&args.command[1..]) {
            Ok(out) => {
                println!("{out}");
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
    let mut opts = ConnectOptions {
        cluster: args.cluster,
        timeout: Duration::from_millis(args.timeout_ms),
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
    let mut session = Session::new(args.server, opts, args.json);
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
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(f) => {
            print!("{}", f.output().unwrap_or_default());
            let (msg, code) = f.report();
            eprintln!("nebcli: {msg}");
            ExitCode::from(code)
        }
    }
}

fn history_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".nebcli_history"))
}

fn interactive(runtime: &tokio::runtime::Runtime, session: &mut Session) -> ExitCode {
    // Connect first, so an unreachable beacon is one clear line rather than a prompt that
    // fails on every command.
    if let Err(e) = runtime.block_on(session.client()) {
        eprintln!("nebcli: {e}");
        return ExitCode::from(1);
    }
    let mut editor = match rustyline::DefaultEditor::new() {
        Ok(editor) => editor,
        Err(e) => {
            eprintln!("nebcli: cannot open the terminal: {e}");
            return ExitCode::from(1);
        }
    };
    let history = history_path();
    if let Some(path) = &history {
        let _ = editor.load_history(path);
    }
    if std::io::stdin().is_terminal() {
        let client = session.client.as_ref().expect("connected above");
        println!(
            "connected to beacon {} (cluster {}); type `help` for commands, `quit` to leave",
            client.node(),
            client.cluster()
        );
    }
    let mut code = ExitCode::SUCCESS;
    loop {
        let line = match editor.readline("nebcli) ") {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                eprintln!("nebcli: cannot read input: {e}");
                code = ExitCode::from(1);
                break;
            }
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(line.trim());
        match commands::parse(&words) {
            Ok(Some(Command::Quit)) => break,
            Ok(Some(cmd)) => match runtime.block_on(cmd.run(session)) {
                Ok(out) => print!("{out}"),
                Err(f) => {
                    print!("{}", f.output().unwrap_or_default());
                    eprintln!("error: {}", f.report().0);
                }
            },
            Ok(None) => {}
            Err(e) => eprintln!("error: {e}"),
        }
    }
    if let Some(path) = &history {
        let _ = editor.save_history(path);
    }
    code
}
