//! How the commands parse.

use super::*;

#[test]
fn commands_parse_with_their_flags() {
    assert_eq!(
        Command::parse_line("task submit q t1 --payload hi --priority 2 --wait"),
        Ok(Command::Submit {
            queue: "q".into(),
            name: "t1".into(),
            payload: "hi".into(),
            options: SubmitOptions {
                priority: 2,
                ..SubmitOptions::default()
            },
            wait: true,
        })
    );
    assert!(
        Command::parse_line("task submit q").is_err(),
        "needs a name"
    );
    assert!(Command::parse_line("task submit q t --priority x").is_err());
    assert!(Command::parse_line("task submit q t --frob 1").is_err());
    assert_eq!(
        Command::parse_line("task cancel q t"),
        Ok(Command::Cancel {
            queue: "q".into(),
            name: "t".into()
        })
    );
    assert_eq!(
        Command::parse_line("TASK requeue q"),
        Ok(Command::Requeue {
            queue: "q".into(),
            names: vec![]
        })
    );
    assert_eq!(
        Command::parse_line("queue create q --attempt-timeout-ms 500 --max-attempts 3"),
        Ok(Command::CreateQueue {
            name: "q".into(),
            timeout_ms: 500,
            max_attempts: 3
        })
    );
    assert!(Command::parse_line("queue create").is_err());
    assert_eq!(
        Command::parse_line("show tasks q --state dead"),
        Ok(Command::Tasks {
            queue: "q".into(),
            state: "dead".into(),
            limit: 100
        })
    );
    assert!(Command::parse_line("show tasks").is_err());
    assert_eq!(
        Command::parse_line("show queues"),
        Ok(Command::Queues(Default::default()))
    );
    assert!(matches!(
        Command::parse_line("task work a,b --capacity 4 --sleep-ms 10"),
        Ok(Command::Work {
            capacity: 4,
            sleep_ms: 10,
            ..
        })
    ));
    assert!(Command::parse_line("task work a --capacity 0").is_err());
    assert!(Command::parse_line("task frob").is_err());
}
