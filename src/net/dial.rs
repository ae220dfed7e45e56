//! Dialling the first beacon that answers.
//!
//! A fresh client knows nothing of which beacon is up. Trying its list in order cost a whole
//! handshake limit for every hung beacon ahead of a live one (a stopped process: the kernel
//! still accepts its connections, nothing answers the `Hello`), on every fresh client and
//! every nebcli command. As happy eyeballs does for a host's addresses (RFC 8305), the next
//! beacon is dialled when those before it have not answered within
//! [`ConnectOptions::attempt_delay`], or at once when one failed; every attempt is kept, and
//! the first handshake to complete wins. Attempts it outran go on in the background until
//! they answer or reach their limit: one that reaches it is noted a suspect for the whole
//! process ([`super::suspects`]), and no caller waited for it.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use super::{Client, ClientError, ConnectOptions, suspects};

/// One handshake under way: the candidate's position, and how it ended.
type Attempt = Pin<Box<dyn Future<Output = (usize, Result<Client, ClientError>)> + Send>>;

/// A connection made by [`first_to_answer`].
#[derive(Debug)]
pub struct Dialled {
    pub client: Client,
    /// The candidate that answered first (its position in the list given).
    pub index: usize,
    /// How many candidates were dialled.
    pub attempted: usize,
}

/// A dial in which no candidate answered.
#[derive(Debug)]
pub struct DialFailed {
    /// The error that decides: the first that another attempt cannot mend, else the last.
    pub error: ClientError,
    pub attempted: usize,
}

fn attempt(i: usize, addr: String, opts: ConnectOptions, limit: Duration) -> Attempt {
    Box::pin(async move {
        let result = Client::connect_within(&addr, &opts, limit).await;
        (i, result)
    })
}

/// What an attempt's end teaches the process about its beacon.
fn learn(addr: &str, result: &Result<Client, ClientError>) {
    match result {
        Ok(_) => suspects::clear(addr),
        Err(e) if e.is_silence() => {
            tracing::debug!(beacon = %addr, "no answer to a handshake in time: tried last for a while: {e}");
            suspects::note(addr);
        }
        Err(_) => {}
    }
}

/// Connects to the first of `candidates` to complete a handshake, each handshake allowed
/// `limit`, the next dialled [`ConnectOptions::attempt_delay`] after the one before (at once
/// when one fails). Returns a refusal that no other beacon would mend (a wrong cluster, a
/// certificate that does not verify) as soon as it comes.
pub async fn first_to_answer(
    candidates: &[String],
    opts: &ConnectOptions,
    limit: Duration,
) -> Result<Dialled, DialFailed> {
    let stagger = opts.attempt_delay.min(limit);
    let mut pending: FuturesUnordered<Attempt> = FuturesUnordered::new();
    let mut started = 0;
    let mut last = None;
    let start_next = |pending: &mut FuturesUnordered<Attempt>, started: &mut usize| {
        pending.push(attempt(
            *started,
            candidates[*started].clone(),
            opts.clone(),
            limit,
        ));
        *started += 1;
    };
    loop {
        if pending.is_empty() {
            if started == candidates.len() {
                let error = last.unwrap_or_else(|| ClientError::Ended {
                    what: "connecting",
                    why: "no beacon address was given".into(),
                });
                return Err(DialFailed {
                    error,
                    attempted: started,
                });
            }
            start_next(&mut pending, &mut started);
        }
        let more = started < candidates.len();
        tokio::select! {
            Some((i, result)) = pending.next() => {
                learn(&candidates[i], &result);
                match result {
                    Ok(client) => {
                        settle_in_background(std::mem::take(&mut pending), candidates);
                        return Ok(Dialled { client, index: i, attempted: started });
                    }
                    Err(error) if !error.is_retryable() => {
                        settle_in_background(std::mem::take(&mut pending), candidates);
                        return Err(DialFailed { error, attempted: started });
                    }
                    Err(error) => {
                        last = Some(error);
                        if more {
                            start_next(&mut pending, &mut started);
                        }
                    }
                }
            }
            () = tokio::time::sleep(stagger), if more => start_next(&mut pending, &mut started),
        }
    }
}

/// Lets the attempts a winner outran end on their own, learning from each.
fn settle_in_background(outrun: FuturesUnordered<Attempt>, candidates: &[String]) {
    if outrun.is_empty() {
        return;
    }
    let names: Vec<String> = candidates.to_vec();
    tokio::spawn(async move {
        let mut outrun = outrun;
        while let Some((i, result)) = outrun.next().await {
            learn(&names[i], &result);
        }
    });
}
