//! gRPC calls over one HTTP/2 connection, straight through `h2` (the HTTP/2 crate under hyper
//! and tonic): unary calls, and two-way streams of one answer per request.
//!
//! The gRPC part's clients share two cores with the beacons they measure, so
//! what a client spends per call is taken from the servers. tonic's `Channel` puts four
//! tasks behind each unary call (the caller, its buffer's worker, hyper's connection and a
//! task piping the request body) and measured some 20 µs of CPU per call here, where the
//! native client spends 8. This client sends the headers and the one message from the
//! caller's own task and reads the answer there: the HTTP/2 connection's task is the only
//! other. A stream's requests go out and its answers come in the same way, without tonic's
//! queue and body task. Both beacon's and etcd's gRPC APIs are measured through it in the
//! gRPC part.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use bytes::{BufMut, Bytes, BytesMut};

/// One HTTP/2 connection to a gRPC server.
pub struct Connection {
    send: h2::client::SendRequest<Bytes>,
    authority: String,
}

impl Connection {
    /// Connects to `addr` (plaintext HTTP/2, as the bench's clusters serve), within `timeout`.
    pub async fn open(addr: SocketAddr, timeout: Duration) -> anyhow::Result<Connection> {
        let tcp = tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr))
            .await
            .map_err(|_| anyhow!("connecting to {addr} timed out"))?
            .with_context(|| format!("connect to {addr}"))?;
        tcp.set_nodelay(true)?;
        let (send, connection) = tokio::time::timeout(timeout, h2::client::handshake(tcp))
            .await
            .map_err(|_| anyhow!("the HTTP/2 handshake with {addr} timed out"))?
            .with_context(|| format!("HTTP/2 handshake with {addr}"))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Connection {
            send,
            authority: addr.to_string(),
        })
    }

    /// Calls unary method `path` (`/SERVICE/METHOD`) with `req`.
    pub async fn unary<Req, Resp>(&mut self, path: &str, req: &Req) -> anyhow::Result<Resp>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        let mut send = self.send.clone().ready().await?;
        let (answer, mut body) = send.send_request(self.request(path)?, false)?;
        body.send_data(message(req)?, true)?;
        let mut incoming = answered(answer, path).await?;
        let mut read = BytesMut::new();
        while let Some(data) = incoming.data().await {
            let data = data?;
            let _ = incoming.flow_control().release_capacity(data.len());
            read.extend_from_slice(&data);
        }
        let trailers = incoming
            .trailers()
            .await?
            .ok_or_else(|| anyhow!("{path}: the answer has no trailers"))?;
        status(&trailers, path)?;
        if read.len() < 5 || read[0] != 0 {
            bail!("{path}: the answer holds no uncompressed message");
        }
        Ok(Resp::decode(&read[5..])?)
    }

    /// The headers of a call of `path`.
    fn request(&self, path: &str) -> anyhow::Result<http::Request<()>> {
        Ok(
            http::Request::post(format!("http://{}{path}", self.authority))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(())?,
        )
    }

    /// Opens a stream of method `path`: requests go out as they are sent, answers are read
    /// one at a time.
    pub async fn stream(&mut self, path: &str) -> anyhow::Result<Stream> {
        let mut send = self.send.clone().ready().await?;
        let (answer, requests) = send.send_request(self.request(path)?, false)?;
        Ok(Stream {
            requests,
            answers: answered(answer, path).await?,
            read: BytesMut::new(),
            path: path.to_owned(),
        })
    }
}

/// A two-way stream: requests sent, answers read in order.
pub struct Stream {
    requests: h2::SendStream<Bytes>,
    answers: h2::RecvStream,
    /// Bytes of answers read and not yet taken.
    read: BytesMut,
    path: String,
}

impl Stream {
    /// Sends `req`.
    pub fn send<Req: prost::Message>(&mut self, req: &Req) -> anyhow::Result<()> {
        Ok(self.requests.send_data(message(req)?, false)?)
    }

    /// The next answer; an error once the stream has ended (with its status, if not OK).
    pub async fn next<Resp: prost::Message + Default>(&mut self) -> anyhow::Result<Resp> {
        loop {
            if self.read.len() >= 5 {
                let len =
                    u32::from_be_bytes([self.read[1], self.read[2], self.read[3], self.read[4]])
                        as usize;
                if self.read.len() >= 5 + len {
                    let whole = self.read.split_to(5 + len);
                    return Ok(Resp::decode(&whole[5..])?);
                }
            }
            match self.answers.data().await {
                Some(data) => {
                    let data = data?;
                    let _ = self.answers.flow_control().release_capacity(data.len());
                    self.read.extend_from_slice(&data);
                }
                None => {
                    if let Some(trailers) = self.answers.trailers().await? {
                        status(&trailers, &self.path)?;
                    }
                    bail!("{}: the stream ended", self.path);
                }
            }
        }
    }
}

/// The body of a call's answer, once its headers say it goes on: a refusal comes as
/// headers only, grpc-status among them.
async fn answered(
    answer: h2::client::ResponseFuture,
    path: &str,
) -> anyhow::Result<h2::RecvStream> {
    let (head, body) = answer.await?.into_parts();
    if head.status != http::StatusCode::OK {
        bail!("HTTP status {} from {path}", head.status);
    }
    status(&head.headers, path)?;
    Ok(body)
}

/// `req` as a gRPC message: uncompressed, its length first.
fn message<Req: prost::Message>(req: &Req) -> anyhow::Result<Bytes> {
    let mut frame = BytesMut::with_capacity(5 + req.encoded_len());
    frame.put_u8(0);
    frame.put_u32(req.encoded_len() as u32);
    req.encode(&mut frame)?;
    Ok(frame.freeze())
}

/// Fails with the call's gRPC status if `headers` carry one other than OK.
fn status(headers: &http::HeaderMap, path: &str) -> anyhow::Result<()> {
    match headers.get("grpc-status") {
        None => Ok(()),
        Some(code) if code == "0" => Ok(()),
        Some(code) => {
            let message = headers
                .get("grpc-message")
                .and_then(|m| m.to_str().ok())
                .unwrap_or("");
            bail!("{path}: gRPC status {code:?}: {message}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::status;

    #[test]
    fn a_status_other_than_ok_fails_the_call_with_its_message() {
        let mut headers = http::HeaderMap::new();
        assert!(
            status(&headers, "/a/B").is_ok(),
            "no status yet: headers of an answer"
        );
        headers.insert("grpc-status", "0".parse().unwrap());
        assert!(status(&headers, "/a/B").is_ok());
        headers.insert("grpc-status", "14".parse().unwrap());
        headers.insert("grpc-message", "no leader".parse().unwrap());
        let e = status(&headers, "/a/B").unwrap_err().to_string();
        assert!(e.contains("\"14\"") && e.contains("no leader"), "{e}");
    }
}
