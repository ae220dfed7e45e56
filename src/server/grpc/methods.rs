//! Serving one call of a method by its [`Kind`]: a unary call, a stream the server sends, a
//! stream of requests each answered in order, and the worker's two-way stream.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::calls::{Edge, Events};
use super::codec::Raw;
use super::status;
use crate::pb;
use crate::wire::rpc::{Kind, Method, REFUSED, REPORTED, unwrap, wrap};

/// Events queued for a client stream the server answers, before the server waits for it.
const QUEUED: usize = 64;

/// Serves one call of `method`.
pub(super) async fn serve<B>(
    edge: Arc<Edge>,
    method: &'static Method,
    req: http::Request<B>,
) -> http::Response<tonic::body::Body>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
{
    let max = edge.shared.config.max_frame_bytes;
    let mut grpc = tonic::server::Grpc::new(Raw)
        .max_decoding_message_size(max)
        .max_encoding_message_size(usize::MAX);
    let response = match method.kind {
        Kind::Unary(cmd) => return unary(edge, cmd, max, req).await,
        Kind::Stream(cmd) => {
            let svc = tower::service_fn(move |req: Request<Bytes>| {
                let edge = edge.clone();
                async move {
                    let who = edge.identify(req.metadata())?;
                    let limit = deadline(req.metadata())?;
                    let call = edge.open(who, cmd, req.into_inner());
                    let events = within(limit, call)
                        .await?
                        .map_err(|r| status::of_reply(&r))?;
                    Ok::<_, Status>(Response::new(events))
                }
            });
            Box::pin(grpc.server_streaming(svc, req)).await
        }
        Kind::Each(cmd) => {
            let svc = tower::service_fn(move |req: Request<Streaming<Bytes>>| {
                let edge = edge.clone();
                async move {
                    let who = edge.identify(req.metadata())?;
                    let flags = super::calls::flags(req.metadata())?;
                    let mut incoming = req.into_inner();
                    let (tx, rx) = mpsc::channel(QUEUED);
                    tokio::spawn(async move {
                        loop {
                            let msg = match incoming.message().await {
                                Ok(Some(msg)) => msg,
                                Ok(None) => break,
                                Err(refused) => {
                                    let _ = tx.send(Err(status::decoded(refused, max))).await;
                                    break;
                                }
                            };
                            let answer = edge
                                .unary(who.clone(), flags, cmd, msg)
                                .await
                                .map_err(|r| status::of_reply(&r));
                            let failed = answer.is_err();
                            if tx.send(answer).await.is_err() || failed {
                                break;
                            }
                        }
                    });
                    let events: Events = Box::pin(ReceiverStream::new(rx));
                    Ok::<_, Status>(Response::new(events))
                }
            });
            Box::pin(grpc.streaming(svc, req)).await
        }
        Kind::Mux(cmds) => {
            let svc = tower::service_fn(move |req: Request<Streaming<Bytes>>| {
                let edge = edge.clone();
                async move {
                    let who = edge.identify(req.metadata())?;
                    let incoming = req.into_inner();
                    let events = mux(edge, who, cmds, incoming, max).await?;
                    Ok::<_, Status>(Response::new(events))
                }
            });
            Box::pin(grpc.streaming(svc, req)).await
        }
    };
    status::decoded_response(response, max)
}

/// A unary call, served without tonic's streaming machinery (the hot path: one message in,
/// one out): the request's one length-prefixed message is read whole, the answer goes out as
/// one data frame and `grpc-status: 0` trailers; a refusal is a trailers-only response.
async fn unary<B>(
    edge: Arc<Edge>,
    cmd: u32,
    max: usize,
    req: http::Request<B>,
) -> http::Response<tonic::body::Body>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
{
    match unary_answer(&edge, cmd, max, req).await {
        Ok(answer) => {
            let mut frame = Vec::with_capacity(answer.len() + 5);
            frame.push(0);
            frame.extend_from_slice(&(answer.len() as u32).to_be_bytes());
            frame.extend_from_slice(&answer);
            let mut trailers = http::HeaderMap::new();
            trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
            let frames = futures_util::stream::iter([
                Ok::<_, Status>(http_body::Frame::data(Bytes::from(frame))),
                Ok(http_body::Frame::trailers(trailers)),
            ]);
            let mut response = http::Response::new(tonic::body::Body::new(
                http_body_util::StreamBody::new(frames),
            ));
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/grpc"),
            );
            response
        }
        Err(status) => status.into_http(),
    }
}

/// The answer to a unary call's one message, or why not.
async fn unary_answer<B>(
    edge: &Edge,
    cmd: u32,
    max: usize,
    req: http::Request<B>,
) -> Result<Bytes, Status>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send,
{
    use http_body_util::BodyExt;
    let (parts, body) = req.into_parts();
    if let Some(encoding) = parts.headers.get("grpc-encoding")
        && encoding != "identity"
    {
        return Err(Status::unimplemented(format!(
            "message compression ({encoding:?}) is not supported: send messages uncompressed"
        )));
    }
    let metadata = tonic::metadata::MetadataMap::from_headers(parts.headers);
    let who = edge.identify(&metadata)?;
    let limit = deadline(&metadata)?;
    let body = http_body_util::Limited::new(body, max + 5)
        .collect()
        .await
        .map_err(|e| {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                status::too_large(max)
            } else {
                Status::internal(format!("the request could not be read: {e}"))
            }
        })?
        .to_bytes();
    if body.len() < 5 {
        return Err(Status::invalid_argument(
            "the request holds no message (a gRPC message is a flag byte and a 4-byte length first)",
        ));
    }
    if body[0] != 0 {
        return Err(Status::unimplemented(
            "a compressed message: send messages uncompressed",
        ));
    }
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    if len != body.len() - 5 {
        return Err(Status::invalid_argument(format!(
            "the message's length prefix says {len} bytes, but {} follow: a unary call carries one message",
            body.len() - 5
        )));
    }
    let call = edge.unary(who, super::calls::flags(&metadata)?, cmd, body.slice(5..));
    within(limit, call).await?.map_err(|r| status::of_reply(&r))
}

/// A [`Kind::Mux`] stream: its first request (field 1) starts the stream of `cmds[0]`; each
/// later one (field `n`) is a request of `cmds[n - 1]`, answered in order as an event of its
/// own, between the stream's notices.
async fn mux(
    edge: Arc<Edge>,
    who: Option<Arc<crate::auth::Identity>>,
    cmds: &'static [u32],
    mut incoming: Streaming<Bytes>,
    max: usize,
) -> Result<Events, Status> {
    let first = incoming
        .message()
        .await
        .map_err(|refused| status::decoded(refused, max))?
        .ok_or_else(|| Status::invalid_argument("the stream ended before its first request"))?;
    let body = match unwrap(&first) {
        Some((1, body)) => body,
        _ => {
            return Err(Status::invalid_argument(
                "the first request of this stream must be its field 1 (the request that starts it)",
            ));
        }
    };
    let mut events = edge
        .open(who.clone(), cmds[0], body)
        .await
        .map_err(|r| status::of_reply(&r))?;
    let (tx, rx) = mpsc::channel(QUEUED);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                event = events.next() => {
                    let Some(event) = event else { break };
                    let ended = event.is_err();
                    if tx.send(event).await.is_err() || ended {
                        break;
                    }
                }
                msg = incoming.message() => {
                    let msg = match msg {
                        Ok(Some(msg)) => msg,
                        Ok(None) => break,
                        Err(refused) => {
                            let _ = tx.send(Err(status::decoded(refused, max))).await;
                            break;
                        }
                    };
                    let event = match unwrap(&msg) {
                        Some((field, body)) if field >= 2 && (field as usize) <= cmds.len() => {
                            match edge.unary(who.clone(), 0, cmds[field as usize - 1], body).await {
                                Ok(answer) => Ok(wrap(REPORTED, &answer)),
                                Err(refused) => Ok(wrap(REFUSED, &prost::Message::encode_to_vec(&refused))),
                            }
                        }
                        _ => Err(Status::invalid_argument(format!(
                            "a request on this stream after the first must be one of its fields 2 to {}",
                            cmds.len()
                        ))),
                    };
                    let ended = event.is_err();
                    if tx.send(event).await.is_err() || ended {
                        break;
                    }
                }
            }
        }
    });
    Ok(Box::pin(ReceiverStream::new(rx)))
}

/// The call's deadline, from its `grpc-timeout` metadata (`100m`: 100 ms).
fn deadline(metadata: &tonic::metadata::MetadataMap) -> Result<Option<Duration>, Status> {
    let Some(value) = metadata.get("grpc-timeout") else {
        return Ok(None);
    };
    let bad = || Status::invalid_argument("grpc-timeout is not a number and a unit (H M S m u n)");
    let text = value.to_str().map_err(|_| bad())?;
    let (digits, unit) = text.split_at(text.len().saturating_sub(1));
    let n: u64 = digits.parse().map_err(|_| bad())?;
    Ok(Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return Err(bad()),
    }))
}

/// `call`, given up with `DEADLINE_EXCEEDED` once `limit` has passed. Not an `async fn`: one
/// of two futures, so that the call's future is held once (an `async fn` holding it in each
/// branch held it twice, and a unary call's future was moved whole several times a call).
fn within<T>(
    limit: Option<Duration>,
    call: impl Future<Output = Result<T, pb::ErrorReply>>,
) -> impl Future<Output = Result<Result<T, pb::ErrorReply>, Status>> {
    use futures_util::FutureExt;
    use futures_util::future::Either;
    match limit {
        None => Either::Left(call.map(Ok)),
        Some(limit) => Either::Right(tokio::time::timeout(limit, call).map(move |r| {
            r.map_err(|_| {
                Status::deadline_exceeded(format!(
                    "no answer within the call's deadline ({} ms); a write may or may not have taken effect",
                    limit.as_millis()
                ))
            })
        })),
    }
}
