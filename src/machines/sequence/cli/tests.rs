//! How the commands parse.

use super::*;

#[test]
fn commands_parse_with_their_flags() {
    assert_eq!(
        Command::parse_line("sequence create orders --start 100 --step 50"),
        Ok(Command::Create {
            name: "orders".into(),
            start: 100,
            step: 50
        })
    );
    assert_eq!(
        Command::parse_line("SEQUENCE next Orders"),
        Ok(Command::Next {
            name: "Orders".into(),
            count: 0
        })
    );
    assert_eq!(
        Command::parse_line("show sequences"),
        Ok(Command::Show(None, Default::default()))
    );
    assert!(Command::parse_line("sequence create").is_err());
    assert!(Command::parse_line("sequence create orders --step 0").is_err());
    assert!(Command::parse_line("sequence create orders --step x").is_err());
    assert!(Command::parse_line("sequence create orders --count 3").is_err());
    assert!(Command::parse_line("sequence change orders").is_err());
    assert!(Command::parse_line("sequence frobnicate orders").is_err());
    assert!(Command::parse_line("snowflake decode").is_err());
    assert!(Command::parse_line("snowflake decode 12 --layout 41,10").is_err());
    assert!(Command::parse_line(&format!("snowflake decode {}", u64::MAX)).is_err());
}

#[test]
fn an_id_decodes_to_time_worker_and_sequence() {
    let layout = Layout::default();
    let id = layout.compose(DEFAULT_EPOCH_MS + 86_400_000, 5, 9);
    let Ok(Command::Decode { id: got, layout: l }) =
        Command::parse_line(&format!("snowflake decode {id}"))
    else {
        panic!("parses");
    };
    let d = l.decode(got);
    assert_eq!((d.unix_ms, d.worker, d.sequence), (1_704_153_600_000, 5, 9));
    assert_eq!(utc_ms(d.unix_ms), "2024-01-02T00:00:00.000Z");
}
