//! Streamable HTTP (`/mcp`, `/mcp/{profile}`): each `POST` carries one client message for
//! the session core, and the answer to a request comes back on that `POST`.
//!
//! Two kinds of client meet here:
//! - up to 2025-11-25 a client opens a session with `initialize`, and names it in
//!   `Mcp-Session-Id` from then on; it may `GET` the session's standalone stream (what the
//!   gateway sends it outside any request) and `DELETE` the session;
//! - from 2026-07-28 on a client sends requests that carry their own context and no
//!   session id. They are served by one session per client credentials and profile, kept
//!   for the purpose, which holds nothing a replica must share: any replica serves any of
//!   them.
//!
//! A session belongs to the credentials that opened it: the opener's identity is
//! recorded in the session's shared record (`crate::state`), and every later request
//! naming the session must carry the same credentials or gets `403`, whichever replica it
//! reaches. Reading the record renews it; a session whose record is gone (ended by
//! `DELETE` on any replica, or unused past `[cluster] session_ttl_secs`) gets `404`. A
//! replica that does not hold a session re-creates it from the record (the client's
//! `initialize` is kept there). While the shared state cannot be reached, requests get
//! `503`.
//!
//! An answer that comes before anything else was sent during its request is a plain JSON
//! body; otherwise the `POST` is answered with an event stream (progress, log messages,
//! requests to the client, then the answer), each event recorded so that the client can
//! resume with `Last-Event-ID` on any replica ([`super::http_events`]). With replicas
//! every request streams from its first byte, so that even a request whose replica dies
//! before it sent anything can be resumed elsewhere.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use rmcp::model::{
    ClientConfig, ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData, JsonRpcMessage,
    RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::common::http_header::{HEADER_LAST_EVENT_ID, HEADER_SESSION_ID};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};
use wire::headers::{accepts, session_id, speaks_2026, stateless_context};

use super::http_events::{self, Event, Recorder, ResumeError};
use crate::gateway::Gateway;
use crate::gateway::drain::{Delivery, OpenSession};
use crate::listener_guard::Credentials;
use crate::server::core::decode::decode_message;
use crate::server::core::{self, STREAM_CAPACITY, Scope, Served, Unasked};
use crate::server::http::draining::Held;
use crate::server::session_profile;
use crate::session::limits::{Holding, LIMIT_ERROR, LimitError, Owner, Permit, Quotas};
use crate::session::registry::{SessionRefusal, check_owner};
use crate::session::{Opening, Session, Transport};
use crate::state::{SharedState, StateError};

/// How long an answer may keep its request waiting with nothing sent before the request
/// is answered with a stream, whose keep-alive comments keep intermediaries patient.
const PLAIN_WAIT: Duration = Duration::from_secs(15);

/// How often a request's stream yields, once its answer is in, to the tasks relaying what
/// came before the answer.
const RELAY_YIELDS: usize = 4;

/// Interval between keep-alive comments on a silent stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The streamable HTTP endpoint for one path (`/mcp` or `/mcp/{profile}`); a token bound
/// to a profile overrides `profile` for the sessions it opens.
#[derive(Clone)]
pub struct StreamableHttp(Arc<ServedPath>);

/// What serves one path: the gateway, the path's profile, and what its sessions share.
struct ServedPath {
    gateway: Arc<Gateway>,
    profile: Option<String>,
    state: Arc<dyn SharedState>,
    /// What each identity may hold.
    quotas: Arc<Quotas>,
    shutdown: CancellationToken,
}

/// What this transport keeps with a session opened by `initialize`.
struct Kept {
    /// What the gateway sends the client outside any request.
    standalone: Arc<Standalone>,
    /// Counts the session as open, for the drain to wait for its client to close it.
    _open: OpenSession,
}

/// A session's standalone stream on this replica: every message to it is recorded (and so
/// published to the other replicas) as it is sent, then goes to the client's `GET` when
/// one is open here, or waits for the next one.
#[derive(Default)]
struct Standalone {
    open: Mutex<StandaloneState>,
}

#[derive(Default)]
struct StandaloneState {
    /// The open `GET`'s events.
    get: Option<mpsc::Sender<Event>>,
    /// Events recorded while no `GET` was open, the newest [`STREAM_CAPACITY`] of them.
    waiting: VecDeque<Event>,
}

impl Standalone {
    /// Records each message the session's outbox receives, until the session ends.
    async fn pump(
        self: Arc<Self>,
        mut outbox: mpsc::Receiver<ServerJsonRpcMessage>,
        recorder: Recorder,
    ) {
        while let Some(message) = outbox.recv().await {
            let event = recorder.record(message);
            let mut open = self.lock();
            let event = match &open.get {
                Some(get) => match get.try_send(event) {
                    Ok(()) => continue,
                    Err(mpsc::error::TrySendError::Full(event)) => {
                        tracing::debug!("a standalone stream is behind; its event waits");
                        event
                    }
                    Err(mpsc::error::TrySendError::Closed(event)) => {
                        open.get = None;
                        event
                    }
                },
                None => event,
            };
            if open.waiting.len() == STREAM_CAPACITY {
                open.waiting.pop_front();
            }
            open.waiting.push_back(event);
        }
    }

    /// The events of a new `GET`: what waited for it, then what comes; `None` while
    /// another `GET` is open.
    fn attach(&self) -> Option<mpsc::Receiver<Event>> {
        let mut open = self.lock();
        if open.get.as_ref().is_some_and(|get| !get.is_closed()) {
            return None;
        }
        let (get, events) = mpsc::channel(STREAM_CAPACITY.max(open.waiting.len()));
        for event in open.waiting.drain(..) {
            let _ = get.try_send(event);
        }
        open.get = Some(get);
        Some(events)
    }

    fn lock(&self) -> MutexGuard<'_, StandaloneState> {
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl StreamableHttp {
    pub fn new(
        gateway: &Arc<Gateway>,
        profile: Option<String>,
        quotas: Arc<Quotas>,
        shutdown: CancellationToken,
    ) -> Self {
        Self(Arc::new(ServedPath {
            state: gateway.shared_state().clone(),
            gateway: gateway.clone(),
            profile,
            quotas,
            shutdown,
        }))
    }

    /// Serves one HTTP request.
    pub async fn handle(State(this): State<Self>, request: Request) -> Response {
        let endpoint = &this.0;
        let (parts, body) = request.into_parts();
        match parts.method {
            Method::POST => {
                let body = match axum::body::to_bytes(body, usize::MAX).await {
                    Ok(body) => body,
                    Err(e) => {
                        return text(StatusCode::BAD_REQUEST, format!("unreadable body: {e}"));
                    }
                };
                endpoint.post(parts, body).await
            }
            Method::GET => endpoint.get(parts).await,
            Method::DELETE => endpoint.delete(parts).await,
            _ => {
                let mut response = text(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "Method Not Allowed: use POST, GET or DELETE".into(),
                );
                response
                    .headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
                response
            }
        }
    }
}

impl ServedPath {
    async fn post(self: &Arc<Self>, parts: http::request::Parts, body: Bytes) -> Response {
        let message = match decode_message(&body) {
            Ok(message) => message,
            Err(error) => return rpc_error(StatusCode::BAD_REQUEST, error, None),
        };
        let parts = Arc::new(parts);
        match session_id(&parts.headers) {
            Some(id) => match self.session(&parts, &id).await {
                Ok(session) => self.deliver(&session, message, parts, false).await,
                Err(refused) => refused,
            },
            None => match message {
                JsonRpcMessage::Request(request)
                    if matches!(request.request, ClientRequest::InitializeRequest(_)) =>
                {
                    self.open(parts, request.id, request.request).await
                }
                JsonRpcMessage::Request(request)
                    if speaks_2026(&parts.headers, &request.request) =>
                {
                    let checked = stateless_context(&parts.headers, &request.request)
                        .and_then(|()| self.routed_as_said(&parts.headers, &request.request));
                    if let Err(refused) = checked {
                        return rpc_error(StatusCode::BAD_REQUEST, refused, Some(request.id));
                    }
                    let Some(session) = self.stateless_session(&parts) else {
                        let profile = self.profile_of(&parts).unwrap_or_default();
                        return rpc_error(
                            StatusCode::NOT_FOUND,
                            ErrorData::invalid_request(
                                crate::server::unknown_profile(&profile),
                                None,
                            ),
                            Some(request.id),
                        );
                    };
                    self.deliver(&session, JsonRpcMessage::Request(request), parts, true)
                        .await
                }
                JsonRpcMessage::Request(request) => rpc_error(
                    StatusCode::BAD_REQUEST,
                    ErrorData::invalid_request(
                        "Bad Request: no Mcp-Session-Id; send initialize first, or give the \
                         request its own context in _meta (protocol 2026-07-28)",
                        None,
                    ),
                    Some(request.id),
                ),
                _ => text(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: no Mcp-Session-Id for a notification or answer".into(),
                ),
            },
        }
    }

    /// Opens a session with the client's `initialize`.
    async fn open(
        self: &Arc<Self>,
        parts: Arc<http::request::Parts>,
        id: RequestId,
        request: ClientRequest,
    ) -> Response {
        if !self.state.is_ready() {
            return unavailable(&StateError::Unavailable("no answer from Redis".into()));
        }
        let credentials = parts.extensions.get::<Credentials>();
        let identity = credentials.and_then(Credentials::identity);
        let profile = session_profile(self.profile.as_deref(), credentials);
        let session_id = uuid::Uuid::new_v4().simple().to_string();
        let Some(session) = self.hold(&session_id, profile.as_deref(), identity.clone()) else {
            return text(
                StatusCode::NOT_FOUND,
                crate::server::unknown_profile(profile.as_deref().unwrap_or_default()),
            );
        };
        let record = session.record();
        if let Err(e) = self
            .state
            .set_owner(&session_id, record.owner.as_deref())
            .await
        {
            // Without its owner on record the session could not be checked on another
            // replica: end it rather than hand it out.
            self.forget(&session_id);
            return unavailable(&e);
        }
        let scope = Scope {
            http: Some(parts),
            ..Scope::default()
        };
        let Some(served) = session.serve(&self.gateway, id, request, scope).await else {
            return StatusCode::ACCEPTED.into_response();
        };
        // What the client said at `initialize`, as the session keeps it, for a replica
        // that takes the session over.
        let handshake = session.record().handshake.unwrap_or_default();
        if let Err(e) = self.state.set_handshake(&session_id, &handshake).await {
            tracing::warn!(session = %session_id, "handshake not shared: {e}");
        }
        let mut response = plain(served);
        if let Ok(value) = HeaderValue::from_str(&session_id) {
            response.headers_mut().insert(HEADER_SESSION_ID, value);
        }
        response
    }

    /// Holds a new session of `identity` under `id` on this replica; `None` for an
    /// unknown profile.
    fn hold(
        &self,
        id: &str,
        profile: Option<&str>,
        identity: Option<String>,
    ) -> Option<Arc<Session>> {
        let (outbox, queued) = mpsc::channel(STREAM_CAPACITY);
        let standalone = Arc::<Standalone>::default();
        let opening = Opening {
            profile,
            transport: Transport::StreamableHttp,
            id: Some(id),
            outbox,
            owner: self.owner(identity),
            attachment: Box::new(Kept {
                standalone: standalone.clone(),
                _open: self.gateway.drain().open_session(),
            }),
        };
        let session = core::open(&self.gateway, opening)?;
        let recorder = Recorder::standalone(self.state.clone(), id);
        tokio::spawn(standalone.pump(queued, recorder));
        Some(session)
    }

    /// The session `id` names, for a request with these credentials: held here, or
    /// re-created from its shared record; otherwise the response that refuses it.
    async fn session(
        self: &Arc<Self>,
        parts: &http::request::Parts,
        id: &str,
    ) -> Result<Arc<Session>, Response> {
        let identity = parts
            .extensions
            .get::<Credentials>()
            .and_then(Credentials::identity);
        let record = match self.state.touch_session(id).await {
            Err(e) => return Err(unavailable(&e)),
            Ok(None) => {
                // Ended on another replica, or expired: end it here too.
                self.forget(id);
                return Err(text(
                    StatusCode::NOT_FOUND,
                    format!("Not Found: session `{id}` has ended; open a new one with initialize"),
                ));
            }
            Ok(Some(record)) => record,
        };
        let held = check_owner(record.owner.as_deref(), identity.as_deref())
            .and_then(|()| self.gateway.sessions().find(id, identity.as_deref()));
        match held {
            Ok(session) => return Ok(session),
            Err(SessionRefusal::NotYours) => {
                tracing::warn!(session = %id, "refused a request for a session opened with other credentials");
                return Err(text(
                    StatusCode::FORBIDDEN,
                    format!(
                        "Forbidden: session `{id}` was opened with other credentials; open \
                         your own with an initialize request"
                    ),
                ));
            }
            Err(SessionRefusal::Unknown) => {}
        }
        // Opened on another replica: taken over here with the client's handshake.
        let client: Option<ClientConfig> = record
            .handshake
            .as_deref()
            .and_then(|handshake| serde_json::from_str(handshake).ok());
        let Some(client) = client else {
            return Err(text(
                StatusCode::NOT_FOUND,
                format!("Not Found: session `{id}` never initialized; open a new one"),
            ));
        };
        let profile = self.profile_of(parts);
        let session = self.hold(id, profile.as_deref(), identity).ok_or_else(|| {
            text(
                StatusCode::NOT_FOUND,
                crate::server::unknown_profile(profile.as_deref().unwrap_or_default()),
            )
        })?;
        session.restore(&self.gateway, client).await;
        Ok(session)
    }

    /// Whether a stateless request's routing headers say what its body says.
    fn routed_as_said(
        &self,
        headers: &HeaderMap,
        request: &ClientRequest,
    ) -> Result<(), ErrorData> {
        let schema = match request {
            ClientRequest::CallToolRequest(call) => self
                .gateway
                .catalog()
                .tools
                .get(call.params.name.as_ref())
                .map(|tool| tool.definition.input_schema.clone()),
            _ => None,
        };
        wire::routing::check(headers, request, schema.as_deref())
    }

    /// The profile of a request's session: its token's, or the endpoint's.
    fn profile_of(&self, parts: &http::request::Parts) -> Option<String> {
        session_profile(
            self.profile.as_deref(),
            parts.extensions.get::<Credentials>(),
        )
    }

    /// A session owner of `identity`, counted against this listener's quotas.
    fn owner(&self, identity: Option<String>) -> Owner {
        Owner {
            identity,
            quotas: self.quotas.clone(),
        }
    }

    /// The session serving this client's requests of 2026-07-28; `None` when its profile
    /// is gone (a reload removed the profile its path or token names).
    fn stateless_session(&self, parts: &http::request::Parts) -> Option<Arc<Session>> {
        let identity = parts
            .extensions
            .get::<Credentials>()
            .and_then(Credentials::identity);
        let profile = self.profile_of(parts);
        core::serving_stateless(&self.gateway, profile.as_deref(), self.owner(identity))
    }

    /// Hands `message` to `session`: a request's answer as plain JSON or a stream, other
    /// messages `202 Accepted`. A `stateless` request (2026-07-28) ends when its client
    /// stops waiting; a session's request goes on, and its stream can be resumed.
    async fn deliver(
        self: &Arc<Self>,
        session: &Arc<Session>,
        message: ClientJsonRpcMessage,
        parts: Arc<http::request::Parts>,
        stateless: bool,
    ) -> Response {
        let request = match Unasked::of(message) {
            Ok(unasked) => {
                session.receive(&self.gateway, unasked).await;
                return StatusCode::ACCEPTED.into_response();
            }
            Err(request) => request,
        };
        let listens = matches!(
            request.request,
            ClientRequest::SubscriptionsListenRequest(_)
        );
        // A listening stream stays open: it counts against its identity's streams.
        let permit = match listens.then(|| self.stream_permit(&parts)).transpose() {
            Ok(permit) => permit,
            Err(refused) => return too_many(&refused),
        };
        let may_be_plain =
            !listens && !self.state.is_shared() && accepts(&parts.headers, "application/json");
        let (stream, mut sent) = mpsc::channel(STREAM_CAPACITY);
        let gone = CancellationToken::new();
        let guard = gone.clone().drop_guard();
        let scope = Scope {
            stream: Some(stream),
            cancel: stateless.then_some(gone),
            http: Some(parts),
        };
        let id = request.id.clone();
        let mut answer: PendingAnswer = Box::pin(Outliving::new(session.serve(
            &self.gateway,
            id.clone(),
            request.request,
            scope,
        )));
        let mut first = None;
        let mut silent = false;
        if may_be_plain {
            tokio::select! {
                biased;
                served = &mut answer => {
                    if sent.is_empty() {
                        return match served {
                            Some(served) => {
                                guard.disarm();
                                plain(served)
                            }
                            // Cancelled by its client: the stream ends with no answer.
                            None => sse(futures::stream::empty(), guard),
                        };
                    }
                    // Something was sent first: it all goes as a stream.
                    answer = Box::pin(futures::future::ready(served));
                }
                Some(message) = sent.recv() => first = Some(message),
                () = tokio::time::sleep(PLAIN_WAIT) => silent = true,
            }
        }
        // Only a session's client can resume a stream (with its session id): the streams
        // of stateless requests are not recorded.
        let recorder =
            (!stateless).then(|| Recorder::request(self.state.clone(), &session.id, &id));
        let priming = recorder
            .as_ref()
            .filter(|_| self.state.is_shared())
            .map(Recorder::priming);
        let record = move |message| match &recorder {
            Some(recorder) => recorder.record(message),
            None => Event::unrecorded(message),
        };
        let messages = RequestStream {
            pending: first.into_iter().map(Outgoing::Message).collect(),
            sent: Some(sent),
            answer: Some(answer),
        }
        .into_stream()
        .map(move |outgoing| {
            let _ = &permit;
            match outgoing {
                Outgoing::Message(message) => Some((record(message), None)),
                Outgoing::Answer(message, delivery) => Some((record(message), Some(delivery))),
            }
        });
        // A request silent for so long begins its stream with a keep-alive comment.
        let opening = priming
            .map(|event| Some((event, None)))
            .or_else(|| silent.then_some(None));
        sse(futures::stream::iter(opening).chain(messages), guard)
    }

    async fn get(self: &Arc<Self>, parts: http::request::Parts) -> Response {
        let Some(id) = session_id(&parts.headers) else {
            return text(
                StatusCode::METHOD_NOT_ALLOWED,
                "Method Not Allowed: a GET needs the Mcp-Session-Id of a session (protocol \
                 2026-07-28 listens with subscriptions/listen instead)"
                    .into(),
            );
        };
        let session = match self.session(&parts, &id).await {
            Ok(session) => session,
            Err(refused) => return refused,
        };
        if let Some(last) = parts.headers.get(HEADER_LAST_EVENT_ID) {
            let last = String::from_utf8_lossy(last.as_bytes()).into_owned();
            return match http_events::resume(&self.state, &id, &last).await {
                Ok(events) => sse(
                    futures::stream::iter(events.into_iter().map(|event| Some((event, None)))),
                    CancellationToken::new().drop_guard(),
                ),
                Err(ResumeError::NotYours) => text(
                    StatusCode::BAD_REQUEST,
                    format!("Bad Request: Last-Event-ID `{last}` names no stream of this session"),
                ),
                Err(ResumeError::Dropped) => {
                    text(StatusCode::GONE, LimitError::EventsDropped.text())
                }
                Err(ResumeError::State(e)) => unavailable(&e),
            };
        }
        let permit = match self.stream_permit(&parts) {
            Ok(permit) => permit,
            Err(refused) => return too_many(&refused),
        };
        let Some(events) = session
            .attached::<Kept>()
            .and_then(|kept| kept.standalone.attach())
        else {
            return text(
                StatusCode::CONFLICT,
                "Conflict: this session's stream is already open".into(),
            );
        };
        let published = self.state.published();
        let shutdown = self.shutdown.clone();
        let local = tokio_stream::wrappers::ReceiverStream::new(events)
            .take_until(async move { shutdown.cancelled().await });
        let events = http_events::with_published(local, published, &id, self.state.replica());
        sse(
            events.map(move |event| {
                let _ = &permit;
                Some((event, None))
            }),
            CancellationToken::new().drop_guard(),
        )
    }

    async fn delete(self: &Arc<Self>, parts: http::request::Parts) -> Response {
        let Some(id) = session_id(&parts.headers) else {
            return text(
                StatusCode::BAD_REQUEST,
                "Bad Request: DELETE needs the Mcp-Session-Id of the session to end".into(),
            );
        };
        if let Err(refused) = self.session(&parts, &id).await {
            return refused;
        }
        if let Err(e) = self.state.end_session(&id).await {
            tracing::warn!(session = %id, "session not ended in the shared state: {e}");
        }
        self.forget(&id);
        StatusCode::NO_CONTENT.into_response()
    }

    /// A place among the streams the request's identity holds open.
    fn stream_permit(&self, parts: &http::request::Parts) -> Result<Permit, LimitError> {
        let identity = parts
            .extensions
            .get::<Credentials>()
            .and_then(Credentials::identity);
        self.quotas.acquire(Holding::Stream, identity.as_deref())
    }

    /// Ends this replica's part of session `id`.
    fn forget(&self, id: &str) {
        self.gateway.sessions().end(id);
    }
}

/// The answer a request's stream ends with, once it comes.
type PendingAnswer = Pin<Box<dyn Future<Output = Option<Served>> + Send>>;

/// A request being served by the response that waits for it, with no task of its own
/// (a spawned task and the wake-up of its joiner cost the connection more than polling
/// the request in place); dropped before its answer (the client hung up), it goes on in a
/// task, so that a session's call still runs to its end, is logged, and leaves nothing
/// entered in the session (a stateless request's, cancelled by then, ends at once).
struct Outliving(Option<PendingAnswer>);

impl Outliving {
    fn new(serving: impl Future<Output = Option<Served>> + Send + 'static) -> Self {
        Self(Some(Box::pin(serving)))
    }
}

impl Future for Outliving {
    type Output = Option<Served>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(serving) = self.0.as_mut() else {
            return Poll::Ready(None);
        };
        let served = std::task::ready!(serving.as_mut().poll(cx));
        self.0 = None;
        Poll::Ready(served)
    }
}

impl Drop for Outliving {
    fn drop(&mut self) {
        if let Some(serving) = self.0.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(serving);
        }
    }
}

/// What a request's stream carries.
enum Outgoing {
    Message(ServerJsonRpcMessage),
    Answer(ServerJsonRpcMessage, Delivery),
}

/// A request's stream: what is sent during the request, then its answer, and nothing
/// after it (a call parked for input may still hold the stream's sender).
struct RequestStream {
    pending: VecDeque<Outgoing>,
    sent: Option<mpsc::Receiver<ServerJsonRpcMessage>>,
    answer: Option<PendingAnswer>,
}

impl RequestStream {
    fn into_stream(self) -> impl Stream<Item = Outgoing> + Send + 'static {
        futures::stream::unfold(self, |mut this| async move {
            loop {
                if let Some(next) = this.pending.pop_front() {
                    return Some((next, this));
                }
                let answer = this.answer.as_mut()?;
                let received = async {
                    match this.sent.as_mut() {
                        Some(sent) => sent.recv().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    biased;
                    message = received => match message {
                        Some(message) => this.pending.push_back(Outgoing::Message(message)),
                        None => this.sent = None,
                    },
                    served = answer => {
                        this.answer = None;
                        // What the upstream sent just before its answer may still be on
                        // its way through the relay's tasks (rmcp hands each notification
                        // to a task): they run before the stream closes.
                        for _ in 0..RELAY_YIELDS {
                            tokio::task::yield_now().await;
                        }
                        if let Some(sent) = this.sent.as_mut() {
                            while let Ok(message) = sent.try_recv() {
                                this.pending.push_back(Outgoing::Message(message));
                            }
                        }
                        if let Some(served) = served {
                            let (message, delivery) = served.into_parts();
                            this.pending.push_back(Outgoing::Answer(message, delivery));
                        }
                    }
                }
            }
        })
    }
}

/// `events` as an SSE response (`None`: a keep-alive comment); each answer's delivery is
/// held until its event is written. Dropping the response (the client went away) drops
/// `guard`.
fn sse(
    events: impl Stream<Item = Option<(Event, Option<Delivery>)>> + Send + 'static,
    guard: DropGuard,
) -> Response {
    let events = events.map(move |item| {
        let _ = &guard;
        let Some((event, delivery)) = item else {
            return Ok(SseEvent::default().comment(""));
        };
        drop(delivery);
        let mut sse = SseEvent::default();
        if !event.id.is_empty() {
            sse = sse.id(event.id);
        }
        if let Some(message) = event.message {
            match serde_json::to_string(&message) {
                Ok(json) => sse = sse.event("message").data(json),
                Err(e) => tracing::error!("cannot encode a server message: {e}"),
            }
        } else {
            sse = sse.data("");
        }
        Ok::<_, Infallible>(sse)
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// A served request's answer as a plain JSON body; a stateless request's error carries
/// the HTTP status its code calls for.
fn plain(served: Served) -> Response {
    let status = if served.stateless {
        status_of(&served.message)
    } else {
        StatusCode::OK
    };
    let (message, delivery) = served.into_parts();
    let body = serde_json::to_vec(&message).unwrap_or_default();
    let mut response = Response::new(Held::body(Body::from(body), delivery));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The HTTP status of a stateless answer: its error's, or 200.
fn status_of(message: &ServerJsonRpcMessage) -> StatusCode {
    let JsonRpcMessage::Error(error) = message else {
        return StatusCode::OK;
    };
    match error.error.code {
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        ErrorCode::INVALID_PARAMS
        | ErrorCode::INVALID_REQUEST
        | ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::HEADER_MISMATCH
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY => StatusCode::BAD_REQUEST,
        LIMIT_ERROR => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::OK,
    }
}

/// A JSON-RPC error as the whole response.
fn rpc_error(status: StatusCode, error: ErrorData, id: Option<RequestId>) -> Response {
    let message = ServerJsonRpcMessage::error(error, id);
    let mut response = axum::Json(message).into_response();
    *response.status_mut() = status;
    response
}

/// 429 for what a limit refused.
fn too_many(refused: &LimitError) -> Response {
    tracing::warn!(code = refused.code(), "{refused}");
    text(StatusCode::TOO_MANY_REQUESTS, refused.text())
}

/// 503 for a request that needs the shared state while it cannot be reached.
fn unavailable(error: &StateError) -> Response {
    text(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "Service Unavailable: sessions are kept in Redis ([cluster] redis_url), which does \
             not answer ({}: {error}); retry shortly",
            error.code()
        ),
    )
}

fn text(status: StatusCode, text: String) -> Response {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
