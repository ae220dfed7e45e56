//! Framing: a fixed 16-byte head followed by a protobuf body.
//!
//! ```text
//!  0      2    3     4          8          12         16
//!  +------+----+-----+----------+----------+----------+----------------+
//!  | BEAC | v1 |flags|   cmd    |   seq    |  length  |  body (length) |
//!  +------+----+-----+----------+----------+----------+----------------+
//!  all integers big-endian
//! ```
//!
//! The magic lets a beacon tell at once that a peer speaks something else (an HTTP client
//! pointed at the cluster port, a port scanner) and say so, instead of waiting for a length
//! that will never come. The length is checked against a limit before any body is buffered,
//! so a bogus length cannot make the daemon allocate gigabytes.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// First two bytes of every frame.
pub const MAGIC: [u8; 2] = [0xBE, 0xAC];
/// The only protocol version spoken so far.
pub const VERSION: u8 = 1;
/// Size of the fixed head.
pub const HEAD_LEN: usize = 16;
/// Default limit on a frame's body.
pub const DEFAULT_MAX_FRAME: usize = 4 * 1024 * 1024;

/// Head flag: the sender expects no response (heartbeats).
pub const FLAG_ONEWAY: u8 = 0x01;
/// Head flag: the body is an `ErrorReply`, not the command's own response.
pub const FLAG_ERROR: u8 = 0x02;
/// Head flag: the message goes on in the next frame (beacon to beacon only; see
/// [`super::fragment`]).
pub const FLAG_MORE: u8 = 0x04;
/// Head flag, on a read: answer from this beacon's replica as it is (a serializable read),
/// not after the read-index wait that makes reads linearizable by default.
pub const FLAG_SERIALIZABLE: u8 = 0x08;

/// Whether `buf` starts with a whole frame (head and body), so that decoding it would not
/// wait for the network. A server that finds one after answering a request holds its reply
/// back to send it with the next one: one write for a pipelined batch.
pub fn holds_frame(buf: &[u8]) -> bool {
    buf.len() >= HEAD_LEN
        && buf.len() - HEAD_LEN
            >= u32::from_be_bytes(buf[12..16].try_into().expect("four bytes")) as usize
}

/// The `(flags, cmd)` of the frame at the start of `buf` when the codec, with body limit
/// `max_body`, would hand it over at once and without error: head and body are in, and the
/// magic, version and length are good. A server can then take it along with the request it
/// is answering.
pub fn ready_frame(buf: &[u8], max_body: usize) -> Option<(u8, u32)> {
    if !holds_frame(buf) || buf[..2] != MAGIC || buf[2] != VERSION {
        return None;
    }
    let len = u32::from_be_bytes(buf[12..16].try_into().expect("four bytes")) as usize;
    let cmd = u32::from_be_bytes(buf[4..8].try_into().expect("four bytes"));
    (len <= max_body).then_some((buf[3], cmd))
}

/// One frame: head fields plus the still-encoded body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub cmd: u32,
    pub seq: u32,
    pub flags: u8,
    pub body: Bytes,
}

impl Frame {
    /// A frame whose body is `msg` encoded.
    pub fn new(cmd: u32, seq: u32, flags: u8, msg: &impl prost::Message) -> Self {
        Frame {
            cmd,
            seq,
            flags,
            body: msg.encode_to_vec().into(),
        }
    }

    pub fn is_error(&self) -> bool {
        self.flags & FLAG_ERROR != 0
    }

    pub fn is_oneway(&self) -> bool {
        self.flags & FLAG_ONEWAY != 0
    }

    /// Decodes the body as `M`, naming the command when the bytes are not an `M`.
    pub fn decode<M: prost::Message + Default>(&self) -> Result<M, FrameError> {
        M::decode(self.body.as_ref()).map_err(|e| FrameError::MalformedBody {
            cmd: self.cmd,
            seq: self.seq,
            reason: e.to_string(),
        })
    }
}

/// Why a byte stream could not be turned into frames. Every variant says what was wrong and
/// where, so the log line (and the error reply) is enough to find the culprit.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error(
        "not a beacon frame: expected magic 0xBEAC, got 0x{found:04X}{hint} (the connection is closed)"
    )]
    BadMagic { found: u16, hint: &'static str },
    #[error("unsupported protocol version {found} (this beacon speaks version {VERSION})")]
    UnsupportedVersion { found: u8, cmd: u32, seq: u32 },
    #[error(
        "frame cmd {cmd} seq {seq}: body of {len} bytes exceeds the limit of {max} bytes (`max_frame_bytes`)"
    )]
    TooLarge {
        cmd: u32,
        seq: u32,
        len: usize,
        max: usize,
    },
    #[error("truncated frame: connection closed after {have} of {need} bytes")]
    Truncated { have: usize, need: usize },
    #[error("frame cmd {cmd} seq {seq}: malformed body: {reason}")]
    MalformedBody { cmd: u32, seq: u32, reason: String },
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

impl FrameError {
    /// The (cmd, seq) of the offending frame when the head was readable, so an error reply can
    /// be addressed to the request that caused it.
    pub fn request(&self) -> Option<(u32, u32)> {
        match *self {
            FrameError::UnsupportedVersion { cmd, seq, .. }
            | FrameError::TooLarge { cmd, seq, .. }
            | FrameError::MalformedBody { cmd, seq, .. } => Some((cmd, seq)),
            _ => None,
        }
    }

    /// Whether the stream can go on after this error. Only a malformed body leaves the framing
    /// intact; after anything else the byte stream cannot be resynchronised.
    pub fn is_recoverable(&self) -> bool {
        matches!(self, FrameError::MalformedBody { .. })
    }
}

/// `tokio_util` codec for [`Frame`]s with a body limit.
#[derive(Debug, Clone)]
pub struct FrameCodec {
    max_body: usize,
}

impl FrameCodec {
    pub fn new(max_body: usize) -> Self {
        FrameCodec { max_body }
    }
}

impl Default for FrameCodec {
    fn default() -> Self {
        FrameCodec::new(DEFAULT_MAX_FRAME)
    }
}

fn magic_hint(head: &[u8]) -> &'static str {
    const HTTP: [&[u8]; 5] = [b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE"];
    if HTTP.iter().any(|m| head.starts_with(m)) {
        " (looks like HTTP: the admin HTTP API listens on its own address, see `admin` in the config)"
    } else if head.len() >= 2 && matches!(head[0], 0x15 | 0x16) && head[1] == 0x03 {
        // A TLS record (alert or handshake) where plain frames were expected.
        " (looks like TLS: this beacon requires it; connect with its CA, nebcli --cacert or ConnectOptions.tls)"
    } else {
        ""
    }
}

/// The codec's work, on bytes alone: a transport hands it what it read and takes what it
/// encodes (`transport::codec` puts it under tokio's `Framed`), so the wire format needs no
/// runtime.
impl FrameCodec {
    /// The next whole frame at the start of `src` (taken out of it), `None` while more
    /// bytes are needed, or why the bytes are no frame.
    pub fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        // Check the magic as soon as two bytes are in, so garbage is reported even when the
        // sender sends fewer than a full head and then waits.
        if src.len() >= 2 && src[..2] != MAGIC {
            let found = u16::from_be_bytes([src[0], src[1]]);
            return Err(FrameError::BadMagic {
                found,
                hint: magic_hint(src),
            });
        }
        if src.len() < HEAD_LEN {
            return Ok(None);
        }
        let version = src[2];
        let flags = src[3];
        let cmd = u32::from_be_bytes(src[4..8].try_into().expect("4 bytes"));
        let seq = u32::from_be_bytes(src[8..12].try_into().expect("4 bytes"));
        let len = u32::from_be_bytes(src[12..16].try_into().expect("4 bytes")) as usize;
        if version != VERSION {
            return Err(FrameError::UnsupportedVersion {
                found: version,
                cmd,
                seq,
            });
        }
        if len > self.max_body {
            return Err(FrameError::TooLarge {
                cmd,
                seq,
                len,
                max: self.max_body,
            });
        }
        if src.len() < HEAD_LEN + len {
            src.reserve(HEAD_LEN + len - src.len());
            return Ok(None);
        }
        src.advance(HEAD_LEN);
        let body = src.split_to(len).freeze();
        Ok(Some(Frame {
            cmd,
            seq,
            flags,
            body,
        }))
    }

    /// [`FrameCodec::decode`] at the end of the stream: bytes left over that make no whole
    /// frame are a truncated one.
    pub fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        match self.decode(src)? {
            Some(frame) => Ok(Some(frame)),
            None if src.is_empty() => Ok(None),
            None => {
                let need = if src.len() >= HEAD_LEN {
                    HEAD_LEN + u32::from_be_bytes(src[12..16].try_into().expect("4 bytes")) as usize
                } else {
                    HEAD_LEN
                };
                Err(FrameError::Truncated {
                    have: src.len(),
                    need,
                })
            }
        }
    }

    /// Appends `frame` to `dst`, or refuses one over the body limit.
    pub fn encode(&mut self, frame: Frame, dst: &mut BytesMut) -> Result<(), FrameError> {
        if frame.body.len() > self.max_body {
            return Err(FrameError::TooLarge {
                cmd: frame.cmd,
                seq: frame.seq,
                len: frame.body.len(),
                max: self.max_body,
            });
        }
        dst.reserve(HEAD_LEN + frame.body.len());
        dst.put_slice(&MAGIC);
        dst.put_u8(VERSION);
        dst.put_u8(frame.flags);
        dst.put_u32(frame.cmd);
        dst.put_u32(frame.seq);
        dst.put_u32(frame.body.len() as u32);
        dst.put_slice(&frame.body);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(frame: Frame) -> BytesMut {
        let mut buf = BytesMut::new();
        FrameCodec::default().encode(frame, &mut buf).unwrap();
        buf
    }

    #[test]
    fn round_trip_keeps_every_field() {
        let frame = Frame {
            cmd: 113,
            seq: 7,
            flags: FLAG_ONEWAY,
            body: Bytes::from_static(b"\x08\x01"),
        };
        let mut buf = encoded(frame.clone());
        assert_eq!(buf.len(), HEAD_LEN + 2);
        assert_eq!(&buf[..4], &[0xBE, 0xAC, 1, FLAG_ONEWAY]);
        let got = FrameCodec::default().decode(&mut buf).unwrap().unwrap();
        assert_eq!(got, frame);
        assert!(buf.is_empty());
    }

    #[test]
    fn holds_frame_only_when_head_and_body_are_in() {
        let full = encoded(Frame {
            cmd: 101,
            seq: 3,
            flags: 0,
            body: Bytes::from_static(b"abcd"),
        });
        assert!(holds_frame(&full));
        assert!(!holds_frame(&full[..full.len() - 1]));
        assert!(!holds_frame(&full[..HEAD_LEN - 1]));
        assert!(!holds_frame(&[]));
        // Ready: whole and well-formed, within the limit.
        assert_eq!(ready_frame(&full, 4), Some((0, 101)));
        assert_eq!(ready_frame(&full, 3), None, "over the limit");
        assert_eq!(ready_frame(&full[..full.len() - 1], 4), None, "not whole");
        let mut bad = full.clone();
        bad[2] = VERSION + 1;
        assert_eq!(ready_frame(&bad, 4), None, "another version");
        bad[0] = b'G';
        assert_eq!(ready_frame(&bad, 4), None, "not a beacon frame");
    }

    #[test]
    fn partial_frame_waits_for_more_bytes() {
        let full = encoded(Frame {
            cmd: 1,
            seq: 1,
            flags: 0,
            body: Bytes::from_static(b"abc"),
        });
        let mut codec = FrameCodec::default();
        let mut buf = BytesMut::from(&full[..HEAD_LEN + 1]);
        assert_eq!(codec.decode(&mut buf).unwrap(), None);
        buf.extend_from_slice(&full[HEAD_LEN + 1..]);
        assert_eq!(codec.decode(&mut buf).unwrap().unwrap().body, "abc");
    }

    #[test]
    fn garbage_is_rejected_after_two_bytes_and_http_is_named() {
        let mut buf = BytesMut::from(&b"GE"[..]);
        let err = FrameCodec::default().decode(&mut buf).unwrap_err();
        assert!(matches!(err, FrameError::BadMagic { found: 0x4745, .. }));
        let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\n"[..]);
        let msg = FrameCodec::default()
            .decode(&mut buf)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("looks like HTTP"), "{msg}");
    }

    #[test]
    fn oversized_length_is_rejected_from_the_head_alone() {
        let mut head = BytesMut::new();
        head.put_slice(&MAGIC);
        head.put_u8(VERSION);
        head.put_u8(0);
        head.put_u32(103);
        head.put_u32(9);
        head.put_u32(u32::MAX);
        let err = FrameCodec::new(1024).decode(&mut head).unwrap_err();
        assert!(matches!(
            err,
            FrameError::TooLarge {
                cmd: 103,
                seq: 9,
                len,
                max: 1024
            } if len == u32::MAX as usize
        ));
        assert_eq!(err.request(), Some((103, 9)));
        assert!(!err.is_recoverable());
    }

    #[test]
    fn wrong_version_is_named() {
        let mut buf = encoded(Frame {
            cmd: 1,
            seq: 2,
            flags: 0,
            body: Bytes::new(),
        });
        buf[2] = 9;
        let err = FrameCodec::default().decode(&mut buf).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unsupported protocol version 9 (this beacon speaks version 1)"
        );
    }

    #[test]
    fn eof_inside_a_frame_is_truncation() {
        let full = encoded(Frame {
            cmd: 1,
            seq: 1,
            flags: 0,
            body: Bytes::from_static(b"0123456789"),
        });
        let mut buf = BytesMut::from(&full[..HEAD_LEN + 4]);
        let err = FrameCodec::default().decode_eof(&mut buf).unwrap_err();
        assert!(matches!(err, FrameError::Truncated { have: 20, need: 26 }));
        let mut empty = BytesMut::new();
        assert_eq!(FrameCodec::default().decode_eof(&mut empty).unwrap(), None);
    }

    #[test]
    fn encoder_refuses_bodies_over_the_limit() {
        let mut buf = BytesMut::new();
        let err = FrameCodec::new(2)
            .encode(
                Frame {
                    cmd: 1,
                    seq: 1,
                    flags: 0,
                    body: Bytes::from_static(b"abc"),
                },
                &mut buf,
            )
            .unwrap_err();
        assert!(matches!(err, FrameError::TooLarge { len: 3, max: 2, .. }));
        assert!(buf.is_empty());
    }
}
