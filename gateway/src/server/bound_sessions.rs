//! Streamable HTTP sessions bound to the credentials that opened them, because a session id
//! alone must not let one token act in another token's session: call its tools, cancel
//! its calls, read its event stream or end it.
//!
//! [`BoundSessions`] sits in front of rmcp's streamable HTTP service. When an `initialize`
//! opens a session it remembers the session id with the request's
//! [`Credentials`]; every later request naming that id in `Mcp-Session-Id` — a `POST` of
//! any message, the `GET` stream, the `DELETE` — must carry the same credentials or gets
//! `403` without reaching the session. Ids of sessions that have ended are forgotten as new
//! ones open (the table is pruned against the session manager whenever it has doubled), so
//! a gateway left running for weeks keeps one entry per live session.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use axum::body::Body;
use http::{Request, Response, StatusCode, header};
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tower::Service;

use super::handler::GatewayServer;
use super::security::Credentials;

/// Entries kept before the first pruning.
const FIRST_PRUNE: usize = 64;

/// rmcp's streamable HTTP service with every session bound to its opener's credentials.
#[derive(Clone)]
pub struct BoundSessions {
    inner: StreamableHttpService<GatewayServer, LocalSessionManager>,
    manager: Arc<LocalSessionManager>,
    owners: Arc<Mutex<Owners>>,
}

struct Owners {
    by_session: HashMap<String, Option<Credentials>>,
    /// Size at which ended sessions are next pruned.
    prune_at: usize,
}

impl BoundSessions {
    /// `inner` must be served by `manager`, whose sessions are the ones bound.
    pub fn new(
        inner: StreamableHttpService<GatewayServer, LocalSessionManager>,
        manager: Arc<LocalSessionManager>,
    ) -> Self {
        Self {
            inner,
            manager,
            owners: Arc::new(Mutex::new(Owners {
                by_session: HashMap::new(),
                prune_at: FIRST_PRUNE,
            })),
        }
    }

    /// Whether `credentials` may use `session`: its opener's, or a session this table does
    /// not know (unknown ids are answered by rmcp with 404).
    fn admits(&self, session: &str, credentials: Option<&Credentials>) -> bool {
        lock(&self.owners)
            .by_session
            .get(session)
            .is_none_or(|owner| owner.as_ref() == credentials)
    }

    async fn remember(&self, session: String, credentials: Option<Credentials>) {
        let prune = {
            let mut owners = lock(&self.owners);
            owners.by_session.insert(session, credentials);
            owners.by_session.len() >= owners.prune_at
        };
        if !prune {
            return;
        }
        let live = self.manager.sessions.read().await;
        let mut owners = lock(&self.owners);
        owners
            .by_session
            .retain(|session, _| live.contains_key(session.as_str()));
        owners.prune_at = (owners.by_session.len() * 2).max(FIRST_PRUNE);
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
            let credentials = request.extensions().get::<Credentials>().cloned();
            let named = request
                .headers()
                .get(HEADER_SESSION_ID)
                .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
            if let Some(session) = &named
                && !this.admits(session, credentials.as_ref())
            {
                tracing::warn!(
                    %session,
                    "refused a request for a session opened with other credentials"
                );
                return Ok(forbidden(session));
            }
            let mut inner = this.inner.clone();
            let response = inner.call(request).await?.map(Body::new);
            if named.is_none()
                && let Some(opened) = response.headers().get(HEADER_SESSION_ID)
            {
                let opened = String::from_utf8_lossy(opened.as_bytes()).into_owned();
                this.remember(opened, credentials).await;
            }
            Ok(response)
        })
    }
}

fn forbidden(session: &str) -> Response<Body> {
    let mut response = Response::new(Body::from(format!(
        "Forbidden: session `{session}` was opened with other credentials; open your own with \
         an initialize request"
    )));
    *response.status_mut() = StatusCode::FORBIDDEN;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn lock(owners: &Mutex<Owners>) -> std::sync::MutexGuard<'_, Owners> {
    // The table holds no invariant a panicking holder could break half-way.
    owners.lock().unwrap_or_else(PoisonError::into_inner)
}
