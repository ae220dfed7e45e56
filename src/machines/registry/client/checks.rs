//! Health checks run beside the service, their result reported as its registration's health
//! ([`crate::machines::registry::client::Registration::run_checks`]).
//!
//! Every `every` the checks run; the worst of their statuses is the round's, and it is
//! reported only once it has held for `threshold` rounds in a row (hysteresis), so one slow
//! answer does not take a service out of discovery. The leader then damps a service that
//! still flaps (key `health_damping`).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::machines::registry::state::Status;

/// What a check found: a status and why.
pub type Finding = (Status, String);

/// A check's own code: what a service knows of itself (a queue's backlog, a dependency's
/// client), or a gRPC health check through the service's own client.
pub type CheckFn = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Finding> + Send>> + Send + Sync>;

/// One check.
#[derive(Clone)]
pub enum Check {
    /// Passing when a TCP connection to `addr` opens within `timeout`.
    Tcp { addr: SocketAddr, timeout: Duration },
    /// An HTTP/1.1 GET of `path` at `addr` (plain HTTP): a 2xx status is passing, 429
    /// warning, anything else, or no answer within `timeout`, critical.
    Http {
        addr: SocketAddr,
        path: String,
        timeout: Duration,
    },
    /// The standard gRPC health check (`grpc.health.v1.Health/Check`) of `service` (`""`:
    /// the whole server) at `addr`, plaintext HTTP/2: `SERVING` is passing; any other
    /// status, a refused call, or no answer within `timeout` is critical. With the
    /// `grpc-check` feature (on in `beacon`, asked for in `beacon-client`).
    #[cfg(feature = "grpc-check")]
    Grpc {
        addr: SocketAddr,
        service: String,
        timeout: Duration,
    },
    /// The service's own check, named `name` in the notes.
    Callback { name: String, check: CheckFn },
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl Check {
    /// `tcp ADDR`, `http ADDR/PATH`, or the callback's name.
    pub fn name(&self) -> String {
        match self {
            Check::Tcp { addr, .. } => format!("tcp {addr}"),
            Check::Http { addr, path, .. } => format!("http {addr}{path}"),
            #[cfg(feature = "grpc-check")]
            Check::Grpc { addr, service, .. } if service.is_empty() => format!("grpc {addr}"),
            #[cfg(feature = "grpc-check")]
            Check::Grpc { addr, service, .. } => format!("grpc {addr} {service}"),
            Check::Callback { name, .. } => name.clone(),
        }
    }

    /// Runs the check once.
    pub async fn run(&self) -> Finding {
        match self {
            Check::Tcp { addr, timeout } => {
                match tokio::time::timeout(*timeout, TcpStream::connect(addr)).await {
                    Ok(Ok(_)) => (Status::Passing, String::new()),
                    Ok(Err(e)) => (Status::Critical, format!("{}: {e}", self.name())),
                    Err(_) => (Status::Critical, format!("{}: no answer", self.name())),
                }
            }
            Check::Http {
                addr,
                path,
                timeout,
            } => match tokio::time::timeout(*timeout, http_status(*addr, path)).await {
                Ok(Ok(code)) if (200..300).contains(&code) => (Status::Passing, String::new()),
                Ok(Ok(429)) => (Status::Warning, format!("{}: 429", self.name())),
                Ok(Ok(code)) => (Status::Critical, format!("{}: {code}", self.name())),
                Ok(Err(e)) => (Status::Critical, format!("{}: {e}", self.name())),
                Err(_) => (Status::Critical, format!("{}: no answer", self.name())),
            },
            #[cfg(feature = "grpc-check")]
            Check::Grpc {
                addr,
                service,
                timeout,
            } => {
                match tokio::time::timeout(*timeout, grpc_status(*addr, service, *timeout)).await {
                    Ok(Ok(status)) if status == "SERVING" => (Status::Passing, String::new()),
                    Ok(Ok(status)) => (Status::Critical, format!("{}: {status}", self.name())),
                    Ok(Err(e)) => (Status::Critical, format!("{}: {e}", self.name())),
                    Err(_) => (Status::Critical, format!("{}: no answer", self.name())),
                }
            }
            Check::Callback { check, .. } => check().await,
        }
    }
}

/// The serving status `grpc.health.v1.Health/Check` of `service` at `addr` answers
/// (`SERVING`, `NOT_SERVING`, ...), or why there is none.
#[cfg(feature = "grpc-check")]
async fn grpc_status(addr: SocketAddr, service: &str, timeout: Duration) -> Result<String, String> {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    // The whole chain of causes: a transport error says only "transport error" itself.
    let causes = |e: &dyn std::error::Error| {
        let mut text = e.to_string();
        let mut source = e.source();
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        text
    };
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| causes(&e))?
        .connect_timeout(timeout)
        .connect()
        .await
        .map_err(|e| causes(&e))?;
    let reply = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: service.to_owned(),
        })
        .await
        .map_err(|s| format!("{:?}: {}", s.code(), s.message()))?;
    Ok(reply.into_inner().status().as_str_name().to_owned())
}

/// The status code of `GET path` at `addr`: the first line of the answer is all a check
/// needs, so the connection is closed after it.
async fn http_status(addr: SocketAddr, path: &str) -> std::io::Result<u16> {
    let mut stream = TcpStream::connect(addr).await?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: beacon-check\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut head = Vec::with_capacity(64);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n") && head.len() < 256 {
        if stream.read(&mut byte).await? == 0 {
            break;
        }
        head.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&head);
    // `HTTP/1.1 200 OK`
    line.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .filter(|_| line.starts_with("HTTP/"))
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("not an HTTP answer: {:?}", line.trim_end()),
            )
        })
}

/// The worst status of a round, with the notes of the checks that found it.
pub fn worst(findings: &[Finding]) -> Finding {
    let Some(status) = findings.iter().map(|(s, _)| *s).max() else {
        return (Status::Passing, String::new());
    };
    let notes: Vec<&str> = findings
        .iter()
        .filter(|(s, n)| *s == status && !n.is_empty())
        .map(|(_, n)| n.as_str())
        .collect();
    (status, notes.join("; "))
}

/// Reports a status only once it has held for `threshold` rounds in a row.
#[derive(Debug, Clone)]
pub struct Hysteresis {
    threshold: u32,
    published: Status,
    candidate: Status,
    held: u32,
}

impl Hysteresis {
    pub fn new(threshold: u32) -> Hysteresis {
        Hysteresis {
            threshold: threshold.max(1),
            published: Status::Passing,
            candidate: Status::Passing,
            held: 0,
        }
    }

    /// Takes one round's status; whether it is now the one to report.
    pub fn observe(&mut self, status: Status) -> bool {
        if status == self.published {
            self.candidate = status;
            self.held = 0;
            return false;
        }
        if status != self.candidate {
            self.candidate = status;
            self.held = 0;
        }
        self.held += 1;
        if self.held >= self.threshold {
            self.published = status;
            self.held = 0;
            return true;
        }
        false
    }
}

/// Runs `checks` every `every` until the returned future is dropped, calling `report` with
/// each status that held for `threshold` rounds.
pub(crate) async fn run(
    checks: Vec<Check>,
    every: Duration,
    threshold: u32,
    report: impl Fn(Status, String),
) {
    let mut hysteresis = Hysteresis::new(threshold);
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let mut findings = Vec::with_capacity(checks.len());
        for c in &checks {
            findings.push(c.run().await);
        }
        let (status, note) = worst(&findings);
        if hysteresis.observe(status) {
            report(status, note);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_is_reported_only_once_it_held_for_the_threshold() {
        use Status::*;
        let mut h = Hysteresis::new(3);
        let rounds = [Critical, Passing, Critical, Critical, Critical, Critical];
        let said: Vec<bool> = rounds.iter().map(|s| h.observe(*s)).collect();
        assert_eq!(said, [false, false, false, false, true, false]);
        assert_eq!(
            worst(&[
                (Passing, String::new()),
                (Warning, "slow".into()),
                (Critical, "down".into()),
                (Critical, "gone".into()),
            ]),
            (Critical, "down; gone".into())
        );
        assert_eq!(worst(&[]), (Passing, String::new()));
    }
}
