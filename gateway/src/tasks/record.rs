//! What the gateway keeps of one task, in the shared state under the task's id (the
//! gateway's), as JSON: who created it, the call it stands for, and where its work is.

use std::time::{Duration, SystemTime};

use rmcp::ErrorData;
use rmcp::model::{DetailedTask, InputResponses, JsonObject, TaskPayload, TaskStatus};
use serde::{Deserialize, Serialize};

use crate::approvals::unix_ms;
use crate::state::{SharedState, StateError};

/// One task as the gateway keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRecord {
    /// The identity of the credentials that created it (`None`: no credentials); any
    /// other is told the task does not exist.
    pub identity: Option<String>,
    /// The tool, as the client named it, and the arguments it was called with: every
    /// request about the task passes the profile and the gate again with them.
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<JsonObject>,
    /// When the record goes (Unix milliseconds): its task's `ttlMs` after its creation.
    pub expires_ms: u64,
    pub work: Work,
}

/// Where a task's work is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Work {
    /// An upstream's own task: the upstream keeps its state.
    #[serde(rename_all = "camelCase")]
    Upstream {
        server: String,
        /// The upstream's id of it.
        task_id: String,
    },
    /// The gateway's own: a call it runs on `replica`, and its state as of the last
    /// change.
    #[serde(rename_all = "camelCase")]
    Own { replica: String, task: DetailedTask },
}

impl TaskRecord {
    /// When a task created now with a TTL of `ttl` expires (Unix milliseconds).
    pub fn expiry(ttl: Duration) -> u64 {
        let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        unix_ms(SystemTime::now()).saturating_add(ttl)
    }

    /// How long the record is still kept.
    pub fn left(&self) -> Duration {
        Duration::from_millis(self.expires_ms.saturating_sub(unix_ms(SystemTime::now())))
    }

    /// Whether a request of `identity` may know of this task.
    pub fn belongs_to(&self, identity: Option<&str>) -> bool {
        self.identity.as_deref() == identity
    }
}

/// The record of task `id`, if the shared state still keeps it.
pub async fn load(state: &dyn SharedState, id: &str) -> Result<Option<TaskRecord>, StateError> {
    let Some(json) = state.get_task(id).await? else {
        return Ok(None);
    };
    serde_json::from_str(&json)
        .map(Some)
        .map_err(|e| StateError::Corrupt(format!("task `{id}`: {e}")))
}

/// Keeps `record` as task `id`'s until it expires (a record expired already is kept for
/// a moment: no longer than it takes to read it back).
pub async fn save(
    state: &dyn SharedState,
    id: &str,
    record: &TaskRecord,
) -> Result<(), StateError> {
    let json = serde_json::to_string(record)
        .map_err(|e| StateError::Corrupt(format!("task `{id}`: {e}")))?;
    let left = record.left().max(Duration::from_millis(1));
    state.put_task(id, json, left).await
}

/// `task`, settled as failed with `error`, now.
pub fn failed(mut task: DetailedTask, error: &ErrorData) -> DetailedTask {
    task.task.last_updated_at = now();
    let error = match serde_json::to_value(error) {
        Ok(serde_json::Value::Object(error)) => error,
        _ => JsonObject::new(),
    };
    DetailedTask::new(task.task, TaskPayload::Failed { error })
}

/// `task` once the questions `answered` names are answered (by the replica running it):
/// `input_required` while some are left, `working` once none are.
pub fn answered(task: DetailedTask, answered: &InputResponses) -> DetailedTask {
    let TaskPayload::InputRequired { input_requests } = &task.payload else {
        return task;
    };
    let mut left = input_requests.clone();
    left.retain(|key, _| !answered.contains_key(key));
    let mut task = task;
    task.task.last_updated_at = now();
    if left.is_empty() {
        return DetailedTask::new(task.task, TaskPayload::Working);
    }
    DetailedTask::new(
        task.task,
        TaskPayload::InputRequired {
            input_requests: left,
        },
    )
}

/// Whether `task` has settled.
pub fn is_terminal(task: &DetailedTask) -> bool {
    task.status().is_terminal()
}

/// `task`, in `status` now (for the statuses without payload).
pub fn with_status(mut task: DetailedTask, status: TaskStatus) -> DetailedTask {
    task.task.last_updated_at = now();
    let payload = match status {
        TaskStatus::Cancelled => TaskPayload::Cancelled,
        _ => TaskPayload::Working,
    };
    DetailedTask::new(task.task, payload)
}

/// The time now, as tasks write it (ISO 8601, UTC).
pub fn now() -> String {
    rmcp::task_manager::current_timestamp()
}

#[cfg(test)]
mod tests {
    use rmcp::model::Task;

    use super::*;
    use crate::state::ClusterConfig;
    use crate::state::memory::MemoryState;

    #[tokio::test]
    async fn a_record_reads_back_as_written() {
        let state = MemoryState::new(&ClusterConfig::default());
        let task = Task::new("gateway.1", TaskStatus::Working, now(), now());
        let record = TaskRecord {
            identity: Some("alice".into()),
            tool: "run_code".into(),
            arguments: None,
            expires_ms: TaskRecord::expiry(Duration::from_secs(60)),
            work: Work::Own {
                replica: "r1".into(),
                task: DetailedTask::new(task, TaskPayload::Working),
            },
        };
        save(&state, "gateway.1", &record).await.unwrap();
        let read = load(&state, "gateway.1").await.unwrap().unwrap();
        assert_eq!(read, record);
        assert!(read.belongs_to(Some("alice")));
        assert!(!read.belongs_to(Some("bob")));
        assert!(!read.belongs_to(None));
        assert_eq!(load(&state, "gateway.2").await.unwrap(), None);
    }
}
