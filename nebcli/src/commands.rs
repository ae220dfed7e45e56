//! The commands nebcli understands: the core's and each machine's, one line per set in
//! [`parse`], [`help_text`] and [`Command::run`].

use crate::snapshot::Snapshot;
use beacon::cli::beacon::{Endpoint, LeaderTransfer, ShowBeacon};
use beacon::cli::member::Member;
use beacon::cli::{Commands, Failure, Session, UsageError, usage};
use beacon::machines::{assign, configs, registry, sequence, tasks};

/// One parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Beacon(ShowBeacon),
    Endpoint(Endpoint),
    Leader(LeaderTransfer),
    Member(Member),
    Snapshot(Snapshot),
    Registry(registry::cli::Command),
    Sequence(sequence::cli::Command),
    Assign(assign::cli::Command),
    Tasks(tasks::cli::Command),
    Lock(assign::cli::lock::Command),
    Configs(configs::cli::Command),
    Help,
    /// `COMMAND --help`: the help of the commands starting with these words.
    HelpOn(Vec<String>),
    /// `quit` / `exit`, with the exit code to leave with, if one is given.
    Quit(Option<u8>),
    /// `completion bash|zsh|fish`.
    Completion(String),
}

/// Every `show` subject, for the message that lists them.
fn subjects() -> Vec<&'static str> {
    [
        ShowBeacon::SUBJECTS,
        registry::cli::Command::SUBJECTS,
        sequence::cli::Command::SUBJECTS,
        assign::cli::Command::SUBJECTS,
        tasks::cli::Command::SUBJECTS,
    ]
    .concat()
}

/// Every command's `(syntax, what it does)`.
fn all_help() -> Vec<(&'static str, &'static str)> {
    let own: &[(&str, &str)] = &[
        ("help", "this list"),
        (
            "quit | exit [CODE]",
            "leave the interactive shell (with exit code CODE)",
        ),
        (
            "completion bash|zsh|fish",
            "a shell completion script for nebcli",
        ),
    ];
    [
        ShowBeacon::HELP,
        Endpoint::HELP,
        LeaderTransfer::HELP,
        Member::HELP,
        Snapshot::HELP,
        registry::cli::Command::HELP,
        sequence::cli::Command::HELP,
        assign::cli::Command::HELP,
        tasks::cli::Command::HELP,
        configs::cli::Command::HELP,
        assign::cli::lock::Command::HELP,
        own,
    ]
    .concat()
}

/// The first word of every command, for completion.
pub fn command_words() -> Vec<String> {
    let mut words: Vec<String> = all_help()
        .iter()
        .filter_map(|(cmd, _)| cmd.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    words.sort();
    words.dedup();
    words
}

/// The words that may follow `first` (`show` -> `beacon`, `nodes`, ...), for completion.
pub fn second_words(first: &str) -> Vec<String> {
    let mut words: Vec<String> = all_help()
        .iter()
        .filter_map(|(cmd, _)| {
            let mut it = cmd.split_whitespace();
            (it.next()? == first).then(|| it.next()).flatten()
        })
        .flat_map(|w| w.split('|'))
        .filter(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .map(str::to_owned)
        .collect();
    words.sort();
    words.dedup();
    words
}

/// A completion script for `shell`: the first word from the commands, the second from what
/// follows it, and the global options.
fn completion_script(shell: &str) -> String {
    let firsts = command_words().join(" ");
    let options = options().join(" ");
    let seconds: Vec<(String, String)> = command_words()
        .into_iter()
        .map(|w| {
            let next = second_words(&w).join(" ");
            (w, next)
        })
        .filter(|(_, next)| !next.is_empty())
        .collect();
    match shell {
        "fish" => {
            let mut out = format!(
                "# nebcli completion for fish: nebcli completion fish > ~/.config/fish/completions/nebcli.fish\n\
                 complete -c nebcli -f -n '__fish_use_subcommand' -a '{firsts}'\n"
            );
            for (first, next) in &seconds {
                out.push_str(&format!(
                    "complete -c nebcli -f -n '__fish_seen_subcommand_from {first}' -a '{next}'\n"
                ));
            }
            out
        }
        _ => {
            let cases: String = seconds
                .iter()
                .map(|(first, next)| format!("        {first}) words=\"{next}\" ;;\n"))
                .collect();
            let zsh = if shell == "zsh" {
                "# nebcli completion for zsh: source <(nebcli completion zsh)\nautoload -U +X bashcompinit && bashcompinit\n"
            } else {
                "# nebcli completion for bash: source <(nebcli completion bash)\n"
            };
            format!(
                "{zsh}_nebcli() {{\n    local cur=\"${{COMP_WORDS[COMP_CWORD]}}\" words=\"\"\n    \
                 if [[ \"$cur\" == -* ]]; then words=\"{options}\"\n    \
                 elif [[ $COMP_CWORD -eq 1 ]]; then words=\"{firsts}\"\n    \
                 elif [[ $COMP_CWORD -eq 2 ]]; then\n      case \"${{COMP_WORDS[1]}}\" in\n{cases}      esac\n    fi\n    \
                 COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n}}\ncomplete -F _nebcli nebcli\n"
            )
        }
    }
}

/// The help of the commands whose syntax starts with `words` (`show nodes`, `register`).
fn help_on(words: &[String]) -> Option<String> {
    let matches = |cmd: &str, n: usize| {
        let syntax: Vec<String> = cmd
            .split_whitespace()
            .map(|w| w.to_ascii_lowercase())
            .collect();
        syntax.len() >= n
            && words
                .iter()
                .take(n)
                .zip(&syntax)
                .all(|(w, s)| s.split('|').any(|alt| alt == w.to_ascii_lowercase()))
    };
    // The longest prefix of the words that names some command.
    (1..=words.len().min(2)).rev().find_map(|n| {
        let found: Vec<String> = all_help()
            .into_iter()
            .filter(|(cmd, _)| matches(cmd, n))
            .map(|(cmd, what)| format!("  {cmd}\n      {what}\n"))
            .collect();
        (!found.is_empty()).then(|| found.concat())
    })
}

pub fn help_text() -> String {
    let mut out = String::from("commands:\n");
    for (cmd, what) in all_help() {
        out.push_str(&format!("  {cmd}\n      {what}\n"));
    }
    out.push_str(
        "options (before or after the command): -s HOST:PORT[,...]  --json | -w table|json  --cluster NAME  --timeout-ms MS\n",
    );
    out
}

/// Parses one command line. `Ok(None)` for a blank line. A line not understood is told
/// what was likely meant: an option nebcli has, a command, or the word after it.
pub fn parse(words: &[&str]) -> Result<Option<Command>, UsageError> {
    parse_words(words).map_err(|e| match suggestion(words) {
        Some(meant) => usage(format!("{} (did you mean {meant}?)", e.0)),
        None => e,
    })
}

/// The global options, for the message that refuses another.
fn options() -> Vec<&'static str> {
    let mut all: Vec<&str> = crate::GLOBAL_WITH_VALUE
        .iter()
        .chain(crate::GLOBAL_FLAGS)
        .copied()
        .chain(["--help", "--version"])
        .collect();
    all.sort_unstable();
    all
}

/// What a line that did not parse likely meant: the option nearest an unknown one, the
/// command nearest an unknown first word, or, after a known first word, the nearest word
/// that may follow it (`show beacons` -> `show beacon`).
fn suggestion(words: &[&str]) -> Option<String> {
    let lower: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
    let first = lower.first()?;
    if first.starts_with('-') {
        let name = first.split_once('=').map_or(first.as_str(), |(n, _)| n);
        return nearest(name, options()).map(|o| format!("`{o}`"));
    }
    let commands = command_words();
    if !commands.contains(first) {
        return nearest(first, commands.iter().map(String::as_str)).map(|c| format!("`{c}`"));
    }
    let second = lower.get(1)?;
    let follows = second_words(first);
    if follows.is_empty() || follows.contains(second) || second.starts_with('-') {
        return None;
    }
    nearest(second, follows.iter().map(String::as_str)).map(|w| format!("`{first} {w}`"))
}

/// The candidate `word` most likely stands for: the shortest that starts with it (two
/// letters or more typed), else the nearest within two edits (one for a short word).
fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let candidates: Vec<&str> = candidates.into_iter().collect();
    if word.len() >= 2
        && let Some(started) = candidates
            .iter()
            .filter(|c| c.starts_with(word))
            .min_by_key(|c| c.len())
    {
        return Some(started);
    }
    let most = if word.len() < 4 { 1 } else { 2 };
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(word, c), c))
        .filter(|(d, _)| *d <= most)
        .min()
        .map(|(_, c)| c)
}

fn parse_words(words: &[&str]) -> Result<Option<Command>, UsageError> {
    // Words after `--` are a command nebcli runs (`lock NAME -- CMD`), not nebcli's.
    let own = &words[..words.iter().position(|w| *w == "--").unwrap_or(words.len())];
    if own.len() > 1 && own.iter().any(|w| *w == "--help" || *w == "-h") {
        let rest: Vec<String> = own
            .iter()
            .filter(|w| **w != "--help" && **w != "-h")
            .map(|w| (*w).to_owned())
            .collect();
        return Ok(Some(Command::HelpOn(rest)));
    }
    let lower = beacon::cli::head(words);
    let head: Vec<&str> = lower.iter().map(String::as_str).collect();
    if let Some(cmd) = ShowBeacon::parse(&head, words) {
        return cmd.map(|c| Some(Command::Beacon(c)));
    }
    if let Some(cmd) = Endpoint::parse(&head, words) {
        return cmd.map(|c| Some(Command::Endpoint(c)));
    }
    if let Some(cmd) = LeaderTransfer::parse(&head, words) {
        return cmd.map(|c| Some(Command::Leader(c)));
    }
    if let Some(cmd) = Member::parse(&head, words) {
        return cmd.map(|c| Some(Command::Member(c)));
    }
    if let Some(cmd) = Snapshot::parse(&head, words) {
        return cmd.map(|c| Some(Command::Snapshot(c)));
    }
    if let Some(cmd) = registry::cli::Command::parse(&head, words) {
        return cmd.map(|c| Some(Command::Registry(c)));
    }
    if let Some(cmd) = sequence::cli::Command::parse(&head, words) {
        return cmd.map(|c| Some(Command::Sequence(c)));
    }
    if let Some(cmd) = assign::cli::Command::parse(&head, words) {
        return cmd.map(|c| Some(Command::Assign(c)));
    }
    if let Some(cmd) = tasks::cli::Command::parse(&head, words) {
        return cmd.map(|c| Some(Command::Tasks(c)));
    }
    if let Some(cmd) = assign::cli::lock::Command::parse(&head, words) {
        return cmd.map(|c| Some(Command::Lock(c)));
    }
    if let Some(cmd) = configs::cli::Command::parse(&head, words) {
        return cmd.map(|c| Some(Command::Configs(c)));
    }
    match head.as_slice() {
        [] => Ok(None),
        ["help" | "?", ..] => Ok(Some(Command::Help)),
        ["quit" | "exit"] => Ok(Some(Command::Quit(None))),
        ["quit" | "exit", code] => code
            .parse()
            .map(|c| Some(Command::Quit(Some(c))))
            .map_err(|_| usage(format!("`exit {code}`: the code is a number 0..=255"))),
        ["completion", shell] if ["bash", "zsh", "fish"].contains(shell) => {
            Ok(Some(Command::Completion((*shell).to_owned())))
        }
        ["completion", ..] => Err(usage("usage: `completion bash|zsh|fish`")),
        ["show"] => Err(usage(format!(
            "`show` needs a subject: {}",
            subjects().join(", ")
        ))),
        ["show", what, ..] => Err(usage(format!("unknown subject `show {what}`"))),
        [other, ..] if other.starts_with('-') => Err(usage(format!(
            "unknown option `{other}` (nebcli's options: {})",
            options().join(" ")
        ))),
        [other, ..] => Err(usage(format!("unknown command `{other}`"))),
    }
}

impl Command {
    /// Runs the command and returns what to print.
    pub async fn run(&self, session: &mut Session) -> Result<String, Failure> {
        match self {
            Command::Beacon(c) => c.run(session).await,
            Command::Endpoint(c) => c.run(session).await,
            Command::Leader(c) => c.run(session).await,
            Command::Member(c) => c.run(session).await,
            Command::Snapshot(c) => c.run(session).await,
            Command::Registry(c) => c.run(session).await,
            Command::Sequence(c) => c.run(session).await,
            Command::Assign(c) => c.run(session).await,
            Command::Tasks(c) => c.run(session).await,
            Command::Lock(c) => c.run(session).await,
            Command::Configs(c) => c.run(session).await,
            Command::Help => Ok(help_text()),
            Command::HelpOn(words) => help_on(words).ok_or_else(|| {
                Failure::Usage(usage(format!("unknown command `{}`", words.join(" "))))
            }),
            Command::Quit(_) => Ok(String::new()),
            Command::Completion(shell) => Ok(completion_script(shell)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use beacon::machines::registry::cli::{Command as R, Registration};

    #[test]
    fn known_commands_parse_case_insensitively() {
        assert_eq!(
            parse(&["show", "beacon"]),
            Ok(Some(Command::Beacon(ShowBeacon)))
        );
        assert_eq!(
            parse(&["SHOW", "Beacon"]),
            Ok(Some(Command::Beacon(ShowBeacon)))
        );
        assert_eq!(parse(&["exit"]), Ok(Some(Command::Quit(None))));
        assert_eq!(parse(&["quit"]), Ok(Some(Command::Quit(None))));
        assert_eq!(parse(&["exit", "3"]), Ok(Some(Command::Quit(Some(3)))));
        assert!(parse(&["exit", "three"]).is_err());
        assert_eq!(
            parse(&["register", "--help"]),
            Ok(Some(Command::HelpOn(vec!["register".into()])))
        );
        assert_eq!(parse(&["help"]), Ok(Some(Command::Help)));
        assert_eq!(parse(&[]), Ok(None));
    }

    #[test]
    fn arguments_keep_their_case() {
        assert_eq!(
            parse(&["show", "nodes", "LOGIC"]),
            Ok(Some(Command::Registry(R::ShowNodes {
                node_type: Some("LOGIC".into()),
                health: beacon::machines::registry::HealthFilter::Any,
                limit: None,
                from: 0
            })))
        );
        assert_eq!(
            parse(&["show", "node_report", "Logic", "10.0.0.1:80"]),
            Ok(Some(Command::Registry(R::ShowNodeReport(
                "Logic".into(),
                Some("10.0.0.1:80".into())
            ))))
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
            Ok(Some(Command::Registry(R::Register(Registration {
                node_type: "LOGIC".into(),
                addr: "10.0.0.1:80".into(),
                metadata: r#"{"Zone":1}"#.into(),
                ..Registration::default()
            }))))
        );
        assert_eq!(
            parse(&["bench", "register", "--clients", "4", "--count", "100"]),
            Ok(Some(Command::Registry(R::BenchRegister {
                clients: 4,
                count: 100,
                node_type: "BENCH".into()
            })))
        );
    }

    #[test]
    fn a_near_miss_is_told_what_was_meant() {
        let said = |words: &[&str]| parse(words).unwrap_err().0;
        assert_eq!(
            said(&["--bogus", "show", "beacon"]),
            format!(
                "unknown option `--bogus` (nebcli's options: {})",
                options().join(" ")
            )
        );
        assert!(said(&["--sever", "show"]).ends_with("did you mean `--server`?)"));
        assert!(said(&["show", "beacons"]).ends_with("did you mean `show beacon`?)"));
        assert!(said(&["show", "nod"]).ends_with("did you mean `show nodes`?)"));
        assert!(said(&["regster"]).ends_with("did you mean `register`?)"));
        assert!(said(&["sequence", "nxt", "x"]).ends_with("did you mean `sequence next`?)"));
        assert!(said(&["member", "lst"]).ends_with("did you mean `member list`?)"));
        assert!(said(&["config", "gt", "x"]).ends_with("did you mean `config get`?)"));
        assert!(said(&["queue", "creat", "q"]).ends_with("did you mean `queue create`?)"));
        // Every subject of `show` is one a near miss can be sent to.
        for subject in subjects() {
            let typo = format!("{subject}s");
            assert!(
                said(&["show", &typo]).ends_with(&format!("did you mean `show {subject}`?)")),
                "{subject}: {}",
                said(&["show", &typo])
            );
        }
        // Nothing near: no guess.
        assert!(!said(&["frobnicate"]).contains("did you mean"));
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
            Ok(Some(Command::Registry(R::Unregister {
                target: "3".into(),
                free: true
            })))
        );
    }
}
