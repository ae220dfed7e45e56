//! The sequence issuer's nebcli commands: `show sequences`, `sequence create|change|delete|
//! next`, and `snowflake decode`.
//!
//! Keywords are case-insensitive; sequence names are kept as typed.

use serde::Serialize;

use crate::cli::table::{render, utc_ms};
use crate::cli::{Commands, Failure, Session, UsageError, flags, number, usage};
use crate::machines::sequence::client::{DEFAULT_EPOCH_MS, Layout};
use crate::pb::sequence as pb;

/// One parsed sequence command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `show sequences [NAME]`
    Show(Option<String>, crate::cli::Page),
    /// `sequence create NAME [--start N] [--step N]`
    Create { name: String, start: u64, step: u64 },
    /// `sequence change NAME [--step N] [--start N]`
    Change { name: String, start: u64, step: u64 },
    /// `sequence delete NAME`
    Delete(String),
    /// `sequence next NAME [--count N]`
    Next { name: String, count: u64 },
    /// `snowflake decode ID [--layout T,W,S] [--epoch-ms MS]`
    Decode { id: u64, layout: Layout },
}

const USAGE: &str = "usage: `sequence create|change|delete|next NAME [flags]` (see `help`)";

/// `NAME [--flag N]...` with the flags `allowed`; each value a number.
fn name_and_numbers(
    cmd: &str,
    args: &[&str],
    allowed: &[&str],
) -> Result<(String, Vec<(String, u64)>), UsageError> {
    let Some((name, rest)) = args.split_first() else {
        return Err(usage(format!("`{cmd}` needs a sequence name")));
    };
    if name.starts_with("--") {
        return Err(usage(format!(
            "`{cmd}` needs a sequence name before {name}"
        )));
    }
    let mut out = Vec::new();
    for (flag, value) in flags(cmd, rest)? {
        if !allowed.contains(&flag.as_str()) {
            return Err(usage(format!(
                "`{cmd}`: unknown flag --{flag} (it takes {})",
                allowed
                    .iter()
                    .map(|f| format!("--{f}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let n = number(cmd, &flag, value)?;
        out.push((flag, n));
    }
    Ok(((*name).to_owned(), out))
}

fn get(values: &[(String, u64)], flag: &str) -> u64 {
    values
        .iter()
        .rev()
        .find(|(f, _)| f == flag)
        .map_or(0, |(_, n)| *n)
}

fn parse_sequence(words: &[&str]) -> Result<Command, UsageError> {
    let Some(sub) = words.first() else {
        return Err(usage(USAGE));
    };
    let args = &words[1..];
    match sub.to_ascii_lowercase().as_str() {
        "create" => {
            let (name, v) = name_and_numbers("sequence create", args, &["start", "step"])?;
            for flag in ["start", "step"] {
                if v.iter().any(|(f, n)| f == flag && *n == 0) {
                    return Err(usage(format!(
                        "`sequence create`: --{flag} must be at least 1"
                    )));
                }
            }
            Ok(Command::Create {
                name,
                start: get(&v, "start"),
                step: get(&v, "step"),
            })
        }
        "change" => {
            let (name, v) = name_and_numbers("sequence change", args, &["start", "step"])?;
            if v.is_empty() {
                return Err(usage("`sequence change` needs --step N, --start N or both"));
            }
            Ok(Command::Change {
                name,
                start: get(&v, "start"),
                step: get(&v, "step"),
            })
        }
        "delete" => match args {
            [name] => Ok(Command::Delete((*name).to_owned())),
            _ => Err(usage("usage: `sequence delete NAME`")),
        },
        "next" => {
            let (name, v) = name_and_numbers("sequence next", args, &["count"])?;
            if v.iter().any(|(flag, n)| flag == "count" && *n == 0) {
                return Err(usage(
                    "`sequence next`: --count must be at least 1 (leave it out for the sequence's step)",
                ));
            }
            Ok(Command::Next {
                name,
                count: get(&v, "count"),
            })
        }
        _ => Err(usage(USAGE)),
    }
}

fn parse_decode(args: &[&str]) -> Result<Command, UsageError> {
    let Some((id, rest)) = args.split_first() else {
        return Err(usage(
            "usage: `snowflake decode ID [--layout T,W,S] [--epoch-ms MS]`",
        ));
    };
    let id: u64 = number("snowflake decode", "ID", id)?;
    let (mut widths, mut epoch) = ("41,10,12".to_owned(), DEFAULT_EPOCH_MS);
    for (flag, value) in flags("snowflake decode", rest)? {
        match flag.as_str() {
            "layout" => widths = value.to_owned(),
            "epoch-ms" => epoch = number("snowflake decode", "epoch-ms", value)?,
            other => {
                return Err(usage(format!("`snowflake decode`: unknown flag --{other}")));
            }
        }
    }
    let layout = Layout::parse(&widths, epoch).map_err(|e| usage(e.to_string()))?;
    if id >> 63 != 0 {
        return Err(usage(format!(
            "{id} has the sign bit set: it is not a snowflake ID"
        )));
    }
    Ok(Command::Decode { id, layout })
}

/// `show sequences` as a table.
fn sequences_table(reply: &pb::SequencesReply) -> String {
    let rows: Vec<Vec<String>> = reply
        .sequences
        .iter()
        .map(|s| {
            let age = match s.last_ms {
                0 => "-".to_owned(),
                t => format!("{} ms", reply.now_ms.saturating_sub(t)),
            };
            vec![
                s.name.clone(),
                s.max.to_string(),
                s.step.to_string(),
                s.segments.to_string(),
                age,
            ]
        })
        .collect();
    let mut out = crate::cli::table::stale_warning(reply.stale.as_deref(), Some(reply.index));
    out.push_str(&render(
        &["name", "max", "step", "segments", "last_segment_age"],
        &rows,
    ));
    out.push_str(&crate::cli::page_note(
        reply.sequences.len(),
        reply.total,
        &reply.next,
    ));
    out
}

fn sequence_line(what: &str, s: &pb::SequenceInfo) -> String {
    format!(
        "{what} sequence {}: max {}, step {}, {} segments handed out\n",
        s.name, s.max, s.step, s.segments
    )
}

/// A decoded snowflake ID, as printed. The ID goes into JSON as a string: above 2^53 a JSON
/// number loses digits in most readers (JavaScript, jq), as etcd's JSON gives 64-bit values.
#[derive(Debug, Serialize)]
struct DecodedId {
    #[serde(serialize_with = "as_string")]
    id: u64,
    time: String,
    unix_ms: u64,
    worker: u64,
    sequence: u64,
}

fn as_string<S: serde::Serializer>(n: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(n)
}

impl Commands for Command {
    const HELP: &'static [(&'static str, &'static str)] = &[
        (
            "show sequences [NAME] [--limit N] [--from NAME]",
            "named sequences: name, max (highest number handed out), step, segments, last_segment_age",
        ),
        (
            "sequence create NAME [--start N] [--step N]",
            "create a sequence whose first number is N (default 1), handed out N at a time (default: the beacon's sequence.default_step)",
        ),
        (
            "sequence change NAME [--step N] [--start N]",
            "change the step, or move the sequence forward so the next segment starts at N (never backward)",
        ),
        (
            "sequence delete NAME",
            "delete a sequence (created again, it starts over)",
        ),
        (
            "sequence next NAME [--count N]",
            "take the next segment (N numbers, default the step) and print [start, end]; never handed out again",
        ),
        (
            "snowflake decode ID [--layout T,W,S] [--epoch-ms MS]",
            "the time, worker (node ID) and sequence of a snowflake ID (default layout 41,10,12 from 2024-01-01)",
        ),
    ];
    const SUBJECTS: &'static [&'static str] = &["sequences"];

    fn parse(head: &[&str], words: &[&str]) -> Option<Result<Self, UsageError>> {
        Some(match head {
            ["show", "sequences"] => {
                crate::cli::list_args("show sequences", words.get(2..).unwrap_or_default(), true)
                    .map(|(name, page)| Command::Show(name, page))
            }
            ["sequence", ..] => parse_sequence(&words[1..]),
            ["snowflake", "decode"] => parse_decode(&words[2..]),
            ["snowflake", ..] => Err(usage("usage: `snowflake decode ID`")),
            _ => return None,
        })
    }

    async fn run(&self, session: &mut Session) -> Result<String, Failure> {
        let out = match self {
            Command::Show(name, page) => {
                let req = pb::SequencesRequest {
                    name: name.clone().unwrap_or_default(),
                    limit: page.limit,
                    from: page.from.clone(),
                };
                session
                    .show(async |c| c.sequences_matching(&req).await, sequences_table)
                    .await?
            }
            Command::Create { name, start, step } => {
                let s = session
                    .cluster()
                    .create_sequence(name, *start, *step)
                    .await?;
                session.print(&s, |s| sequence_line("created", s))
            }
            Command::Change { name, start, step } => {
                let s = session
                    .cluster()
                    .change_sequence(name, *step, *start)
                    .await?;
                session.print(&s, |s| sequence_line("changed", s))
            }
            Command::Delete(name) => {
                let s = session.cluster().delete_sequence(name).await?;
                session.print(&s, |s| sequence_line("deleted", s))
            }
            Command::Next { name, count } => {
                let reply = session.cluster().next_segment(name, *count).await?;
                let got = reply.segment.as_ref().map_or(0, |s| s.end - s.start + 1);
                if *count > got {
                    // Capped by the beacon, or the end of the number space: said, not hidden.
                    let why = if *count > reply.max_step {
                        format!(
                            "a segment holds at most {} numbers (key sequence.max_step)",
                            reply.max_step
                        )
                    } else {
                        "the sequence is at the end of its number space".into()
                    };
                    eprintln!("nebcli: asked for {count} numbers, got {got}: {why}");
                }
                session.print(&reply, |r| {
                    let s = r.segment.clone().unwrap_or_default();
                    format!(
                        "{} [{}, {}] ({} numbers)\n",
                        s.name,
                        s.start,
                        s.end,
                        s.end - s.start + 1
                    )
                })
            }
            Command::Decode { id, layout } => {
                let d = layout.decode(*id);
                let decoded = DecodedId {
                    id: *id,
                    time: utc_ms(d.unix_ms),
                    unix_ms: d.unix_ms,
                    worker: d.worker,
                    sequence: d.sequence,
                };
                session.print(&decoded, |d| {
                    format!(
                        "id {}: time {} ({} ms), worker {}, sequence {}\n",
                        d.id, d.time, d.unix_ms, d.worker, d.sequence
                    )
                })
            }
        };
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
