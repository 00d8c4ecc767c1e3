//! The event streams of streamable HTTP, kept in the shared state (`crate::state`) so that
//! a client can resume one with `Last-Event-ID` on any replica.
//!
//! Every event a replica sends on a stream is recorded there first; its id names the
//! stream, `<replica>:<session>:<request or "common">`, so a resumption finds the stream,
//! the session it belongs to (only that session's client may resume it), and the replica
//! that wrote it. An event id of a request's stream also carries the request's id
//! (`<stored id>#<hex of the request id's JSON>`): when the replica that served the
//! request died before answering, the replay ends with a JSON-RPC error for the request,
//! so the client stops waiting for an answer that can never come. That error is made anew
//! for each resumption and never stored: a forged id, which can only name a stream of the
//! client's own session, earns its sender that error and writes nothing.
//!
//! Notifications outside any request (`list_changed`, resource updates, log messages) go
//! to a session's standalone stream, the client's `GET`, which one replica holds; every
//! other replica publishes the events it records for that stream (Redis pub/sub), and the
//! replica holding the `GET` adds them to it ([`with_published`]).

use std::sync::Arc;

use futures::{Stream, StreamExt};
use rmcp::ErrorData;
use rmcp::model::{RequestId, ServerJsonRpcMessage};

use wire::event_id::{LastEventId, request_stream, standalone_stream, tag};

use crate::state::{Published, SharedState, StateError, StoredEvent};

/// One event of a stream: its id (empty for an event nobody can resume from), and the
/// message (none for a priming event).
pub struct Event {
    pub id: String,
    pub message: Option<ServerJsonRpcMessage>,
}

impl Event {
    /// An event of a stream that is not recorded.
    pub fn unrecorded(message: ServerJsonRpcMessage) -> Self {
        Self {
            id: String::new(),
            message: Some(message),
        }
    }
}

/// The events of one stream as this replica writes them.
pub struct Recorder {
    state: Arc<dyn SharedState>,
    stream: String,
    /// The request the stream answers, carried in every event id.
    request: Option<RequestId>,
    /// The session, when this is its standalone stream (published to other replicas).
    standalone_of: Option<String>,
}

impl Recorder {
    /// The stream of the answer to `request` in `session`.
    pub fn request(state: Arc<dyn SharedState>, session: &str, request: &RequestId) -> Self {
        let stream = request_stream(state.replica(), session, request);
        Self {
            state,
            stream,
            request: Some(request.clone()),
            standalone_of: None,
        }
    }

    /// The standalone stream of `session`.
    pub fn standalone(state: Arc<dyn SharedState>, session: &str) -> Self {
        let stream = standalone_stream(state.replica(), session);
        Self {
            state,
            stream,
            request: None,
            standalone_of: Some(session.to_owned()),
        }
    }

    /// Records `message`; the event to send.
    pub fn record(&self, message: ServerJsonRpcMessage) -> Event {
        let payload = serde_json::to_string(&message).unwrap_or_default();
        let id = self
            .state
            .record_event(&self.stream, payload, self.standalone_of.as_deref());
        Event {
            id: self.tagged(id),
            message: Some(message),
        }
    }

    /// An event with an id and no message, which a client can resume from before
    /// anything else was sent.
    pub fn priming(&self) -> Event {
        Event {
            id: self.tagged(self.state.reserve_event_id(&self.stream)),
            message: None,
        }
    }

    fn tagged(&self, id: String) -> String {
        match &self.request {
            Some(request) => tag(&id, request),
            None => id,
        }
    }
}

/// Why a stream cannot be resumed.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error("Last-Event-ID names no stream of this session")]
    NotYours,
    /// Events after it were dropped to keep the stored events within bounds.
    #[error("events after Last-Event-ID were dropped")]
    Dropped,
    #[error(transparent)]
    State(#[from] StateError),
}

/// The events after `last_event_id` of a stream of `session`, and, when the replica that
/// served the stream's request is gone without answering it, the answer it can no longer
/// send.
pub async fn resume(
    state: &Arc<dyn SharedState>,
    session: &str,
    last_event_id: &str,
) -> Result<Vec<Event>, ResumeError> {
    let LastEventId {
        stored,
        stream,
        origin,
        session: owner,
        request,
        ..
    } = LastEventId::parse(last_event_id).ok_or(ResumeError::NotYours)?;
    if owner != session {
        return Err(ResumeError::NotYours);
    }
    let replay = state.events_after(stored).await?;
    if replay.dropped {
        return Err(ResumeError::Dropped);
    }
    let stored_events = replay.events;
    let answered = |events: &[StoredEvent]| {
        events.iter().filter_map(message).any(|message| {
            matches!(
                message,
                ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_)
            )
        })
    };
    let mut events: Vec<Event> = stored_events
        .iter()
        .map(|event| Event {
            id: match &request {
                Some(request) => tag(&event.id, request),
                None => event.id.clone(),
            },
            message: message(event),
        })
        .collect();
    if let Some(request) = &request
        && !answered(&stored_events)
        && origin != state.replica()
        && !state.replica_alive(origin).await?
        && !answered(
            &state
                .events_after(&crate::state::event_id(stream, 0))
                .await?
                .events,
        )
    {
        let error = ServerJsonRpcMessage::error(
            ErrorData::internal_error(
                "the gateway replica serving this request stopped before answering; \
                 the request may or may not have taken effect",
                None,
            ),
            Some(request.clone()),
        );
        // Resuming from this id again gives the same error.
        let last = events
            .last()
            .map_or(last_event_id, |event| event.id.as_str());
        events.push(Event {
            id: last.to_owned(),
            message: Some(error),
        });
    }
    Ok(events)
}

/// `local` (events of this replica's standalone stream of `session`), with the events
/// other replicas published for that session; it ends when `local` does.
pub fn with_published(
    local: impl Stream<Item = Event> + Send + 'static,
    published: tokio::sync::broadcast::Receiver<Published>,
    session: &str,
    replica: &str,
) -> impl Stream<Item = Event> + Send + 'static {
    use futures::future::ready;
    let (session, replica) = (session.to_owned(), replica.to_owned());
    let remote = tokio_stream::wrappers::BroadcastStream::new(published).filter_map(move |item| {
        let event = match item {
            Ok(published) if published.session == session && published.origin != replica => {
                Some(Event {
                    message: message(&published.event),
                    id: published.event.id,
                })
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

/// The message a stored event holds (`None` for what this gateway did not store).
fn message(event: &StoredEvent) -> Option<ServerJsonRpcMessage> {
    serde_json::from_str(&event.payload).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClusterConfig;
    use crate::state::memory::MemoryState;

    #[tokio::test]
    async fn a_stream_resumes_for_its_own_session_only() {
        let state: Arc<dyn SharedState> = Arc::new(MemoryState::new(&ClusterConfig::default()));
        let recorder = Recorder::request(state.clone(), "mine", &RequestId::Number(1));
        let first = recorder.priming();
        let progress = ServerJsonRpcMessage::error(ErrorData::internal_error("x", None), None);
        recorder.record(progress);
        let replayed = resume(&state, "mine", &first.id).await.unwrap();
        assert_eq!(replayed.len(), 1);
        assert!(matches!(
            resume(&state, "theirs", &first.id).await,
            Err(ResumeError::NotYours)
        ));
        assert!(matches!(
            resume(&state, "mine", "garbage").await,
            Err(ResumeError::NotYours)
        ));
    }
}
