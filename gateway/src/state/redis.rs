//! Shared state in Redis, for replicas behind a load balancer.
//!
//! Keys (all under `<prefix>:`, each with a TTL so nothing outlives its use):
//! - `session:<id>`: a hash with `owner`, `handshake` and `log_level`; its TTL is
//!   renewed on use.
//! - `window:<id>`: the rate limiter's sorted set of admission times (Redis's clock).
//! - `chain:<id>`: the reminder's hash `key`, `count`.
//! - `events:<stream>`: a sorted set of `<seq>:<JSON>` scored `<seq>`.
//! - `replica:<id>`: the lease of a running replica, renewed with every probe.
//! - `task:<id>`: a task's record (JSON), for its TTL, with its owner's index and the
//!   tombstones of dropped tasks ([`tasks`]).
//! - `mailbox:<name>`: a list of messages one replica left for another (for the one
//!   running task `<id>` in `task:<id>`, for replica `<id>` in `replica:<id>`, …), each
//!   announced on the channel `mail`.
//! - `record:<key>`: a record kept for its owner (a per-user sign-in, sealed by it).
//! - `lock:<name>`: a lock's holder, with the lock's lease as its TTL.
//! - the pub/sub channels `published`, events of standalone streams (see
//!   [`Published`]), `ended`, ids of sessions just ended, and `mail`, names of mailboxes
//!   a message was just left in; each replica keeps one subscription to the three,
//!   re-made after Redis returns.
//!
//! Each operation is one command, one `MULTI` pipeline or one Lua script, so replicas
//! racing on the same session see the effects of each other's whole steps only. Two
//! things are kept off the path of a request, each explained in its module: session
//! records are read again at most once a second ([`recent_sessions`]), and events are
//! written behind the streams that send them ([`write_behind`]).
//!
//! The connection is a [`ConnectionManager`] (it reconnects by itself), opened in the
//! background: a gateway starts even when Redis is down, reports itself unready, and
//! becomes ready once Redis answers. A probe every second, which also renews the
//! replica's lease, keeps [`SharedState::is_ready`] true to what Redis does, and every
//! failed operation marks the state unready at once.

mod recent_sessions;
mod tasks;
mod write_behind;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use redis::Script;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::OnceCell;

use self::recent_sessions::RecentSessions;
use self::tasks::{PutTask, TaskKeys};
use self::write_behind::{EventWriter, Retention, StreamKeys};
use super::replica::Replica;
use super::{
    ClusterConfig, Published, Replay, SessionRecord, SharedState, StateError, StoredEvent,
    StoredTask, TaskBound, TaskEntry, TaskKept, event_id, parse_event_id,
};

/// How long one Redis command may take before it counts as a failure.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How often readiness is probed (and this replica's lease renewed).
const PROBE_EVERY: Duration = Duration::from_secs(1);
/// How long a replica counts as running after it last renewed its lease.
const REPLICA_LEASE: Duration = Duration::from_secs(3);

/// Sliding-window admission: drops what left the window, admits when there is room.
/// Uses Redis's clock, so replicas with skewed clocks still share one window.
const ADMIT: &str = r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local window = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
return 1
";

/// Extends the chain when the key repeats, restarts it otherwise.
const EXTEND_CHAIN: &str = r"
local count = 1
if redis.call('HGET', KEYS[1], 'key') == ARGV[1] then
  count = redis.call('HINCRBY', KEYS[1], 'count', 1)
else
  redis.call('HSET', KEYS[1], 'key', ARGV[1], 'count', 1)
end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return count
";

/// Sets the log level of a session that has a record, and only then.
const SET_LOG_LEVEL: &str = r"
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'log_level', ARGV[1])
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end
return 1
";

/// Lets a lock go only when its holder still holds it (its lease may have lapsed and
/// another taken it).
const UNLOCK: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

pub struct RedisState {
    prefix: String,
    unlock: Script,
    session_ttl: Duration,
    replica: Replica,
    connection: Arc<OnceCell<ConnectionManager>>,
    ready: Arc<AtomicBool>,
    admit: Script,
    extend_chain: Script,
    set_log_level: Script,
    put_task: PutTask,
    task_keys: TaskKeys,
    recent: Arc<RecentSessions>,
    events: EventWriter,
    /// Stops the connector and the probe when the state is dropped.
    _background: tokio_util::sync::DropGuard,
}

impl RedisState {
    /// Starts connecting to `url` in the background. Fails only when the URL is bad.
    pub fn open(url: &str, config: &ClusterConfig) -> Result<RedisState, StateError> {
        let client = redis::Client::open(url)
            .map_err(|e| StateError::Unavailable(format!("bad cluster.redis_url: {e}")))?;
        let connection = Arc::new(OnceCell::new());
        let ready = Arc::new(AtomicBool::new(false));
        let stop = tokio_util::sync::CancellationToken::new();
        let recent = Arc::new(RecentSessions::default());
        let replica = Replica::new();
        let lease = format!("{}:replica:{}", config.key_prefix, replica.name());
        tokio::spawn(keep_subscribed(
            client.clone(),
            Channels::of(&config.key_prefix),
            Heard {
                replica: replica.clone(),
                recent: recent.clone(),
            },
            stop.clone(),
        ));
        tokio::spawn(keep_connected(
            client,
            lease,
            connection.clone(),
            ready.clone(),
            stop.clone(),
        ));
        Ok(RedisState {
            prefix: config.key_prefix.clone(),
            unlock: Script::new(UNLOCK),
            session_ttl: config.session_ttl(),
            replica,
            connection: connection.clone(),
            ready: ready.clone(),
            admit: Script::new(ADMIT),
            extend_chain: Script::new(EXTEND_CHAIN),
            set_log_level: Script::new(SET_LOG_LEVEL),
            put_task: PutTask::new(),
            task_keys: TaskKeys::new(&config.key_prefix),
            recent,
            events: EventWriter::start(
                connection.clone(),
                ready.clone(),
                Retention {
                    max_events: super::max_events_per_stream(config),
                    max_bytes: config.max_event_bytes,
                    ttl_secs: Self::secs(config.event_ttl()),
                    channel: Channels::of(&config.key_prefix).published,
                },
            ),
            _background: stop.drop_guard(),
        })
    }

    fn key(&self, kind: &str, id: &str) -> String {
        format!("{}:{kind}:{id}", self.prefix)
    }

    /// The connection, or Unavailable while the first connection has not succeeded.
    fn connection(&self) -> Result<ConnectionManager, StateError> {
        self.connection
            .get()
            .cloned()
            .ok_or_else(|| StateError::Unavailable("not connected to Redis yet".into()))
    }

    fn observe<T>(&self, result: redis::RedisResult<T>) -> Result<T, StateError> {
        observe(&self.ready, result)
    }

    fn secs(duration: Duration) -> u64 {
        duration.as_secs().max(1)
    }
}

/// The outcome of one operation, recorded in the readiness flag.
fn observe<T>(ready: &AtomicBool, result: redis::RedisResult<T>) -> Result<T, StateError> {
    match result {
        Ok(value) => {
            ready.store(true, Ordering::Release);
            Ok(value)
        }
        // An answer of the wrong shape is ours to report; anything else means Redis is
        // not there to ask.
        Err(e)
            if matches!(
                e.kind(),
                redis::ErrorKind::Parse | redis::ErrorKind::UnexpectedReturnType
            ) =>
        {
            Err(StateError::Corrupt(e.to_string()))
        }
        Err(e) => {
            ready.store(false, Ordering::Release);
            Err(StateError::Unavailable(e.to_string()))
        }
    }
}

/// Connects (retrying every second until it works), then probes by renewing `lease`.
async fn keep_connected(
    client: redis::Client,
    lease: String,
    connection: Arc<OnceCell<ConnectionManager>>,
    ready: Arc<AtomicBool>,
    stop: tokio_util::sync::CancellationToken,
) {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_max_delay(PROBE_EVERY);
    let mut probe = tokio::time::interval(PROBE_EVERY);
    probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = probe.tick() => {}
        }
        let mut manager = match connection.get() {
            Some(manager) => manager.clone(),
            None => match client
                .get_connection_manager_with_config(config.clone())
                .await
            {
                Ok(manager) => connection.get_or_init(|| async { manager }).await.clone(),
                Err(e) => {
                    tracing::warn!("cannot reach Redis yet: {e}");
                    continue;
                }
            },
        };
        let answered = redis::cmd("SET")
            .arg(&lease)
            .arg(1)
            .arg("PX")
            .arg(REPLICA_LEASE.as_millis() as u64)
            .query_async::<()>(&mut manager)
            .await
            .is_ok();
        if ready.swap(answered, Ordering::AcqRel) != answered {
            if answered {
                tracing::info!("Redis answers: shared state is ready");
            } else {
                tracing::error!("Redis does not answer: new sessions get 503 until it does");
            }
        }
    }
}

/// The pub/sub channels every replica listens to.
struct Channels {
    /// Events of standalone streams, as [`Published`] JSON.
    published: String,
    /// Ids of sessions just ended.
    ended: String,
    /// Names of mailboxes a message was just left in.
    mail: String,
}

impl Channels {
    fn of(prefix: &str) -> Channels {
        Channels {
            published: format!("{prefix}:published"),
            ended: format!("{prefix}:ended"),
            mail: format!("{prefix}:mail"),
        }
    }
}

/// Where what the subscription hears goes.
struct Heard {
    /// Where published events and names of mailboxes with new messages go.
    replica: Replica,
    /// The copies of session records, of which ended sessions' are forgotten.
    recent: Arc<RecentSessions>,
}

/// Keeps one subscription to `channels` (re-made a second after it breaks), and passes
/// what it hears on to `heard`.
async fn keep_subscribed(
    client: redis::Client,
    channels: Channels,
    heard: Heard,
    stop: tokio_util::sync::CancellationToken,
) {
    use futures::StreamExt;
    loop {
        let subscribed = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub
                .subscribe(&[&channels.published, &channels.ended, &channels.mail])
                .await?;
            Ok::<_, redis::RedisError>(pubsub.into_on_message())
        };
        let messages = tokio::select! {
            () = stop.cancelled() => return,
            subscribed = tokio::time::timeout(CONNECT_TIMEOUT, subscribed) => subscribed,
        };
        match messages {
            Ok(Ok(mut messages)) => loop {
                let message = tokio::select! {
                    () = stop.cancelled() => return,
                    message = messages.next() => message,
                };
                let Some(message) = message else { break };
                let payload = message.get_payload_bytes();
                let channel = message.get_channel_name();
                if channel == channels.ended {
                    heard.recent.forget(&String::from_utf8_lossy(payload));
                    continue;
                }
                if channel == channels.mail {
                    let mailbox = String::from_utf8_lossy(payload).into_owned();
                    heard.replica.heard_of_mail(mailbox);
                    continue;
                }
                match serde_json::from_slice::<Published>(payload) {
                    Ok(event) => heard.replica.heard_published(event),
                    Err(e) => tracing::warn!("unreadable event on {}: {e}", channels.published),
                }
            },
            Ok(Err(e)) => tracing::debug!("cannot subscribe to Redis's channels yet: {e}"),
            Err(_elapsed) => tracing::debug!("cannot subscribe to Redis's channels yet: timed out"),
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(PROBE_EVERY) => {}
        }
    }
}

impl RedisState {
    /// Sets one field of a session's record and restarts its TTL, in one transaction.
    async fn set_session_field(
        &self,
        id: &str,
        field: &str,
        value: &str,
    ) -> Result<(), StateError> {
        let mut connection = self.connection()?;
        let key = self.key("session", id);
        let result = redis::pipe()
            .atomic()
            .hset(&key, field, value)
            .ignore()
            .expire(&key, Self::secs(self.session_ttl) as i64)
            .ignore()
            .query_async::<()>(&mut connection)
            .await;
        self.recent.forget(id);
        self.observe(result)
    }
}

impl SharedState for RedisState {
    fn set_owner<'a>(
        &'a self,
        id: &'a str,
        owner: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(self.set_session_field(id, "owner", owner.unwrap_or("")))
    }

    fn set_handshake<'a>(
        &'a self,
        id: &'a str,
        handshake: &'a str,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(self.set_session_field(id, "handshake", handshake))
    }

    fn touch_session<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<SessionRecord>, StateError>> {
        Box::pin(async move {
            if self.is_ready()
                && let Some(record) = self.recent.fresh(id)
            {
                return Ok(Some(record));
            }
            let mut connection = self.connection()?;
            let key = self.key("session", id);
            let result = redis::pipe()
                .atomic()
                .hgetall(&key)
                .expire(&key, Self::secs(self.session_ttl) as i64)
                .ignore()
                .query_async::<(std::collections::HashMap<String, String>,)>(&mut connection)
                .await;
            let (mut fields,) = self.observe(result)?;
            let record = (!fields.is_empty()).then(|| SessionRecord {
                owner: fields.remove("owner").filter(|o| !o.is_empty()),
                handshake: fields.remove("handshake"),
                log_level: fields.remove("log_level"),
            });
            self.recent.read(id, record.as_ref());
            Ok(record)
        })
    }

    fn set_log_level<'a>(
        &'a self,
        id: &'a str,
        level: &'a str,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move {
            let mut connection = self.connection()?;
            let result = self
                .set_log_level
                .key(self.key("session", id))
                .arg(level)
                .arg(Self::secs(self.session_ttl))
                .invoke_async::<i64>(&mut connection)
                .await;
            self.recent.forget(id);
            self.observe(result).map(drop)
        })
    }

    fn end_session<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move {
            let mut connection = self.connection()?;
            let keys = [
                self.key("session", id),
                self.key("window", id),
                self.key("chain", id),
            ];
            // Announced, so other replicas drop their copies of the record now.
            let result = redis::pipe()
                .del(&keys[..])
                .ignore()
                .publish(Channels::of(&self.prefix).ended, id)
                .ignore()
                .query_async::<()>(&mut connection)
                .await;
            self.recent.forget(id);
            self.observe(result)
        })
    }

    fn admit_call<'a>(
        &'a self,
        session: &'a str,
        limit: u32,
        window: Duration,
    ) -> BoxFuture<'a, Result<bool, StateError>> {
        Box::pin(async move {
            let mut connection = self.connection()?;
            let result = self
                .admit
                .key(self.key("window", session))
                .arg(window.as_micros() as u64)
                .arg(limit)
                .arg(uuid::Uuid::new_v4().simple().to_string())
                .invoke_async::<i64>(&mut connection)
                .await;
            Ok(self.observe(result)? == 1)
        })
    }

    fn extend_chain<'a>(
        &'a self,
        session: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<u32, StateError>> {
        Box::pin(async move {
            let mut connection = self.connection()?;
            let result = self
                .extend_chain
                .key(self.key("chain", session))
                .arg(key)
                .arg(Self::secs(self.session_ttl))
                .invoke_async::<u32>(&mut connection)
                .await;
            self.observe(result)
        })
    }

    fn record_event(&self, stream: &str, payload: String, standalone_of: Option<&str>) -> String {
        let keys = StreamKeys {
            events: self.key("events", stream),
            dropped: self.key("dropped", stream),
        };
        let sequence = self.events.append(
            keys,
            |sequence| format!("{sequence}:{payload}"),
            |sequence| {
                let id = event_id(stream, sequence);
                let published = self
                    .replica
                    .publication(standalone_of?, id, payload.clone());
                Some(serde_json::to_string(&published).expect("an event serializes"))
            },
        );
        event_id(stream, sequence)
    }

    fn reserve_event_id(&self, stream: &str) -> String {
        event_id(stream, self.events.reserve())
    }

    /// A replay is marked `dropped` when this gateway removed one of the events after
    /// `event` to keep within `max_event_bytes`; the trims past `max_events_per_stream`
    /// and what Redis itself evicts go unnoticed, and the replay holds what is left.
    fn events_after<'a>(&'a self, event: &'a str) -> BoxFuture<'a, Result<Replay, StateError>> {
        Box::pin(async move {
            let Some((stream, after)) = parse_event_id(event) else {
                return Ok(Replay::default());
            };
            self.events.flushed(RESPONSE_TIMEOUT).await;
            let mut connection = self.connection()?;
            let result = redis::pipe()
                .cmd("ZRANGEBYSCORE")
                .arg(self.key("events", stream))
                .arg(format!("({after}"))
                .arg("+inf")
                .get(self.key("dropped", stream))
                .query_async::<(Vec<String>, Option<u64>)>(&mut connection)
                .await;
            let (entries, dropped) = self.observe(result)?;
            let events = entries
                .into_iter()
                .map(|entry| {
                    let (sequence, payload) = entry
                        .split_once(':')
                        .and_then(|(seq, payload)| Some((seq.parse::<u64>().ok()?, payload)))
                        .ok_or_else(|| StateError::Corrupt(format!("event entry `{entry}`")))?;
                    Ok(StoredEvent {
                        id: event_id(stream, sequence),
                        payload: payload.to_owned(),
                    })
                })
                .collect::<Result<_, _>>()?;
            Ok(Replay {
                events,
                dropped: dropped.is_some_and(|dropped| dropped > after),
            })
        })
    }

    fn published(&self) -> tokio::sync::broadcast::Receiver<Published> {
        self.replica.published()
    }

    fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    fn replica(&self) -> &str {
        self.replica.name()
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn replica_alive<'a>(&'a self, replica: &'a str) -> BoxFuture<'a, Result<bool, StateError>> {
        Box::pin(async move {
            let mut connection = self.connection()?;
            let result = redis::cmd("EXISTS")
                .arg(self.key("replica", replica))
                .query_async::<bool>(&mut connection)
                .await;
            self.observe(result)
        })
    }

    fn get_record<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, StateError>> {
        Box::pin(async move {
            let mut connection = self.connection()?;
            let result = redis::cmd("GET")
                .arg(self.key("record", key))
                .query_async::<Option<Vec<u8>>>(&mut connection)
                .await;
            self.observe(result)
        })
    }

    fn put_record<'a>(
        &'a self,
        key: &'a str,
        bytes: Vec<u8>,
        ttl: Option<Duration>,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move {
            let mut connection = self.connection()?;
            let mut command = redis::cmd("SET");
            command.arg(self.key("record", key)).arg(bytes);
            if let Some(ttl) = ttl {
                command.arg("PX").arg(ttl.as_millis().max(1) as u64);
            }
            let result = command.query_async::<()>(&mut connection).await;
            self.observe(result)
        })
    }

    fn take_record<'a>(
        &'a self,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, StateError>> {
        Box::pin(async move {
            let mut connection = self.connection()?;
            let result = redis::cmd("GETDEL")
                .arg(self.key("record", key))
                .query_async::<Option<Vec<u8>>>(&mut connection)
                .await;
            self.observe(result)
        })
    }

    fn delete_record<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move {
            let mut connection = self.connection()?;
            let result = redis::cmd("DEL")
                .arg(self.key("record", key))
                .query_async::<()>(&mut connection)
                .await;
            self.observe(result)
        })
    }

    fn record_keys<'a>(
        &'a self,
        prefix: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, StateError>> {
        Box::pin(async move {
            let mut connection = self.connection()?;
            let start = self.key("record", "");
            // The pattern's own wildcard characters in a key prefix are escaped.
            let mut pattern = start.clone();
            for c in prefix.chars() {
                if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                    pattern.push('\\');
                }
                pattern.push(c);
            }
            pattern.push('*');
            let mut keys = Vec::new();
            let mut cursor = 0u64;
            loop {
                let result = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .query_async::<(u64, Vec<String>)>(&mut connection)
                    .await;
                let (next, found) = self.observe(result)?;
                keys.extend(
                    found
                        .into_iter()
                        .filter_map(|k| k.strip_prefix(&start).map(str::to_owned)),
                );
                if next == 0 {
                    break;
                }
                cursor = next;
            }
            keys.sort();
            keys.dedup();
            Ok(keys)
        })
    }

    fn try_lock<'a>(
        &'a self,
        name: &'a str,
        holder: &'a str,
        lease: Duration,
    ) -> BoxFuture<'a, Result<bool, StateError>> {
        Box::pin(async move {
            let mut connection = self.connection()?;
            let result = redis::cmd("SET")
                .arg(self.key("lock", name))
                .arg(holder)
                .arg("NX")
                .arg("PX")
                .arg(lease.as_millis().max(1) as u64)
                .query_async::<Option<String>>(&mut connection)
                .await;
            Ok(self.observe(result)?.is_some())
        })
    }

    fn unlock<'a>(
        &'a self,
        name: &'a str,
        holder: &'a str,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move {
            let mut connection = self.connection()?;
            let result = self
                .unlock
                .key(self.key("lock", name))
                .arg(holder)
                .invoke_async::<i64>(&mut connection)
                .await;
            self.observe(result).map(drop)
        })
    }

    fn put_task<'a>(
        &'a self,
        task: TaskEntry<'a>,
        bound: TaskBound,
    ) -> BoxFuture<'a, Result<TaskKept, StateError>> {
        Box::pin(async move {
            let mut connection = self.connection()?;
            let result = self
                .put_task
                .invoke(&mut connection, &self.task_keys, task, bound)
                .await;
            self.observe(result)
        })
    }

    fn get_task<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<StoredTask>, StateError>> {
        Box::pin(async move {
            let mut connection = self.connection()?;
            let result = redis::cmd("MGET")
                .arg(self.task_keys.record(id))
                .arg(self.task_keys.tombstone(id))
                .query_async::<(Option<String>, Option<String>)>(&mut connection)
                .await;
            let (record, tombstone) = self.observe(result)?;
            Ok(tasks::stored(record, tombstone))
        })
    }

    fn send_message<'a>(
        &'a self,
        mailbox: &'a str,
        message: String,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move {
            let mut connection = self.connection()?;
            let key = self.key("mailbox", mailbox);
            let millis = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX).max(1);
            let result = redis::pipe()
                .atomic()
                .rpush(&key, message)
                .ignore()
                .pexpire(&key, millis)
                .ignore()
                .publish(Channels::of(&self.prefix).mail, mailbox)
                .ignore()
                .query_async::<()>(&mut connection)
                .await;
            self.observe(result)
        })
    }

    fn take_messages<'a>(
        &'a self,
        mailbox: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, StateError>> {
        Box::pin(async move {
            let mut connection = self.connection()?;
            let key = self.key("mailbox", mailbox);
            let result = redis::pipe()
                .atomic()
                .lrange(&key, 0, -1)
                .del(&key)
                .ignore()
                .query_async::<(Vec<String>,)>(&mut connection)
                .await;
            self.observe(result).map(|(messages,)| messages)
        })
    }

    fn new_messages(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.replica.new_messages()
    }
}
