//! Shared state in this process's memory: the default, for a gateway that runs alone.
//! One mutex makes each operation atomic, as Redis's scripts do for the cluster; nothing
//! is held across an await.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::future::{BoxFuture, ready};
// The system clock, except in tests that pause tokio's time to step through windows.
use tokio::time::Instant;

use super::{
    ClusterConfig, PUBLISHED_BACKLOG, Published, SessionRecord, SharedState, StateError,
    StoredEvent, event_id, parse_event_id,
};

pub struct MemoryState {
    session_ttl: Duration,
    event_ttl: Duration,
    max_events: usize,
    replica: String,
    inner: Mutex<Inner>,
    /// Published events: in one process, the streams of every path of this listener.
    published: tokio::sync::broadcast::Sender<Published>,
}

#[derive(Default)]
struct Inner {
    sessions: HashMap<String, Session>,
    streams: HashMap<String, Stream>,
    /// Number of streams at which expired ones are next dropped: pruning waits for the
    /// map to double, so it costs O(1) per append.
    prune_streams_at: usize,
    /// The same for sessions, which are created on first use.
    prune_sessions_at: usize,
}

struct Session {
    record: SessionRecord,
    last_used: Instant,
    /// Admission times in the rate limiter's window.
    window: VecDeque<Instant>,
    /// The reminder chain: key of the last tracked call, and its length.
    chain: (String, u32),
}

#[derive(Default)]
struct Stream {
    next: u64,
    last_append: Option<Instant>,
    events: VecDeque<(u64, String)>,
}

impl MemoryState {
    pub fn new(config: &ClusterConfig) -> Self {
        Self {
            session_ttl: config.session_ttl(),
            event_ttl: config.event_ttl(),
            max_events: config.max_events_per_stream.max(1),
            replica: uuid::Uuid::new_v4().simple().to_string(),
            inner: Mutex::default(),
            published: tokio::sync::broadcast::channel(PUBLISHED_BACKLOG).0,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Each operation leaves the maps consistent before it can panic.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The live session `id` (expired ones are removed on the way), created when asked.
    fn session<'a>(&self, inner: &'a mut Inner, id: &str, create: bool) -> Option<&'a mut Session> {
        let now = Instant::now();
        let expired = inner
            .sessions
            .get(id)
            .is_some_and(|s| now.duration_since(s.last_used) >= self.session_ttl);
        if expired {
            inner.sessions.remove(id);
        }
        if create && !inner.sessions.contains_key(id) {
            if inner.sessions.len() >= inner.prune_sessions_at {
                let ttl = self.session_ttl;
                inner
                    .sessions
                    .retain(|_, s| now.duration_since(s.last_used) < ttl);
                inner.prune_sessions_at = (inner.sessions.len() * 2).max(64);
            }
            inner.sessions.insert(
                id.to_owned(),
                Session {
                    record: SessionRecord::default(),
                    last_used: now,
                    window: VecDeque::new(),
                    chain: (String::new(), 0),
                },
            );
        }
        let session = inner.sessions.get_mut(id)?;
        session.last_used = now;
        Some(session)
    }

    /// Appends `payload` to `stream` (nothing for a reserved id); the event's id.
    fn append(&self, stream: &str, payload: Option<String>) -> String {
        let now = Instant::now();
        let mut inner = self.lock();
        if inner.streams.len() >= inner.prune_streams_at {
            let event_ttl = self.event_ttl;
            inner.streams.retain(|_, s| {
                s.last_append
                    .is_some_and(|at| now.duration_since(at) < event_ttl)
            });
            inner.prune_streams_at = (inner.streams.len() * 2).max(64);
        }
        let entry = inner.streams.entry(stream.to_owned()).or_default();
        entry.next += 1;
        entry.last_append = Some(now);
        if let Some(payload) = payload {
            entry.events.push_back((entry.next, payload));
        }
        while entry.events.len() > self.max_events {
            entry.events.pop_front();
        }
        event_id(stream, entry.next)
    }
}

impl SharedState for MemoryState {
    fn set_owner<'a>(
        &'a self,
        id: &'a str,
        owner: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        let mut inner = self.lock();
        if let Some(session) = self.session(&mut inner, id, true) {
            session.record.owner = owner.map(str::to_owned);
        }
        Box::pin(ready(Ok(())))
    }

    fn set_handshake<'a>(
        &'a self,
        id: &'a str,
        handshake: &'a str,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        let mut inner = self.lock();
        if let Some(session) = self.session(&mut inner, id, true) {
            session.record.handshake = Some(handshake.to_owned());
        }
        Box::pin(ready(Ok(())))
    }

    fn touch_session<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<SessionRecord>, StateError>> {
        let mut inner = self.lock();
        let record = self
            .session(&mut inner, id, false)
            .map(|s| s.record.clone());
        Box::pin(ready(Ok(record)))
    }

    fn set_log_level<'a>(
        &'a self,
        id: &'a str,
        level: &'a str,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        let mut inner = self.lock();
        if let Some(session) = self.session(&mut inner, id, false) {
            session.record.log_level = Some(level.to_owned());
        }
        Box::pin(ready(Ok(())))
    }

    fn end_session<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StateError>> {
        self.lock().sessions.remove(id);
        Box::pin(ready(Ok(())))
    }

    fn admit_call<'a>(
        &'a self,
        session: &'a str,
        limit: u32,
        window: Duration,
    ) -> BoxFuture<'a, Result<bool, StateError>> {
        let now = Instant::now();
        let mut inner = self.lock();
        let admitted = self
            .session(&mut inner, session, true)
            .is_some_and(|session| {
                let times = &mut session.window;
                while times
                    .front()
                    .is_some_and(|t| now.duration_since(*t) >= window)
                {
                    times.pop_front();
                }
                let room = times.len() < limit as usize;
                if room {
                    times.push_back(now);
                }
                room
            });
        Box::pin(ready(Ok(admitted)))
    }

    fn extend_chain<'a>(
        &'a self,
        session: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<u32, StateError>> {
        let mut inner = self.lock();
        let count = self
            .session(&mut inner, session, true)
            .map_or(1, |session| {
                let chain = &mut session.chain;
                if chain.0 == key {
                    chain.1 += 1;
                } else {
                    *chain = (key.to_owned(), 1);
                }
                chain.1
            });
        Box::pin(ready(Ok(count)))
    }

    fn record_event(&self, stream: &str, payload: String, standalone_of: Option<&str>) -> String {
        let id = self.append(stream, Some(payload.clone()));
        if let Some(session) = standalone_of {
            // No receiver is no error: nobody holds a stream to deliver to.
            let _ = self.published.send(Published {
                origin: self.replica.clone(),
                session: session.to_owned(),
                event: StoredEvent {
                    id: id.clone(),
                    payload,
                },
            });
        }
        id
    }

    fn reserve_event_id(&self, stream: &str) -> String {
        self.append(stream, None)
    }

    fn events_after<'a>(
        &'a self,
        event: &'a str,
    ) -> BoxFuture<'a, Result<Vec<StoredEvent>, StateError>> {
        let events = parse_event_id(event)
            .and_then(|(stream, after)| {
                let inner = self.lock();
                let kept = inner.streams.get(stream)?;
                Some(
                    kept.events
                        .iter()
                        .filter(|(sequence, _)| *sequence > after)
                        .map(|(sequence, payload)| StoredEvent {
                            id: event_id(stream, *sequence),
                            payload: payload.clone(),
                        })
                        .collect(),
                )
            })
            .unwrap_or_default();
        Box::pin(ready(Ok(events)))
    }

    fn published(&self) -> tokio::sync::broadcast::Receiver<Published> {
        self.published.subscribe()
    }

    fn is_ready(&self) -> bool {
        true
    }

    fn replica(&self) -> &str {
        &self.replica
    }

    fn is_shared(&self) -> bool {
        false
    }

    fn replica_alive<'a>(&'a self, replica: &'a str) -> BoxFuture<'a, Result<bool, StateError>> {
        // Every stream in this memory is this process's own.
        Box::pin(ready(Ok(replica == self.replica)))
    }
}
