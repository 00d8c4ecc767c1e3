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
//! local manager only to tell the handler which session it serves (so per-session state
//! is keyed by the id every replica sees) and to end the session everywhere on `DELETE`.

use std::sync::Arc;

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetExtensions, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    EventStore, EventStoreError, EventStream, RestoreOutcome, ServerSseMessage, SessionId,
    SessionState, SessionStore, SessionStoreError,
};

use crate::state::SharedState;

/// The streamable HTTP session id a handler serves, put into the `initialize` request's
/// extensions (fresh or restored).
#[derive(Debug, Clone)]
pub struct TransportSession(pub SessionId);

/// rmcp's local session manager, its event store the shared state, its sessions ended
/// in the shared state too.
pub struct SharedSessions {
    local: LocalSessionManager,
    state: Arc<dyn SharedState>,
}

impl SharedSessions {
    /// `replica` tells this process's streams apart from other replicas' (rmcp numbers
    /// request streams per process).
    pub fn new(state: Arc<dyn SharedState>, replica: &str) -> Self {
        let events = Arc::new(SharedEvents {
            state: state.clone(),
            replica: replica.to_owned(),
        });
        Self {
            local: LocalSessionManager::default().with_event_store(events),
            state,
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
            request
                .request
                .extensions_mut()
                .insert(TransportSession(id.clone()));
        }
        self.local.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.local.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
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
        self.local.create_stream(id, message).await
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
        self.local.create_standalone_stream(id).await
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
    replica: String,
}

/// One SSE event as stored: the message (none for a priming event) and the retry hint.
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredSse {
    message: Option<ServerJsonRpcMessage>,
    retry_ms: Option<u64>,
}

#[async_trait::async_trait]
impl EventStore for SharedEvents {
    async fn store_event(
        &self,
        stream_id: &str,
        event: &ServerSseMessage,
    ) -> Result<String, EventStoreError> {
        let stored = StoredSse {
            message: event.message.as_deref().cloned(),
            retry_ms: event.retry.map(|r| r.as_millis() as u64),
        };
        let payload = serde_json::to_string(&stored)?;
        let stream = format!("{}:{stream_id}", self.replica);
        Ok(self.state.append_event(&stream, &payload).await?)
    }

    async fn replay_events_after(
        &self,
        last_event_id: &str,
    ) -> Result<EventStream, EventStoreError> {
        let events = self.state.events_after(last_event_id).await?;
        let messages: Vec<ServerSseMessage> = events
            .into_iter()
            .filter_map(|event| {
                let stored: StoredSse = serde_json::from_str(&event.payload).ok()?;
                let message = match stored.message {
                    Some(message) => ServerSseMessage::new(event.id, message),
                    None => ServerSseMessage::priming(
                        event.id,
                        std::time::Duration::from_millis(stored.retry_ms.unwrap_or_default()),
                    ),
                };
                Some(message)
            })
            .collect();
        Ok(Box::pin(futures::stream::iter(messages)))
    }
}
