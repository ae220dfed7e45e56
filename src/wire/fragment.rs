//! Messages larger than one frame, between beacons: a snapshot of a large registry (100k
//! registrations are several MiB) goes out as a run of frames of the same `cmd` and `seq`,
//! every one but the last flagged [`FLAG_MORE`], and is put back together on arrival.
//!
//! The frame limit (`max_frame_bytes`) stays what it is for clients; only handshaken beacons
//! of the same cluster may send fragments, and a whole message is bounded by
//! [`MAX_MESSAGE_BYTES`], so a peer cannot make a beacon buffer without end.

use bytes::{Bytes, BytesMut};

use super::frame::{FLAG_MORE, Frame};

/// Largest message a beacon puts back together from fragments.
pub const MAX_MESSAGE_BYTES: usize = 1 << 30;

/// `body` as frames of at most `max` bytes of body each (one frame when it fits).
pub fn split(cmd: u32, seq: u32, flags: u8, body: Bytes, max: usize) -> Vec<Frame> {
    if body.len() <= max {
        return vec![Frame {
            cmd,
            seq,
            flags,
            body,
        }];
    }
    let mut frames = Vec::with_capacity(body.len().div_ceil(max));
    let mut rest = body;
    while !rest.is_empty() {
        let part = rest.split_to(rest.len().min(max));
        let more = if rest.is_empty() { 0 } else { FLAG_MORE };
        frames.push(Frame {
            cmd,
            seq,
            flags: flags | more,
            body: part,
        });
    }
    frames
}

/// Why fragments could not be put back together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FragmentError {
    #[error(
        "fragment of cmd {cmd} seq {seq} arrived inside message cmd {open_cmd} seq {open_seq}: \
         fragments of two messages interleaved"
    )]
    Interleaved {
        cmd: u32,
        seq: u32,
        open_cmd: u32,
        open_seq: u32,
    },
    #[error("message cmd {cmd} seq {seq} exceeds {max} bytes in fragments")]
    TooLarge { cmd: u32, seq: u32, max: usize },
}

/// Puts fragmented messages back together, one at a time per connection.
#[derive(Debug)]
pub struct Reassembly {
    /// (cmd, seq) of the message being put together, and its bytes so far.
    open: Option<(u32, u32, BytesMut)>,
    max: usize,
}

impl Reassembly {
    pub fn new(max: usize) -> Reassembly {
        Reassembly { open: None, max }
    }

    /// Takes one frame: `Ok(Some(whole))` when it completes a message (or is one on its
    /// own), `Ok(None)` while more fragments are to come. After an error the partial message
    /// is dropped.
    pub fn push(&mut self, frame: Frame) -> Result<Option<Frame>, FragmentError> {
        let more = frame.flags & FLAG_MORE != 0;
        let Some((cmd, seq, mut buf)) = self.open.take() else {
            if !more {
                return Ok(Some(frame));
            }
            self.check(frame.cmd, frame.seq, frame.body.len())?;
            self.open = Some((frame.cmd, frame.seq, BytesMut::from(frame.body.as_ref())));
            return Ok(None);
        };
        if (frame.cmd, frame.seq) != (cmd, seq) {
            return Err(FragmentError::Interleaved {
                cmd: frame.cmd,
                seq: frame.seq,
                open_cmd: cmd,
                open_seq: seq,
            });
        }
        self.check(cmd, seq, buf.len() + frame.body.len())?;
        buf.extend_from_slice(&frame.body);
        if more {
            self.open = Some((cmd, seq, buf));
            return Ok(None);
        }
        Ok(Some(Frame {
            cmd,
            seq,
            flags: frame.flags,
            body: buf.freeze(),
        }))
    }

    fn check(&self, cmd: u32, seq: u32, len: usize) -> Result<(), FragmentError> {
        if len > self.max {
            return Err(FragmentError::TooLarge {
                cmd,
                seq,
                max: self.max,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::FLAG_ONEWAY;

    fn body(n: usize) -> Bytes {
        (0..n).map(|i| (i % 251) as u8).collect::<Vec<u8>>().into()
    }

    #[test]
    fn a_message_that_fits_is_one_frame() {
        let frames = split(113, 7, FLAG_ONEWAY, body(100), 100);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].flags, FLAG_ONEWAY);
    }

    #[test]
    fn a_large_message_splits_and_comes_back_whole() {
        let original = body(10_001);
        let frames = split(113, 7, FLAG_ONEWAY, original.clone(), 1000);
        assert_eq!(frames.len(), 11);
        assert!(frames.iter().all(|f| f.body.len() <= 1000));
        assert!(frames[..10].iter().all(|f| f.flags & FLAG_MORE != 0));
        assert_eq!(frames[10].flags, FLAG_ONEWAY);
        let mut r = Reassembly::new(MAX_MESSAGE_BYTES);
        let mut whole = None;
        for (i, f) in frames.into_iter().enumerate() {
            let out = r.push(f).unwrap();
            assert_eq!(out.is_some(), i == 10);
            whole = whole.or(out);
        }
        let whole = whole.unwrap();
        assert_eq!((whole.cmd, whole.seq, whole.flags), (113, 7, FLAG_ONEWAY));
        assert_eq!(whole.body, original);
        // The next message starts afresh.
        let single = split(113, 8, 0, body(5), 1000).remove(0);
        assert_eq!(r.push(single.clone()).unwrap(), Some(single));
    }

    #[test]
    fn interleaved_or_oversized_fragments_are_refused() {
        let mut r = Reassembly::new(MAX_MESSAGE_BYTES);
        let a = split(113, 1, 0, body(300), 100);
        let b = split(113, 2, 0, body(300), 100);
        assert_eq!(r.push(a[0].clone()).unwrap(), None);
        assert_eq!(
            r.push(b[0].clone()).unwrap_err().to_string(),
            "fragment of cmd 113 seq 2 arrived inside message cmd 113 seq 1: fragments of two messages interleaved"
        );
        let mut small = Reassembly::new(250);
        assert_eq!(small.push(a[0].clone()).unwrap(), None);
        assert_eq!(small.push(a[1].clone()).unwrap(), None);
        assert_eq!(
            small.push(a[2].clone()).unwrap_err(),
            FragmentError::TooLarge {
                cmd: 113,
                seq: 1,
                max: 250
            }
        );
    }
}
