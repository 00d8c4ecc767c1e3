//! Tasks (`io.modelcontextprotocol/tasks`, SEP-2663): a `tools/call` of a 2026-07-28
//! client that declares the extension may be answered with a task handle
//! (`CreateTaskResult`) instead of its result; the client polls `tasks/get` for the
//! result, answers the task's questions with `tasks/update` and may stop it with
//! `tasks/cancel`. Two kinds of task reach a client through the gateway:
//!
//! - an upstream's own task ([`Work::Upstream`]): the upstream's `CreateTaskResult` goes to
//!   the client as the upstream wrote it, under an id of the gateway's; `tasks/*` go on to
//!   that upstream under the upstream's id;
//! - the gateway's own ([`Work::Own`]): a call to a server of 2025-11-25, which has no
//!   tasks, or a `run_code` run, that has not answered within
//!   `[tasks] answer_within_ms` (or asks its client something first) becomes a task the
//!   gateway runs, whose state it keeps.
//!
//! Either way the task's record lives in the shared state (`crate::state`), so any
//! replica answers `tasks/get`. A record names who created the task: to any other
//! identity the task does not exist (a task id is a bearer token otherwise). Every
//! request about a task passes the profile and the gate again, as a call would.
//!
//! ```toml
//! [tasks]
//! answer_within_ms = 500   # a call of the gateway's own that runs longer becomes a task
//! ttl_ms = 3600000         # how long the gateway keeps its own tasks (and bindings of an
//!                          # upstream's task that names no TTL)
//! poll_interval_ms = 500   # the poll interval the gateway's own tasks suggest
//! ```

pub mod handle;
pub mod record;
pub mod running;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use record::{TaskRecord, Work};

/// `[tasks]`: the gateway's own tasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TasksConfig {
    /// How long a call that may become a task of the gateway's runs before it does: one
    /// that answers sooner is answered as it is. Default 500.
    pub answer_within_ms: u64,
    /// How long the gateway keeps a task of its own from its creation, and the binding of
    /// an upstream's task that names no TTL. Default 3600000 (an hour).
    pub ttl_ms: u64,
    /// The poll interval the gateway's own tasks suggest. Default 500.
    pub poll_interval_ms: u64,
}

impl Default for TasksConfig {
    fn default() -> Self {
        Self {
            answer_within_ms: 500,
            ttl_ms: 3_600_000,
            poll_interval_ms: 500,
        }
    }
}

impl TasksConfig {
    pub fn answer_within(&self) -> Duration {
        Duration::from_millis(self.answer_within_ms)
    }

    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms.max(1))
    }
}

/// A fresh task id of the gateway's, in the namespace of `owner` (an upstream's name, or
/// `gateway` for its own tasks): unguessable, and telling where the work runs.
pub fn new_id(owner: &str) -> String {
    format!("{owner}.{}", uuid::Uuid::new_v4().simple())
}

/// The mailbox (in the shared state) of the replica that runs the gateway's own task `id`,
/// where other replicas leave what `tasks/update` and `tasks/cancel` ask of it.
pub fn mailbox(id: &str) -> String {
    format!("task:{id}")
}

/// The name of the namespace of the gateway's own tasks.
pub const OWN: &str = "gateway";
