//! The task methods of 2026-07-28 (`tasks/get`, `tasks/update`, `tasks/cancel`, see
//! [`crate::tasks`]), and the handle a `tools/call` answers with when it became an
//! upstream's task (the gateway's own: [`own_tasks`](crate::server::core::own_tasks)).
//!
//! Every task request goes the same way: the client must have declared the tasks
//! extension on it (`-32021` otherwise); the task must exist and belong to the request's
//! identity (`-32602`, `UNKNOWN_TASK`, otherwise: to anyone else a task id names
//! nothing; `TASK_DROPPED` to that identity once it settled and was dropped to keep the
//! identity's tasks within bounds); its tool must still be visible to the request's
//! profile and let through by the gate. Then the request goes to the task's work: the
//! upstream whose task it is, under the upstream's id, or the gateway's own record.

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    CancelTaskParams, CancelTaskRequest, ClientCapabilities, ClientRequest, CreateTaskResult,
    DetailedTask, GetTaskParams, GetTaskRequest, GetTaskResult, JsonObject, ServerResult,
    TaskPayload, TaskStatus, UpdateTaskParams, UpdateTaskRequest,
};
use serde_json::Value;

use super::call::passed_on;
use super::{Call, Key, Route, Serves};
use crate::config::TasksConfig;
use crate::pipeline::federated;
use crate::pipeline::{ErrorCode, Target, ToolError};
use crate::server::core::own_tasks::{answer_here, send, state_error};
use crate::session::limits::LimitError;
use crate::state::TaskKept;
use crate::tasks::record::Lookup;
use crate::tasks::running::Message;
use crate::tasks::{self, TaskError, TaskRecord, Work, record};
use crate::tool_result::ToolResult;
use crate::upstream;

impl Route for GetTaskRequest {
    const SERVES: Serves = Serves::STATELESS;

    fn key(&self) -> Option<Key<'_>> {
        None
    }

    async fn serve(self, call: Call) -> Result<ServerResult, ErrorData> {
        call.get_task(self.params).await
    }
}

impl Route for UpdateTaskRequest {
    const SERVES: Serves = Serves::STATELESS;

    fn key(&self) -> Option<Key<'_>> {
        None
    }

    async fn serve(self, call: Call) -> Result<ServerResult, ErrorData> {
        call.update_task(self.params).await
    }
}

impl Route for CancelTaskRequest {
    const SERVES: Serves = Serves::STATELESS;

    fn key(&self) -> Option<Key<'_>> {
        None
    }

    async fn serve(self, call: Call) -> Result<ServerResult, ErrorData> {
        call.cancel_task(self.params).await
    }
}

impl Call {
    /// The answer to a call of `tool` with `arguments` that the upstream `server` made a
    /// task of (`created`): the handle as the upstream wrote it, under an id of the
    /// gateway's, bound to this request's identity, its `ttlMs` capped at `[tasks]
    /// ttl_ms`. Refused (and the upstream's task cancelled) when the identity's running
    /// tasks leave no room for it.
    pub(super) async fn upstream_task(
        &self,
        tool: String,
        arguments: Option<JsonObject>,
        server: String,
        mut created: CreateTaskResult,
    ) -> Result<ServerResult, ErrorData> {
        if !self.declared_tasks() {
            return Err(ErrorData::internal_error(
                format!("upstream `{server}` answered with a task, which this request cannot take"),
                None,
            ));
        }
        let id = tasks::new_id(&server);
        let config = self.gateway().policy().config.tasks.clone();
        // Kept as long as the upstream says it keeps the task, and no longer than the
        // gateway keeps any.
        let ttl_ms = capped_ttl(created.task.ttl_ms, &config);
        created.task.ttl_ms = Some(ttl_ms);
        let record = TaskRecord {
            identity: self.identity().map(str::to_owned),
            tool,
            arguments,
            expires_ms: TaskRecord::expiry(Duration::from_millis(ttl_ms)),
            work: Work::Upstream {
                server,
                task_id: std::mem::replace(&mut created.task.task_id, id.clone()),
                settled: created.task.status.is_terminal(),
            },
        };
        let state = self.gateway().shared_state().as_ref();
        let kept = record::create(state, &id, &record, config.bound())
            .await
            .map_err(state_error)?;
        if kept == TaskKept::Refused {
            let Work::Upstream {
                server, task_id, ..
            } = record.work
            else {
                unreachable!("the record was made for an upstream's task");
            };
            // Nobody could reach the upstream's task: it is stopped.
            let cancel = CancelTaskRequest::new(CancelTaskParams::new(task_id));
            if let Err(e) = self
                .forward(&server, ClientRequest::CancelTaskRequest(cancel))
                .await
            {
                tracing::warn!(server = %server, "an upstream's task not kept was not cancelled: {e:?}");
            }
            let refused = LimitError::TasksKept {
                max_tasks: config.max_kept_per_identity.get(),
                max_bytes: config.max_kept_bytes_per_identity.get(),
            };
            tracing::warn!(session = %self.session.id, code = refused.code(), "{refused}");
            return Err(refused.to_error());
        }
        tracing::info!(session = %self.session.id, task = %id, "a call became an upstream's task");
        Ok(ServerResult::CreateTaskResult(created))
    }

    async fn get_task(&self, params: GetTaskParams) -> Result<ServerResult, ErrorData> {
        let id = params.task_id;
        let (record, target) = self.task(&id).await?;
        let task = match record.work {
            Work::Upstream {
                server,
                task_id,
                settled,
            } => {
                let request = ClientRequest::GetTaskRequest(GetTaskRequest::new(
                    GetTaskParams::new(task_id.clone()),
                ));
                let written = self.forward(&server, request).await?;
                let mut got: GetTaskResult = read_task(&server, &written)?;
                let config = self.gateway().policy().config.tasks.clone();
                got.task.task.task_id = id.clone();
                got.task.task.ttl_ms = Some(capped_ttl(got.task.task.ttl_ms, &config));
                if !settled && record::is_terminal(&got.task) {
                    // Kept from now on without the call's arguments, and droppable.
                    let record = TaskRecord {
                        work: Work::Upstream {
                            server,
                            task_id,
                            settled: true,
                        },
                        ..record
                    };
                    let state = self.gateway().shared_state().as_ref();
                    if let Err(e) = record::save(state, &id, &record, config.bound()).await {
                        tracing::warn!(task = %id, "task record not written: {e}");
                    }
                }
                got.task = self.finished(&target, got.task);
                return Ok(passed_on(with_changes(written, &got)));
            }
            Work::Own { replica, task } => {
                let record = TaskRecord {
                    work: Work::Own {
                        replica: replica.clone(),
                        task: task.clone(),
                    },
                    ..record
                };
                self.own_task(&id, record, &replica, task).await
            }
        };
        Ok(ServerResult::GetTaskResult(GetTaskResult::new(task)))
    }

    /// The state of the gateway's own task `id` (`record`, run on `replica`): as its
    /// record says, unless the replica running it is gone (its lease lapsed), which leaves
    /// it failed, and says why.
    async fn own_task(
        &self,
        id: &str,
        mut record: TaskRecord,
        replica: &str,
        task: DetailedTask,
    ) -> DetailedTask {
        let state = self.gateway().shared_state().as_ref();
        if record::is_terminal(&task) || replica == state.replica() {
            return task;
        }
        match state.replica_alive(replica).await {
            Ok(false) => {}
            Ok(true) => return task,
            Err(e) => {
                tracing::warn!(task = %id, "whether replica {replica} runs is unknown: {e}");
                return task;
            }
        }
        let error = ErrorData::internal_error(
            format!("the replica running the task ({replica}) stopped before it finished"),
            None,
        );
        let task = record::failed(task, &error);
        record.work = Work::Own {
            replica: replica.to_owned(),
            task: task.clone(),
        };
        let bound = self.gateway().policy().config.tasks.bound();
        if let Err(e) = record::save(state, id, &record, bound).await {
            tracing::warn!(task = %id, "task record not written: {e}");
        }
        task
    }

    async fn update_task(&self, params: UpdateTaskParams) -> Result<ServerResult, ErrorData> {
        let (record, _) = self.task(&params.task_id).await?;
        match record.work {
            Work::Upstream {
                server, task_id, ..
            } => {
                let params = UpdateTaskParams::new(task_id, params.input_responses);
                let request = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(params));
                self.acknowledged(&server, request).await
            }
            Work::Own { task, .. } if record::is_terminal(&task) => Ok(ServerResult::task_ack(())),
            Work::Own { replica, task } => {
                let id = &params.task_id;
                let gateway = self.gateway();
                // Answered and written before the acknowledgment: the next `tasks/get`
                // shows only the questions still open.
                match gateway.running_tasks().get(id) {
                    Some(running) => answer_here(gateway, id, &running, params.input_responses)
                        .await
                        .map_err(state_error)?,
                    None => {
                        let task = record::answered(task, &params.input_responses);
                        let record = TaskRecord {
                            work: Work::Own { replica, task },
                            ..record
                        };
                        let message = Message::Answer(params.input_responses);
                        send(gateway, id, &record, message).await?;
                    }
                }
                Ok(ServerResult::task_ack(()))
            }
        }
    }

    async fn cancel_task(&self, params: CancelTaskParams) -> Result<ServerResult, ErrorData> {
        let (record, _) = self.task(&params.task_id).await?;
        match record.work {
            Work::Upstream {
                server, task_id, ..
            } => {
                let params = CancelTaskParams::new(task_id);
                let request = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(params));
                self.acknowledged(&server, request).await
            }
            Work::Own { task, .. } if record::is_terminal(&task) => Ok(ServerResult::task_ack(())),
            Work::Own { replica, task } => {
                match self.gateway().running_tasks().get(&params.task_id) {
                    // Settles as cancelled once its call has stopped.
                    Some(running) => running.cancel(),
                    // Settled here at once, and its replica stops its call, which finds
                    // the task settled when it ends, and leaves it so.
                    None => {
                        let task = record::with_status(task, TaskStatus::Cancelled);
                        let record = TaskRecord {
                            work: Work::Own { replica, task },
                            ..record
                        };
                        send(self.gateway(), &params.task_id, &record, Message::Cancel).await?;
                    }
                }
                Ok(ServerResult::task_ack(()))
            }
        }
    }

    /// The upstream's acknowledgment of `request` (`tasks/update`, `tasks/cancel`).
    async fn acknowledged(
        &self,
        server: &str,
        request: ClientRequest,
    ) -> Result<ServerResult, ErrorData> {
        // An acknowledgment says nothing but that it came.
        self.forward(server, request).await?;
        Ok(ServerResult::task_ack(()))
    }

    /// The record of task `id` and its tool's target, when this request may reach it.
    async fn task(&self, id: &str) -> Result<(TaskRecord, Target), ErrorData> {
        if !self.declared_tasks() {
            return Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        let unknown = || TaskError::Unknown { id: id.to_owned() }.to_error();
        let found = record::load(self.gateway().shared_state().as_ref(), id)
            .await
            .map_err(state_error)?;
        let record = match found {
            Some(Lookup::Kept(record)) if record.belongs_to(self.identity()) => *record,
            Some(Lookup::Dropped { identity }) if identity.as_deref() == self.identity() => {
                return Err(TaskError::Dropped { id: id.to_owned() }.to_error());
            }
            _ => return Err(unknown()),
        };
        let session = self.session.clone();
        let admitted = self
            .gateway()
            .admits_again(&session, &record.tool, record.arguments.clone())
            .await;
        match admitted {
            Ok(target) => Ok((record, target)),
            // Hidden from the profile now: as unknown as the tool.
            Err(error) if error.code == ErrorCode::ToolNotFound => Err(unknown()),
            Err(error) => Err(refused(&error)),
        }
    }

    /// `task` with its result as the client sees a result of its tool, once completed
    /// (an upstream's task: see [`federated::finish`]).
    fn finished(&self, target: &Target, mut task: DetailedTask) -> DetailedTask {
        let (Target::Federated(tool), TaskPayload::Completed { result }) = (target, &task.payload)
        else {
            return task;
        };
        let rewrite_uris = self
            .gateway()
            .registry()
            .upstream(&tool.server)
            .is_none_or(|upstream| upstream.config.rewrite_uris);
        let finished = ToolResult::from_json(result.clone())
            .map_err(|e| {
                ToolError::new(
                    ErrorCode::UpstreamError,
                    format!(
                        "upstream `{}` finished the task with no tool result: {e}",
                        tool.server
                    ),
                )
            })
            .and_then(|mut result| {
                upstream::forwarded(&mut result);
                federated::finish(tool, rewrite_uris, result)
            })
            .unwrap_or_else(|error| error.to_result());
        task.payload = TaskPayload::Completed {
            result: finished.into_json(),
        };
        task
    }

    /// Whether this request declared the tasks extension.
    pub(super) fn declared_tasks(&self) -> bool {
        self.revision.is_stateless()
            && self
                .revision
                .client()
                .is_some_and(|client| client.capabilities.supports_tasks())
    }

    fn identity(&self) -> Option<&str> {
        self.session.owner()
    }
}

/// The task record an upstream answered `tasks/get` with, read for what the gateway acts
/// on (its status, its TTL, its result).
fn read_task(server: &str, written: &JsonObject) -> Result<GetTaskResult, ErrorData> {
    serde_json::from_value(Value::Object(written.clone())).map_err(|error| {
        let message =
            format!("upstream `{server}` answered tasks/get with something else: {error}");
        ErrorData::internal_error(message, None)
    })
}

/// The keys of a task record that are the gateway's to say: the task's id (the
/// gateway's), its TTL (capped), and its status with the payload that status has (a
/// result finished as the call's would be, the error, the questions). A payload the
/// status does not have (a `result` on a working task, say) is not passed on: it would
/// reach the client unchecked.
const TASK_KEYS_OF_THE_GATEWAY: [&str; 6] = [
    "taskId",
    "ttlMs",
    "status",
    "result",
    "error",
    "inputRequests",
];

/// The upstream's task record as it wrote it (`written`), with the keys that are the
/// gateway's (see [`TASK_KEYS_OF_THE_GATEWAY`]) as `got` has them. Every other key, the
/// upstream's own among them, goes on as it came.
fn with_changes(mut written: JsonObject, got: &GetTaskResult) -> JsonObject {
    let Ok(Value::Object(mut changed)) = serde_json::to_value(got) else {
        return written;
    };
    for key in TASK_KEYS_OF_THE_GATEWAY {
        match changed.remove(key) {
            Some(value) => written.insert(key.into(), value),
            None => written.remove(key),
        };
    }
    written
}

/// An upstream's `ttlMs` for a task (`None`: it names none) as the gateway passes it on:
/// no longer than `[tasks] ttl_ms`, how long the gateway keeps a task's binding.
fn capped_ttl(upstreams: Option<u64>, config: &TasksConfig) -> u64 {
    let cap = config.ttl().as_millis().try_into().unwrap_or(u64::MAX);
    upstreams.map_or(cap, |ttl| ttl.min(cap))
}

/// A task request the gate refuses now, as a JSON-RPC error carrying the failure's code.
fn refused(error: &ToolError) -> ErrorData {
    ErrorData::invalid_request(
        format!("{}: {}", error.code, error.message),
        Some(serde_json::json!({"code": error.code.as_str()})),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_upstreams_task_record_goes_on_as_written_but_for_what_the_gateway_changes() {
        let written = json!({
            "taskId": "upstream-1", "status": "completed",
            "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:01Z",
            "ttlMs": 600000, "pollIntervalMs": 50,
            "x-vendor": {"queue": 3},
            "result": {"content": [{"type": "text", "text": "done"}]},
            "_meta": {"vendor/key": 1},
        });
        let written = written.as_object().cloned().unwrap();
        let mut got = read_task("up", &written).unwrap();
        // rmcp's type keeps no key it does not declare: the record cannot go on as it.
        assert_eq!(serde_json::to_value(&got).unwrap().get("x-vendor"), None);
        got.task.task.task_id = "gateway-1".into();
        got.task.task.ttl_ms = Some(1000);
        let finished = json!({"content": [{"type": "text", "text": "finished"}]});
        got.task.payload = TaskPayload::Completed {
            result: finished.as_object().cloned().unwrap(),
        };
        let passed = Value::Object(with_changes(written, &got));
        let expected = json!({
            "taskId": "gateway-1", "status": "completed",
            "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:01Z",
            "ttlMs": 1000, "pollIntervalMs": 50,
            "x-vendor": {"queue": 3},
            "result": finished,
            "_meta": {"vendor/key": 1},
        });
        assert_eq!(passed, expected);
        assert!(read_task("up", json!({"status": 1}).as_object().unwrap()).is_err());

        // A payload the status does not have is not passed on unchecked.
        let mut working = expected.as_object().cloned().unwrap();
        working.insert("status".into(), json!("working"));
        let got = read_task("up", &working).unwrap();
        let passed = with_changes(working, &got);
        assert_eq!(passed.get("result"), None);
        assert_eq!(passed["status"], "working");
        assert_eq!(passed["x-vendor"], json!({"queue": 3}));
    }
}
