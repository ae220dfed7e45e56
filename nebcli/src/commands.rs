//! The commands nebcli understands, parsed from a line of words.

use std::fmt;

/// One parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    ShowBeacon,
    Help,
    Quit,
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
    ("help", "this list"),
    ("quit | exit", "leave the interactive shell"),
];

pub fn help_text() -> String {
    let width = HELP.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
    let mut out = String::from("commands:\n");
    for (cmd, what) in HELP {
        out.push_str(&format!("  {cmd:<width$}    {what}\n"));
    }
    out.push_str(
        "options (before the command): -s IP:PORT  --json  --cluster NAME  --timeout-ms MS\n",
    );
    out
}

/// Parses one command line. `Ok(None)` for a blank line.
pub fn parse(words: &[&str]) -> Result<Option<Command>, UsageError> {
    let lower: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
    let words: Vec<&str> = lower.iter().map(String::as_str).collect();
    match words.as_slice() {
        [] => Ok(None),
        ["show", "beacon"] => Ok(Some(Command::ShowBeacon)),
        ["show", "beacon", extra @ ..] => Err(UsageError(format!(
            "`show beacon` takes no arguments (got `{}`)",
            extra.join(" ")
        ))),
        ["show"] => Err(UsageError("`show` needs a subject: `show beacon`".into())),
        ["show", what, ..] => Err(UsageError(format!("unknown subject `show {what}`"))),
        ["help" | "?", ..] => Ok(Some(Command::Help)),
        ["quit" | "exit"] => Ok(Some(Command::Quit)),
        [other, ..] => Err(UsageError(format!("unknown command `{other}`"))),
    }
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
    }
}
