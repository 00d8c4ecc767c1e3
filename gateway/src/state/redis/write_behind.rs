//! Events written to Redis behind the streams that send them, so a call's answer does
//! not wait for Redis twice (its priming event and its answer) before reaching the client.
//!
//! Only the replica that opened a stream appends to it while it runs, so the replica
//! numbers the events itself (one counter for all its streams, which it names) and sends
//! each event at once; a single task writes them in order, gathering what comes within a
//! few milliseconds into one pipeline, so a busy replica pays one Redis round trip for
//! many calls. What that gives up, and why it is safe:
//! - A client that resumes on *this* replica sees every event recorded before it asked:
//!   a replay first waits until the writer has flushed them ([`EventWriter::flushed`]).
//! - A client that resumes on *another* replica a moment after an event was sent may
//!   find it not stored yet; its replay ends early, and it asks again.
//! - A replica that dies takes its unwritten events with it. A client that missed them
//!   resumes elsewhere, finds no answer, and gets the lost-answer error once this
//!   replica's lease lapses (`server::transport::http_events`).
//!
//! The writer also keeps the events this replica wrote within `max_event_bytes`, as the
//! memory store does for its process ([`crate::state::event_bytes`]): it removes from
//! Redis the events let go, and marks each stream with the last of its events so removed
//! (`dropped:<stream>`), so that a resume from before it is told events are missing. What
//! a replica wrote before it restarted is left to its TTL.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio::sync::{Notify, OnceCell, mpsc, watch};

use crate::state::event_bytes::EventBytes;

/// The most events queued for writing; beyond it, events are kept for sending only.
const QUEUE: usize = 16 * 1024;
/// The most events written in one pipeline.
const BATCH: usize = 256;
/// How long the writer lets events gather before it writes them (unless a replay is
/// waiting for them).
const GATHER: Duration = Duration::from_millis(5);

/// The Redis keys of one stream.
pub struct StreamKeys {
    /// The sorted set of its events.
    pub events: String,
    /// The sequence number of the last of its events removed to keep within bounds.
    pub dropped: String,
}

/// One event to append: its sequence number and the stream's keys, the sorted-set entry,
/// and what to publish with it, if anything.
struct Write {
    sequence: u64,
    keys: StreamKeys,
    entry: String,
    publish: Option<String>,
}

/// How events are kept: at most `max_events` per stream and `max_bytes` of this replica's
/// in all, for `ttl_secs`; published ones on `channel`.
pub struct Retention {
    pub max_events: usize,
    pub max_bytes: usize,
    pub ttl_secs: u64,
    pub channel: String,
}

/// The numbering and the queue of this replica's events.
pub struct EventWriter {
    queue: Mutex<Queue>,
    /// The sequence number up to which events were written (or given up on).
    flushed: watch::Receiver<u64>,
    /// Asks the writer to write what it gathered now.
    hurry: Arc<Notify>,
}

struct Queue {
    /// The last sequence number handed out.
    last: u64,
    /// The last sequence number queued for writing.
    last_queued: u64,
    writes: mpsc::Sender<Write>,
}

impl EventWriter {
    /// Starts the writer task; it ends when the writer is dropped.
    pub fn start(
        connection: Arc<OnceCell<ConnectionManager>>,
        ready: Arc<AtomicBool>,
        retention: Retention,
    ) -> EventWriter {
        let (writes, queued) = mpsc::channel(QUEUE);
        let (flushed_to, flushed) = watch::channel(0);
        let hurry = Arc::new(Notify::new());
        tokio::spawn(write(
            queued,
            connection,
            ready,
            flushed_to,
            hurry.clone(),
            retention,
        ));
        EventWriter {
            queue: Mutex::new(Queue {
                last: 0,
                last_queued: 0,
                writes,
            }),
            flushed,
            hurry,
        }
    }

    /// A sequence number for an event that is not stored.
    pub fn reserve(&self) -> u64 {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.last += 1;
        queue.last
    }

    /// Numbers an event of the stream of `keys` and queues it; its sequence number.
    /// `entry` makes the set's member from the number. `publish` is what to publish once
    /// the event is stored.
    pub fn append(
        &self,
        keys: StreamKeys,
        entry: impl FnOnce(u64) -> String,
        publish: impl FnOnce(u64) -> Option<String>,
    ) -> u64 {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.last += 1;
        let sequence = queue.last;
        let write = Write {
            sequence,
            keys,
            entry: entry(sequence),
            publish: publish(sequence),
        };
        match queue.writes.try_send(write) {
            Ok(()) => queue.last_queued = sequence,
            Err(e) => tracing::warn!(
                "an event was sent but not kept for resumption ({}): Redis is not keeping up",
                e.into_inner().keys.events
            ),
        }
        sequence
    }

    /// Waits (at most `patience`) until every event queued so far is written.
    pub async fn flushed(&self, patience: Duration) {
        let queued = self
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last_queued;
        let mut flushed = self.flushed.clone();
        if *flushed.borrow() < queued {
            self.hurry.notify_one();
        }
        let _ = tokio::time::timeout(patience, flushed.wait_for(|done| *done >= queued)).await;
    }
}

/// Writes what is queued, a pipeline at a time, until the writer is dropped.
async fn write(
    mut queued: mpsc::Receiver<Write>,
    connection: Arc<OnceCell<ConnectionManager>>,
    ready: Arc<AtomicBool>,
    flushed: watch::Sender<u64>,
    hurry: Arc<Notify>,
    retention: Retention,
) {
    let mut batch = Vec::with_capacity(BATCH);
    let ttl = retention.ttl_secs as i64;
    let keep = -(retention.max_events as isize) - 1;
    let mut event_bytes = EventBytes::new(retention.max_bytes);
    while queued.recv_many(&mut batch, BATCH).await > 0 {
        tokio::select! {
            () = tokio::time::sleep(GATHER) => {}
            () = hurry.notified() => {}
        }
        while batch.len() < BATCH
            && let Ok(write) = queued.try_recv()
        {
            batch.push(write);
        }
        let last = batch.last().map_or(0, |write| write.sequence);
        let mut pipe = redis::pipe();
        for write in batch.drain(..) {
            let bytes = event_bytes.charge(write.keys.events.len(), write.entry.len());
            if bytes.is_some() {
                pipe.zadd(&write.keys.events, write.entry, write.sequence)
                    .ignore()
                    .zremrangebyrank(&write.keys.events, 0, keep)
                    .ignore()
                    .expire(&write.keys.events, ttl)
                    .ignore();
            } else {
                // Keeping it would push out every other event: it alone is not kept.
                pipe.set_ex(&write.keys.dropped, write.sequence, retention.ttl_secs)
                    .ignore();
            }
            // Published once stored, so a replica that hears of it can find it.
            if let Some(message) = write.publish {
                pipe.publish(&retention.channel, message).ignore();
            }
            let Some(bytes) = bytes else {
                continue;
            };
            for (oldest, sequence) in event_bytes.keep(write.keys, write.sequence, bytes) {
                pipe.zrembyscore(&oldest.events, sequence, sequence)
                    .ignore()
                    .set_ex(&oldest.dropped, sequence, retention.ttl_secs)
                    .ignore();
            }
        }
        let written = match connection.get() {
            Some(connection) => {
                let result = pipe.query_async::<()>(&mut connection.clone()).await;
                super::observe(&ready, result)
            }
            None => Err(super::StateError::Unavailable(
                "not connected to Redis yet".into(),
            )),
        };
        if let Err(e) = written {
            tracing::warn!("events not kept for resumption: {e}");
        }
        flushed.send_replace(last);
    }
}
