//! The tools of the tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) as the
//! suite's `tasks-*` scenarios name them, and the tasks they become.
//!
//! On 2026-07-28 the server decides per call whether a call becomes a task: here every
//! call of a task tool does when its request declares the extension, and rmcp's
//! [`TaskManager`] keeps the task (its status, `inputRequests`, result or error, `ttlMs`)
//! for `tasks/get`, `tasks/update` and `tasks/cancel`. A task tool the request cannot
//! have as a task runs as an ordinary call, unless it must be a task (`failing_job`,
//! `test_tool_with_task`: `-32021`) or, on 2026-07-28, would need to ask its client
//! mid-call (it says so as its text). A client of 2025-11-25 calls the same tools, which answer when done and ask
//! it through requests of their own: that is the server a gateway in front of an older
//! server sees, and makes tasks of itself.
//!
//! Each job is written once, against an [`Asker`]: the task's context (questions become
//! `inputRequests`) or the client's session (questions are requests to it).

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
    CreateTaskResult, ElicitRequestParams, GetTaskResult, InputRequest, JsonObject,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData, Peer, RoleServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::fixtures::decode;
use crate::lifecycle::Lifecycle;
use crate::rounds::{self, Round};

/// How long `failing_job` and `protocol_error_job` work before they fail.
const FAILING_AFTER: Duration = Duration::from_secs(1);
/// The poll interval tasks suggest.
const POLL_INTERVAL_MS: u64 = 200;
/// How long a task is kept from its creation.
const TTL_MS: u64 = 300_000;

/// The tools that may become tasks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Job {
    SlowCompute,
    Failing,
    ProtocolError,
    ConfirmDelete,
    MultiInput,
}

impl Job {
    fn named(name: &str) -> Option<Self> {
        Some(match name {
            "slow_compute" => Self::SlowCompute,
            "failing_job" => Self::Failing,
            "protocol_error_job" => Self::ProtocolError,
            "confirm_delete" => Self::ConfirmDelete,
            "multi_input" => Self::MultiInput,
            _ => return None,
        })
    }

    /// A tool that must be a task (`taskSupport: required`).
    fn required(self) -> bool {
        self == Self::Failing
    }

    /// A tool that asks its client mid-call.
    fn asks(self) -> bool {
        matches!(self, Self::ConfirmDelete | Self::MultiInput)
    }
}

/// The definitions of the task tools (and of `greet`, the ordinary tool beside them), as
/// `tools/list` shows them to clients of either revision, each with the
/// `execution.taskSupport` it has here (which [`crate::executions`] puts on the wire).
pub fn listed() -> Value {
    let object = |properties: Value| json!({"type": "object", "properties": properties});
    let supports = |support: &str| json!({"taskSupport": support});
    json!([
        {"name": "greet", "description": "Says hello (never a task)",
         "inputSchema": object(json!({"name": {"type": "string"}})),
         "execution": supports("forbidden")},
        {"name": "slow_compute", "description": "Works for `seconds` seconds, then answers (a task when the client can have one)",
         "inputSchema": object(json!({"seconds": {"type": "number"}, "label": {"type": "string"}})),
         "execution": supports("optional")},
        {"name": "failing_job", "description": "Fails as a tool after a second (always a task on 2026-07-28)",
         "inputSchema": object(json!({})),
         "execution": supports("required")},
        {"name": "protocol_error_job", "description": "Fails with a protocol error after a second",
         "inputSchema": object(json!({})),
         "execution": supports("optional")},
        {"name": "confirm_delete", "description": "Asks the client to confirm deleting `filename`",
         "inputSchema": object(json!({"filename": {"type": "string"}})),
         "execution": supports("optional")},
        {"name": "multi_input", "description": "Asks the client two questions at once",
         "inputSchema": object(json!({})),
         "execution": supports("optional")},
        {"name": "test_tool_with_task", "description": "Asks for a name, then greets it in a task",
         "inputSchema": object(json!({})),
         "execution": supports("required")},
    ])
}

/// The tasks of this process.
#[derive(Clone, Default)]
pub struct Jobs {
    tasks: TaskManager,
}

impl Jobs {
    /// Serves a call of one of these tools; `None` for any other name. `open_round` opens
    /// a multi round-trip retry (for `test_tool_with_task`).
    pub async fn call<'a>(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        open_round: impl FnOnce() -> Result<Round<'a>, ErrorData>,
    ) -> Option<Result<CallToolResponse, ErrorData>> {
        let name = request.name.as_ref();
        let arguments = request.arguments.clone().unwrap_or_default();
        let per_request = Lifecycle::of(context) == Lifecycle::PerRequest;
        let declared = per_request
            && context
                .client_capabilities()
                .is_some_and(|capabilities| capabilities.supports_tasks());
        if name == "greet" {
            let name = arguments.get("name").and_then(Value::as_str).unwrap_or("");
            return Some(Ok(text(format!("Hello, {name}!")).into()));
        }
        if name == "test_tool_with_task" {
            return Some(
                self.greet_in_a_task(context, per_request, declared, open_round)
                    .await,
            );
        }
        let job = Job::named(name)?;
        if declared {
            return Some(Ok(
                self.spawn(move |task| run(job, arguments, Asker::Task(task)))
            ));
        }
        if per_request && job.required() {
            return Some(Err(tasks_required()));
        }
        if per_request && job.asks() {
            // A request of 2026-07-28 takes no questions mid-call: as the suite's reference
            // server does for a client that cannot answer, the tool says so.
            return Some(Ok(text(format!(
                "{name} asks its client mid-call, which on this revision needs the tasks \
                 extension: nothing was done"
            ))
            .into()));
        }
        let asker = Asker::Client {
            peer: context.peer.clone(),
            cancel: context.ct.clone(),
        };
        Some(match run(job, arguments, asker).await {
            Ok(result) => Ok(result.into()),
            Err(TaskExit::Error(error)) => Err(error),
            Err(TaskExit::Cancelled) => Err(ErrorData::internal_error("cancelled", None)),
        })
    }

    /// `test_tool_with_task`: on 2026-07-28 a round that asks for the name
    /// (`InputRequiredResult`), then a task that greets it; on 2025-11-25 the question is
    /// a request to the client, and the greeting the answer.
    async fn greet_in_a_task<'a>(
        &self,
        context: &RequestContext<RoleServer>,
        per_request: bool,
        declared: bool,
        open_round: impl FnOnce() -> Result<Round<'a>, ErrorData>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !per_request {
            let asker = Asker::Client {
                peer: context.peer.clone(),
                cancel: context.ct.clone(),
            };
            let answer = asker.elicit("user_name", "What is your name?", "name", "string");
            return match answer.await {
                Ok(name) => Ok(text(format!("Hello, {}!", name.unwrap_or_default())).into()),
                Err(TaskExit::Error(error)) => Err(error),
                Err(TaskExit::Cancelled) => Err(ErrorData::internal_error("cancelled", None)),
            };
        }
        if !declared {
            return Err(tasks_required());
        }
        let round = open_round()?;
        round.settle(rounds::greet(&round)?, |greeting| {
            Ok(self.spawn(move |_| Box::pin(async move { Ok(text(greeting)) })))
        })
    }

    /// Starts `work` as a task; the task exists (`tasks/get` finds it) on return.
    fn spawn(
        &self,
        work: impl FnOnce(TaskContext) -> rmcp::task_manager::TaskFuture,
    ) -> CallToolResponse {
        let options = TaskOptions::new()
            .with_ttl_ms(TTL_MS)
            .with_poll_interval_ms(POLL_INTERVAL_MS);
        CallToolResponse::Task(CreateTaskResult::new(self.tasks.spawn(options, work)))
    }

    pub fn get(&self, task_id: &str) -> Result<GetTaskResult, ErrorData> {
        self.tasks.get_task(task_id).map(GetTaskResult::new)
    }

    pub fn update(
        &self,
        task_id: &str,
        responses: rmcp::model::InputResponses,
    ) -> Result<(), ErrorData> {
        self.tasks.update_task(task_id, responses)
    }

    pub fn cancel(&self, task_id: &str) -> Result<(), ErrorData> {
        self.tasks.cancel_task(task_id)
    }
}

/// Who a job asks, and what cancels it.
enum Asker {
    /// The job is a task: its questions are the task's `inputRequests`, `tasks/cancel`
    /// cancels it.
    Task(TaskContext),
    /// The job is an ordinary call of a session's client: its questions are requests to
    /// the client, and the client's cancellation of the call cancels it.
    Client {
        peer: Peer<RoleServer>,
        cancel: CancellationToken,
    },
}

impl Asker {
    /// Resolves when the job is cancelled.
    async fn cancelled(&self) {
        match self {
            Self::Task(task) => task.cancelled().await,
            Self::Client { cancel, .. } => cancel.cancelled().await,
        }
    }

    /// Waits `duration`, or fails as cancelled.
    async fn work(&self, duration: Duration) -> Result<(), TaskExit> {
        tokio::select! {
            () = tokio::time::sleep(duration) => Ok(()),
            () = self.cancelled() => Err(TaskExit::Cancelled),
        }
    }

    /// Asks for one field (`key` names the question among the task's); the field's value
    /// as text when the client accepted, `None` when it declined.
    async fn elicit(
        &self,
        key: &str,
        message: &str,
        field: &str,
        kind: &str,
    ) -> Result<Option<String>, TaskExit> {
        let params = json!({
            "message": message,
            "requestedSchema": {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
        });
        let answer = match self {
            Self::Task(task) => {
                let request: InputRequest =
                    decode(json!({"method": "elicitation/create", "params": params}))?;
                task.request_input(key, request).await?
            }
            Self::Client { peer, .. } => {
                let params: ElicitRequestParams = decode(params)?;
                let answer = tokio::select! {
                    answer = peer.create_elicitation(params) => answer,
                    () = self.cancelled() => return Err(TaskExit::Cancelled),
                };
                let answer = answer.map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                serde_json::to_value(answer).unwrap_or_default()
            }
        };
        let accepted = answer.get("action").and_then(Value::as_str) == Some("accept");
        Ok(
            accepted.then(|| match answer.pointer(&format!("/content/{field}")) {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            }),
        )
    }
}

/// What `job` comes to, called with `arguments`.
fn run(job: Job, arguments: JsonObject, asker: Asker) -> rmcp::task_manager::TaskFuture {
    Box::pin(async move {
        let argument = |name: &str| arguments.get(name).cloned().unwrap_or(Value::Null);
        match job {
            Job::SlowCompute => {
                let seconds = argument("seconds")
                    .as_f64()
                    .unwrap_or(1.0)
                    .clamp(0.0, 3600.0);
                asker.work(Duration::from_secs_f64(seconds)).await?;
                let label = argument("label");
                let label = label.as_str().unwrap_or("");
                Ok(text(format!(
                    "slow_compute `{label}` done after {seconds}s"
                )))
            }
            Job::Failing => {
                asker.work(FAILING_AFTER).await?;
                Ok(CallToolResult::error(vec![ContentBlock::text(
                    "failing_job failed, as it always does",
                )]))
            }
            Job::ProtocolError => {
                asker.work(FAILING_AFTER).await?;
                Err(TaskExit::Error(ErrorData::internal_error(
                    "protocol_error_job failed with a protocol error, as it always does",
                    None,
                )))
            }
            Job::ConfirmDelete => {
                let filename = argument("filename");
                let filename = filename.as_str().unwrap_or("");
                let message = format!("Delete `{filename}`?");
                let confirmed = asker
                    .elicit("confirm", &message, "confirm", "boolean")
                    .await?;
                Ok(text(match confirmed.as_deref() {
                    Some("true") => format!("Deleted `{filename}`"),
                    _ => format!("Kept `{filename}`"),
                }))
            }
            Job::MultiInput => {
                let (name, confirm) = tokio::join!(
                    asker.elicit("name", "Your name?", "name", "string"),
                    asker.elicit("confirm", "Go ahead?", "confirm", "boolean"),
                );
                let (name, confirm) = (name?, confirm?);
                Ok(text(format!(
                    "multi_input: name={}, confirm={}",
                    name.unwrap_or_default(),
                    confirm.unwrap_or_default()
                )))
            }
        }
    })
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// The error for a call that can only be a task, from a request that cannot have one.
fn tasks_required() -> ErrorData {
    ErrorData::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}
