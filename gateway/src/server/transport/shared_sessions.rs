//! Streamable HTTP sessions that every replica can serve: rmcp's in-process session
//! manager, with what outlives a process kept in the shared state (`crate::state`).
//!
//! rmcp keeps each session's worker in the process that opened it. What lets another
//! replica serve the session's next request is rmcp's own restore path: when a request
//! names a session this process does not hold, rmcp loads the client's `initialize`
//! parameters from a [`SessionStore`], creates a local worker under the same id and
//! replays the handshake into a fresh handler (marked [`SessionRestoreMarker`]). Here
//! that store, and the [`EventStore`] that makes SSE streams resumable with
//! `Last-Event-ID` on any replica, are the shared state. [`SharedSessions`] wraps the
//! local manager to tell the handler which session it serves (so per-session state is
//! keyed by the id every replica sees), to end the session everywhere on `DELETE`, and
//! to carry notifications across replicas.
//!
//! A request stream resumed on another replica replays what its replica stored. While
//! that replica runs, the client reconnects until the answer is stored; once it is gone
//! (its lease in the shared state lapsed) the answer can never come, so the replay ends
//! with a JSON-RPC error for the request instead of leaving the client to wait forever.
//! To know which request a stream answers, every event id a client sees on a request
//! stream carries the request's id (`<stored id>#<hex of the request id's JSON>`), so the
//! client's `Last-Event-ID` names it even when its replica died before storing anything
//! of the stream. A forged tag can only earn its sender an error on its own stream.
//!
//! Notifications outside any request (`list_changed`, resource updates, log messages)
//! go to a session's standalone stream, the client's `GET`, which one replica holds. Any
//! other replica serving the session stores such an event as usual and also publishes it
//! (Redis pub/sub); the replica holding the `GET` adds what others published for that
//! session to the stream. A change every replica sees (an upstream's `list_changed`)
//! can so reach the client once per replica that serves the session: those
//! notifications only ask the client to list again.
//!
//! A client opens its `GET` when it likes, often a moment after its first requests, and
//! rmcp delivers a standalone notification only to a stream that is open. So the first
//! `GET` a replica opens for a session begins with what this replica recorded for that
//! session's standalone stream before it: a tool found by the session's first search is
//! announced even when the search answered first. (What other replicas published before
//! that `GET` is not kept for it.)

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures::Stream;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorData, GetExtensions, ProtocolVersion, RequestId,
    ServerJsonRpcMessage,
};
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    EventStore, EventStoreError, EventStream, RestoreOutcome, ServerSseMessage, SessionId,
    SessionState, SessionStore, SessionStoreError,
};
use rmcp::{Peer, RoleServer};

use super::direct_calls::http::{DirectSessions, HttpSession};
use crate::server::handler::GatewayServer;
use crate::state::{
    Published, SharedState, StateError, StoredEvent, event_id as event_id_of, parse_event_id,
};

/// The suffix of the standalone stream's id in rmcp (`<session>:common`).
const STANDALONE: &str = ":common";

/// The streamable HTTP session a handler serves, put into the `initialize` request's
/// extensions (fresh or restored).
#[derive(Clone)]
pub struct TransportSession {
    pub id: SessionId,
    /// Where the session's tool calls may be served directly, on a gateway that runs alone.
    direct: Option<Arc<DirectSessions>>,
}

impl TransportSession {
    /// Offers the session's tool calls to be served directly, once `server` answers its
    /// `initialize` with `version` (see [`super::direct_calls::http`]).
    pub fn initialized(
        &self,
        peer: &Peer<RoleServer>,
        server: &GatewayServer,
        version: &ProtocolVersion,
    ) {
        if let Some(direct) = &self.direct {
            direct.open(self.id.clone(), peer, server, version);
        }
    }
}

/// rmcp's local session manager, its event store the shared state, its sessions ended
/// in the shared state too.
pub struct SharedSessions {
    local: LocalSessionManager,
    state: Arc<dyn SharedState>,
    /// Sessions whose standalone stream this replica has opened.
    standalone_opened: Mutex<HashSet<SessionId>>,
    /// Sessions whose tool calls are served directly; `None` with replicas.
    direct: Option<Arc<DirectSessions>>,
}

impl SharedSessions {
    pub fn new(state: Arc<dyn SharedState>) -> Self {
        let events = Arc::new(SharedEvents {
            state: state.clone(),
        });
        Self {
            local: LocalSessionManager::default().with_event_store(events),
            direct: (!state.is_shared()).then(Arc::default),
            state,
            standalone_opened: Mutex::default(),
        }
    }

    /// The [`SessionStore`] for rmcp's restore path.
    pub fn store(&self) -> Arc<dyn SessionStore> {
        Arc::new(SharedHandshakes(self.state.clone()))
    }

    /// Whether this process holds session `id` now.
    pub async fn holds(&self, id: &str) -> bool {
        self.local.sessions.read().await.contains_key(id)
    }

    /// The notifications this replica recorded for session `id`'s standalone stream
    /// before it opened that stream, when it opens it for the first time.
    async fn recorded_before_first_get(&self, id: &SessionId) -> Vec<ServerSseMessage> {
        let first = {
            let held = self.local.sessions.read().await;
            let mut opened = self
                .standalone_opened
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            opened.retain(|session| held.contains_key(session));
            opened.insert(id.clone())
        };
        if !first {
            return Vec::new();
        }
        let stream = format!("{}:{id}{STANDALONE}", self.state.replica());
        match self.state.events_after(&event_id_of(&stream, 0)).await {
            Ok(events) => events.into_iter().filter_map(sse_message).collect(),
            Err(e) => {
                tracing::warn!(session = %id, "notifications before the first GET not read: {e}");
                Vec::new()
            }
        }
    }

    /// Session `id`, when its tool calls may be served directly. Since those calls never
    /// reach rmcp's session worker, which ends a session it has not heard of for a while,
    /// the worker is told now and then that the session is in use.
    pub fn direct(self: &Arc<Self>, id: &str) -> Option<Arc<HttpSession>> {
        let (session, keep_alive) = self.direct.as_ref()?.get(id)?;
        if keep_alive {
            let this = Arc::clone(self);
            let id = SessionId::from(id);
            tokio::spawn(async move {
                let worker = this.local.sessions.read().await.get(&id).cloned();
                if let Some(worker) = worker {
                    // Closing a request stream that never existed is an event and no more.
                    let _ = worker.close_request_wise_channel(u64::MAX).await;
                }
            });
        }
        Some(session)
    }

    /// Drops this process's worker of a session that ended elsewhere.
    pub async fn forget(&self, id: &str) {
        let _ = self.local.close_session(&SessionId::from(id)).await;
    }
}

impl SessionManager for SharedSessions {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.local.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        mut message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        if let ClientJsonRpcMessage::Request(request) = &mut message
            && matches!(request.request, ClientRequest::InitializeRequest(_))
        {
            request.request.extensions_mut().insert(TransportSession {
                id: id.clone(),
                direct: self.direct.clone(),
            });
        }
        self.local.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.local.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        if let Some(direct) = &self.direct {
            direct.end(id);
        }
        if let Err(e) = self.state.end_session(id).await {
            tracing::warn!(session = %id, "session not ended in the shared state: {e}");
        }
        self.local.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        // Only another replica ever needs to know which request a stream answers.
        let request = match &message {
            ClientJsonRpcMessage::Request(request) if self.state.is_shared() => {
                Some(request.id.clone())
            }
            _ => None,
        };
        let stream = self.local.create_stream(id, message).await?;
        Ok(tagged(stream, request))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.local.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        // Both subscribed before the stored events are read, so nothing falls in between.
        let published = self.state.published();
        let local = self.local.create_standalone_stream(id).await?;
        let earlier = self.recorded_before_first_get(id).await;
        let local = after_earlier(earlier, local);
        Ok(with_published(local, published, id, self.state.replica()))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.local.resume(id, last_event_id).await
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.local.restore_session(id).await
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.local.event_store()
    }
}

/// The `earlier` events, then those of `local` not among them.
fn after_earlier(
    earlier: Vec<ServerSseMessage>,
    local: impl Stream<Item = ServerSseMessage> + Send + Sync + 'static,
) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static {
    use futures::StreamExt;
    use futures::future::ready;
    let sequence = |event: &ServerSseMessage| {
        let (_, sequence) = parse_event_id(event.event_id.as_deref()?)?;
        Some(sequence)
    };
    let last = earlier.last().and_then(sequence).unwrap_or(0);
    let later = local.filter(move |event| ready(sequence(event).is_none_or(|s| s > last)));
    futures::stream::iter(earlier).chain(later)
}

/// `local` (this replica's standalone stream of `session`), with the events other
/// replicas published for that session; it ends when `local` does.
fn with_published(
    local: impl Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    published: tokio::sync::broadcast::Receiver<Published>,
    session: &str,
    replica: &str,
) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static {
    use futures::StreamExt;
    use futures::future::ready;
    let (session, replica) = (session.to_owned(), replica.to_owned());
    let remote = tokio_stream::wrappers::BroadcastStream::new(published).filter_map(move |item| {
        let event = match item {
            Ok(event) if event.session == session && event.origin != replica => {
                sse_message(event.event)
            }
            Ok(_) => None,
            Err(lagged) => {
                tracing::warn!(%session, "notifications from other replicas skipped: {lagged}");
                None
            }
        };
        ready(event)
    });
    // `None` marks the end of the local stream, which ends the whole.
    futures::stream::select(
        local.map(Some).chain(futures::stream::once(ready(None))),
        remote.map(Some),
    )
    .take_while(|item| ready(item.is_some()))
    .filter_map(ready)
}

/// `stream` (a request stream of this replica), every event id tagged with `request`.
fn tagged(
    stream: impl Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    request: Option<RequestId>,
) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static {
    use futures::StreamExt;
    stream.map(move |mut event| {
        if let Some(request) = &request {
            event.event_id = event.event_id.map(|id| tag(&id, request));
        }
        event
    })
}

/// `event_id` tagged with the request its stream answers.
fn tag(event_id: &str, request: &RequestId) -> String {
    let json = serde_json::to_string(request).expect("a request id serializes");
    let mut tagged = format!("{event_id}#");
    for byte in json.bytes() {
        tagged.push_str(&format!("{byte:02x}"));
    }
    tagged
}

/// The stored event id and the request of a (possibly tagged) event id.
fn untag(event_id: &str) -> (&str, Option<RequestId>) {
    let Some((stored, hex)) = event_id.rsplit_once('#') else {
        return (event_id, None);
    };
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    let request = bytes.and_then(|bytes| serde_json::from_slice(&bytes).ok());
    (stored, request)
}

/// A stored event as rmcp sends it (`None` for what this gateway did not store).
fn sse_message(event: StoredEvent) -> Option<ServerSseMessage> {
    let message: ServerJsonRpcMessage = serde_json::from_str(&event.payload).ok()?;
    Some(ServerSseMessage::new(event.id, message))
}

/// The clients' `initialize` parameters, kept in the shared state.
struct SharedHandshakes(Arc<dyn SharedState>);

#[async_trait::async_trait]
impl SessionStore for SharedHandshakes {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let Some(record) = self.0.touch_session(session_id).await? else {
            return Ok(None);
        };
        let Some(handshake) = record.handshake else {
            return Ok(None);
        };
        let params = serde_json::from_str(&handshake)?;
        Ok(Some(SessionState::new(params)))
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let handshake = serde_json::to_string(&state.initialize_params)?;
        Ok(self.0.set_handshake(session_id, &handshake).await?)
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        Ok(self.0.end_session(session_id).await?)
    }
}

/// SSE events, kept in the shared state for `Last-Event-ID` resumption on any replica.
struct SharedEvents {
    state: Arc<dyn SharedState>,
}

#[async_trait::async_trait]
impl EventStore for SharedEvents {
    async fn store_event(
        &self,
        stream_id: &str,
        event: &ServerSseMessage,
    ) -> Result<String, EventStoreError> {
        let stream = format!("{}:{stream_id}", self.state.replica());
        let Some(message) = event.message.as_deref() else {
            return Ok(self.state.reserve_event_id(&stream));
        };
        // Priming events carry no message: a replay after one needs only its place.
        let payload = serde_json::to_string(message)?;
        // Notifications for the client's `GET`, which another replica may hold.
        let standalone_of = stream_id.strip_suffix(STANDALONE);
        Ok(self.state.record_event(&stream, payload, standalone_of))
    }

    async fn replay_events_after(
        &self,
        last_event_id: &str,
    ) -> Result<EventStream, EventStoreError> {
        let (stored_id, request) = untag(last_event_id);
        let mut messages: Vec<ServerSseMessage> = self
            .state
            .events_after(stored_id)
            .await?
            .into_iter()
            .filter_map(sse_message)
            .collect();
        if let Some(request) = &request
            && let Some(lost) = self.lost_answer(stored_id, request).await?
        {
            messages.push(lost);
        }
        // Still tagged, so a later resumption knows the request too.
        Ok(Box::pin(tagged(futures::stream::iter(messages), request)))
    }
}

impl SharedEvents {
    /// For the stream of `event_id`, answering `request`, whose replica is gone before it
    /// answered: the answer it can no longer send, a JSON-RPC error, stored in the stream
    /// so every later resumption replays it. `None` while the replica runs, or once the
    /// stream holds an answer.
    async fn lost_answer(
        &self,
        event_id: &str,
        request: &RequestId,
    ) -> Result<Option<ServerSseMessage>, StateError> {
        let Some((stream, _)) = parse_event_id(event_id) else {
            return Ok(None);
        };
        let origin = stream
            .split_once(':')
            .map_or(stream, |(replica, _)| replica);
        if origin == self.state.replica() || self.state.replica_alive(origin).await? {
            return Ok(None);
        }
        let answered = self
            .state
            .events_after(&event_id_of(stream, 0))
            .await?
            .into_iter()
            .filter_map(sse_message)
            .any(|event| {
                matches!(
                    event.message.as_deref(),
                    Some(ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_))
                )
            });
        if answered {
            return Ok(None);
        }
        let error = ServerJsonRpcMessage::error(
            ErrorData::internal_error(
                "the gateway replica serving this request stopped before answering; \
                 the request may or may not have taken effect",
                None,
            ),
            Some(request.clone()),
        );
        let payload = serde_json::to_string(&error).expect("a JSON-RPC error serializes");
        let id = self.state.append_event(event_id, &payload).await?;
        Ok(Some(ServerSseMessage::new(id, error)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_id_carries_its_request_and_gives_it_back() {
        for request in [
            RequestId::Number(7),
            RequestId::String("a#b/\"c\"\nü".into()),
        ] {
            let tagged = tag("replica:stream/3", &request);
            assert!(tagged.is_ascii() && !tagged.contains('\n'), "{tagged}");
            assert_eq!(untag(&tagged), ("replica:stream/3", Some(request)));
        }
        assert_eq!(untag("replica:stream/3"), ("replica:stream/3", None));
        assert_eq!(untag("replica:stream/3#zz"), ("replica:stream/3", None));
    }
}
