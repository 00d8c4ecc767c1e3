//! Downstream legacy SSE transport (MCP 2024-11-05), because clients that only speak SSE
//! must still reach the gateway and rmcp 3.11 has no SSE server.
//!
//! The protocol has two halves that meet by session id:
//! - `GET /sse` (or `GET /sse/{profile}`) opens an event stream. Its first event is
//!   `endpoint`, whose data is the relative URL `/message?sessionId=<id>`; every server
//!   message after that is an `event: message` whose data is the JSON-RPC message.
//!   Comments are sent periodically so proxies keep the stream open.
//! - `POST /message?sessionId=<id>` carries one client message (or a batch) and is
//!   answered `202 Accepted`; the answer to a request arrives on the stream.
//!
//! Each stream is a [`Session`](crate::session::Session) of the session core: every message a `POST` carries
//! is decoded as a stdio line is and taken by it in order ([`Session::take`](crate::session::Session::take):
//! notifications and `initialize` in order, other requests side by side), and
//! every message to the client, answers included, joins the stream's queue. The session
//! ends and its id is forgotten when the client drops the stream, on shutdown, or when the
//! client stops reading: the per-session queue is bounded, and an answer that finds it
//! full for [`SseServerConfig::stall_timeout`] drops the session with a log line instead
//! of growing it.
//!
//! A session belongs to the credentials of the `GET` that opened it (see
//! [`crate::listener_guard::Credentials`]): a `POST` that presents another token, or another
//! token's profile, gets `403` and its body never reaches the session, so knowing a session
//! id is not enough to act in it.
//!
//! What one client may hold is bounded (`[listen.limits]`): a batch has at most
//! `max_batch` messages (`413`, `SSE_BATCH_TOO_LONG`), a session runs at most
//! `max_in_flight_per_session` requests at once and the sessions of one identity
//! `max_in_flight_per_identity` (a `POST` that would pass either is refused whole with
//! `429`, `SSE_IN_FLIGHT_LIMIT` or `SSE_IDENTITY_IN_FLIGHT_LIMIT`, and nothing of it
//! runs), and an identity holds
//! at most `max_streams_per_identity` open streams (`429`, `STREAM_LIMIT`).
//!
//! Errors the client sees: an unknown or closed session id gets `404`, a body that is not
//! a JSON-RPC message gets `400` (the session lives on; if the body still names a request
//! id, an error response for it is also sent on the stream so the caller is not left
//! waiting), a session that does not take its messages in time gets `503`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use futures::Stream;
use rmcp::model::{JsonRpcMessage, ServerJsonRpcMessage};
use tokio::sync::mpsc::error::SendTimeoutError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::gateway::Gateway;
use crate::gateway::drain::OpenSession;
use crate::listener_guard::Credentials;
use crate::server::core::decode::{Batch, MalformedBody};
use crate::server::core::{self, Served};
use crate::server::{session_profile, unknown_profile};
use crate::session::Transport as SessionTransport;
use crate::session::limits::{Holding, LimitError, Owner, Permit, Quotas};
use crate::session::registry::SessionRefusal;
use crate::session::{Opening, Session};

/// The query parameter that names the session in `POST /message`.
const SESSION_QUERY: &str = "sessionId";

/// Limits of the SSE listener.
#[derive(Debug, Clone)]
pub struct SseServerConfig {
    /// Messages that may wait in each direction of one session. Default: 64.
    pub queue_capacity: usize,
    /// How long a full queue may stay full before the session is dropped (outgoing) or
    /// the POST is refused with 503 (incoming). Default: 10 s.
    pub stall_timeout: Duration,
    /// Interval between keep-alive comments on an idle stream. Default: 15 s.
    pub keep_alive: Duration,
}

impl Default for SseServerConfig {
    fn default() -> Self {
        Self {
            queue_capacity: 64,
            stall_timeout: Duration::from_secs(10),
            keep_alive: Duration::from_secs(15),
        }
    }
}

/// Why a session could not take a server message.
#[derive(Debug, thiserror::Error)]
pub enum SseSessionError {
    #[error("SSE session {session_id} is closed")]
    Closed { session_id: String },
    #[error(
        "SSE session {session_id} dropped: its client read nothing for {waited:?} with a full queue"
    )]
    SlowClient {
        session_id: String,
        waited: Duration,
    },
}

impl SseSessionError {
    /// Stable code for logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Closed { .. } => "SSE_SESSION_CLOSED",
            Self::SlowClient { .. } => "SSE_CLIENT_TOO_SLOW",
        }
    }
}

/// Where a session's answers go: its event stream, through a queue that may stay full for
/// `stall_timeout` at most before the session is dropped.
#[derive(Clone)]
struct SseOutput {
    session_id: String,
    outgoing: mpsc::Sender<ServerJsonRpcMessage>,
    closed: CancellationToken,
    stall_timeout: Duration,
}

impl SseOutput {
    async fn send(&self, item: ServerJsonRpcMessage) -> Result<(), SseSessionError> {
        let session_id = || self.session_id.clone();
        let sent = tokio::select! {
            biased;
            _ = self.closed.cancelled() => return Err(SseSessionError::Closed { session_id: session_id() }),
            sent = self.outgoing.send_timeout(item, self.stall_timeout) => sent,
        };
        match sent {
            Ok(()) => Ok(()),
            Err(SendTimeoutError::Closed(_)) => Err(SseSessionError::Closed {
                session_id: session_id(),
            }),
            Err(SendTimeoutError::Timeout(_)) => {
                let error = SseSessionError::SlowClient {
                    session_id: session_id(),
                    waited: self.stall_timeout,
                };
                tracing::warn!(code = error.code(), "{error}");
                self.closed.cancel();
                Err(error)
            }
        }
    }
}

/// The gateway's SSE routes, `GET /sse`, `GET /sse/{profile}` and `POST /message`: every
/// new stream becomes a session of its own, with the profile [`session_profile`] chooses.
/// A path must name a profile that exists, even when a bound token overrides it;
/// otherwise the stream is refused with 404. Cancelling `shutdown` ends every session and
/// refuses new ones.
pub fn service(gateway: &Arc<Gateway>, quotas: Arc<Quotas>, shutdown: CancellationToken) -> Router {
    let state = SseState {
        gateway: gateway.clone(),
        quotas,
        shutdown,
        config: SseServerConfig::default(),
    };
    Router::new()
        .route("/sse", get(open_default))
        .route("/sse/{profile}", get(open_profile))
        .route("/message", post(accept_message))
        .with_state(state)
}

/// What the SSE transport keeps with each of its sessions.
struct SseStream {
    output: SseOutput,
    /// A permit per request of the session running now.
    in_flight: Arc<Semaphore>,
    /// Counts the session as open, for the drain to wait for its client to close it.
    _open: OpenSession,
}

#[derive(Clone)]
struct SseState {
    gateway: Arc<Gateway>,
    /// What each identity may hold.
    quotas: Arc<Quotas>,
    shutdown: CancellationToken,
    config: SseServerConfig,
}

async fn open_default(State(state): State<SseState>, request: Request) -> Response {
    open_session(state, None, request)
}

async fn open_profile(
    State(state): State<SseState>,
    Path(profile): Path<String>,
    request: Request,
) -> Response {
    open_session(state, Some(profile), request)
}

fn open_session(state: SseState, profile: Option<String>, request: Request) -> Response {
    if state.shutdown.is_cancelled() {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "the gateway is shutting down".into(),
        );
    }
    if let Some(named) = &profile
        && !state.gateway.has_profile(Some(named))
    {
        return text(StatusCode::NOT_FOUND, unknown_profile(named));
    }
    let opener = request.extensions().get::<Credentials>().cloned();
    let owner = Owner {
        identity: opener.as_ref().and_then(Credentials::identity),
        quotas: state.quotas.clone(),
    };
    let permit = match owner.acquire(Holding::Stream) {
        Ok(permit) => permit,
        Err(refused) => {
            tracing::warn!(code = refused.code(), "{refused}");
            return text(StatusCode::TOO_MANY_REQUESTS, refused.text());
        }
    };
    let profile = session_profile(profile.as_deref(), opener.as_ref());
    let session_id = uuid::Uuid::new_v4().simple().to_string();
    let (outgoing_tx, outgoing_rx) = mpsc::channel(state.config.queue_capacity.max(1));
    let closed = state.shutdown.child_token();
    let output = SseOutput {
        session_id: session_id.clone(),
        outgoing: outgoing_tx.clone(),
        closed: closed.clone(),
        stall_timeout: state.config.stall_timeout,
    };
    let opening = Opening {
        profile: profile.as_deref(),
        transport: SessionTransport::Sse,
        id: Some(&session_id),
        outbox: outgoing_tx,
        owner,
        attachment: Box::new(SseStream {
            output,
            in_flight: Arc::new(Semaphore::new(
                state.quotas.limits().max_in_flight_per_session.get(),
            )),
            _open: state.gateway.drain().open_session(),
        }),
    };
    let Some(session) = core::open(&state.gateway, opening) else {
        return text(
            StatusCode::NOT_FOUND,
            unknown_profile(profile.as_deref().unwrap_or_default()),
        );
    };
    // The one place a session ends: whoever ends it only cancels `closed`.
    tokio::spawn(end_when_closed(
        state.gateway.clone(),
        session,
        closed.clone(),
    ));
    tracing::debug!(%session_id, "SSE session opened");
    let stream = event_stream(
        format!("/message?{SESSION_QUERY}={session_id}"),
        outgoing_rx,
        closed,
        permit,
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(state.config.keep_alive))
        .into_response()
}

async fn end_when_closed(gateway: Arc<Gateway>, session: Arc<Session>, closed: CancellationToken) {
    closed.cancelled().await;
    gateway.sessions().end_session(&session);
    tracing::debug!(session_id = %session.id, "SSE session closed");
}

/// Cancels the session when the response body is dropped, i.e. the client went away.
struct CloseOnDrop(CancellationToken);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

struct StreamState {
    endpoint: Option<String>,
    outgoing: mpsc::Receiver<ServerJsonRpcMessage>,
    closed: CancellationToken,
    _close_on_drop: CloseOnDrop,
    /// The stream's place among its identity's open streams.
    _permit: Permit,
}

/// The `endpoint` event, then one `message` event per server message, until the session
/// closes (messages already queued are still written) or the gateway drops the transport.
fn event_stream(
    endpoint: String,
    outgoing: mpsc::Receiver<ServerJsonRpcMessage>,
    closed: CancellationToken,
    permit: Permit,
) -> impl Stream<Item = Result<Event, Infallible>> + Send + 'static {
    let state = StreamState {
        endpoint: Some(endpoint),
        outgoing,
        _close_on_drop: CloseOnDrop(closed.clone()),
        closed,
        _permit: permit,
    };
    futures::stream::unfold(state, |mut state| async move {
        if let Some(endpoint) = state.endpoint.take() {
            return Some((Ok(Event::default().event("endpoint").data(endpoint)), state));
        }
        loop {
            let message = tokio::select! {
                biased;
                message = state.outgoing.recv() => message?,
                _ = state.closed.cancelled() => return None,
            };
            match serde_json::to_string(&message) {
                Ok(json) => return Some((Ok(Event::default().event("message").data(json)), state)),
                Err(error) => tracing::error!(%error, "cannot encode a server message; dropped"),
            }
        }
    })
}

async fn accept_message(
    State(state): State<SseState>,
    Query(query): Query<HashMap<String, String>>,
    credentials: Option<Extension<Credentials>>,
    body: Bytes,
) -> Response {
    let Some(session_id) = query.get(SESSION_QUERY) else {
        return text(
            StatusCode::BAD_REQUEST,
            format!("missing query parameter `{SESSION_QUERY}`: open a session with GET /sse"),
        );
    };
    let identity = credentials.and_then(|Extension(credentials)| credentials.identity());
    let session = match state
        .gateway
        .sessions()
        .find(session_id, identity.as_deref())
    {
        Ok(session) => session,
        Err(SessionRefusal::Unknown) => return unknown_session(session_id),
        Err(SessionRefusal::NotYours) => {
            tracing::warn!(%session_id, "refused a message for an SSE session opened with other credentials");
            return text(
                StatusCode::FORBIDDEN,
                format!(
                    "Forbidden: SSE session `{session_id}` was opened with other credentials; \
                     open your own with GET /sse"
                ),
            );
        }
    };
    let Some(stream) = session
        .attached::<SseStream>()
        .filter(|stream| !stream.output.closed.is_cancelled())
    else {
        return unknown_session(session_id);
    };
    let batch = match Batch::split(&body) {
        Ok(batch) => batch,
        Err(refused) => return malformed(stream, refused),
    };
    let limits = state.quotas.limits();
    if batch.len() > limits.max_batch.get() {
        let refused = LimitError::BatchTooLong {
            length: batch.len(),
            limit: limits.max_batch.get(),
        };
        tracing::warn!(%session_id, code = refused.code(), "{refused}");
        return text(StatusCode::PAYLOAD_TOO_LARGE, refused.text());
    }
    let messages = match batch.decode() {
        Ok(messages) => messages,
        Err(refused) => return malformed(stream, refused),
    };
    let request_count = messages
        .iter()
        .filter(|message| matches!(message, JsonRpcMessage::Request(_)))
        .count();
    let permits = in_flight(&stream.in_flight, request_count)
        .ok_or(LimitError::InFlight {
            limit: limits.max_in_flight_per_session.get(),
        })
        .and_then(|of_session| {
            let of_identity = (0..request_count)
                .map(|_| state.quotas.acquire(Holding::Request, identity.as_deref()))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(of_session.into_iter().zip(of_identity))
        });
    let mut permits: Vec<_> = match permits {
        Ok(permits) => permits.collect(),
        Err(refused) => {
            tracing::warn!(%session_id, code = refused.code(), "{refused}");
            return text(StatusCode::TOO_MANY_REQUESTS, refused.text());
        }
    };
    let requests = TaskTracker::new();
    for message in messages {
        if stream.output.closed.is_cancelled() {
            return unknown_session(session_id);
        }
        let output = stream.output.clone();
        // A request holds its place among the session's and the identity's requests in
        // flight until answered.
        let permit = matches!(message, JsonRpcMessage::Request(_))
            .then(|| permits.pop())
            .flatten();
        let deliver = |served: Served| async move {
            let _permit = permit;
            if let Err(e) = output.send(served.message).await {
                tracing::debug!(code = e.code(), "an answer not delivered: {e}");
            }
        };
        session
            .take(&state.gateway, message, &requests, deliver)
            .await;
    }
    text(StatusCode::ACCEPTED, "Accepted".into())
}

/// A permit for each of `requests` new requests of a session, or `None` when it has too
/// few left.
fn in_flight(permits: &Arc<Semaphore>, requests: usize) -> Option<Vec<OwnedSemaphorePermit>> {
    (0..requests)
        .map(|_| permits.clone().try_acquire_owned().ok())
        .collect()
}

/// `400` for a body that is no JSON-RPC message; the error answer a malformed request
/// names goes to its sender's stream too.
fn malformed(stream: &SseStream, refused: MalformedBody) -> Response {
    if let Some(answer) = refused.answer {
        // Best effort: the 400 below is the answer the sender relies on.
        if stream.output.outgoing.try_send(*answer).is_err() {
            tracing::debug!("no room to report a malformed message");
        }
    }
    text(
        StatusCode::BAD_REQUEST,
        format!("malformed JSON-RPC message: {}", refused.reason),
    )
}

fn unknown_session(session_id: &str) -> Response {
    text(
        StatusCode::NOT_FOUND,
        format!("unknown or closed SSE session `{session_id}`: open a new one with GET /sse"),
    )
}

fn text(status: StatusCode, message: String) -> Response {
    (status, message).into_response()
}
