//! `nebcli`: the beacon admin shell.
//!
//! `nebcli -s 127.0.0.1:16000 show beacon` runs one command and exits; with no command it
//! opens the interactive `nebcli)` prompt (history, `help`, `quit`/`exit`).
//!
//! Exit codes: 0 success, 1 the beacon could not be reached or refused the request, 2 the
//! command line was not understood.

mod bench;
mod commands;
mod render;
mod table;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use beacon::client::{Client, ClientError, Cluster, ConnectOptions};
use beacon::machines::registry::RegistryCmd;
use beacon::pb;
use clap::Parser;
use commands::{Command, UsageError};
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
    /// The command, e.g. `show beacon`; none opens the interactive prompt.
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// What a command failure means for the exit code.
enum Failure {
    Usage(UsageError),
    Beacon(ClientError),
    /// The command ran but its result is a failure (a benchmark found duplicates).
    Check(String),
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        Failure::Beacon(e)
    }
}

impl Failure {
    fn report(&self) -> (String, u8) {
        match self {
            Failure::Usage(e) => (e.to_string(), 2),
            Failure::Beacon(e) => (e.to_string(), 1),
            Failure::Check(e) => (e.clone(), 1),
        }
    }
}

/// One nebcli session: the options and a connection opened on first use.
struct Session {
    server: String,
    opts: ConnectOptions,
    json: bool,
    client: Option<Client>,
}

impl Session {
    async fn client(&mut self) -> Result<&mut Client, ClientError> {
        if self.client.is_none() {
            self.client = Some(Client::connect(&self.server, &self.opts).await?);
        }
        Ok(self.client.as_mut().expect("just connected"))
    }

    /// Runs `f` on the connection; a failed connection is dropped so the next command
    /// reconnects.
    async fn with_client<T>(
        &mut self,
        f: impl AsyncFnOnce(&mut Client) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        let result = f(self.client().await?).await;
        if result.is_err() {
            self.client = None;
        }
        result
    }

    /// The cluster's leader, reached through the server given; for writes.
    fn cluster(&self) -> Cluster {
        Cluster::new(
            vec![self.server.clone()],
            self.opts.clone(),
            self.opts.timeout.max(Duration::from_secs(10)),
        )
    }

    /// Registrations as the leader sees them (reports and last_seen are kept there alone).
    async fn leader_nodes(
        &mut self,
        node_type: &str,
        addr: &str,
    ) -> Result<pb::registry::NodesReply, ClientError> {
        self.leader_nodes_by(node_type, addr, 0).await
    }

    /// [`Session::leader_nodes`], also filtered by node ID (0: any).
    async fn leader_nodes_by(
        &mut self,
        node_type: &str,
        addr: &str,
        node_id: u32,
    ) -> Result<pb::registry::NodesReply, ClientError> {
        let req = pb::registry::NodesRequest {
            node_type: node_type.to_owned(),
            addr: addr.to_owned(),
            node_id,
        };
        let reply = self
            .with_client(async |c| c.nodes_matching(&req).await)
            .await?;
        if reply.is_leader {
            return Ok(reply);
        }
        let status = self.with_client(async |c| c.beacon_status().await).await?;
        match status.leader {
            Some(leader) => {
                let mut c = Client::connect(&leader, &self.opts).await?;
                c.nodes_matching(&req).await
            }
            None => Ok(reply),
        }
    }

    fn print<T: serde::Serialize>(&self, value: &T, table: impl FnOnce(&T) -> String) -> String {
        if self.json { json(value) } else { table(value) }
    }

    /// Runs a command and returns what to print.
    async fn execute(&mut self, cmd: &Command) -> Result<String, Failure> {
        let out = match cmd {
            Command::Help => commands::help_text(),
            Command::Quit => String::new(),
            Command::ShowBeacon => {
                let status = self.with_client(async |c| c.beacon_status().await).await?;
                self.print(&status, render::beacon)
            }
            Command::ShowNodes(node_type) => {
                let t = node_type.as_deref().unwrap_or("");
                let reply = self.with_client(async |c| c.nodes(t, "").await).await?;
                self.print(&reply, render::nodes)
            }
            Command::ShowNodeDetail(t, addr) => {
                let a = addr.as_deref().unwrap_or("");
                let reply = self.with_client(async |c| c.nodes(t, a).await).await?;
                self.print(&reply, render::node_detail)
            }
            Command::ShowNodeReport(t, addr) => {
                let reply = self.leader_nodes(t, addr.as_deref().unwrap_or("")).await?;
                self.print(&reply, render::node_report)
            }
            Command::ShowIds => {
                let reply = self.with_client(async |c| c.ids().await).await?;
                self.print(&reply, render::ids)
            }
            Command::ShowSubscription(t) => {
                let t = t.as_deref().unwrap_or("");
                let reply = self.with_client(async |c| c.subscriptions(t).await).await?;
                self.print(&reply, render::subscriptions)
            }
            Command::Register(r) => {
                let req = pb::registry::RegisterRequest {
                    node_type: r.node_type.clone(),
                    addr: r.addr.clone(),
                    access_addr: r.access_addr.clone(),
                    worker_num: r.worker_num,
                    metadata: r.metadata.clone(),
                };
                let reply: pb::registry::RegisterReply = self
                    .cluster()
                    .call(RegistryCmd::Register, &req, "the registration")
                    .await?;
                match &reply.node {
                    Some(node) if self.json => json(node),
                    _ => render::registered(&reply),
                }
            }
            Command::Unregister { target, free } => {
                // The registration is named by the fencing token seen at the leader: if it
                // ends and its ID goes to someone else before this arrives, the beacon
                // refuses (NOT_HOLDER) instead of ending the newcomer's.
                let (id, addr) = match target.parse::<u32>() {
                    Ok(id) => (id, ""),
                    Err(_) => (0, target.as_str()),
                };
                let seen = self.leader_nodes_by("", addr, id).await?;
                let Some(node) = seen
                    .nodes
                    .iter()
                    .filter(|e| e.is_online)
                    .find_map(|e| e.node.clone())
                else {
                    return Err(Failure::Check(format!(
                        "no live registration at {target} (see `show nodes`)"
                    )));
                };
                let req = pb::registry::UnregisterRequest {
                    node_id: node.node_id,
                    addr: String::new(),
                    term: node.term,
                    index: node.index,
                    release: *free,
                };
                let reply: pb::registry::UnregisterReply = self
                    .cluster()
                    .call(RegistryCmd::Unregister, &req, "the unregistration")
                    .await?;
                let node = reply.node.unwrap_or_default();
                if self.json {
                    json(&node)
                } else {
                    let id = if *free {
                        "the ID is free"
                    } else {
                        "the ID is in quarantine (its holder may still be using it; --free frees it at once)"
                    };
                    format!(
                        "unregistered node_id {} ({} at {}, fencing token {}.{}); {id}\n",
                        node.node_id, node.node_type, node.addr, node.term, node.index
                    )
                }
            }
            Command::BenchRegister {
                clients,
                count,
                node_type,
            } => {
                let report =
                    bench::register(&self.server, &self.opts, *clients, *count, node_type).await;
                let out = self.print(&report, bench::Report::render);
                if report.duplicates > 0 || report.failed > 0 {
                    print!("{out}");
                    return Err(Failure::Check(format!(
                        "benchmark failed: {} duplicate IDs, {} failed registrations",
                        report.duplicates, report.failed
                    )));
                }
                out
            }
        };
        Ok(out)
    }
}

fn json<T: serde::Serialize>(value: &T) -> String {
    let mut text = serde_json::to_string_pretty(value).expect("replies serialise");
    text.push('\n');
    text
}

fn main() -> ExitCode {
    let args = Args::parse();
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
    let mut session = Session {
        server: args.server,
        opts: ConnectOptions {
            cluster: args.cluster,
            timeout: Duration::from_millis(args.timeout_ms),
            ..ConnectOptions::default()
        },
        json: args.json,
        client: None,
    };
    if args.command.is_empty() {
        interactive(&runtime, &mut session)
    } else {
        let words: Vec<&str> = args.command.iter().map(String::as_str).collect();
        one_shot(&runtime, &mut session, &words)
    }
}

fn one_shot(runtime: &tokio::runtime::Runtime, session: &mut Session, words: &[&str]) -> ExitCode {
    let result = match commands::parse(words) {
        Ok(Some(cmd)) => runtime.block_on(session.execute(&cmd)),
        Ok(None) => Ok(String::new()),
        Err(e) => Err(Failure::Usage(e)),
    };
    match result {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(f) => {
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
            Ok(Some(cmd)) => match runtime.block_on(session.execute(&cmd)) {
                Ok(out) => print!("{out}"),
                Err(f) => eprintln!("error: {}", f.report().0),
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
