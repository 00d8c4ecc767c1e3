//! `[tasks]`: the gateway's own tasks (`crate::tasks`): how soon a call becomes one, how
//! long they are kept, and how many one identity keeps.
//!
//! ```toml
//! [tasks]
//! answer_within_ms = 500   # a call of the gateway's own that runs longer becomes a task
//! ttl_ms = 3600000         # how long the gateway keeps its own tasks, and the binding of
//!                          # an upstream's (at most: an upstream's ttlMs is capped at it)
//! poll_interval_ms = 500   # the poll interval the gateway's own tasks suggest
//! max_kept_per_identity = 256            # tasks one identity keeps, running and settled
//! max_kept_bytes_per_identity = 16777216 # bytes of their records (16 MiB)
//! ```

use std::num::NonZeroUsize;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[tasks]`: the gateway's own tasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TasksConfig {
    /// How long a call that may become a task of the gateway's runs before it does: one
    /// that answers sooner is answered as it is. Default 500.
    pub answer_within_ms: u64,
    /// How long the gateway keeps a task of its own from its creation, and the binding of
    /// an upstream's task (at most: an upstream's `ttlMs` is capped at it). Default
    /// 3600000 (an hour).
    pub ttl_ms: u64,
    /// The poll interval the gateway's own tasks suggest. Default 500.
    pub poll_interval_ms: u64,
    /// How many tasks one identity keeps, running and settled: past it, its settled tasks
    /// are dropped, oldest first; while its running tasks alone fill it, a call does not
    /// become a task. Default 256.
    pub max_kept_per_identity: NonZeroUsize,
    /// How many bytes the records of one identity's tasks take at most (a running task's
    /// arguments, a settled one's result), bounded as `max_kept_per_identity` is. Default
    /// 16 MiB.
    pub max_kept_bytes_per_identity: NonZeroUsize,
}

impl Default for TasksConfig {
    fn default() -> Self {
        Self {
            answer_within_ms: 500,
            ttl_ms: 3_600_000,
            poll_interval_ms: 500,
            max_kept_per_identity: NonZeroUsize::new(256).expect("not zero"),
            max_kept_bytes_per_identity: NonZeroUsize::new(16 * 1024 * 1024).expect("not zero"),
        }
    }
}

impl TasksConfig {
    /// How long a call runs before it becomes a task.
    pub fn answer_within(&self) -> Duration {
        Duration::from_millis(self.answer_within_ms)
    }

    /// How long a task is kept, at least a millisecond.
    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms.max(1))
    }
}
