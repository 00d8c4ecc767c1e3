//! Session records read from Redis in the last second, so that a session's requests do
//! not each wait for Redis before they are served.
//!
//! Every request names its session, and the gateway checks the record (does it still
//! exist, whose is it) before serving it. The owner never changes; what a copy can miss
//! is that the session ended on another replica, or a new log level. An ended session
//! is dropped from every replica's copies when the replica that ended it announces it
//! (Redis pub/sub); should that announcement be lost, the copy is too old to use a
//! second later anyway. Reading the record again is also what renews its TTL in Redis,
//! so a session in use is renewed about once a second per replica.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::SessionRecord;

/// How long a copy of a record is used before it is read again.
const FRESH_FOR: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct RecentSessions {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    records: HashMap<String, (Instant, SessionRecord)>,
    /// Size at which stale copies are next dropped: pruning waits for the map to
    /// double, so it costs O(1) per read.
    prune_at: usize,
}

impl RecentSessions {
    /// The record of session `id`, when it was read less than a second ago.
    pub fn fresh(&self, id: &str) -> Option<SessionRecord> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let (read_at, record) = inner.records.get(id)?;
        (read_at.elapsed() < FRESH_FOR).then(|| record.clone())
    }

    /// Keeps `record`, just read, as session `id`'s; `None` (the session ended) forgets it.
    pub fn read(&self, id: &str, record: Option<&SessionRecord>) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(record) = record else {
            inner.records.remove(id);
            return;
        };
        if inner.records.len() >= inner.prune_at {
            inner
                .records
                .retain(|_, (read_at, _)| read_at.elapsed() < FRESH_FOR);
            inner.prune_at = (inner.records.len() * 2).max(64);
        }
        inner
            .records
            .insert(id.to_owned(), (Instant::now(), record.clone()));
    }

    /// Forgets the copy of session `id`: it changed or ended.
    pub fn forget(&self, id: &str) {
        self.read(id, None);
    }
}
