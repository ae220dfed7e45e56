//! The config store's nebcli commands: etcdctl's `config get|put|del|history` and
//! NebulaBeacon's `get|set node_config`, `get|set node_custom_config` and
//! `get|set custom_config`, which are documents under fixed keys:
//!
//! | NebulaBeacon | key |
//! |---|---|
//! | `node_config TYPE` | `type/TYPE/node_config` |
//! | `node_config IP:PORT` | `node/IP:PORT/node_config` |
//! | `node_custom_config TYPE` or `IP:PORT` | `…/node_custom_config` |
//! | `custom_config NAME PATH` | `file/NAME`, with the relative path PATH |

use std::io::Read;

use crate::allow::Allowlist;
use crate::cli::table::{render, utc_ms};
use crate::cli::{Commands, Failure, Session, UsageError, usage};
use crate::machines::configs::client::{config_check, config_delete, config_put};
use crate::machines::configs::state::IP_WHITE;
use crate::machines::configs::wire::{get_reply_json, value_json};
use crate::pb::configs as pb;

/// One parsed config command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `config get KEY [--prefix]`, `get node_config ...`
    Get { key: String, prefix: bool },
    /// `config put KEY VALUE|- [--if-rev N] [--check-json]`, `set node_config ... FILE|-`
    Put {
        key: String,
        value: Source,
        json: bool,
        path: String,
        if_rev: Option<u64>,
    },
    /// `config del KEY [--if-rev N]`
    Del { key: String, if_rev: Option<u64> },
    /// `config history KEY`
    History(String),
    /// `config get KEY --rev N`: the value `KEY` held at revision N.
    GetAt { key: String, rev: u64 },
    /// `set ip_white NETWORK...` (`-`: from stdin; none: everyone)
    SetIpWhite(Vec<String>),
    /// `show ip_white`
    ShowIpWhite,
    /// `config watch [KEY...] [--prefix] [--rev N]` or `config watch --service TYPE IP:PORT
    /// [NODE_ID]`
    Watch {
        /// The keys (with `--prefix`, or none given: prefixes).
        prefixes: Vec<String>,
        /// Only the keys themselves, not the others they are a prefix of (no `--prefix`).
        exact: bool,
        rev: Option<u64>,
        service: Option<(String, std::net::SocketAddr, u32)>,
    },
}

/// Where a value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Text(String),
    File(String),
    Stdin,
}

const USAGE: &str = "usage: `config get KEY [--prefix | --rev N]`, `config put KEY VALUE|- [--if-rev N] [--check-json]`, `config del KEY [--if-rev N]`, `config history KEY` or `config watch [KEY...] [--prefix] [--rev N] | --service TYPE IP:PORT [NODE_ID]`";

const WATCH_USAGE: &str = "usage: `config watch [KEY...] [--prefix] [--rev N]` or `config watch --service TYPE IP:PORT [NODE_ID]`";

/// `config watch`'s words: prefixes and `--rev N`, or `--service TYPE IP:PORT`.
fn parse_watch(args: &[&str]) -> Result<Command, UsageError> {
    if let [first, rest @ ..] = args
        && *first == "--service"
    {
        let (node_type, addr, node_id) = match rest {
            [node_type, addr] => (node_type, addr, 0),
            [node_type, addr, id] => (
                node_type,
                addr,
                crate::cli::number("config watch --service", "NODE_ID", id)?,
            ),
            _ => return Err(usage(WATCH_USAGE)),
        };
        let addr = addr.parse().map_err(|_| {
            usage(format!(
                "`config watch --service`: `{addr}` is not the IP:PORT of a service"
            ))
        })?;
        return Ok(Command::Watch {
            prefixes: Vec::new(),
            exact: false,
            rev: None,
            service: Some(((*node_type).to_owned(), addr, node_id)),
        });
    }
    let mut prefixes = Vec::new();
    let mut rev = None;
    let mut prefix = false;
    let mut it = args.iter();
    while let Some(word) = it.next() {
        match *word {
            "--prefix" => prefix = true,
            "--rev" => {
                let value = it
                    .next()
                    .ok_or_else(|| usage("`config watch`: --rev needs a revision"))?;
                let r = crate::cli::number("config watch", "rev", value)?;
                if r == 0 {
                    return Err(usage("`config watch --rev` takes a revision of 1 or more"));
                }
                rev = Some(r);
            }
            flag if flag.starts_with("--") => {
                return Err(usage(format!(
                    "`config watch`: unknown flag {flag}; {WATCH_USAGE}"
                )));
            }
            key => prefixes.push(key.to_owned()),
        }
    }
    Ok(Command::Watch {
        exact: !prefix && !prefixes.is_empty(),
        prefixes,
        rev,
        service: None,
    })
}

/// The key of NebulaBeacon's `what` (node_config, node_custom_config) for a node type or a
/// service's address.
fn nebula_key(what: &str, target: &str) -> String {
    if target.parse::<std::net::SocketAddr>().is_ok() {
        format!("node/{target}/{what}")
    } else {
        format!("type/{target}/{what}")
    }
}

/// `KEY` then flags: `--prefix`, `--check-json` (switches) and `--if-rev N`. (`--json` is
/// nebcli's own: JSON output.)
struct Parsed<'a> {
    positional: Vec<&'a str>,
    prefix: bool,
    json: bool,
    if_rev: Option<u64>,
    rev: Option<u64>,
}

fn parse_args<'a>(cmd: &str, args: &[&'a str], allowed: &[&str]) -> Result<Parsed<'a>, UsageError> {
    let mut p = Parsed {
        positional: Vec::new(),
        prefix: false,
        json: false,
        if_rev: None,
        rev: None,
    };
    let mut it = args.iter();
    while let Some(word) = it.next() {
        let Some(flag) = word.strip_prefix("--") else {
            p.positional.push(word);
            continue;
        };
        if !allowed.contains(&flag) {
            return Err(usage(format!("`{cmd}`: unknown flag --{flag}")));
        }
        match flag {
            "prefix" => p.prefix = true,
            "check-json" => p.json = true,
            "if-rev" | "rev" => {
                let value = it
                    .next()
                    .ok_or_else(|| usage(format!("`{cmd}`: --{flag} needs a revision")))?;
                let revision = Some(crate::cli::number(cmd, flag, value)?);
                if flag == "rev" {
                    p.rev = revision;
                } else {
                    p.if_rev = revision;
                }
            }
            _ => unreachable!("allowed flags are handled"),
        }
    }
    Ok(p)
}

impl Commands for Command {
    const HELP: &'static [(&'static str, &'static str)] = &[
        (
            "config get KEY [--prefix]",
            "a config document (value, revision) or every one under a key prefix; keys: cluster/NAME, type/TYPE/NAME, node/IP:PORT/NAME, id/NODE_ID/NAME, file/NAME",
        ),
        (
            "config get KEY --rev N",
            "the value the document held at revision N (from the last values kept, key configs.history)",
        ),
        (
            "config put KEY VALUE|- [--if-rev N] [--check-json]",
            "write a config document (`-`: from stdin); --if-rev N writes only if it is at revision N (0: only if new), --check-json has the leader check that it is JSON and keeps it marked so (role admin)",
        ),
        (
            "config del KEY [--if-rev N]",
            "delete a config document (only at revision N with --if-rev) (role admin)",
        ),
        (
            "config history KEY",
            "the values a config document held, newest first, with their revisions (key `configs.history` of them)",
        ),
        (
            "set ip_white NETWORK... | -",
            "the networks (10.0.0.0/8, 192.168.1.7) that may open client connections and register services, on every beacon (document beacon/ip_white; `-`: from stdin; none: everyone); the beacons are always admitted (role admin)",
        ),
        (
            "show ip_white",
            "the cluster's allowlist and its revision, or that none is set (then each beacon's key ip_allow applies)",
        ),
        (
            "config watch [KEY...] [--prefix] [--rev N]",
            "the documents (with --prefix: every one under the keys; no key: all), then each change with its revision, as lines (JSON lines with -w json), until Ctrl-C; --rev N starts at revision N instead of a listing (every change from it on); follows leader changes",
        ),
        (
            "config watch --service TYPE IP:PORT [NODE_ID]",
            "what one service gets: its effective config (node ID over address over type over cluster, and the custom files), then each change",
        ),
        (
            "get node_config TYPE|IP:PORT",
            "NebulaBeacon's node config of a node type or one service (document type/TYPE/node_config or node/IP:PORT/node_config)",
        ),
        (
            "set node_config TYPE|IP:PORT FILE|-",
            "write it from FILE or stdin (role admin)",
        ),
        (
            "get node_custom_config TYPE|IP:PORT",
            "NebulaBeacon's custom node config (document …/node_custom_config)",
        ),
        (
            "set node_custom_config TYPE|IP:PORT FILE|-",
            "write it from FILE or stdin (role admin)",
        ),
        (
            "get custom_config NAME",
            "NebulaBeacon's named custom file and the relative path it is written to (document file/NAME)",
        ),
        (
            "set custom_config NAME PATH FILE|-",
            "write custom file NAME, to be written at relative PATH, from FILE or stdin (role admin)",
        ),
    ];
    const SUBJECTS: &'static [&'static str] = &["ip_white"];

    fn parse(head: &[&str], words: &[&str]) -> Option<Result<Self, UsageError>> {
        let rest = words.get(2..).unwrap_or(&[]);
        let source = |w: &str| {
            if w == "-" {
                Source::Stdin
            } else {
                Source::File(w.to_owned())
            }
        };
        Some(match head {
            ["config", "get"] => parse_args("config get", rest, &["prefix", "rev"]).and_then(|p| {
                match (p.positional.as_slice(), p.rev) {
                    ([_], Some(_)) if p.prefix => Err(usage(
                        "`config get --rev` reads one document's past value: give a key, not --prefix",
                    )),
                    ([key], Some(rev)) => Ok(Command::GetAt {
                        key: (*key).to_owned(),
                        rev,
                    }),
                    ([key], None) => Ok(Command::Get {
                        key: (*key).to_owned(),
                        prefix: p.prefix,
                    }),
                    _ => Err(usage(USAGE)),
                }
            }),
            ["config", "put"] => parse_args("config put", rest, &["if-rev", "check-json"])
                .and_then(|p| match p.positional.as_slice() {
                    [key, value] => Ok(Command::Put {
                        key: (*key).to_owned(),
                        value: if *value == "-" {
                            Source::Stdin
                        } else {
                            Source::Text((*value).to_owned())
                        },
                        json: p.json,
                        path: String::new(),
                        if_rev: p.if_rev,
                    }),
                    _ => Err(usage(USAGE)),
                }),
            ["config", "del"] => parse_args("config del", rest, &["if-rev"]).and_then(|p| match p
                .positional
                .as_slice()
            {
                [key] => Ok(Command::Del {
                    key: (*key).to_owned(),
                    if_rev: p.if_rev,
                }),
                _ => Err(usage(USAGE)),
            }),
            ["config", "history"] => match rest {
                [key] => Ok(Command::History((*key).to_owned())),
                _ => Err(usage(USAGE)),
            },
            ["config", "watch"] => parse_watch(rest),
            ["config", ..] => Err(usage(USAGE)),
            ["get", what @ ("node_config" | "node_custom_config")] => match rest {
                [target] => Ok(Command::Get {
                    key: nebula_key(what, target),
                    prefix: false,
                }),
                _ => Err(usage(format!("usage: `get {what} TYPE|IP:PORT`"))),
            },
            ["set", what @ ("node_config" | "node_custom_config")] => match rest {
                [target, from] => Ok(Command::Put {
                    key: nebula_key(what, target),
                    value: source(from),
                    json: false,
                    path: String::new(),
                    if_rev: None,
                }),
                _ => Err(usage(format!("usage: `set {what} TYPE|IP:PORT FILE|-`"))),
            },
            ["set", "ip_white"] => Ok(Command::SetIpWhite(
                rest.iter().map(|w| (*w).to_owned()).collect(),
            )),
            ["show", "ip_white"] => match rest {
                [] => Ok(Command::ShowIpWhite),
                _ => Err(usage("usage: `show ip_white`")),
            },
            ["get", "custom_config"] => match rest {
                [name] => Ok(Command::Get {
                    key: format!("file/{name}"),
                    prefix: false,
                }),
                _ => Err(usage("usage: `get custom_config NAME`")),
            },
            ["set", "custom_config"] => match rest {
                [name, path, from] => Ok(Command::Put {
                    key: format!("file/{name}"),
                    value: source(from),
                    json: false,
                    path: (*path).to_owned(),
                    if_rev: None,
                }),
                _ => Err(usage("usage: `set custom_config NAME PATH FILE|-`")),
            },
            _ => return None,
        })
    }

    async fn run(&self, session: &mut Session) -> Result<String, Failure> {
        match self {
            Command::Get { key, prefix } => {
                let (key, prefix) = (key.clone(), *prefix);
                let reply = session
                    .with_client(async |c| c.config_get(&key, prefix).await)
                    .await?;
                Ok(session.print(&get_reply_json(&reply, true), |_| {
                    render_get(&reply, prefix)
                }))
            }
            Command::Put {
                key,
                value,
                json,
                path,
                if_rev,
            } => {
                let bytes = read(value).map_err(Failure::Check)?;
                let mut op = config_put(key, bytes, *json);
                op.path = path.clone();
                let checks = if_rev.map(|r| config_check(key, r)).into_iter().collect();
                let reply = session.cluster().config_write(checks, vec![op]).await?;
                Ok(session.print(&reply, |r| format!("OK revision {}\n", r.revision)))
            }
            Command::Del { key, if_rev } => {
                let checks = if_rev.map(|r| config_check(key, r)).into_iter().collect();
                let reply = session
                    .cluster()
                    .config_write(checks, vec![config_delete(key)])
                    .await?;
                Ok(session.print(&reply, |r| {
                    format!("{} deleted, revision {}\n", r.deleted, r.revision)
                }))
            }
            Command::GetAt { key, rev } => {
                let key = key.clone();
                let reply = session
                    .with_client(async |c| c.config_history(&key).await)
                    .await?;
                let held = value_at(&reply, *rev).map_err(Failure::Check)?;
                let json = serde_json::json!({
                    "key": key,
                    "rev": rev,
                    "revision": held.revision,
                    "value": value_json(&held.value),
                    "wall_ms": held.wall_ms,
                });
                Ok(session.print(&json, |_| {
                    let mut out = String::from_utf8_lossy(&held.value).into_owned();
                    if !out.ends_with('\n') {
                        out.push('\n');
                    }
                    out.push_str(&format!(
                        "# as of revision {rev}: written at revision {}\n",
                        held.revision
                    ));
                    out
                }))
            }
            Command::History(key) => {
                let key = key.clone();
                let reply = session
                    .with_client(async |c| c.config_history(&key).await)
                    .await?;
                Ok(session.print(&history_json(&reply), |_| render_history(&reply)))
            }
            Command::Watch {
                prefixes,
                exact,
                rev,
                service,
            } => watch(session, prefixes, *exact, *rev, service.as_ref()).await,
            Command::SetIpWhite(words) => {
                let text = match words.as_slice() {
                    [dash] if dash == "-" => {
                        String::from_utf8(read(&Source::Stdin).map_err(Failure::Check)?)
                            .map_err(|_| Failure::Check("stdin is not text".into()))?
                    }
                    words => words.join(" "),
                };
                // Checked here too, so that a typo is named before anything is sent.
                let list = Allowlist::parse(&text)
                    .map_err(|e| Failure::Check(format!("set ip_white: {e}")))?;
                let value = list.networks().join("\n").into_bytes();
                let reply = session
                    .cluster()
                    .config_write(vec![], vec![config_put(IP_WHITE, value, false)])
                    .await?;
                Ok(session.print(&reply, |r| format!("OK revision {}: {list}\n", r.revision)))
            }
            Command::ShowIpWhite => {
                let reply = session
                    .with_client(async |c| c.config_get(IP_WHITE, true).await)
                    .await?;
                let doc = reply.documents.iter().find(|d| d.key == IP_WHITE);
                let list =
                    doc.and_then(|d| Allowlist::parse(std::str::from_utf8(&d.value).ok()?).ok());
                let json = serde_json::json!({
                    "set": doc.is_some(),
                    "networks": list.as_ref().map(Allowlist::networks).unwrap_or_default(),
                    "revision": doc.map_or(0, |d| d.revision),
                    "index": reply.index,
                });
                Ok(session.print(&json, |_| match (doc, &list) {
                    (Some(d), Some(list)) => format!("{list}\n# revision {}\n", d.revision),
                    _ => "not set: each beacon's key ip_allow applies (everyone by default)\n"
                        .to_owned(),
                }))
            }
        }
    }
}

/// `config watch`: the documents followed (or, from a revision, nothing), then each change
/// with its revision, as lines (JSON lines with `-w json`), until Ctrl-C or SIGTERM. A
/// service's watch prints its effective config instead, then the settings each change
/// makes effective. Follows leader changes: each change once.
async fn watch(
    session: &mut Session,
    prefixes: &[String],
    exact: bool,
    rev: Option<u64>,
    service: Option<&(String, std::net::SocketAddr, u32)>,
) -> Result<String, Failure> {
    use crate::machines::configs::client::{ConfigWatch, Effective};
    let retry_for = session.opts.timeout.max(std::time::Duration::from_secs(10));
    let (servers, opts, json) = (session.servers.clone(), session.opts.clone(), session.json);
    // Installed before anything is printed (see cli::stop_signal).
    let mut stop = crate::cli::stop_signal();
    let mut watch = match (service, rev) {
        (Some((node_type, addr, node_id)), _) => {
            ConfigWatch::for_service(servers, node_type.clone(), *addr, *node_id, opts, retry_for)
                .await?
        }
        (None, Some(from)) => {
            ConfigWatch::resume(servers, prefixes.to_vec(), from, opts, retry_for).await?
        }
        (None, None) => ConfigWatch::start(servers, prefixes.to_vec(), opts, retry_for).await?,
    };
    // Without --prefix a key stands for itself: the watch follows it as a prefix, and what
    // it tells of the keys it is a prefix of is left out here.
    let shown = |key: &str| !exact || prefixes.iter().any(|k| k == key);
    let line = |event: &str, key: &str, d: Option<&pb::Document>, index: u64| {
        if !shown(key) {
            return String::new();
        }
        if json {
            let mut v = serde_json::json!({"event": event, "key": key, "index": index});
            if let Some(d) = d {
                v["value"] = value_json(&d.value);
                v["revision"] = d.revision.into();
                v["path"] = d.path.clone().into();
            }
            format!("{v}\n")
        } else {
            let value = d
                .map(|d| {
                    format!(
                        " {}",
                        String::from_utf8_lossy(&d.value).replace('\n', "\\n")
                    )
                })
                .unwrap_or_default();
            format!("{event} {key} index={index}{value}\n")
        }
    };
    // A service's view: its settings by name (the most specific scope's document) and its
    // files; a change prints what it made effective.
    let effective_lines = |before: &Effective, after: &Effective, index: u64, event: &str| {
        let mut out = String::new();
        for (group, old, new) in [
            ("setting", &before.settings, &after.settings),
            ("file", &before.files, &after.files),
        ] {
            for (name, d) in new {
                if old.get(name) != Some(d) {
                    out.push_str(&line(event, &format!("{group}:{name}"), Some(d), index));
                }
            }
            for name in old.keys().filter(|n| !new.contains_key(*n)) {
                out.push_str(&line("deleted", &format!("{group}:{name}"), None, index));
            }
        }
        out
    };
    let mut effective = watch.effective();
    let present = if service.is_some() {
        effective_lines(&Effective::default(), &effective, watch.index(), "present")
    } else {
        watch
            .documents()
            .map(|d| line("present", &d.key, Some(d), watch.index()))
            .collect()
    };
    crate::cli::emit(&present);
    loop {
        tokio::select! {
            signal = &mut stop => return Ok(if json { String::new() } else { format!("{signal}: stopped\n") }),
            event = watch.next() => {
                let event = event?;
                let out = if service.is_some() {
                    let now = watch.effective();
                    let out = effective_lines(&effective, &now, event.index, "put");
                    effective = now;
                    out
                } else {
                    let mut out: String = event
                        .put
                        .iter()
                        .map(|d| line("put", &d.key, Some(d), event.index))
                        .collect();
                    for key in &event.deleted {
                        out.push_str(&line("deleted", key, None, event.index));
                    }
                    out
                };
                crate::cli::emit(&out);
            }
        }
    }
}

fn read(source: &Source) -> Result<Vec<u8>, String> {
    match source {
        Source::Text(t) => Ok(t.as_bytes().to_vec()),
        Source::File(f) => std::fs::read(f).map_err(|e| format!("cannot read {f}: {e}")),
        Source::Stdin => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .map_err(|e| format!("cannot read stdin: {e}"))?;
            Ok(buf)
        }
    }
}

fn history_json(r: &pb::HistoryReply) -> serde_json::Value {
    let history: Vec<serde_json::Value> = r
        .history
        .iter()
        .map(|p| serde_json::json!({"revision": p.revision, "value": value_json(&p.value), "wall_ms": p.wall_ms}))
        .collect();
    serde_json::json!({"history": history, "index": r.index})
}

fn render_get(r: &pb::GetReply, prefix: bool) -> String {
    let mut out = String::new();
    for d in &r.documents {
        if prefix {
            out.push_str(&d.key);
            out.push('\n');
        }
        out.push_str(&String::from_utf8_lossy(&d.value));
        if !d.value.ends_with(b"\n") {
            out.push('\n');
        }
        if !prefix {
            let path = if d.path.is_empty() {
                String::new()
            } else {
                format!(" · path {}", d.path)
            };
            out.push_str(&format!(
                "# revision {} · created {} · version {}{path}\n",
                d.revision, d.created, d.version
            ));
        }
    }
    out
}

/// The value `r`'s document held at revision `rev`: the newest one written at or before it.
fn value_at(r: &pb::HistoryReply, rev: u64) -> Result<&pb::Past, String> {
    if let Some(held) = r.history.iter().find(|p| p.revision <= rev) {
        return Ok(held);
    }
    let oldest = r.history.last().map_or(0, |p| p.revision);
    Err(format!(
        "revision {rev} is older than the values kept: the oldest is from revision {oldest} (key `configs.history`)"
    ))
}

fn render_history(r: &pb::HistoryReply) -> String {
    let rows: Vec<Vec<String>> = r
        .history
        .iter()
        .map(|p| {
            vec![
                p.revision.to_string(),
                utc_ms(p.wall_ms),
                String::from_utf8_lossy(&p.value).replace('\n', "\\n"),
            ]
        })
        .collect();
    render(&["revision", "written", "value"], &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(words: &[&str]) -> Result<Command, UsageError> {
        crate::cli::parse_words::<Command>(words).expect("a config command")
    }

    #[test]
    fn commands_parse_into_documents_under_their_keys() {
        assert_eq!(
            parse(&[
                "config",
                "put",
                "cluster/a",
                "1",
                "--if-rev",
                "0",
                "--check-json"
            ])
            .unwrap(),
            Command::Put {
                key: "cluster/a".into(),
                value: Source::Text("1".into()),
                json: true,
                path: String::new(),
                if_rev: Some(0),
            }
        );
        assert_eq!(
            parse(&["get", "node_config", "LOGIC"]).unwrap(),
            Command::Get {
                key: "type/LOGIC/node_config".into(),
                prefix: false
            }
        );
        assert_eq!(
            parse(&["GET", "node_custom_config", "10.0.0.1:80"]).unwrap(),
            Command::Get {
                key: "node/10.0.0.1:80/node_custom_config".into(),
                prefix: false
            }
        );
        assert!(matches!(
            parse(&["set", "custom_config", "game", "conf/game.ini", "-"]).unwrap(),
            Command::Put { ref key, ref path, value: Source::Stdin, .. } if key == "file/game" && path == "conf/game.ini"
        ));
        assert!(parse(&["config", "put", "cluster/a"]).is_err());
        let e = parse(&["config", "del", "cluster/a", "--prefix"]).unwrap_err();
        assert!(e.0.contains("unknown flag --prefix"), "{}", e.0);
        let e = parse(&["config", "put", "k", "v", "--if-rev", "x"]).unwrap_err();
        assert!(e.0.contains("not a number"), "{}", e.0);
        assert_eq!(
            parse(&["config", "get", "cluster/a", "--rev", "7"]).unwrap(),
            Command::GetAt {
                key: "cluster/a".into(),
                rev: 7
            }
        );
        assert!(parse(&["config", "get", "cluster/", "--prefix", "--rev", "7"]).is_err());
        let watch = |words: &[&str]| match parse(words).unwrap() {
            Command::Watch {
                prefixes,
                exact,
                rev,
                ..
            } => (prefixes, exact, rev),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            watch(&["config", "watch", "cluster/a"]),
            (vec!["cluster/a".to_owned()], true, None),
            "a key stands for itself, as etcdctl's"
        );
        assert_eq!(
            watch(&["config", "watch", "cluster/", "--prefix", "--rev", "4"]),
            (vec!["cluster/".to_owned()], false, Some(4))
        );
        assert_eq!(watch(&["config", "watch"]), (vec![], false, None));
    }

    #[test]
    fn a_past_value_is_the_newest_written_at_or_before_the_revision() {
        let past = |revision: u64, value: &str| pb::Past {
            revision,
            value: value.into(),
            wall_ms: 0,
        };
        let r = pb::HistoryReply {
            history: vec![past(9, "c"), past(5, "b"), past(3, "a")],
            index: 12,
        };
        assert_eq!(value_at(&r, 12).unwrap().value, b"c");
        assert_eq!(value_at(&r, 8).unwrap().value, b"b");
        assert_eq!(value_at(&r, 3).unwrap().value, b"a");
        let e = value_at(&r, 2).unwrap_err();
        assert!(e.contains("oldest is from revision 3"), "{e}");
    }
}
