//! The wire's frame codec under tokio's `Framed`: the format itself is `wire::frame`'s,
//! which knows no runtime; this is the adapter a connection reads and writes frames through.

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use crate::wire::{Frame, FrameCodec, FrameError};

impl Decoder for FrameCodec {
    type Item = Frame;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        FrameCodec::decode(self, src)
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        FrameCodec::decode_eof(self, src)
    }
}

impl Encoder<Frame> for FrameCodec {
    type Error = FrameError;

    fn encode(&mut self, frame: Frame, dst: &mut BytesMut) -> Result<(), FrameError> {
        FrameCodec::encode(self, frame, dst)
    }
}
