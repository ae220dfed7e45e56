//! One number in a machine's own field of a shared message, for machines small enough not
//! to need a proto file of their own.

use prost::encoding::{WireType, decode_key, decode_varint, encode_key, encode_varint, skip_field};

use super::WireError;

/// Writes `n` as field `tag`.
pub fn put_u64(tag: u32, n: u64, buf: &mut Vec<u8>) {
    encode_key(tag, WireType::Varint, buf);
    encode_varint(n, buf);
}

/// Field `tag` of a whole message, if present (the last one wins, as protobuf merges);
/// every other field is skipped.
pub fn get_u64(tag: u32, mut bytes: &[u8]) -> Result<Option<u64>, WireError> {
    let mut found = None;
    while !bytes.is_empty() {
        let (t, wire_type) = decode_key(&mut bytes)?;
        if t == tag && wire_type == WireType::Varint {
            found = Some(decode_varint(&mut bytes)?);
        } else {
            skip_field(wire_type, t, &mut bytes, Default::default())?;
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use prost::Message as _;

    use super::*;
    use crate::pb;

    #[test]
    fn a_field_rides_beside_the_cores_and_is_read_back() {
        let mut buf = pb::LogEntry {
            index: 7,
            term: 2,
            leader_start: false,
            known_commit: 0,
            members: None,
        }
        .encode_to_vec();
        put_u64(20, 99, &mut buf);
        assert_eq!(get_u64(20, &buf).unwrap(), Some(99));
        assert_eq!(get_u64(21, &buf).unwrap(), None);
        assert_eq!(pb::LogEntry::decode(&buf[..]).unwrap().index, 7);
        assert!(get_u64(20, &[0xff]).is_err(), "a cut-off key is an error");
    }
}
