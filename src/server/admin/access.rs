//! Who may read the admin API: with `auth` configured, the status page, `/metrics` and the
//! JSON views need an identity of role `read` or more, as a client connection does. The
//! token goes in `Authorization: Bearer TOKEN` (scripts, Prometheus' `authorization`), or
//! as the password of HTTP Basic authentication, so that a browser asks for it and sends
//! it with every request the page makes (the user name is not checked). Over plain HTTP
//! off loopback a token is refused unless `auth.allow_plaintext_tokens` is set, as on the
//! cluster port. Over HTTPS, a client certificate the cluster's CA verified is an identity
//! too, named in `auth.certs` as on the cluster port (a token, when one is sent, wins).
//!
//! The probes (`/health`, `/livez`, `/readyz`) stay open: load balancers and kubelets ask
//! without credentials, and they say no more than whether this beacon can write.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Json, Response};
use base64::Engine;
use serde_json::json;

use super::AdminState;
use crate::auth::{AuthError, Identity};

/// The token a request carries, if any: a bearer token, or the password of Basic
/// authentication. `Err` names what is wrong with the header.
fn token(headers: &HeaderMap) -> Result<Option<String>, &'static str> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value
        .to_str()
        .map_err(|_| "the Authorization header is not ASCII")?;
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("bearer") {
        return Ok(Some(rest.to_owned()));
    }
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .map_err(|_| "the Basic credentials are not base64")?;
        let text = String::from_utf8(decoded).map_err(|_| "the Basic credentials are not UTF-8")?;
        // user:password; the password is the token.
        let password = text.split_once(':').map_or(text.as_str(), |(_, p)| p);
        return Ok(Some(password.to_owned()));
    }
    Err("the Authorization header is neither `Bearer TOKEN` nor `Basic ...`")
}

/// Who sent a request, as [`require_read`] established it (`None`: the beacon requires no
/// identity): the handlers read it from the request instead of authenticating again.
#[derive(Clone)]
pub(super) struct Caller(pub(super) Option<Identity>);

/// The identity of a request (its token, or the connection's verified client certificate),
/// `None` when the beacon requires none.
fn identify(
    state: &AdminState,
    headers: &HeaderMap,
    cert: Option<&str>,
) -> Result<Option<Identity>, String> {
    let config = &state.shared.config;
    let auth = state.shared.auth.load();
    if !auth.enabled() {
        return Ok(None);
    }
    let token = token(headers)?.unwrap_or_default();
    let admin = config.admin.unwrap_or(config.node);
    let tls = state.shared.tls.is_some();
    match auth.authenticate(&token, tls, cert, admin) {
        Ok(who) => Ok(Some(who)),
        Err(AuthError::Missing) => Err(
            "this beacon requires authentication: send a token as `Authorization: Bearer TOKEN`, or as the password when the browser asks, or connect with a client certificate named in auth.certs"
                .to_owned(),
        ),
        Err(e) => Err(e.to_string()),
    }
}

/// Lets a request through, with its [`Caller`], when it carries a `read` identity (every
/// role reads) or the beacon requires none; answers 401 otherwise, asking a browser for the
/// token.
pub(super) async fn require_read(
    State(state): State<AdminState>,
    mut request: Request,
    next: Next,
) -> Response {
    let cert = request
        .extensions()
        .get::<super::http::PeerCert>()
        .and_then(|c| c.0.clone());
    match identify(&state, request.headers(), cert.as_deref()) {
        Ok(who) => {
            request.extensions_mut().insert(Caller(who));
            next.run(request).await
        }
        Err(why) => {
            state.shared.metrics.refused("unauthenticated");
            let realm = format!(
                "Basic realm=\"beacon {}\", charset=\"UTF-8\"",
                state.shared.config.cluster
            );
            (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, realm)],
                Json(json!({ "error": why })),
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, value.parse().unwrap());
        h
    }

    #[test]
    fn reads_bearer_and_basic_tokens() {
        assert_eq!(token(&HeaderMap::new()), Ok(None));
        assert_eq!(token(&with("Bearer s3cret")), Ok(Some("s3cret".into())));
        assert_eq!(token(&with("bearer  s3cret ")), Ok(Some("s3cret".into())));
        // "ops:s3cret"
        assert_eq!(
            token(&with("Basic b3BzOnMzY3JldA==")),
            Ok(Some("s3cret".into()))
        );
        // ":s3cret", no user name
        assert_eq!(
            token(&with("Basic OnMzY3JldA==")),
            Ok(Some("s3cret".into()))
        );
        assert!(token(&with("Basic !!!")).is_err());
        assert!(token(&with("Digest x")).is_err());
    }
}
