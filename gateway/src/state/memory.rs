//! Shared state in this process's memory: the default, for a gateway that runs alone.
//! One mutex makes each operation atomic, as Redis's scripts do for the cluster; nothing
//! is held across an await.
//!
//! The events of every stream together stay within `max_event_bytes` (see
//! [`super::event_bytes`]). A stream remembers the last of its events that was dropped,
//! so a resume from before it is told that events are missing rather than handed the
//! rest as if nothing were. Task records are bounded per identity alike (see [`tasks`]).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::future::{BoxFuture, ready};
// The system clock, except in tests that pause tokio's time to step through windows.
use tokio::time::Instant;

use super::event_bytes::EventBytes;
use super::replica::Replica;
use super::{
    ClusterConfig, Published, Replay, SessionRecord, SharedState, StateError, StoredEvent,
    StoredTask, TaskBound, TaskEntry, TaskKept, event_id, parse_event_id,
};

mod tasks;

pub struct MemoryState {
    session_ttl: Duration,
    event_ttl: Duration,
    max_events: usize,
    /// In one process, what is published reaches the streams of every path of this
    /// listener.
    replica: Replica,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Streamable HTTP session records, made by [`SharedState::set_owner`] alone, so that
    /// every record has its owner.
    sessions: HashMap<String, Session>,
    /// The rate limiter's windows and the reminder's chains, of sessions of any transport
    /// (as Redis keeps them under keys of their own).
    usage: HashMap<String, Usage>,
    streams: HashMap<Arc<str>, Stream>,
    /// Every event recorded and not yet dropped from here, across streams; an event its
    /// stream dropped already (past `max_events_per_stream`, or with the whole stream
    /// once expired) stays charged until it leaves this queue.
    event_bytes: EventBytes<Arc<str>>,
    /// Number of streams at which expired ones are next dropped: pruning waits for the
    /// map to double, so it costs O(1) per append.
    prune_streams_at: usize,
    /// The same for sessions, and for usage, which are created on first use.
    prune_sessions_at: usize,
    prune_usage_at: usize,
    /// Task records, bounded per identity.
    tasks: tasks::Tasks,
    /// Messages left in mailboxes, each mailbox's with the moment they are dropped.
    mailboxes: HashMap<String, (Vec<String>, Instant)>,
    /// The same as for streams, for mailboxes.
    prune_mailboxes_at: usize,
    /// Records kept for their owners (per-user sign-ins), by key, with when they lapse.
    records: std::collections::BTreeMap<String, (Vec<u8>, Option<Instant>)>,
    /// Locks held, by name: the holder and when its lease ends.
    locks: HashMap<String, (String, Instant)>,
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
    /// The sequence number of the last event dropped to keep within bounds (0: none).
    dropped_through: u64,
}

impl Stream {
    /// Drops the stream's oldest event.
    fn drop_oldest(&mut self) {
        if let Some((sequence, _)) = self.events.pop_front() {
            self.dropped_through = sequence;
        }
    }
}

impl MemoryState {
    pub fn new(config: &ClusterConfig) -> Self {
        Self {
            session_ttl: config.session_ttl(),
            event_ttl: config.event_ttl(),
            max_events: super::max_events_per_stream(config),
            replica: Replica::new(),
            inner: Mutex::new(Inner {
                event_bytes: EventBytes::new(config.max_event_bytes),
                ..Inner::default()
            }),
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
        let mut guard = self.lock();
        let inner = &mut *guard;
        if inner.streams.len() >= inner.prune_streams_at {
            let event_ttl = self.event_ttl;
            inner.streams.retain(|_, s| {
                s.last_append
                    .is_some_and(|at| now.duration_since(at) < event_ttl)
            });
            inner.prune_streams_at = (inner.streams.len() * 2).max(64);
        }
        let name = inner
            .streams
            .get_key_value(stream)
            .map_or_else(|| Arc::from(stream), |(name, _)| name.clone());
        let entry = inner.streams.entry(name.clone()).or_default();
        entry.next += 1;
        entry.last_append = Some(now);
        let sequence = entry.next;
        let Some(payload) = payload else {
            return event_id(stream, sequence);
        };
        let Some(bytes) = inner.event_bytes.charge(stream.len(), payload.len()) else {
            entry.dropped_through = sequence;
            return event_id(stream, sequence);
        };
        entry.events.push_back((sequence, payload));
        while entry.events.len() > self.max_events {
            entry.drop_oldest();
        }
        for (oldest, sequence) in inner.event_bytes.keep(name, sequence, bytes) {
            // Gone already when its stream dropped it, or the whole stream.
            if let Some(stream) = inner.streams.get_mut(&oldest)
                && stream
                    .events
                    .front()
                    .is_some_and(|(first, _)| *first == sequence)
            {
                stream.drop_oldest();
            }
        }
        event_id(stream, sequence)
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
            let published = self.replica.publication(session, id.clone(), payload);
            self.replica.heard_published(published);
        }
        id
    }

    fn reserve_event_id(&self, stream: &str) -> String {
        self.append(stream, None)
    }

    fn events_after<'a>(&'a self, event: &'a str) -> BoxFuture<'a, Result<Replay, StateError>> {
        let replay = parse_event_id(event)
            .and_then(|(stream, after)| {
                let inner = self.lock();
                let kept = inner.streams.get(stream)?;
                Some(Replay {
                    events: kept
                        .events
                        .iter()
                        .filter(|(sequence, _)| *sequence > after)
                        .map(|(sequence, payload)| StoredEvent {
                            id: event_id(stream, *sequence),
                            payload: payload.clone(),
                        })
                        .collect(),
                    dropped: kept.dropped_through > after,
                })
            })
            .unwrap_or_default();
        Box::pin(ready(Ok(replay)))
    }

    fn published(&self) -> tokio::sync::broadcast::Receiver<Published> {
        self.replica.published()
    }

    fn is_ready(&self) -> bool {
        true
    }

    fn replica(&self) -> &str {
        self.replica.name()
    }

    fn is_shared(&self) -> bool {
        false
    }

    fn replica_alive<'a>(&'a self, replica: &'a str) -> BoxFuture<'a, Result<bool, StateError>> {
        // Every stream in this memory is this process's own.
        Box::pin(ready(Ok(replica == self.replica.name())))
    }

    fn get_record<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, StateError>> {
        let now = Instant::now();
        let found = self
            .lock()
            .records
            .get(key)
            .filter(|(_, until)| until.is_none_or(|until| until > now))
            .map(|(bytes, _)| bytes.clone());
        Box::pin(ready(Ok(found)))
    }

    fn put_record<'a>(
        &'a self,
        key: &'a str,
        bytes: Vec<u8>,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        let mut inner = self.lock();
        let now = Instant::now();
        // Lapsed records go when one is written: their number stays that of the live ones.
        inner
            .records
            .retain(|_, (_, until)| until.is_none_or(|until| until > now));
        inner
            .records
            .insert(key.to_owned(), (bytes, ttl.map(|ttl| now + ttl)));
        Box::pin(ready(Ok(())))
    }

    fn take_record<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, StateError>> {
        let now = Instant::now();
        let taken = self
            .lock()
            .records
            .remove(key)
            .filter(|(_, until)| until.is_none_or(|until| until > now))
            .map(|(bytes, _)| bytes);
        Box::pin(ready(Ok(taken)))
    }

    fn delete_record<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), StateError>> {
        self.lock().records.remove(key);
        Box::pin(ready(Ok(())))
    }

    fn record_keys<'a>(
        &'a self,
        prefix: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, StateError>> {
        let keys = self
            .lock()
            .records
            .keys()
            .filter(|key| key.starts_with(prefix))
            .cloned()
            .collect();
        Box::pin(ready(Ok(keys)))
    }

    fn try_lock<'a>(
        &'a self,
        name: &'a str,
        holder: &'a str,
        lease: Duration,
    ) -> BoxFuture<'a, Result<bool, StateError>> {
        let mut inner = self.lock();
        let now = Instant::now();
        let free = inner.locks.get(name).is_none_or(|(_, until)| *until <= now);
        if free {
            inner
                .locks
                .insert(name.to_owned(), (holder.to_owned(), now + lease));
        }
        Box::pin(ready(Ok(free)))
    }

    fn unlock<'a>(
        &'a self,
        name: &'a str,
        holder: &'a str,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        let mut inner = self.lock();
        if inner
            .locks
            .get(name)
            .is_some_and(|(held, _)| held == holder)
        {
            inner.locks.remove(name);
        }
        Box::pin(ready(Ok(())))
    }

    fn put_task<'a>(
        &'a self,
        task: TaskEntry<'a>,
        bound: TaskBound,
    ) -> BoxFuture<'a, Result<TaskKept, StateError>> {
        let kept = self.lock().tasks.put(task, bound, Instant::now());
        Box::pin(ready(Ok(kept)))
    }

    fn get_task<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<StoredTask>, StateError>> {
        let found = self.lock().tasks.get(id, Instant::now());
        Box::pin(ready(Ok(found)))
    }

    fn send_message<'a>(
        &'a self,
        mailbox: &'a str,
        message: String,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        let now = Instant::now();
        let until = now + ttl;
        let mut inner = self.lock();
        if inner.mailboxes.len() >= inner.prune_mailboxes_at {
            inner.mailboxes.retain(|_, (_, until)| *until > now);
            inner.prune_mailboxes_at = (inner.mailboxes.len() * 2).max(64);
        }
        let (messages, kept_until) = inner
            .mailboxes
            .entry(mailbox.to_owned())
            .or_insert_with(|| (Vec::new(), until));
        messages.push(message);
        *kept_until = until;
        drop(inner);
        self.replica.heard_of_mail(mailbox.to_owned());
        Box::pin(ready(Ok(())))
    }

    fn take_messages<'a>(
        &'a self,
        mailbox: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, StateError>> {
        let now = Instant::now();
        let taken = self
            .lock()
            .mailboxes
            .remove(mailbox)
            .filter(|(_, until)| *until > now)
            .map(|(messages, _)| messages)
            .unwrap_or_default();
        Box::pin(ready(Ok(taken)))
    }

    fn new_messages(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.replica.new_messages()
    }
}
