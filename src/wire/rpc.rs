//! How the gRPC API maps onto the native protocol: each gRPC method is one of the native
//! commands (or a stream of them), and its messages are the command's own, so a call's bytes
//! go to the same handler a native frame does, unchanged. Each machine declares its service
//! (`machines/<m>/grpc.rs`); the gRPC edge (`server::grpc`) serves what they declare, and a
//! test holds the declarations to the `service` blocks of `proto/`.
//!
//! A stream's messages are events that wrap the native frames as fields of a `oneof`: the
//! first answer as field [`START`], each pushed notice as field [`NOTICE`]; on a
//! [`Kind::Mux`] stream, each answer to a report as [`REPORTED`] or, refused, as an
//! `ErrorReply` in [`REFUSED`]. Wrapping is a field tag and a length before the bytes.

pub use tonic::Code as GrpcCode;

/// The event field of a stream's first answer (`start`).
pub const START: u32 = 1;
/// The event field of a pushed notice (`notice`).
pub const NOTICE: u32 = 2;
/// On a [`Kind::Mux`] stream: the event field of a report's answer (`reported`).
pub const REPORTED: u32 = 3;
/// On a [`Kind::Mux`] stream: the event field of a report's refusal (`refused`, an
/// `ErrorReply`); the stream goes on.
pub const REFUSED: u32 = 4;

/// What a gRPC method does in native terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One request, one response: command `cmd`'s.
    Unary(u32),
    /// One request, then the command's stream: its first answer and each notice, as events.
    Stream(u32),
    /// A stream of requests of command `cmd`, each answered in order (a keep-alive).
    Each(u32),
    /// A stream of requests, each a `oneof` whose field `n` carries a request of command
    /// `cmds[n - 1]`: the first (which must come first) starts a [`Kind::Stream`], the others
    /// are reports answered in order, in the same stream of events.
    Mux(&'static [u32]),
}

impl Kind {
    /// Whether the client sends a stream.
    pub fn client_streams(self) -> bool {
        matches!(self, Kind::Each(_) | Kind::Mux(_))
    }

    /// Whether the server answers with a stream.
    pub fn server_streams(self) -> bool {
        !matches!(self, Kind::Unary(_))
    }
}

/// One method of a gRPC service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Method {
    pub name: &'static str,
    pub kind: Kind,
}

impl Method {
    pub const fn unary(name: &'static str, cmd: u32) -> Method {
        Method {
            name,
            kind: Kind::Unary(cmd),
        }
    }

    pub const fn stream(name: &'static str, cmd: u32) -> Method {
        Method {
            name,
            kind: Kind::Stream(cmd),
        }
    }

    pub const fn each(name: &'static str, cmd: u32) -> Method {
        Method {
            name,
            kind: Kind::Each(cmd),
        }
    }

    pub const fn mux(name: &'static str, cmds: &'static [u32]) -> Method {
        Method {
            name,
            kind: Kind::Mux(cmds),
        }
    }
}

/// A gRPC service: its full name (`beacon.v1.registry.Registry`), its methods, and for each
/// of its machine's error codes, its name (`NO_LEASE`, the reason a status carries) and the
/// gRPC status code it is answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Service {
    pub name: &'static str,
    pub methods: &'static [Method],
    pub errors: &'static [(u32, &'static str, GrpcCode)],
}

impl Service {
    /// The method named `name`.
    pub fn method(&self, name: &str) -> Option<&'static Method> {
        self.methods.iter().find(|m| m.name == name)
    }
}

/// Declares a gRPC service: its full name, the enums of its commands and error codes, and
/// its methods by kind. A method is named after its command unless written `Method =
/// Command`; a `mux` method lists the commands its requests carry, the starting one first.
///
/// ```text
/// pub(crate) const SERVICE: Service = service! {
///     "beacon.v1.registry.Registry", RegistryCmd, RegistryErrorCode;
///     unary: Register, Nodes;
///     each: KeepAlive = NodeReport;
/// };
/// ```
macro_rules! service {
    (@cmd $cmd:ident $method:ident) => { $cmd::$method as u32 };
    (@cmd $cmd:ident $method:ident = $target:ident) => { $cmd::$target as u32 };
    (
        $name:literal, $cmd:ident, $err:ident;
        $( unary: $( $unary:ident $(= $unary_cmd:ident)? ),+ ; )?
        $( stream: $( $stream:ident $(= $stream_cmd:ident)? ),+ ; )?
        $( each: $( $each:ident $(= $each_cmd:ident)? ),+ ; )?
        $( mux: $mux:ident = [ $( $muxed:ident ),+ ] ; )?
    ) => {{
        use $crate::wire::rpc::{Method, service};
        $crate::wire::rpc::Service {
            name: $name,
            methods: &[
                $( $( Method::unary(
                    stringify!($unary),
                    service!(@cmd $cmd $unary $(= $unary_cmd)?),
                ), )+ )?
                $( $( Method::stream(
                    stringify!($stream),
                    service!(@cmd $cmd $stream $(= $stream_cmd)?),
                ), )+ )?
                $( $( Method::each(
                    stringify!($each),
                    service!(@cmd $cmd $each $(= $each_cmd)?),
                ), )+ )?
                $( Method::mux(stringify!($mux), &[ $( $cmd::$muxed as u32 ),+ ]), )?
            ],
            errors: &$err::GRPC,
        }
    }};
}
pub(crate) use service;

/// `body` as field `field` of a message: what a stream event is.
pub fn wrap(field: u32, body: &[u8]) -> bytes::Bytes {
    let mut out = Vec::with_capacity(body.len() + 11);
    prost::encoding::encode_key(field, prost::encoding::WireType::LengthDelimited, &mut out);
    prost::encoding::encode_varint(body.len() as u64, &mut out);
    out.extend_from_slice(body);
    out.into()
}

/// The field a `oneof` message carries, and its bytes: what a [`Kind::Mux`] request is.
/// `None` when `message` is not exactly one length-delimited field.
pub fn unwrap(message: &[u8]) -> Option<(u32, bytes::Bytes)> {
    let mut buf = message;
    let (field, wire) = prost::encoding::decode_key(&mut buf).ok()?;
    if wire != prost::encoding::WireType::LengthDelimited {
        return None;
    }
    let len = prost::encoding::decode_varint(&mut buf).ok()? as usize;
    (buf.len() == len).then(|| (field, bytes::Bytes::copy_from_slice(buf)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrapped_message_unwraps_to_its_field_and_bytes() {
        let body = prost::Message::encode_to_vec(&crate::pb::ErrorReply {
            code: 10,
            msg: "not the leader".into(),
            leader: "127.0.0.1:17000".into(),
            retry_after_ms: 0,
        });
        let event = wrap(REFUSED, &body);
        assert_eq!(unwrap(&event), Some((REFUSED, body.clone().into())));
        // Two fields, a varint, trailing bytes, nothing: not one wrapped message.
        let mut two = event.to_vec();
        two.extend_from_slice(&wrap(START, b""));
        assert_eq!(unwrap(&two), None);
        assert_eq!(unwrap(&[0x08, 0x01]), None);
        assert_eq!(unwrap(&event[..event.len() - 1]), None);
        assert_eq!(unwrap(&[]), None);
    }
}
