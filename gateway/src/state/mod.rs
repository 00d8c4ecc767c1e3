//! State that every replica of the gateway must see alike, behind one trait: the
//! streamable HTTP session records (who opened a session, its `initialize` handshake,
//! its log level), the rate limiter's windows, the repeat reminder's chains, the
//! resumable event streams, the records of tasks, the mailboxes in which one replica
//! leaves messages for another (for the one running a task, see `crate::tasks`; for the
//! one holding a parked call, see `server::core::handover`), and the notifications one
//! replica publishes for a session whose stream another replica holds. One process keeps
//! it in memory ([`memory::MemoryState`], the default); several replicas behind a load
//! balancer share it in Redis ([`redis::RedisState`]), as `[cluster]` says
//! ([`ClusterConfig`]). Nothing outside this module knows which.
//!
//! Every update that two replicas could race on is one atomic step in the store (a Lua
//! script in Redis, a mutex in memory): a rate-limit admission, a chain extension, an
//! event append.

mod event_bytes;
pub mod memory;
pub mod redis;
mod replica;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::config::ClusterConfig;

/// Why shared state could not be read or written.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StateError {
    /// The store cannot be reached (Redis down, or not connected yet).
    #[error("shared state is unavailable: {0}")]
    Unavailable(String),
    /// The store answered with something this gateway did not write.
    #[error("shared state holds an unreadable record: {0}")]
    Corrupt(String),
}

impl StateError {
    /// A stable code, for logs and error bodies.
    pub fn code(&self) -> &'static str {
        match self {
            StateError::Unavailable(_) => "STATE_UNAVAILABLE",
            StateError::Corrupt(_) => "STATE_CORRUPT",
        }
    }
}

/// What every replica must know about one streamable HTTP session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionRecord {
    /// Who opened it (see `listener_guard::Credentials::identity`); requests with
    /// other credentials are refused on every replica.
    pub owner: Option<String>,
    /// The client's `initialize` parameters (protocol version, capabilities, client
    /// info) as JSON, so another replica can re-create the session without the client
    /// initializing again.
    pub handshake: Option<String>,
    /// The level the client asked for with `logging/setLevel` (as on the wire, e.g.
    /// `"warning"`), applied by a replica that takes the session over.
    pub log_level: Option<String>,
}

/// The events of a stream after one of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replay {
    /// What is kept of them, in order.
    pub events: Vec<StoredEvent>,
    /// Whether some of them were dropped to keep the stored events within bounds
    /// (`max_events_per_stream`, `max_event_bytes`): a replay of the rest would skip them.
    pub dropped: bool,
}

/// One stored event of a resumable stream: its id and the message as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredEvent {
    pub id: String,
    pub payload: String,
}

/// An event of a session's standalone stream (notifications outside any request),
/// published by the replica that produced it so the replica holding the client's `GET`
/// stream can deliver it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    /// The replica that stored it; it delivers its own events itself.
    pub origin: String,
    pub session: String,
    pub event: StoredEvent,
}

/// How many published events a replica may fall behind on before it skips some.
pub const PUBLISHED_BACKLOG: usize = 1024;

/// A task's record handed to the store, and what the store must know of it to bound
/// what its owner keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEntry<'a> {
    pub id: &'a str,
    /// The identity that created the task (`None`: no credentials).
    pub owner: Option<&'a str>,
    /// The record, as JSON.
    pub record: String,
    /// How long it is kept from now.
    pub ttl: Duration,
    /// Whether the task has settled: only settled tasks are dropped to make room.
    pub settled: bool,
}

impl TaskEntry<'_> {
    /// What keeping the record costs, as charged against its owner's byte bound.
    pub fn bytes(&self) -> usize {
        self.record.len() + self.id.len() + TASK_OVERHEAD
    }
}

/// What keeping one task costs beyond its record and its id: its place in its owner's
/// index.
pub const TASK_OVERHEAD: usize = 128;

/// How much of its tasks one identity keeps at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskBound {
    /// Tasks, running and settled.
    pub max_tasks: usize,
    /// Bytes of their records ([`TaskEntry::bytes`]).
    pub max_bytes: usize,
    /// How many ids of dropped tasks are remembered (the most recently dropped), so
    /// that a late request about one is told it was dropped rather than never known.
    pub remembered: usize,
}

/// What became of a task record given to the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKept {
    Kept,
    /// A new task, which its owner's running tasks leave no room for: nothing is stored.
    Refused,
}

/// A task as the store has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredTask {
    /// Its record (JSON).
    Record(String),
    /// Dropped, settled, to keep its owner's tasks within bounds; `owner` created it.
    Dropped { owner: Option<String> },
}

/// The shared state. Every method is one atomic step; a method that fails leaves the
/// state as it was.
pub trait SharedState: Send + Sync + 'static {
    /// Records who opened session `id` (creating the record).
    fn set_owner<'a>(
        &'a self,
        id: &'a str,
        owner: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), StateError>>;

    /// Stores the `initialize` parameters of session `id` (JSON).
    fn set_handshake<'a>(
        &'a self,
        id: &'a str,
        handshake: &'a str,
    ) -> BoxFuture<'a, Result<(), StateError>>;

    /// The record of session `id`, its lifetime renewed; `None` once the session has
    /// ended (deleted, or unused for longer than the TTL). A store shared by replicas may
    /// answer from a copy read less than a second ago: a session ended on another
    /// replica is then gone here a moment later.
    fn touch_session<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<SessionRecord>, StateError>>;

    /// Records session `id`'s log level, when the session has a record (sessions of
    /// other transports have none).
    fn set_log_level<'a>(
        &'a self,
        id: &'a str,
        level: &'a str,
    ) -> BoxFuture<'a, Result<(), StateError>>;

    /// Ends session `id` everywhere, with its limiter window and reminder chain.
    fn end_session<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StateError>>;

    /// Admits one call of `session` when fewer than `limit` were admitted in the last
    /// `window`; whether it was admitted.
    fn admit_call<'a>(
        &'a self,
        session: &'a str,
        limit: u32,
        window: Duration,
    ) -> BoxFuture<'a, Result<bool, StateError>>;

    /// Extends `session`'s reminder chain with a call keyed `key`: the chain's length
    /// now (1 when the previous tracked call had another key).
    fn extend_chain<'a>(
        &'a self,
        session: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<u32, StateError>>;

    /// Keeps an event (JSON) of `stream`, a stream only this replica writes, and returns
    /// its globally unique id at once. The store may have it a moment later: events are
    /// written in the order they were recorded, and [`SharedState::events_after`] on
    /// this replica waits for those recorded before it. When `standalone_of` names a
    /// session, the event belongs to that session's standalone stream and is also
    /// published to every replica's [`SharedState::published`] receivers (at most once:
    /// a replica not listening then misses it).
    fn record_event(&self, stream: &str, payload: String, standalone_of: Option<&str>) -> String;

    /// An id in `stream` (a stream only this replica writes) for an event with nothing
    /// to replay, such as an SSE priming event: nothing is stored, and the stream's later
    /// events sort after it.
    fn reserve_event_id(&self, stream: &str) -> String;

    /// The events of the stream of `event_id` after it, in order (none when the stream is
    /// no longer kept), and whether some of them were dropped.
    fn events_after<'a>(&'a self, event_id: &'a str) -> BoxFuture<'a, Result<Replay, StateError>>;

    /// The events replicas publish from now on.
    fn published(&self) -> tokio::sync::broadcast::Receiver<Published>;

    /// Whether the store answered lately (`/readyz`).
    fn is_ready(&self) -> bool;

    /// This process's name among the replicas, new at every start.
    fn replica(&self) -> &str;

    /// Whether other processes share this state (and so may serve what this one began).
    fn is_shared(&self) -> bool;

    /// Whether `replica` still runs. A replica renews a lease while it can reach the
    /// store; one whose lease lapsed (a few seconds after it died) is gone.
    fn replica_alive<'a>(&'a self, replica: &'a str) -> BoxFuture<'a, Result<bool, StateError>>;

    /// Keeps `task`'s record in place of any before, within what its owner may keep
    /// (`bound`, see [`TaskBound`]): a task new to the store that has not settled is
    /// refused when its owner's running tasks leave no room for it; then the owner's
    /// settled tasks are dropped, oldest first, until the kept ones are within the bound
    /// (running tasks never are), and their ids remembered as dropped.
    fn put_task<'a>(
        &'a self,
        task: TaskEntry<'a>,
        bound: TaskBound,
    ) -> BoxFuture<'a, Result<TaskKept, StateError>>;

    /// Task `id` as the store has it: its record while it is kept, or that it was dropped
    /// (while its id is remembered).
    fn get_task<'a>(&'a self, id: &'a str)
    -> BoxFuture<'a, Result<Option<StoredTask>, StateError>>;

    /// Leaves `message` (JSON) in `mailbox`, kept for `ttl` unless taken before, and tells
    /// every replica's [`SharedState::new_messages`] receivers that it did. A mailbox is
    /// read by the one replica it is for: the one running a task (`task:<id>`, see
    /// `crate::tasks`), the one holding a parked call (`replica:<id>`), the one waiting for
    /// another's answer.
    fn send_message<'a>(
        &'a self,
        mailbox: &'a str,
        message: String,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StateError>>;

    /// Takes the messages left in `mailbox`, oldest first.
    fn take_messages<'a>(
        &'a self,
        mailbox: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, StateError>>;

    /// The names of the mailboxes messages are left in from now on, so their reader takes
    /// them at once. At most once: a reader not listening then (Redis's subscription
    /// being made again, say) misses the news, so it also looks now and then.
    fn new_messages(&self) -> tokio::sync::broadcast::Receiver<String>;

    /// The record kept under `key` (per-user sign-ins, sealed by their owner), if any.
    fn get_record<'a>(&'a self, key: &'a str)
    -> BoxFuture<'a, Result<Option<Vec<u8>>, StateError>>;

    /// Keeps `bytes` under `key`, in place of what was there, for `ttl` (or until
    /// deleted).
    fn put_record<'a>(
        &'a self,
        key: &'a str,
        bytes: Vec<u8>,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<(), StateError>>;

    /// The record under `key`, which is gone from then on, for everyone: of several
    /// takers, one gets it.
    fn take_record<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, StateError>>;

    /// Forgets the record under `key`.
    fn delete_record<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), StateError>>;

    /// The keys of the records whose key starts with `prefix`, sorted.
    fn record_keys<'a>(&'a self, prefix: &'a str)
    -> BoxFuture<'a, Result<Vec<String>, StateError>>;

    /// Takes the lock `name` for `holder`, for at most `lease` (it lapses by itself should
    /// the holder die); whether it was free.
    fn try_lock<'a>(
        &'a self,
        name: &'a str,
        holder: &'a str,
        lease: Duration,
    ) -> BoxFuture<'a, Result<bool, StateError>>;

    /// Lets the lock `name` go, when `holder` still holds it.
    fn unlock<'a>(
        &'a self,
        name: &'a str,
        holder: &'a str,
    ) -> BoxFuture<'a, Result<(), StateError>>;
}

/// The shared state `config` asks for: Redis when a URL is set, else this process's
/// memory. Connecting to Redis goes on in the background; until it succeeds the state
/// reports itself unready and every operation fails with [`StateError::Unavailable`].
pub fn open(config: &ClusterConfig) -> Result<Arc<dyn SharedState>, StateError> {
    match &config.redis_url {
        None => Ok(Arc::new(memory::MemoryState::new(config))),
        Some(url) => Ok(Arc::new(redis::RedisState::open(url, config)?)),
    }
}

/// The most events either store keeps per stream: as configured, and at least the last.
fn max_events_per_stream(config: &ClusterConfig) -> usize {
    config.max_events_per_stream.max(1)
}

pub use wire::event_id::{event_id, parse_event_id};

#[cfg(test)]
mod tests;
