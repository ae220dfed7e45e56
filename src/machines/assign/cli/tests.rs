//! How the commands parse.

use super::*;

#[test]
fn commands_parse_with_their_flags() {
    assert_eq!(
        Command::parse_line("resource add site-1 --type CRAWLER --weight 3 --label zone=b"),
        Ok(Command::Add {
            name: "site-1".into(),
            node_type: "CRAWLER".into(),
            weight: 3,
            labels: BTreeMap::from([("zone".into(), "b".into())]),
        })
    );
    assert!(
        Command::parse_line("resource add site-1").is_err(),
        "needs a type"
    );
    assert!(
        Command::parse_line("resource add --type X").is_err(),
        "needs a name"
    );
    assert!(Command::parse_line("resource add a --type X --weight 0").is_err());
    assert!(Command::parse_line("resource add a --type X --weight -1").is_err());
    assert!(Command::parse_line("resource add a --type X --label nokey").is_err());
    assert_eq!(
        Command::parse_line("resource delete a"),
        Ok(Command::Delete("a".into()))
    );
    assert_eq!(
        Command::parse_line("RESOURCE rebalance CRAWLER"),
        Ok(Command::Rebalance(Some("CRAWLER".into())))
    );
    assert_eq!(
        Command::parse_line("show resources"),
        Ok(Command::Show(None, Default::default()))
    );
    assert!(Command::parse_line("resource frob").is_err());
    assert_eq!(
        Command::parse_line("resource add bot-1 --slot robots/2"),
        Ok(Command::AddToSlot {
            name: "bot-1".into(),
            group: "robots".into(),
            slot: 2,
            weight: 1
        })
    );
    assert!(Command::parse_line("resource add bot-1 --slot robots").is_err());
    assert!(Command::parse_line("resource add bot-1 --slot robots/1 --type X").is_err());
    assert_eq!(
        Command::parse_line("slots create robots --type ROBOT --count 3"),
        Ok(Command::CreateSlots {
            name: "robots".into(),
            node_type: "ROBOT".into(),
            count: 3
        })
    );
    assert!(Command::parse_line("slots create robots --type ROBOT --count 0").is_err());
    assert!(Command::parse_line("slots create robots --count 3").is_err());
    assert_eq!(
        Command::parse_line("slots delete robots"),
        Ok(Command::DeleteSlots("robots".into()))
    );
    assert_eq!(
        Command::parse_line("show slots"),
        Ok(Command::ShowSlots(None, Default::default()))
    );
}
