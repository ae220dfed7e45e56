//! The commands nebcli understands, parsed from a line of words.
//!
//! Keywords are case-insensitive; arguments (node types, addresses, metadata) are kept as
//! typed, since node types are case-sensitive.

use std::fmt;

/// One parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    ShowBeacon,
    /// `show nodes [TYPE]`
    ShowNodes(Option<String>),
    /// `show node_detail TYPE [ip:port]`
    ShowNodeDetail(String, Option<String>),
    /// `show node_report TYPE [ip:port]`
    ShowNodeReport(String, Option<String>),
    ShowIds,
    /// `show subscription [TYPE]`
    ShowSubscription(Option<String>),
    Register(Registration),
    /// `unregister ID|ip:port [--free]`
    Unregister {
        target: String,
        free: bool,
    },
    /// `bench register --clients C --count N [--type T]`
    BenchRegister {
        clients: usize,
        count: usize,
        node_type: String,
    },
    Help,
    Quit,
}

/// `register --type T --addr ip:port [--access ip:port] [--workers N] [--metadata JSON]`
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Registration {
    pub node_type: String,
    pub addr: String,
    pub access_addr: String,
    pub worker_num: u32,
    pub metadata: String,
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

/// Commands with their one-line descriptions, for `help`.
pub const HELP: &[(&str, &str)] = &[
    (
        "show beacon",
        "the beacon cluster as this beacon sees it: node, is_leader, is_online, term, last_seen_ms",
    ),
    (
        "show nodes [TYPE]",
        "registered services: node_id, node_type, address, is_online, last_seen_ms",
    ),
    (
        "show node_detail TYPE [IP:PORT]",
        "node_id, address, access address, worker_num, registered time, fencing token, metadata",
    ),
    (
        "show node_report TYPE [IP:PORT]",
        "the latest reports (asks the leader): load connect recv_num recv_byte send_num send_byte",
    ),
    (
        "show ids",
        "the node-ID allocator: range, last_node_id, in use, quarantined",
    ),
    (
        "show subscription [TYPE]",
        "which node types each type is told about",
    ),
    (
        "register --type T --addr IP:PORT [--access IP:PORT] [--workers N] [--metadata JSON]",
        "register a service (at the leader) and print its node ID; it lasts one lease unless the service reports",
    ),
    (
        "unregister ID|IP:PORT [--free]",
        "end the registration found there (named by its fencing token, so a registration that replaced it meanwhile is left alone); its ID goes to quarantine, since its holder may still be using it, or with --free is free at once",
    ),
    (
        "bench register --clients C --count N [--type T]",
        "register N services from C concurrent clients; print allocations/s, latency, uniqueness",
    ),
    ("help", "this list"),
    ("quit | exit", "leave the interactive shell"),
];

pub fn help_text() -> String {
    let mut out = String::from("commands:\n");
    for (cmd, what) in HELP {
        out.push_str(&format!("  {cmd}\n      {what}\n"));
    }
    out.push_str(
        "options (before the command): -s IP:PORT  --json  --cluster NAME  --timeout-ms MS\n",
    );
    out
}

fn usage(msg: impl Into<String>) -> UsageError {
    UsageError(msg.into())
}

/// At most one optional argument after `cmd`.
fn optional(cmd: &str, args: &[&str]) -> Result<Option<String>, UsageError> {
    match args {
        [] => Ok(None),
        [one] => Ok(Some((*one).to_owned())),
        _ => Err(usage(format!(
            "`{cmd}` takes at most one argument (got `{}`)",
            args.join(" ")
        ))),
    }
}

/// A type and an optional address after `cmd`.
fn type_and_addr(cmd: &str, args: &[&str]) -> Result<(String, Option<String>), UsageError> {
    match args {
        [t] => Ok(((*t).to_owned(), None)),
        [t, a] => Ok(((*t).to_owned(), Some((*a).to_owned()))),
        _ => Err(usage(format!("usage: `{cmd} TYPE [IP:PORT]`"))),
    }
}

/// `--flag value` pairs.
fn flags<'a>(cmd: &str, args: &[&'a str]) -> Result<Vec<(String, &'a str)>, UsageError> {
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

fn number<T: std::str::FromStr>(cmd: &str, flag: &str, value: &str) -> Result<T, UsageError> {
    value
        .parse()
        .map_err(|_| usage(format!("`{cmd}`: --{flag} `{value}` is not a number")))
}

fn parse_register(args: &[&str]) -> Result<Command, UsageError> {
    let mut r = Registration::default();
    for (flag, value) in flags("register", args)? {
        match flag.as_str() {
            "type" => r.node_type = value.to_owned(),
            "addr" => r.addr = value.to_owned(),
            "access" => r.access_addr = value.to_owned(),
            "workers" => r.worker_num = number("register", "workers", value)?,
            "metadata" => r.metadata = value.to_owned(),
            other => return Err(usage(format!("`register`: unknown flag --{other}"))),
        }
    }
    if r.node_type.is_empty() || r.addr.is_empty() {
        return Err(usage("usage: `register --type T --addr IP:PORT`"));
    }
    Ok(Command::Register(r))
}

fn parse_bench(args: &[&str]) -> Result<Command, UsageError> {
    let (mut clients, mut count, mut node_type) = (16, 1000, "BENCH".to_owned());
    for (flag, value) in flags("bench register", args)? {
        match flag.as_str() {
            "clients" => clients = number("bench register", "clients", value)?,
            "count" => count = number("bench register", "count", value)?,
            "type" => node_type = value.to_owned(),
            other => return Err(usage(format!("`bench register`: unknown flag --{other}"))),
        }
    }
    if clients == 0 || count == 0 {
        return Err(usage(
            "`bench register`: --clients and --count must be at least 1",
        ));
    }
    Ok(Command::BenchRegister {
        clients,
        count,
        node_type,
    })
}

/// Parses one command line. `Ok(None)` for a blank line.
pub fn parse(words: &[&str]) -> Result<Option<Command>, UsageError> {
    let lower: Vec<String> = words
        .iter()
        .take(2)
        .map(|w| w.to_ascii_lowercase())
        .collect();
    let head: Vec<&str> = lower.iter().map(String::as_str).collect();
    let command = match head.as_slice() {
        [] => return Ok(None),
        ["show", subject] => {
            let args = &words[2..];
            match *subject {
                "beacon" => match args {
                    [] => Command::ShowBeacon,
                    _ => {
                        return Err(usage(format!(
                            "`show beacon` takes no arguments (got `{}`)",
                            args.join(" ")
                        )));
                    }
                },
                "nodes" => Command::ShowNodes(optional("show nodes", args)?),
                "node_detail" => {
                    let (t, a) = type_and_addr("show node_detail", args)?;
                    Command::ShowNodeDetail(t, a)
                }
                "node_report" => {
                    let (t, a) = type_and_addr("show node_report", args)?;
                    Command::ShowNodeReport(t, a)
                }
                "ids" => match args {
                    [] => Command::ShowIds,
                    _ => return Err(usage("`show ids` takes no arguments")),
                },
                "subscription" => Command::ShowSubscription(optional("show subscription", args)?),
                what => return Err(usage(format!("unknown subject `show {what}`"))),
            }
        }
        ["show"] => {
            return Err(usage(
                "`show` needs a subject: beacon, nodes, node_detail, node_report, ids, subscription",
            ));
        }
        ["register", ..] => parse_register(&words[1..])?,
        ["unregister", ..] => match &words[1..] {
            [target] => Command::Unregister {
                target: (*target).to_owned(),
                free: false,
            },
            [target, flag] | [flag, target] if flag.eq_ignore_ascii_case("--free") => {
                Command::Unregister {
                    target: (*target).to_owned(),
                    free: true,
                }
            }
            _ => return Err(usage("usage: `unregister ID|IP:PORT [--free]`")),
        },
        ["bench", "register"] => parse_bench(&words[2..])?,
        ["bench", ..] => return Err(usage("usage: `bench register --clients C --count N`")),
        ["help" | "?", ..] => Command::Help,
        ["quit" | "exit"] => Command::Quit,
        [other, ..] => return Err(usage(format!("unknown command `{other}`"))),
    };
    Ok(Some(command))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_commands_parse_case_insensitively() {
        assert_eq!(parse(&["show", "beacon"]), Ok(Some(Command::ShowBeacon)));
        assert_eq!(parse(&["SHOW", "Beacon"]), Ok(Some(Command::ShowBeacon)));
        assert_eq!(parse(&["exit"]), Ok(Some(Command::Quit)));
        assert_eq!(parse(&["quit"]), Ok(Some(Command::Quit)));
        assert_eq!(parse(&["help"]), Ok(Some(Command::Help)));
        assert_eq!(parse(&[]), Ok(None));
    }

    #[test]
    fn arguments_keep_their_case() {
        assert_eq!(
            parse(&["show", "nodes", "LOGIC"]),
            Ok(Some(Command::ShowNodes(Some("LOGIC".into()))))
        );
        assert_eq!(
            parse(&["show", "node_report", "Logic", "10.0.0.1:80"]),
            Ok(Some(Command::ShowNodeReport(
                "Logic".into(),
                Some("10.0.0.1:80".into())
            )))
        );
        assert_eq!(
            parse(&[
                "register",
                "--type",
                "LOGIC",
                "--addr",
                "10.0.0.1:80",
                "--metadata",
                r#"{"Zone":1}"#
            ]),
            Ok(Some(Command::Register(Registration {
                node_type: "LOGIC".into(),
                addr: "10.0.0.1:80".into(),
                metadata: r#"{"Zone":1}"#.into(),
                ..Registration::default()
            })))
        );
        assert_eq!(
            parse(&["bench", "register", "--clients", "4", "--count", "100"]),
            Ok(Some(Command::BenchRegister {
                clients: 4,
                count: 100,
                node_type: "BENCH".into()
            }))
        );
    }

    #[test]
    fn mistakes_say_what_was_wrong() {
        assert_eq!(
            parse(&["frobnicate"]).unwrap_err().to_string(),
            "unknown command `frobnicate`; type `help` for the list of commands"
        );
        assert!(parse(&["show"]).unwrap_err().0.contains("needs a subject"));
        assert!(
            parse(&["show", "stars"])
                .unwrap_err()
                .0
                .contains("`show stars`")
        );
        assert!(
            parse(&["show", "beacon", "x"])
                .unwrap_err()
                .0
                .contains("no arguments")
        );
        assert!(
            parse(&["register", "--type", "A"])
                .unwrap_err()
                .0
                .contains("--addr")
        );
        assert!(
            parse(&["register", "--type"])
                .unwrap_err()
                .0
                .contains("needs a value")
        );
        assert!(
            parse(&["register", "--colour", "x"])
                .unwrap_err()
                .0
                .contains("unknown flag")
        );
        assert!(
            parse(&["bench", "register", "--count", "many"])
                .unwrap_err()
                .0
                .contains("not a number")
        );
        assert!(
            parse(&["show", "node_detail"])
                .unwrap_err()
                .0
                .contains("TYPE")
        );
        assert!(parse(&["unregister"]).unwrap_err().0.contains("usage"));
        assert!(
            parse(&["unregister", "3", "--now"])
                .unwrap_err()
                .0
                .contains("--free")
        );
        assert_eq!(
            parse(&["unregister", "--free", "3"]),
            Ok(Some(Command::Unregister {
                target: "3".into(),
                free: true
            }))
        );
    }
}
