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
    /// Streamable HTTP session records, made by [`SharedState::set_owner`] alone, so that
    /// every record has its owner.
    sessions: HashMap<String, Session>,
    /// The rate limiter's windows and the reminder's chains, of sessions of any transport
    /// (as Redis keeps them under keys of their own).
    usage: HashMap<String, Usage>,
    streams: HashMap<String, Stream>,
    /// Number of streams at which expired ones are next dropped: pruning waits for the
    /// map to double, so it costs O(1) per append.
    prune_streams_at: usize,
    /// The same for sessions, and for usage, which are created on first use.
    prune_sessions_at: usize,
    prune_usage_at: usize,
}

struct Session {
    record: SessionRecord,
    last_used: Instant,
}

impl Expiring for Session {
    fn last_used(&mut self) -> &mut Instant {
        &mut self.last_used
    }
}

struct Usage {
    last_used: Instant,
    /// Admission times in the rate limiter's window.
    window: VecDeque<Instant>,
    /// The reminder chain: key of the last tracked call, and its length.
    chain: (String, u32),
}

impl Expiring for Usage {
    fn last_used(&mut self) -> &mut Instant {
        &mut self.last_used
    }
}

/// An entry that ends once unused for the session TTL.
trait Expiring {
    fn last_used(&mut self) -> &mut Instant;
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
        let fresh = create.then(|| Session {
            record: SessionRecord::default(),
            last_used: Instant::now(),
        });
        let prune_at = &mut inner.prune_sessions_at;
        self.live(&mut inner.sessions, prune_at, id, fresh)
    }

    /// The live usage of session `id`, created on first use.
    fn usage<'a>(&self, inner: &'a mut Inner, id: &str) -> Option<&'a mut Usage> {
        let fresh = Usage {
            last_used: Instant::now(),
            window: VecDeque::new(),
            chain: (String::new(), 0),
        };
        let prune_at = &mut inner.prune_usage_at;
        self.live(&mut inner.usage, prune_at, id, Some(fresh))
    }

    /// The entry `id` of `map` while used within the session TTL (an expired one is
    /// removed on the way), `fresh` when there is none; expired entries are dropped
    /// whenever the map has doubled since the last time.
    fn live<'a, T: Expiring>(
        &self,
        map: &'a mut HashMap<String, T>,
        prune_at: &mut usize,
        id: &str,
        fresh: Option<T>,
    ) -> Option<&'a mut T> {
        let now = Instant::now();
        let ttl = self.session_ttl;
        let mut expired = |entry: &mut T| now.duration_since(*entry.last_used()) >= ttl;
        if map.get_mut(id).is_some_and(&mut expired) {
            map.remove(id);
        }
        if let Some(fresh) = fresh
            && !map.contains_key(id)
        {
            if map.len() >= *prune_at {
                map.retain(|_, entry| !expired(entry));
                *prune_at = (map.len() * 2).max(64);
            }
            map.insert(id.to_owned(), fresh);
        }
        let entry = map.get_mut(id)?;
        *entry.last_used() = now;
        Some(entry)
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
        let mut inner = self.lock();
        inner.sessions.remove(id);
        inner.usage.remove(id);
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
        let admitted = self.usage(&mut inner, session).is_some_and(|session| {
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
        let count = self.usage(&mut inner, session).map_or(1, |session| {
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
