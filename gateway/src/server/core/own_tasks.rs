//! The gateway's own tasks (see [`crate::tasks`]): which call may become one, its
//! promotion as its tool's `execution.taskSupport` says (when it runs long or asks its
//! client something; or always, its first questions asked as rounds of the request), and
//! the work that keeps the task's record as the call goes, on the replica that runs it
//! (its questions, its end, what other replicas left for it). A question left unanswered
//! past `[listen.limits] input_deadline_secs` fails the task and cancels its call, as it
//! cancels a parked call: a client that never answers cannot hold its upstream (its turn
//! between sessions, see `crate::relay::turns`) until the task's TTL.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, CreateTaskResult, DetailedTask, InputResponses,
    ServerResult, Task, TaskPayload, TaskStatus,
};
use tokio::task::JoinError;
use tokio_util::sync::CancellationToken;

use super::revision::Revision;
use super::{joined, unexpected};
use crate::code::tool::RUN_CODE;
use crate::gateway::Gateway;
use crate::pipeline::{Origin, Target, error};
use crate::registry::tool::TaskSupport;
use crate::relay::inputs::Inputs;
use crate::session::Session;
use crate::session::limits::{Holding, LIMIT_ERROR, LimitError, Permit};
use crate::session::parked::ParkedCall;
use crate::state::{StateError, TaskKept};
use crate::tasks::record::Lookup;
use crate::tasks::running::{Message, RunningTask};
use crate::tasks::{self, BecomesTask, Promotion, TaskFailure, TaskRecord, Work, record};
use crate::tool_result::ToolResult;

impl Session {
    /// Whether a `tools/call` (`call`) may become a task of the gateway's: a call of a
    /// client that declared the tasks extension, to `run_code` or to a tool of a server of
    /// 2025-11-25 (which has no tasks of its own; a server of 2026-07-28 decides for
    /// itself), unless the tool's `execution.taskSupport` forbids it. A tool that requires
    /// it always becomes one ([`Promotion::Always`]), and is refused to a client without
    /// the extension (-32021).
    pub(super) fn may_become_task(
        &self,
        gateway: &Gateway,
        call: &CallToolRequestParams,
        revision: &Revision,
    ) -> Result<Option<BecomesTask>, ErrorData> {
        if !revision.is_stateless() {
            return Ok(None);
        }
        let declared = revision
            .client()
            .is_some_and(|client| client.capabilities.supports_tasks());
        let name = call.name.as_ref();
        let support = match gateway.resolve(self, name, &Origin::Client) {
            Some(Target::Builtin(_)) if name == RUN_CODE => None,
            Some(Target::Federated(tool)) => {
                let upstream_decides = gateway
                    .registry()
                    .upstream(&tool.server)
                    .and_then(|upstream| upstream.live())
                    .is_none_or(|live| live.is_stateless());
                if upstream_decides {
                    return Ok(None);
                }
                tool.task_support
            }
            _ => return Ok(None),
        };
        match (support, declared) {
            (Some(TaskSupport::Forbidden), _) => Ok(None),
            (Some(TaskSupport::Required), false) => {
                Err(ErrorData::missing_required_client_capability(
                    ClientCapabilities::builder().enable_tasks().build(),
                ))
            }
            (_, false) => Ok(None),
            (support, true) => Ok(Some(BecomesTask {
                tool: name.to_owned(),
                arguments: call.arguments.clone(),
                when: match support {
                    Some(TaskSupport::Required) => Promotion::Always,
                    _ => Promotion::WhenLong,
                },
            })),
        }
    }

    /// Waits for the answer of `call` for at most `[tasks] answer_within_ms`, then makes
    /// it a task of the gateway's, whose handle is the answer, as `becomes.when` says: a
    /// call still running becomes one; one that asks its client something first does
    /// unless its tool requires a task (then the question is this round's, and the retry
    /// with the answer goes on here); one that answered is answered as it is unless its
    /// tool requires a task (then a task that completed with the answer).
    pub(super) async fn await_or_promote(
        self: &Arc<Self>,
        gateway: &Arc<Gateway>,
        mut call: ParkedCall,
        request: &CancellationToken,
        becomes: BecomesTask,
    ) -> Result<ServerResult, ErrorData> {
        let config = gateway.policy().config.tasks.clone();
        let answered = tokio::select! {
            biased;
            answer = &mut call.task => Some(answer),
            () = call.inputs.asked() => {
                if becomes.when == Promotion::Always {
                    call.becomes_task = Some(becomes);
                    return self.await_or_park(gateway, call, request).await;
                }
                None
            }
            () = tokio::time::sleep(config.answer_within()) => None,
            () = request.cancelled() => {
                call.abandon();
                return joined(call.task.await);
            }
        };
        let BecomesTask {
            tool,
            arguments,
            when,
        } = becomes;
        if when == Promotion::WhenLong
            && let Some(answer) = answered
        {
            return joined(answer);
        }
        // What one identity may have running is bounded: past it, the call stays a call.
        let permit = match self.owner_and_quotas().acquire(Holding::Task) {
            Ok(permit) => permit,
            Err(refused) => {
                tracing::warn!(session = %self.id, code = refused.code(), "{refused}");
                return self.stays_a_call(gateway, call, answered, request).await;
            }
        };
        let id = tasks::new_id(tasks::OWN);
        let now = record::now();
        let mut task = Task::new(id.clone(), TaskStatus::Working, now.clone(), now);
        task.ttl_ms = Some(config.ttl_ms);
        task.poll_interval_ms = Some(config.poll_interval_ms);
        let state = gateway.shared_state();
        let record = TaskRecord {
            identity: self.owner().map(str::to_owned),
            tool,
            arguments,
            expires_ms: TaskRecord::expiry(config.ttl()),
            work: Work::Own {
                replica: state.replica().to_owned(),
                task: DetailedTask::new(task.clone(), TaskPayload::Working),
            },
        };
        // The task exists for `tasks/get` before its handle is given out; while the
        // identity's running tasks fill what it may keep, the call stays a call.
        match record::create(state.as_ref(), &id, &record, config.bound()).await {
            Ok(TaskKept::Kept) => {}
            Ok(TaskKept::Refused) => {
                let refused = LimitError::TasksKept {
                    max_tasks: config.max_kept_per_identity.get(),
                    max_bytes: config.max_kept_bytes_per_identity.get(),
                };
                tracing::warn!(session = %self.id, code = refused.code(), "{refused}");
                return self.stays_a_call(gateway, call, answered, request).await;
            }
            Err(e) => {
                tracing::warn!(session = %self.id, "the call stays a call, not a task: {e}");
                return self.stays_a_call(gateway, call, answered, request).await;
            }
        }
        let running = Arc::new(RunningTask::new(
            call.cancel.clone(),
            call.inputs.clone(),
            record,
        ));
        gateway.running_tasks().insert(id.clone(), running.clone());
        tracing::info!(session = %self.id, task = %id, "a call became a task of the gateway's");
        let calling: Calling = match answered {
            Some(answer) => Box::pin(std::future::ready(answer)),
            None => Box::pin(call.task),
        };
        let input_deadline = self.owner_and_quotas().quotas.limits().input_deadline();
        tokio::spawn(run(
            gateway.clone(),
            id,
            running,
            calling,
            permit,
            input_deadline,
        ));
        Ok(ServerResult::CreateTaskResult(CreateTaskResult::new(task)))
    }

    /// A call that does not become a task after all (its identity's quota of tasks is
    /// full, say): its `answer` if it came, or whatever it comes to as a call.
    async fn stays_a_call(
        &self,
        gateway: &Gateway,
        call: ParkedCall,
        answer: Option<Joined>,
        request: &CancellationToken,
    ) -> Result<ServerResult, ErrorData> {
        match answer {
            Some(answer) => joined(answer),
            None => self.await_or_park(gateway, call, request).await,
        }
    }
}

/// What a call came to, as its task's join gives it.
type Joined = Result<Result<ServerResult, ErrorData>, JoinError>;

/// A call a task runs: still going, or already answered.
type Calling = Pin<Box<dyn Future<Output = Joined> + Send>>;

/// Writes `record`, changed by a request about task `id` that reached a replica other than
/// the one running it, and leaves `message` for that one.
pub(super) async fn send(
    gateway: &Gateway,
    id: &str,
    record: &TaskRecord,
    message: Message,
) -> Result<(), ErrorData> {
    let state = gateway.shared_state().as_ref();
    let bound = gateway.policy().config.tasks.bound();
    record::save(state, id, record, bound)
        .await
        .map_err(state_error)?;
    let message = serde_json::to_string(&message)
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    state
        .send_message(&tasks::mailbox(id), message, record.left())
        .await
        .map_err(state_error)
}

/// Hands `responses` to the questions of task `id`, running here, and writes the
/// questions left open.
pub(super) async fn answer_here(
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
        let bound = gateway.policy().config.tasks.bound();
        record::save(gateway.shared_state().as_ref(), id, &record, bound).await?;
    }
    Ok(())
}

/// What other replicas left for task `id`, running here, done.
async fn take_messages(gateway: &Gateway, id: &str, running: &RunningTask) {
    let messages = match gateway
        .shared_state()
        .take_messages(&tasks::mailbox(id))
        .await
    {
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
/// running when its task expires is cancelled; one whose question stays unanswered past
/// `input_deadline` too, and the task fails ([`TaskFailure::InputExpired`]).
async fn run(
    gateway: Arc<Gateway>,
    id: String,
    running: Arc<RunningTask>,
    mut call: Calling,
    // The task's place in its identity's quota, until it settles.
    permit: Permit,
    input_deadline: Duration,
) {
    let mut seen = 0;
    let shared = gateway.shared_state().is_shared();
    let poll =
        std::time::Duration::from_millis(gateway.policy().config.tasks.poll_interval_ms.max(1));
    // Work whose result nobody can fetch any more stops.
    let expiry = tokio::time::sleep(running.record.lock().await.left());
    tokio::pin!(expiry);
    let mut expired = false;
    let mut failure = None;
    let answer = loop {
        // Taken anew each time round: questions come and are answered meanwhile.
        let unanswered = running.inputs.oldest().map(|asked| asked + input_deadline);
        tokio::select! {
            biased;
            answer = &mut call => break answer,
            () = &mut expiry, if !expired => {
                expired = true;
                running.cancel();
            }
            () = at(unanswered) => {
                if running
                    .inputs
                    .oldest()
                    .is_some_and(|asked| asked + input_deadline <= Instant::now())
                {
                    let unanswered = TaskFailure::InputExpired {
                        secs: input_deadline.as_secs(),
                    };
                    tracing::info!(task = %id, code = unanswered.code(), "{unanswered}");
                    failure = Some(unanswered);
                    running.stop_call();
                }
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
    let stopping = gateway.shutdown_token().is_cancelled();
    // Free before the end is written: whoever sees the task settled may start another.
    drop(permit);
    change(&gateway, &id, &running, |task, _| {
        settled(task, joined(answer), cancelled, failure, stopping)
    })
    .await;
    gateway.running_tasks().remove(&id);
    tracing::info!(task = %id, cancelled, "the gateway's task settled");
}

/// Resolves at `deadline`; never without one.
async fn at(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
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
    let state = gateway.shared_state().as_ref();
    let mut record = running.record.lock().await;
    let settled = match record::load(state, id).await {
        Ok(Some(Lookup::Kept(stored))) => stored.is_settled(),
        // Only a settled task is dropped.
        Ok(Some(Lookup::Dropped { .. })) => true,
        _ => false,
    };
    if settled {
        return;
    }
    let Work::Own { task, .. } = &mut record.work else {
        return;
    };
    *task = change(task.clone(), &running.inputs);
    if record::is_terminal(task) {
        // Nothing needs the call's arguments any more.
        record.arguments = None;
    }
    let bound = gateway.policy().config.tasks.bound();
    if let Err(e) = record::save(state, id, &record, bound).await {
        tracing::warn!(task = %id, "task record not written: {e}");
    }
}

/// `task` with the call's open questions: `input_required` while there are some.
pub(super) fn asking(task: DetailedTask, inputs: &Inputs) -> DetailedTask {
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

/// A task's `failure` as its `error`: [`LIMIT_ERROR`], the message led by the failure's
/// code, and the code in `data.code`, as a call cancelled for the same reason is refused.
fn failure_error(failure: &TaskFailure) -> ErrorData {
    ErrorData::new(
        LIMIT_ERROR,
        format!("{}: {failure}", failure.code()),
        Some(serde_json::json!({ "code": failure.code() })),
    )
}

/// `task` settled by its call's `answer`: completed with the tool's result (an error the
/// tool reported too), failed when the call came to no result of the tool's (see
/// [`error::work_failure`]; when the gateway is `stopping`, saying so), cancelled, or
/// failed with the `failure` for which the gateway stopped its call.
fn settled(
    task: DetailedTask,
    answer: Result<ServerResult, ErrorData>,
    cancelled: bool,
    failure: Option<TaskFailure>,
    stopping: bool,
) -> DetailedTask {
    if cancelled {
        return record::with_status(task, TaskStatus::Cancelled);
    }
    if let Some(failure) = failure {
        return record::failed(task, &failure_error(&failure));
    }
    match answer.map(ToolResult::from_server_result) {
        // Cut by the gateway's shutdown, most likely: said so.
        Ok(Ok(result)) if let Some(error) = error::work_failure(&result) => {
            let error = if stopping {
                ErrorData::internal_error(
                    "the gateway running the task stopped before it finished",
                    error.data,
                )
            } else {
                error
            };
            record::failed(task, &error)
        }
        Ok(Ok(result)) => {
            let result = result.into_json();
            let mut task = task;
            task.task.last_updated_at = record::now();
            DetailedTask::new(task.task, TaskPayload::Completed { result })
        }
        Ok(Err(other)) => record::failed(task, &unexpected(&other)),
        Err(error) => record::failed(task, &error),
    }
}

/// The shared state failed a task request: its code, and why.
pub(super) fn state_error(error: StateError) -> ErrorData {
    ErrorData::internal_error(format!("{}: {error}", error.code()), None)
}
