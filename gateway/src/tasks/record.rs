//! What the gateway keeps of one task, in the shared state under the task's id (the
//! gateway's), as JSON: who created it, the call it stands for, and where its work is.
//! The call's arguments are kept while the task runs, and left out once it settled.

use std::time::{Duration, SystemTime};

use rmcp::ErrorData;
use rmcp::model::{DetailedTask, InputResponses, JsonObject, TaskPayload, TaskStatus};
use serde::{Deserialize, Serialize};

use crate::relay::approvals::unix_ms;
use crate::state::{SharedState, StateError, StoredTask, TaskBound, TaskEntry, TaskKept};

/// One task as the gateway keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRecord {
    /// The identity of the credentials that created it (`None`: no credentials); any
    /// other is told the task does not exist.
    pub identity: Option<String>,
    /// The tool, as the client named it, and the arguments it was called with while the
    /// task runs: every request about the task passes the profile and the gate again with
    /// them (with the tool alone once it settled).
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
        /// Whether the upstream said, answering a `tasks/get`, that the task settled.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        settled: bool,
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

    /// Whether the task settled, as far as the gateway knows.
    pub fn is_settled(&self) -> bool {
        match &self.work {
            Work::Upstream { settled, .. } => *settled,
            Work::Own { task, .. } => is_terminal(task),
        }
    }

    /// This record as kept: without the arguments once the task settled.
    fn to_json(&self, id: &str) -> Result<String, StateError> {
        let json = if self.is_settled() && self.arguments.is_some() {
            serde_json::to_string(&TaskRecord {
                identity: self.identity.clone(),
                tool: self.tool.clone(),
                arguments: None,
                expires_ms: self.expires_ms,
                work: self.work.clone(),
            })
        } else {
            serde_json::to_string(self)
        };
        json.map_err(|e| StateError::Corrupt(format!("task `{id}`: {e}")))
    }
}

/// Task `id` as the shared state has it.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    Kept(Box<TaskRecord>),
    /// Dropped, settled, to keep its identity's tasks within bounds.
    Dropped {
        identity: Option<String>,
    },
}

/// Task `id`, if the shared state still keeps it or remembers dropping it.
pub async fn load(state: &dyn SharedState, id: &str) -> Result<Option<Lookup>, StateError> {
    match state.get_task(id).await? {
        None => Ok(None),
        Some(StoredTask::Dropped { owner }) => Ok(Some(Lookup::Dropped { identity: owner })),
        Some(StoredTask::Record(json)) => serde_json::from_str(&json)
            .map(|record| Some(Lookup::Kept(Box::new(record))))
            .map_err(|e| StateError::Corrupt(format!("task `{id}`: {e}"))),
    }
}

/// Keeps the record of a new task `id` until it expires, unless its identity's running
/// tasks leave no room for it within `bound` ([`TaskKept::Refused`]).
pub async fn create(
    state: &dyn SharedState,
    id: &str,
    record: &TaskRecord,
    bound: TaskBound,
) -> Result<TaskKept, StateError> {
    put(state, id, record, bound).await
}

/// Keeps `record` as task `id`'s until it expires (a record expired already is kept for
/// a moment: no longer than it takes to read it back); its identity's oldest settled
/// tasks are dropped as `bound` requires.
pub async fn save(
    state: &dyn SharedState,
    id: &str,
    record: &TaskRecord,
    bound: TaskBound,
) -> Result<(), StateError> {
    match put(state, id, record, bound).await? {
        TaskKept::Kept => Ok(()),
        // Only a record gone already (expired) is new here: nobody can fetch it.
        TaskKept::Refused => {
            tracing::debug!(task = %id, "an expired task's record is not written again");
            Ok(())
        }
    }
}

async fn put(
    state: &dyn SharedState,
    id: &str,
    record: &TaskRecord,
    bound: TaskBound,
) -> Result<TaskKept, StateError> {
    let entry = TaskEntry {
        id,
        owner: record.identity.as_deref(),
        record: record.to_json(id)?,
        ttl: record.left().max(Duration::from_millis(1)),
        settled: record.is_settled(),
    };
    state.put_task(entry, bound).await
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
    use crate::config::ClusterConfig;
    use crate::state::memory::MemoryState;

    #[tokio::test]
    async fn a_record_reads_back_as_written_and_without_its_arguments_once_settled() {
        let state = MemoryState::new(&ClusterConfig::default());
        let bound = crate::config::TasksConfig::default().bound();
        let task = Task::new("gateway.1", TaskStatus::Working, now(), now());
        let mut arguments = JsonObject::new();
        arguments.insert("code".into(), "return 1".into());
        let record = TaskRecord {
            identity: Some("alice".into()),
            tool: "run_code".into(),
            arguments: Some(arguments),
            expires_ms: TaskRecord::expiry(Duration::from_secs(60)),
            work: Work::Own {
                replica: "r1".into(),
                task: DetailedTask::new(task, TaskPayload::Working),
            },
        };
        let created = create(&state, "gateway.1", &record, bound).await.unwrap();
        assert_eq!(created, TaskKept::Kept);
        let Some(Lookup::Kept(read)) = load(&state, "gateway.1").await.unwrap() else {
            panic!("the record is kept");
        };
        assert_eq!(*read, record);
        assert!(read.belongs_to(Some("alice")));
        assert!(!read.belongs_to(Some("bob")));
        assert!(!read.belongs_to(None));
        assert_eq!(load(&state, "gateway.2").await.unwrap(), None);

        let Work::Own { replica, task } = record.work.clone() else {
            unreachable!()
        };
        let settled = TaskRecord {
            work: Work::Own {
                replica,
                task: with_status(task, TaskStatus::Cancelled),
            },
            ..record
        };
        save(&state, "gateway.1", &settled, bound).await.unwrap();
        let Some(Lookup::Kept(read)) = load(&state, "gateway.1").await.unwrap() else {
            panic!("the record is kept");
        };
        assert!(read.is_settled());
        assert_eq!(read.arguments, None, "{read:?}");
        assert_eq!(read.work, settled.work);
    }
}
