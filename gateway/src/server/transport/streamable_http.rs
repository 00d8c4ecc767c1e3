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
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio_util::sync::CancellationToken;
use tower::Service;

use crate::gateway::Gateway;
use crate::observe::sessions::Transport;
use crate::server::handler::GatewayServer;
use crate::server::http::security::Credentials;

/// The streamable HTTP service for one path (`/mcp` or `/mcp/{profile}`), its sessions
/// bound to their openers. A token bound to a profile overrides `profile` at `initialize`.
pub fn service(
    gateway: &Arc<Gateway>,
    profile: Option<String>,
    shutdown: &CancellationToken,
) -> BoundSessions {
    let gateway = gateway.clone();
    // Host, Origin and body size are checked by the security layer in front. A request
    // served without a session (protocol 2026-07-28 on) whose first message is its answer
    // gets a plain JSON body instead of a one-event stream; rmcp still streams when the
    // call sends anything first. Sessions opened by `initialize` keep rmcp's streams.
    let config = StreamableHttpServerConfig::default()
        .with_json_response(true)
        .disable_allowed_hosts()
        .with_max_request_body_bytes(gateway.config().listen.max_body_bytes)
        .with_cancellation_token(shutdown.child_token());
    let mut manager = LocalSessionManager::default();
    manager.session_config.completed_cache_ttl = ANSWERED_STREAMS_KEPT;
    let manager = Arc::new(manager);
    let service = StreamableHttpService::new(
        move || {
            Ok(GatewayServer::new(
                gateway.clone(),
                profile.clone(),
                Transport::StreamableHttp,
            ))
        },
        manager.clone(),
        config,
    );
    BoundSessions::new(service, manager)
}

/// How long the response stream of an answered request is kept for a client to resume
/// (`Last-Event-ID`): not at all. rmcp keeps it for 60 s by default and, on every message
/// the session handles, scans every kept stream and reads the clock for each (about
/// 35 ns here), so the cost per call grows with the session's rate: a session at 1,000
/// calls/s keeps 60,000 streams and spends about 2 ms of CPU per message on the scan
/// (perf of the gateway under the Python SDK client: `LocalSessionWorker` eviction and
/// `clock_gettime`, under 1% at 1,650 kept streams and linear in them). A stream whose
/// call is still running is kept and resumable as before; once answered it is dropped at
/// the session's next message.
const ANSWERED_STREAMS_KEPT: std::time::Duration = std::time::Duration::ZERO;

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

impl Default for Owners {
    fn default() -> Self {
        Self {
            by_session: HashMap::new(),
            prune_at: FIRST_PRUNE,
        }
    }
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
            owners: Arc::new(Mutex::new(Owners::default())),
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
        if !lock(&self.owners).insert(session, credentials) {
            return;
        }
        let live = self.manager.sessions.read().await;
        lock(&self.owners).prune(|session| live.contains_key(session));
    }
}

impl Owners {
    /// Records who opened `session`; whether the table is now due for pruning.
    fn insert(&mut self, session: String, credentials: Option<Credentials>) -> bool {
        self.by_session.insert(session, credentials);
        self.by_session.len() >= self.prune_at
    }

    /// Forgets every session that is not `live`, and waits for the table to double again
    /// before the next pruning, so pruning costs O(1) per opened session.
    fn prune(&mut self, live: impl Fn(&str) -> bool) {
        self.by_session.retain(|session, _| live(session));
        self.prune_at = (self.by_session.len() * 2).max(FIRST_PRUNE);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Opens `count` sessions named `{prefix}{i}`, pruning whenever the table asks, with
    /// `live` saying which sessions are still open at that moment.
    fn open(owners: &mut Owners, prefix: &str, count: usize, live: &dyn Fn(&str) -> bool) {
        for i in 0..count {
            if owners.insert(format!("{prefix}{i}"), None) {
                owners.prune(live);
            }
        }
    }

    #[test]
    fn ended_sessions_are_forgotten_as_new_ones_open() {
        let mut owners = Owners::default();
        // A week of short sessions, each ended before the next opens.
        let only_the_newest = |session: &str| session == "short-99999";
        open(&mut owners, "short-", 100_000, &only_the_newest);
        assert!(
            owners.by_session.len() <= FIRST_PRUNE,
            "{} entries kept",
            owners.by_session.len()
        );
    }

    #[test]
    fn live_sessions_are_kept_and_pruning_waits_for_the_table_to_double() {
        let mut owners = Owners::default();
        let all_live = |_: &str| true;
        open(&mut owners, "live-", 1_000, &all_live);
        assert_eq!(
            owners.by_session.len(),
            1_000,
            "no live session is forgotten"
        );
        assert!(owners.prune_at > 1_000 && owners.prune_at <= 2_048);
        // Once they all end, the next opening past the threshold forgets them.
        let none_live = |_: &str| false;
        let until_next_pruning = owners.prune_at - 1_000;
        open(&mut owners, "next-", until_next_pruning, &none_live);
        assert!(owners.by_session.is_empty());
        assert_eq!(owners.prune_at, FIRST_PRUNE);
    }
}
