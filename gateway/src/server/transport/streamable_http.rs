//! Streamable HTTP sessions bound to the credentials that opened them, because a session id
//! alone must not let one token act in another token's session: call its tools, cancel
//! its calls, read its event stream or end it.
//!
//! [`BoundSessions`] sits in front of rmcp's streamable HTTP service. When an `initialize`
//! opens a session it records the opener's identity in the session's shared record
//! (`crate::state`); every later request naming that id in `Mcp-Session-Id` — a `POST` of
//! any message, the `GET` stream, the `DELETE` — must carry the same credentials or gets
//! `403` without reaching the session, whichever replica it reaches. Reading the record
//! also renews its lifetime; a session whose record is gone (ended by `DELETE` on any
//! replica, or unused past `[cluster] session_ttl_secs`) is dropped here too, and rmcp
//! answers 404. While the shared state cannot be reached, requests get `503`.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use http::{Method, Request, Response, StatusCode, header};
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;
use tower::Service;

use super::shared_sessions::SharedSessions;
use super::{direct_calls, plain_answers};
use crate::gateway::Gateway;
use crate::observe::sessions::Transport;
use crate::server::handler::GatewayServer;
use crate::server::http::security::Credentials;
use crate::state::{SharedState, StateError};

/// The streamable HTTP service for one path (`/mcp` or `/mcp/{profile}`), its sessions
/// bound to their openers and kept in the shared state. A token bound to a profile
/// overrides `profile` at `initialize`.
pub fn service(
    gateway: &Arc<Gateway>,
    profile: Option<String>,
    shutdown: &CancellationToken,
) -> BoundSessions {
    let gateway = gateway.clone();
    let state = gateway.state.clone();
    let sessions = Arc::new(SharedSessions::new(state.clone()));
    // Host, Origin and body size are checked by the security layer in front. A request
    // served without a session (protocol 2026-07-28 on) whose first message is its answer
    // gets a plain JSON body instead of a one-event stream; rmcp still streams when the
    // call sends anything first. In sessions opened by `initialize`, rmcp always streams;
    // `plain_answers` gives those requests the same plain JSON answers on a gateway that
    // runs alone.
    let mut config = StreamableHttpServerConfig::default()
        .with_json_response(true)
        .disable_allowed_hosts()
        .with_max_request_body_bytes(gateway.config().listen.max_body_bytes)
        .with_cancellation_token(shutdown.child_token());
    config.session_store = Some(sessions.store());
    let service = StreamableHttpService::new(
        move || {
            Ok(GatewayServer::new(
                gateway.clone(),
                profile.clone(),
                Transport::StreamableHttp,
            ))
        },
        sessions.clone(),
        config,
    );
    BoundSessions::new(service, sessions, state)
}

/// rmcp's streamable HTTP service with every session bound to its opener's credentials.
#[derive(Clone)]
pub struct BoundSessions {
    inner: StreamableHttpService<GatewayServer, SharedSessions>,
    sessions: Arc<SharedSessions>,
    state: Arc<dyn SharedState>,
}

impl BoundSessions {
    /// `inner` must be served by `sessions`, whose sessions are the ones bound.
    pub fn new(
        inner: StreamableHttpService<GatewayServer, SharedSessions>,
        sessions: Arc<SharedSessions>,
        state: Arc<dyn SharedState>,
    ) -> Self {
        Self {
            inner,
            sessions,
            state,
        }
    }

    /// `None` when `identity` may use `session` (or rmcp should answer it: an unknown
    /// session is its 404); otherwise the response that refuses it.
    async fn refuse(&self, session: &str, identity: Option<&str>) -> Option<Response<Body>> {
        match self.state.touch_session(session).await {
            Err(e) => Some(unavailable(&e)),
            Ok(None) => {
                if self.sessions.holds(session).await {
                    // Ended on another replica, or expired: end it here too.
                    self.sessions.forget(session).await;
                }
                None
            }
            Ok(Some(record)) if record.owner.as_deref() != identity => {
                tracing::warn!(
                    %session,
                    "refused a request for a session opened with other credentials"
                );
                Some(forbidden(session))
            }
            Ok(Some(_)) => None,
        }
    }
}

impl Service<Request<Body>> for BoundSessions {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // rmcp's service is always ready; each call works on a clone.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let identity = request
                .extensions()
                .get::<Credentials>()
                .and_then(Credentials::identity);
            let named = request
                .headers()
                .get(HEADER_SESSION_ID)
                .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
            match &named {
                Some(session) => {
                    if let Some(refused) = this.refuse(session, identity.as_deref()).await {
                        return Ok(refused);
                    }
                }
                None if !this.state.is_ready() => {
                    return Ok(unavailable(&StateError::Unavailable(
                        "no answer from Redis".into(),
                    )));
                }
                None => {}
            }
            let direct = named
                .as_deref()
                .filter(|_| request.method() == Method::POST)
                .and_then(|session| this.sessions.direct(session));
            let request = match direct {
                Some(session) => match direct_calls::http::serve(&session, request).await {
                    Ok(answered) => return Ok(answered),
                    Err(request) => request,
                },
                None => request,
            };
            let ends_session = request.method() == Method::DELETE;
            // With replicas, a call's stream must start at once: when its replica dies,
            // the client resumes it on another from its first event's id (and gets the
            // call's error there). A plain answer held back until ready has no id to
            // resume from, and the Python SDK ends the whole session when such a POST
            // loses its connection.
            let may_be_plain = !this.state.is_shared()
                && request.method() == Method::POST
                && plain_answers::accepts_json(request.headers());
            let mut inner = this.inner.clone();
            let mut response = inner.call(request).await?.map(Body::new);
            if may_be_plain {
                response = plain_answers::plain_when_single(response, plain_answers::WAIT).await;
            }
            if ends_session && response.status() == StatusCode::ACCEPTED {
                // rmcp says 202; clients expect a DELETE that succeeded to say 200 or 204
                // (the Python SDK logs any other status as a failed termination).
                *response.status_mut() = StatusCode::NO_CONTENT;
                *response.body_mut() = Body::empty();
            }
            if named.is_none()
                && let Some(opened) = response.headers().get(HEADER_SESSION_ID)
            {
                let opened = String::from_utf8_lossy(opened.as_bytes()).into_owned();
                if let Err(e) = this.state.set_owner(&opened, identity.as_deref()).await {
                    // Without its owner on record the session could not be checked on
                    // another replica: end it rather than hand it out.
                    this.sessions.forget(&opened).await;
                    return Ok(unavailable(&e));
                }
            }
            Ok(response)
        })
    }
}

fn forbidden(session: &str) -> Response<Body> {
    text_response(
        StatusCode::FORBIDDEN,
        format!(
            "Forbidden: session `{session}` was opened with other credentials; open your own \
             with an initialize request"
        ),
    )
}

/// 503 for a request that needs the shared state while it cannot be reached.
fn unavailable(error: &StateError) -> Response<Body> {
    text_response(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "Service Unavailable: sessions are kept in Redis ([cluster] redis_url), which does \
             not answer ({}: {error}); retry shortly",
            error.code()
        ),
    )
}

fn text_response(status: StatusCode, text: String) -> Response<Body> {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
