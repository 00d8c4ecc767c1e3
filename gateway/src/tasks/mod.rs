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
//!   tasks, or a `run_code` run, becomes a task the gateway runs, whose state it keeps,
//!   when its tool's `execution.taskSupport` allows it ([`Promotion`]).
//!
//! Either way the task's record lives in the shared state (`crate::state`), so any
//! replica answers `tasks/get`. A record names who created the task: to any other
//! identity the task does not exist (a task id is a bearer token otherwise). Every
//! request about a task passes the profile and the gate again, as a call would.
//!
//! What the shared state keeps of one identity's tasks is bounded (count and bytes): past
//! the bound its settled tasks are dropped, oldest first, and a late request about one is
//! told so ([`TaskError::Dropped`]); while its running tasks alone fill the bound, a call
//! does not become a task. A record holds the call's arguments only while the task runs.
//! The section `[tasks]` ([`TasksConfig`]) sets when a call becomes a task and the bound.

pub mod handle;
pub mod record;
pub mod running;

use rmcp::ErrorData;
use rmcp::model::JsonObject;

pub use record::{TaskRecord, Work};

use crate::config::TasksConfig;
use crate::state::TaskBound;

/// How many ids of an identity's dropped tasks are remembered (the most recently dropped),
/// so that a late request about one is told it was dropped.
pub const DROPPED_REMEMBERED: usize = 1024;

/// `[tasks]` as the shared state reads it.
impl TasksConfig {
    /// What one identity keeps of its tasks.
    pub fn bound(&self) -> TaskBound {
        TaskBound {
            max_tasks: self.max_kept_per_identity.get(),
            max_bytes: self.max_kept_bytes_per_identity.get(),
            remembered: DROPPED_REMEMBERED,
        }
    }
}

/// A call that may become a task of the gateway's ([`Work::Own`]): what the task's record
/// keeps of it, and when it becomes one.
#[derive(Debug, Clone)]
pub struct BecomesTask {
    pub tool: String,
    pub arguments: Option<JsonObject>,
    pub when: Promotion,
}

/// When a call becomes a task of the gateway's, as its tool's `execution.taskSupport`
/// declares (`forbidden`: never, so no [`BecomesTask`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Promotion {
    /// `optional`, or nothing declared: once it has run `[tasks] answer_within_ms`, or
    /// asks its client something; one that answers sooner is answered as it is.
    WhenLong,
    /// `required`: whatever it does, once it no longer waits for what it asked first.
    /// What it asks within `answer_within_ms` of starting (or of a retry with the answers)
    /// is a round of the request (`InputRequiredResult`), as a server of 2026-07-28
    /// gathers a required task's input before it makes the task; what it asks later is
    /// the task's.
    Always,
}

/// Why a request about a task reaches none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    /// No task of the request's identity has the id: none ever had, it outlived its TTL,
    /// another identity created it, or the request's profile no longer shows its tool.
    #[error("unknown task {id}")]
    Unknown { id: String },
    /// The task settled, and was dropped to keep its identity's tasks within
    /// `max_kept_per_identity` and `max_kept_bytes_per_identity`.
    #[error(
        "task {id} settled and was dropped to keep these credentials' tasks within [tasks] max_kept_per_identity and max_kept_bytes_per_identity; fetch results sooner"
    )]
    Dropped { id: String },
}

impl TaskError {
    /// A stable code, for clients, logs and docs/error-codes.md.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unknown { .. } => "UNKNOWN_TASK",
            Self::Dropped { .. } => "TASK_DROPPED",
        }
    }

    /// The error as JSON-RPC's `-32602` (invalid params, which the tasks extension gives a
    /// task id that names no task), the message led by the code, and the code in
    /// `data.code`.
    pub fn to_error(&self) -> ErrorData {
        ErrorData::invalid_params(
            format!("{}: {self}", self.code()),
            Some(serde_json::json!({ "code": self.code() })),
        )
    }
}

/// Why the gateway ended a task of its own as `failed` whatever its call came to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskFailure {
    /// A question of the task stayed unanswered (no `tasks/update` brought its answer)
    /// past `[listen.limits] input_deadline_secs`: its call was cancelled, so that what it
    /// holds is free for others, such as its upstream's turn (see `crate::relay::turns`).
    #[error(
        "a question of the task went unanswered for {secs} s ([listen.limits] input_deadline_secs), so its call was cancelled; call the tool again to start over"
    )]
    InputExpired { secs: u64 },
}

impl TaskFailure {
    /// A stable code, for clients, logs and docs/error-codes.md.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InputExpired { .. } => "INPUT_EXPIRED",
        }
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
