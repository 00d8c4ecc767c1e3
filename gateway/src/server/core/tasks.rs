//! The task methods of 2026-07-28 (`tasks/get`, `tasks/update`, `tasks/cancel`, see
//! [`crate::tasks`]), and the handle a `tools/call` answers with when it became a task.
//!
//! Every task request goes the same way: the client must have declared the tasks
//! extension on it (`-32021` otherwise); the task must exist and belong to the request's
//! identity (`-32602`, "unknown task", otherwise: to anyone else a task id names
//! nothing); its tool must still be visible to the request's profile and let through by
//! the gate. Then the request goes to the task's work: the upstream whose task it is,
//! under the upstream's id, or the gateway's own record.

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, CancelTaskParams, CancelTaskRequest, ClientCapabilities, ClientRequest,
    CreateTaskResult, DetailedTask, GetTaskParams, GetTaskRequest, GetTaskResult, InputResponses,
    JsonObject, ServerResult, Task, TaskPayload, TaskStatus, UpdateTaskParams, UpdateTaskRequest,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::methods::{Call, unexpected};
use super::parked::ParkedCall;
use super::revision::Revision;
use super::{ClientSession, joined};
use crate::code::tool::RUN_CODE;
use crate::gateway::Gateway;
use crate::pipeline::federated;
use crate::pipeline::{ErrorCode, Origin, Target, ToolError, error};
use crate::relay::inputs::Inputs;
use crate::state::StateError;
use crate::tasks::running::{Message, RunningTask};
use crate::tasks::{self, TaskRecord, Work, record};
use crate::upstream;

impl Call {
    /// The answer to a call of `tool` with `arguments` that the upstream `server` made a
    /// task of (`created`): the handle as the upstream wrote it, under an id of the
    /// gateway's, bound to this request's identity.
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
        // Kept as long as the upstream says it keeps the task.
        let ttl = created.task.ttl_ms.map_or_else(
            || self.gateway().config().tasks.ttl(),
            std::time::Duration::from_millis,
        );
        let record = TaskRecord {
            identity: self.identity().map(str::to_owned),
            tool,
            arguments,
            expires_ms: TaskRecord::expiry(ttl),
            work: Work::Upstream {
                server,
                task_id: std::mem::replace(&mut created.task.task_id, id.clone()),
            },
        };
        record::save(self.gateway().state.as_ref(), &id, &record)
            .await
            .map_err(state_error)?;
        Ok(ServerResult::CreateTaskResult(created))
    }

    pub(super) async fn get_task(&self, params: GetTaskParams) -> Result<ServerResult, ErrorData> {
        let id = params.task_id;
        let (record, target) = self.task(&id).await?;
        let task = match record.work {
            Work::Upstream { server, task_id } => {
                let request =
                    ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(task_id)));
                let ServerResult::GetTaskResult(mut got) = self.forward(&server, request).await?
                else {
                    return Err(ErrorData::internal_error(
                        format!("upstream `{server}` answered tasks/get with something else"),
                        None,
                    ));
                };
                got.task.task.task_id = id;
                got.task = self.finished(&target, got.task);
                return Ok(ServerResult::GetTaskResult(got));
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
        let state = self.gateway().state.as_ref();
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
        if let Err(e) = record::save(state, id, &record).await {
            tracing::warn!(task = %id, "task record not written: {e}");
        }
        task
    }

    pub(super) async fn update_task(
        &self,
        params: UpdateTaskParams,
    ) -> Result<ServerResult, ErrorData> {
        let (record, _) = self.task(&params.task_id).await?;
        match record.work {
            Work::Upstream { server, task_id } => {
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
                match gateway.tasks.get(id) {
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

    pub(super) async fn cancel_task(
        &self,
        params: CancelTaskParams,
    ) -> Result<ServerResult, ErrorData> {
        let (record, _) = self.task(&params.task_id).await?;
        match record.work {
            Work::Upstream { server, task_id } => {
                let params = CancelTaskParams::new(task_id);
                let request = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(params));
                self.acknowledged(&server, request).await
            }
            Work::Own { task, .. } if record::is_terminal(&task) => Ok(ServerResult::task_ack(())),
            Work::Own { replica, task } => {
                match self.gateway().tasks.get(&params.task_id) {
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
        match self.forward(server, request).await? {
            ServerResult::TaskAckResult(_) | ServerResult::EmptyResult(_) => {
                Ok(ServerResult::task_ack(()))
            }
            other => Err(unexpected(&other)),
        }
    }

    /// The record of task `id` and its tool's target, when this request may reach it.
    async fn task(&self, id: &str) -> Result<(TaskRecord, Target), ErrorData> {
        if !self.declared_tasks() {
            return Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        let unknown = || ErrorData::invalid_params(format!("unknown task: {id}"), None);
        let record = record::load(self.gateway().state.as_ref(), id)
            .await
            .map_err(state_error)?
            .filter(|record| record.belongs_to(self.identity()))
            .ok_or_else(unknown)?;
        let session = self.session.session.clone();
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
            .registry
            .upstream(&tool.server)
            .is_none_or(|upstream| upstream.config.rewrite_uris);
        let finished = serde_json::from_value::<CallToolResult>(result.clone().into())
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
        if let Ok(serde_json::Value::Object(result)) = serde_json::to_value(finished) {
            task.payload = TaskPayload::Completed { result };
        }
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
        self.session.owner.identity.as_deref()
    }
}

/// The shared state failed a task request: its code, and why.
fn state_error(error: StateError) -> ErrorData {
    ErrorData::internal_error(format!("{}: {error}", error.code()), None)
}

/// A task request the gate refuses now, as a JSON-RPC error carrying the failure's code.
fn refused(error: &ToolError) -> ErrorData {
    ErrorData::invalid_request(
        format!("{}: {}", error.code, error.message),
        Some(serde_json::json!({"code": error.code.as_str()})),
    )
}

/// The gateway's own tasks: a call that may become one, its promotion, and the work
/// that keeps its record as it goes.
impl ClientSession {
    /// The tool and arguments of `request`, when it is a call that becomes a task of the
    /// gateway's should it run long: a `tools/call` of a client that declared the tasks
    /// extension, to `run_code` or to a tool of a server of 2025-11-25 (which has no
    /// tasks of its own; a server of 2026-07-28 decides for itself).
    pub(super) fn may_become_task(
        &self,
        request: &ClientRequest,
        revision: &Revision,
    ) -> Option<(String, Option<JsonObject>)> {
        let ClientRequest::CallToolRequest(call) = request else {
            return None;
        };
        let declared = revision.is_stateless()
            && revision
                .client()
                .is_some_and(|client| client.capabilities.supports_tasks());
        if !declared {
            return None;
        }
        let name = call.params.name.as_ref();
        let eligible = match self.gateway.resolve(&self.session, name, &Origin::Client)? {
            Target::Builtin(_) => name == RUN_CODE,
            Target::Federated(tool) => self
                .gateway
                .registry
                .upstream(&tool.server)
                .and_then(|upstream| upstream.live())
                .is_some_and(|live| !live.stateless),
        };
        eligible.then(|| (name.to_owned(), call.params.arguments.clone()))
    }

    /// Waits for the answer of `call` (of `tool` with `arguments`) for at most
    /// `[tasks] answer_within_ms`; a call still running then, or asking its client
    /// something first, becomes a task of the gateway's, whose handle is the answer.
    pub(super) async fn await_or_promote(
        self: &Arc<Self>,
        mut call: ParkedCall,
        request: &CancellationToken,
        tool: String,
        arguments: Option<JsonObject>,
    ) -> Result<ServerResult, ErrorData> {
        let config = self.gateway.config().tasks;
        tokio::select! {
            biased;
            answer = &mut call.task => return joined(answer),
            () = call.inputs.asked() => {}
            () = tokio::time::sleep(config.answer_within()) => {}
            () = request.cancelled() => {
                call.abandon();
                return joined(call.task.await);
            }
        }
        let id = tasks::new_id(tasks::OWN);
        let now = record::now();
        let mut task = Task::new(id.clone(), TaskStatus::Working, now.clone(), now);
        task.ttl_ms = Some(config.ttl_ms);
        task.poll_interval_ms = Some(config.poll_interval_ms);
        let state = &self.gateway.state;
        let record = TaskRecord {
            identity: self.owner.identity.clone(),
            tool,
            arguments,
            expires_ms: TaskRecord::expiry(config.ttl()),
            work: Work::Own {
                replica: state.replica().to_owned(),
                task: DetailedTask::new(task.clone(), TaskPayload::Working),
            },
        };
        // The task exists for `tasks/get` before its handle is given out.
        if let Err(e) = record::save(state.as_ref(), &id, &record).await {
            tracing::warn!(session = %self.id(), "the call stays a call, not a task: {e}");
            return self.await_or_park(call, request).await;
        }
        let running = Arc::new(RunningTask::new(
            call.cancel.clone(),
            call.inputs.clone(),
            record,
        ));
        self.gateway.tasks.insert(id.clone(), running.clone());
        tokio::spawn(run(self.gateway.clone(), id, running, call.task));
        Ok(ServerResult::CreateTaskResult(CreateTaskResult::new(task)))
    }
}

/// Writes `record`, changed by a request about task `id` that reached a replica other than
/// the one running it, and leaves `message` for that one.
async fn send(
    gateway: &Gateway,
    id: &str,
    record: &TaskRecord,
    message: Message,
) -> Result<(), ErrorData> {
    let state = gateway.state.as_ref();
    record::save(state, id, record).await.map_err(state_error)?;
    let message = serde_json::to_string(&message)
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    state
        .send_to_task(id, message, record.left())
        .await
        .map_err(state_error)
}

/// Hands `responses` to the questions of task `id`, running here, and writes the
/// questions left open.
async fn answer_here(
    gateway: &Gateway,
    id: &str,
    running: &RunningTask,
    responses: InputResponses,
) -> Result<(), StateError> {
    let mut record = running.record.lock().await;
    running.inputs.answer(responses);
    if let Work::Own { task, .. } = &mut record.work
        && !record::is_terminal(task)
    {
        *task = asking(task.clone(), &running.inputs);
        record::save(gateway.state.as_ref(), id, &record).await?;
    }
    Ok(())
}

/// What other replicas left for task `id`, running here, done.
async fn take_messages(gateway: &Gateway, id: &str, running: &RunningTask) {
    let messages = match gateway.state.take_task_messages(id).await {
        Ok(messages) => messages,
        Err(e) => {
            tracing::debug!(task = %id, "messages for the task not read: {e}");
            return;
        }
    };
    for message in messages {
        match serde_json::from_str(&message) {
            Ok(Message::Answer(responses)) => {
                if let Err(e) = answer_here(gateway, id, running, responses).await {
                    tracing::warn!(task = %id, "task record not written: {e}");
                }
            }
            Ok(Message::Cancel) => running.cancel(),
            Err(e) => tracing::warn!(task = %id, "an unreadable message for the task: {e}"),
        }
    }
}

/// Keeps the record of the gateway's task `id` as its call goes: `input_required` with the
/// questions it asks, then its answer (or error), or `cancelled`; meanwhile, with
/// replicas, takes what requests that reached another replica left for it. A call still
/// running when its task expires is cancelled.
async fn run(
    gateway: Arc<Gateway>,
    id: String,
    running: Arc<RunningTask>,
    mut call: JoinHandle<Result<ServerResult, ErrorData>>,
) {
    let mut seen = 0;
    let shared = gateway.state.is_shared();
    let poll = std::time::Duration::from_millis(gateway.config().tasks.poll_interval_ms.max(1));
    // Work whose result nobody can fetch any more stops.
    let expiry = tokio::time::sleep(running.record.lock().await.left());
    tokio::pin!(expiry);
    let mut expired = false;
    let answer = loop {
        tokio::select! {
            biased;
            answer = &mut call => break answer,
            () = &mut expiry, if !expired => {
                expired = true;
                running.cancel();
            }
            () = running.inputs.asked_after(seen) => {
                running.inputs.settled().await;
                seen = running.inputs.asked_count();
                change(&gateway, &id, &running, asking).await;
            }
            () = tokio::time::sleep(poll), if shared => {
                take_messages(&gateway, &id, &running).await;
            }
        }
    };
    let cancelled = running.is_cancelled();
    let stopping = gateway.shutdown.is_cancelled();
    change(&gateway, &id, &running, |task, _| {
        settled(task, joined(answer), cancelled, stopping)
    })
    .await;
    gateway.tasks.remove(&id);
}

/// Changes the running task `id`'s state with `change` (given the call's open
/// questions) and writes its record, unless it settled meanwhile (another replica
/// cancelled it, say).
async fn change(
    gateway: &Gateway,
    id: &str,
    running: &RunningTask,
    change: impl FnOnce(DetailedTask, &Inputs) -> DetailedTask,
) {
    let state = gateway.state.as_ref();
    let mut record = running.record.lock().await;
    if let Ok(Some(TaskRecord {
        work: Work::Own { task: stored, .. },
        ..
    })) = record::load(state, id).await
        && record::is_terminal(&stored)
    {
        return;
    }
    let Work::Own { task, .. } = &mut record.work else {
        return;
    };
    *task = change(task.clone(), &running.inputs);
    if let Err(e) = record::save(state, id, &record).await {
        tracing::warn!(task = %id, "task record not written: {e}");
    }
}

/// `task` with the call's open questions: `input_required` while there are some.
fn asking(task: DetailedTask, inputs: &Inputs) -> DetailedTask {
    let questions = inputs.questions();
    if questions.is_empty() {
        return record::with_status(task, TaskStatus::Working);
    }
    let mut task = task;
    task.task.last_updated_at = record::now();
    DetailedTask::new(
        task.task,
        TaskPayload::InputRequired {
            input_requests: questions,
        },
    )
}

/// `task` settled by its call's `answer`: completed with the tool's result (an error the
/// tool reported too), failed when the call came to no result of the tool's (see
/// [`error::work_failure`]), or cancelled.
fn settled(
    task: DetailedTask,
    answer: Result<ServerResult, ErrorData>,
    cancelled: bool,
    stopping: bool,
) -> DetailedTask {
    if cancelled {
        return record::with_status(task, TaskStatus::Cancelled);
    }
    if stopping {
        let error = ErrorData::internal_error(
            "the gateway running the task stopped before it finished",
            None,
        );
        return record::failed(task, &error);
    }
    match answer {
        Ok(ServerResult::CallToolResult(result))
            if let Some(error) = error::work_failure(&result) =>
        {
            record::failed(task, &error)
        }
        Ok(ServerResult::CallToolResult(result)) => {
            let result = match serde_json::to_value(result) {
                Ok(serde_json::Value::Object(result)) => result,
                _ => JsonObject::new(),
            };
            let mut task = task;
            task.task.last_updated_at = record::now();
            DetailedTask::new(task.task, TaskPayload::Completed { result })
        }
        Ok(other) => record::failed(task, &unexpected(&other)),
        Err(error) => record::failed(task, &error),
    }
}
