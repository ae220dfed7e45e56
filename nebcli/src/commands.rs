//! The commands nebcli understands: the core's and each machine's, one line per set in
//! [`parse`], [`help_text`] and [`Command::run`].

use beacon::cli::beacon::{Endpoint, ShowBeacon};
use beacon::cli::{Commands, Failure, Session, UsageError, usage};
use beacon::machines::{assign, registry, sequence, tasks};

/// One parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Beacon(ShowBeacon),
    Endpoint(Endpoint),
    Registry(registry::cli::Command),
    Sequence(sequence::cli::Command),
    Assign(assign::cli::Command),
    Tasks(tasks::cli::Command),
    Help,
    Quit,
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

pub fn help_text() -> String {
    let mut out = String::from("commands:\n");
    let own: &[(&str, &str)] = &[
        ("help", "this list"),
        ("quit | exit", "leave the interactive shell"),
    ];
    let sets = [
        ShowBeacon::HELP,
        Endpoint::HELP,
        registry::cli::Command::HELP,
        sequence::cli::Command::HELP,
        assign::cli::Command::HELP,
        tasks::cli::Command::HELP,
        own,
    ];
    for (cmd, what) in sets.concat() {
        out.push_str(&format!("  {cmd}\n      {what}\n"));
    }
    out.push_str(
        "options (before the command): -s IP:PORT  --json  --cluster NAME  --timeout-ms MS\n",
    );
    out
}

/// Parses one command line. `Ok(None)` for a blank line.
pub fn parse(words: &[&str]) -> Result<Option<Command>, UsageError> {
    let lower = beacon::cli::head(words);
    let head: Vec<&str> = lower.iter().map(String::as_str).collect();
    if let Some(cmd) = ShowBeacon::parse(&head, words) {
        return cmd.map(|c| Some(Command::Beacon(c)));
    }
    if let Some(cmd) = Endpoint::parse(&head, words) {
        return cmd.map(|c| Some(Command::Endpoint(c)));
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
    match head.as_slice() {
        [] => Ok(None),
        ["help" | "?", ..] => Ok(Some(Command::Help)),
        ["quit" | "exit"] => Ok(Some(Command::Quit)),
        ["show"] => Err(usage(format!(
            "`show` needs a subject: {}",
            subjects().join(", ")
        ))),
        ["show", what, ..] => Err(usage(format!("unknown subject `show {what}`"))),
        [other, ..] => Err(usage(format!("unknown command `{other}`"))),
    }
}

impl Command {
    /// Runs the command and returns what to print.
    pub async fn run(&self, session: &mut Session) -> Result<String, Failure> {
        match self {
            Command::Beacon(c) => c.run(session).await,
            Command::Endpoint(c) => c.run(session).await,
            Command::Registry(c) => c.run(session).await,
            Command::Sequence(c) => c.run(session).await,
            Command::Assign(c) => c.run(session).await,
            Command::Tasks(c) => c.run(session).await,
            Command::Help => Ok(help_text()),
            Command::Quit => Ok(String::new()),
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
        assert_eq!(parse(&["exit"]), Ok(Some(Command::Quit)));
        assert_eq!(parse(&["quit"]), Ok(Some(Command::Quit)));
        assert_eq!(parse(&["help"]), Ok(Some(Command::Help)));
        assert_eq!(parse(&[]), Ok(None));
    }

    #[test]
    fn arguments_keep_their_case() {
        assert_eq!(
            parse(&["show", "nodes", "LOGIC"]),
            Ok(Some(Command::Registry(R::ShowNodes(Some("LOGIC".into())))))
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
