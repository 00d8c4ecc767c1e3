//! One run, seen from the host: hand the program to a worker, serve its tool calls, keep
//! its logs, enforce the budgets, and settle exactly once.
//!
//! The worker is a hostile peer. Its messages are read with a size cap and parsed
//! strictly; call ids must arrive in order (the worker's Rust side numbers them, so
//! anything else means the worker is not ours any more); each id is answered at most
//! once, and nothing is answered after the run settles. Whatever ends the run (result,
//! failure, budget, cancellation), the worker is killed and reaped, unfinished calls are
//! cancelled and drained, and logs printed before the end are kept.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::attachments::take_images;
use super::bridge::ToolBridge;
use super::outcome::{CodeRunFailure, FailureKind, RunOutcome};
use super::process::WorkerProcess;
use super::protocol::{
    self, Bindings, HostMessage, LineError, LineReader, WorkerFailure, WorkerMessage,
};
use super::scheduler::{QueuedCall, Scheduler};
use super::strip::StrippedProgram;
use crate::config::CodeBudgets;

/// How often the worker's CPU time is read.
const CPU_POLL: Duration = Duration::from_millis(10);
/// Calls the program may have waiting to start before the run fails.
const MAX_QUEUED_CALLS: usize = 10_000;
/// How long cancelled tool calls get to finish before they are dropped.
const CALL_DRAIN: Duration = Duration::from_secs(5);
/// The longest diagnostic (other than a thrown value) kept from a worker.
const MAX_DIAGNOSTIC_BYTES: usize = 4096;
/// How long to collect the logs still in the pipe after the worker was killed.
const LOG_DRAIN: Duration = Duration::from_secs(2);
/// How long the work a finished run leaves behind waits: its worker's exit (tearing down
/// its memory) and the making of the next runner (a fork, then the runner's
/// preparation). Started at once, they compete with the answer's way back to the client
/// for the cores; a few milliseconds covers that way.
pub(crate) const AFTER_THE_ANSWER: Duration = Duration::from_millis(3);

/// What one run needs besides its worker.
pub(crate) struct RunRequest<'a> {
    pub(crate) program: &'a StrippedProgram,
    pub(crate) bindings: &'a Bindings,
    pub(crate) budgets: &'a CodeBudgets,
    pub(crate) bridge: Arc<dyn ToolBridge>,
    pub(crate) cancel: &'a CancellationToken,
    pub(crate) shutdown: &'a CancellationToken,
    /// Where background work (reaping finished workers) is tracked.
    pub(crate) tasks: &'a TaskTracker,
}

/// What the worker sent, as the reader task saw it.
enum Inbound {
    Message(WorkerMessage),
    Garbage(String),
}

/// What woke the run loop.
enum Event {
    Cancelled,
    ShuttingDown,
    WallElapsed,
    CpuTick,
    CallFinished(Option<(u64, Value)>),
    Inbound(Option<Inbound>),
}

/// How the loop ended.
enum Settled {
    Completed(Option<Value>),
    Failed(CodeRunFailure),
    /// The worker's output ended without an outcome; the message needs its exit status.
    Vanished,
}

/// How a run on one worker ended.
pub(crate) enum Driven {
    Finished(RunOutcome),
    /// The worker died before the program produced anything (no log, no call, no
    /// outcome): nothing of the program was observed, so it may run again on a fresh
    /// worker. This is what a runner killed while it waited looks like.
    DiedSilently(RunOutcome),
}

/// Run the program on `worker`.
pub(crate) async fn drive(mut worker: WorkerProcess, request: &RunRequest<'_>) -> Driven {
    let Some(channel) = worker.channel.take() else {
        let _ = worker.kill_and_reap().await;
        return Driven::DiedSilently(RunOutcome::failed(died("the worker has no bridge socket")));
    };
    let (from_worker, to_worker) = channel.into_split();
    let max_message = protocol::max_message_bytes(request.budgets.max_output_bytes);
    let run_message = protocol::encode(&HostMessage::Run {
        program: request.program.js.clone(),
        bindings: (worker.prepared.as_ref() != Some(request.bindings))
            .then(|| request.bindings.clone()),
        max_output_bytes: request.budgets.max_output_bytes,
    });
    let (to_worker, writer) = start_writer(to_worker, run_message);
    let (mut inbound, reader) = start_reader(from_worker, max_message);

    let mut run = RunState::new(request, to_worker, worker.cpu_time());
    let settled = run.serve(&mut worker, &mut inbound).await;

    // The end. A worker that reported its outcome only waits to be killed, so it is
    // stopped once the answer is on its way: the kill and the closing of its channel
    // wake it, and its exit competes for a core. Any other worker is stopped first, so
    // nothing more happens in it.
    if !run.reported {
        worker.kill();
    }
    run.cancel_calls().await;
    if !run.reported {
        // Stopped from here: keep what it printed before the end.
        run.drain_logs(&mut inbound).await;
    }
    let status = if matches!(settled, Settled::Vanished) {
        writer.abort();
        reader.abort();
        Some(worker.kill_and_reap().await)
    } else {
        // Nobody needs to wait for the exit; `shutdown` waits for the reaping.
        request.tasks.spawn(async move {
            tokio::time::sleep(AFTER_THE_ANSWER).await;
            let _ = worker.kill_and_reap().await;
            writer.abort();
            reader.abort();
        });
        None
    };

    let silent = run.logs.is_empty() && run.next_call_id == 1;
    let mut outcome = RunOutcome {
        logs: run.logs,
        attachments: run.attachments.into_values().flatten().collect(),
        ..RunOutcome::default()
    };
    match settled {
        Settled::Failed(failure) => outcome.failure = Some(failure),
        Settled::Completed(result) => outcome.result = result,
        Settled::Vanished => {
            let how = match status {
                Some(Ok(status)) => status.to_string(),
                Some(Err(error)) => format!("status unknown: {error}"),
                None => "status unknown".to_owned(),
            };
            outcome.failure = Some(died(&format!(
                "the worker process ended before the run finished ({how})"
            )));
            if silent {
                return Driven::DiedSilently(outcome);
            }
        }
    }
    Driven::Finished(outcome)
}

/// The host's state of one run.
struct RunState<'a> {
    request: &'a RunRequest<'a>,
    to_worker: mpsc::UnboundedSender<HostMessage>,
    logs: Vec<String>,
    output_used: usize,
    /// Image contents taken out of call results, by call id.
    attachments: BTreeMap<u64, Vec<Value>>,
    scheduler: Scheduler,
    calls: JoinSet<(u64, Value)>,
    calls_token: CancellationToken,
    next_call_id: u64,
    /// The worker's CPU time when the run was handed to it; compute is charged from
    /// there. `None` if it could not be read (the worker is then already gone).
    cpu_base: Option<Duration>,
    /// The worker reported the outcome itself (and exited): nothing more can come.
    reported: bool,
}

impl<'a> RunState<'a> {
    fn new(
        request: &'a RunRequest<'a>,
        to_worker: mpsc::UnboundedSender<HostMessage>,
        cpu_base: Option<Duration>,
    ) -> Self {
        Self {
            request,
            to_worker,
            logs: Vec::new(),
            output_used: 0,
            attachments: BTreeMap::new(),
            scheduler: Scheduler::new(request.budgets.parallel_calls()),
            calls: JoinSet::new(),
            calls_token: CancellationToken::new(),
            next_call_id: 1,
            cpu_base,
            reported: false,
        }
    }

    /// Serve the worker until the run settles.
    async fn serve(
        &mut self,
        worker: &mut WorkerProcess,
        inbound: &mut mpsc::Receiver<Inbound>,
    ) -> Settled {
        let budgets = self.request.budgets;
        let wall = tokio::time::sleep(budgets.wall());
        tokio::pin!(wall);
        let mut cpu_tick = tokio::time::interval_at(Instant::now() + CPU_POLL, CPU_POLL);
        cpu_tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let (cancel, shutdown) = (self.request.cancel, self.request.shutdown);
        loop {
            let event = tokio::select! {
                _ = cancel.cancelled() => Event::Cancelled,
                _ = shutdown.cancelled() => Event::ShuttingDown,
                _ = &mut wall => Event::WallElapsed,
                _ = cpu_tick.tick() => Event::CpuTick,
                Some(joined) = self.calls.join_next(), if !self.calls.is_empty() => {
                    Event::CallFinished(joined.ok())
                }
                message = inbound.recv() => Event::Inbound(message),
            };
            let settled = match event {
                Event::Cancelled => Some(Settled::Failed(failure(
                    FailureKind::Aborted,
                    "the run was cancelled",
                ))),
                Event::ShuttingDown => Some(Settled::Failed(failure(
                    FailureKind::Aborted,
                    "the code runtime is shutting down",
                ))),
                Event::WallElapsed => Some(Settled::Failed(failure(
                    FailureKind::Wall,
                    format!("the run took longer than {} ms", budgets.wall().as_millis()),
                ))),
                Event::CpuTick => self.check_compute(worker),
                Event::CallFinished(Some((id, result))) => {
                    self.call_finished(id, result);
                    None
                }
                // A call task cannot panic (it catches unwinds) and is aborted only at the end.
                Event::CallFinished(None) => None,
                Event::Inbound(Some(Inbound::Message(message))) => self.handle(message),
                Event::Inbound(Some(Inbound::Garbage(why))) => Some(Settled::Failed(died(
                    &format!("the worker broke the bridge protocol: {why}"),
                ))),
                Event::Inbound(None) => Some(Settled::Vanished),
            };
            if let Some(settled) = settled {
                return settled;
            }
        }
    }

    /// Cancel the calls still running and wait for them; calls that ignore cancellation
    /// are dropped after a grace period.
    async fn cancel_calls(&mut self) {
        self.calls_token.cancel();
        let calls = &mut self.calls;
        let drained = tokio::time::timeout(CALL_DRAIN, async {
            while calls.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                calls = self.calls.len(),
                "tool calls ignored cancellation after the run settled; dropping them"
            );
            self.calls.shutdown().await;
        }
    }

    /// Keep the logs still in the pipe of a worker that was stopped from here.
    async fn drain_logs(&mut self, inbound: &mut mpsc::Receiver<Inbound>) {
        let _ = tokio::time::timeout(LOG_DRAIN, async {
            while let Some(message) = inbound.recv().await {
                if let Inbound::Message(WorkerMessage::Log { text }) = message
                    && self.keep_log(text).is_err()
                {
                    break;
                }
            }
        })
        .await;
    }

    fn check_compute(&self, worker: &WorkerProcess) -> Option<Settled> {
        let used = worker.cpu_time()?.saturating_sub(self.cpu_base?);
        let budget = self.request.budgets.compute();
        (used > budget).then(|| {
            Settled::Failed(failure(
                FailureKind::Compute,
                format!(
                    "the program used more than {} ms of CPU time",
                    budget.as_millis()
                ),
            ))
        })
    }

    /// One message from the worker; `Some` when it settles the run.
    fn handle(&mut self, message: WorkerMessage) -> Option<Settled> {
        match message {
            WorkerMessage::Ready { .. } => {
                Some(Settled::Failed(died("the worker said ready twice")))
            }
            WorkerMessage::Forked { .. } => Some(Settled::Failed(died(
                "the worker answered a fork nobody asked for",
            ))),
            WorkerMessage::Log { text } => self.keep_log(text).err().map(Settled::Failed),
            WorkerMessage::Call { id, tool, args } => self.call_requested(id, tool, args),
            WorkerMessage::Done { result } => {
                self.reported = true;
                Some(self.completed(result))
            }
            WorkerMessage::Fail { kind, message } => {
                self.reported = true;
                Some(Settled::Failed(self.failed(kind, &message)))
            }
        }
    }

    /// Keep a log line if it fits in the output budget.
    fn keep_log(&mut self, text: String) -> Result<(), CodeRunFailure> {
        self.charge_output(protocol::log_cost(&text), "console output")?;
        self.logs.push(self.request.program.map_positions(&text));
        Ok(())
    }

    fn charge_output(&mut self, bytes: usize, what: &str) -> Result<(), CodeRunFailure> {
        let max = self.request.budgets.max_output_bytes;
        match self
            .output_used
            .checked_add(bytes)
            .filter(|total| *total <= max)
        {
            Some(total) => {
                self.output_used = total;
                Ok(())
            }
            None => Err(failure(
                FailureKind::Output,
                format!(
                    "{what} ({bytes} bytes) exceeds what is left of the {max}-byte output budget"
                ),
            )),
        }
    }

    fn call_requested(&mut self, id: u64, tool: String, args: Value) -> Option<Settled> {
        if id != self.next_call_id {
            return Some(Settled::Failed(died(&format!(
                "the worker sent call id {id}, expected {}",
                self.next_call_id
            ))));
        }
        self.next_call_id += 1;
        if self.scheduler.queued() >= MAX_QUEUED_CALLS {
            return Some(Settled::Failed(failure(
                FailureKind::Exception,
                format!("the program has more than {MAX_QUEUED_CALLS} tool calls waiting to start"),
            )));
        }
        let safe = self.request.bridge.is_concurrency_safe(&tool);
        self.scheduler.push(QueuedCall {
            id,
            tool,
            args,
            safe,
        });
        self.start_calls();
        None
    }

    /// Start every call the scheduler allows now.
    fn start_calls(&mut self) {
        while let Some(call) = self.scheduler.start_next() {
            let cancel = self.calls_token.child_token();
            let future = self.request.bridge.call(call.tool, call.args, cancel);
            let id = call.id;
            self.calls.spawn(async move {
                let result = AssertUnwindSafe(future).catch_unwind().await.unwrap_or_else(|_| {
                    json!({
                        "isError": true,
                        "content": [{"type": "text", "text": "Error: the tool call failed inside the gateway"}],
                    })
                });
                (id, result)
            });
        }
    }

    fn call_finished(&mut self, id: u64, mut result: Value) {
        self.scheduler.finish(id);
        let images = take_images(&mut result);
        if !images.is_empty() {
            self.attachments.insert(id, images);
        }
        let _ = self.to_worker.send(HostMessage::Reply { id, result });
        self.start_calls();
    }

    fn completed(&mut self, result: Option<Value>) -> Settled {
        let bytes = result.as_ref().map_or(0, |value| value.to_string().len());
        match self.charge_output(bytes, "the result") {
            Ok(()) => Settled::Completed(result),
            Err(failure) => Settled::Failed(failure),
        }
    }

    /// A failure the worker reported. A thrown value's description is program output and
    /// is charged as such; the worker's own diagnostics are short, and cut if they are not.
    fn failed(&mut self, kind: WorkerFailure, message: &str) -> CodeRunFailure {
        let kind = match kind {
            WorkerFailure::Parse => FailureKind::Parse,
            WorkerFailure::Exception => FailureKind::Exception,
            WorkerFailure::Output => FailureKind::Output,
            WorkerFailure::Heap => FailureKind::Heap,
            WorkerFailure::Confine => FailureKind::Died,
        };
        if kind == FailureKind::Exception {
            if let Err(failure) =
                self.charge_output(message.len(), "the thrown value's description")
            {
                return failure;
            }
            return failure(kind, self.request.program.map_positions(message));
        }
        let mut end = message.len().min(MAX_DIAGNOSTIC_BYTES);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        failure(kind, self.request.program.map_positions(&message[..end]))
    }
}

fn failure(kind: FailureKind, message: impl Into<String>) -> CodeRunFailure {
    CodeRunFailure::new(kind, message)
}

fn died(message: &str) -> CodeRunFailure {
    failure(FailureKind::Died, message)
}

/// Messages to the worker (`first`, then what is sent later) go through a task, so a
/// worker that stops reading cannot stall the run loop.
fn start_writer(
    mut stdin: OwnedWriteHalf,
    first: Vec<u8>,
) -> (
    mpsc::UnboundedSender<HostMessage>,
    tokio::task::JoinHandle<()>,
) {
    // The run message usually fits the socket's buffer: written here, it reaches the
    // worker without waiting for the writer task to be scheduled.
    let sent = stdin.try_write(&first).unwrap_or(0);
    let (sender, mut messages) = mpsc::unbounded_channel::<HostMessage>();
    let task = tokio::spawn(async move {
        if stdin.write_all(&first[sent..]).await.is_err() {
            return;
        }
        while let Some(message) = messages.recv().await {
            if stdin.write_all(&protocol::encode(&message)).await.is_err() {
                break;
            }
        }
    });
    (sender, task)
}

/// Messages from the worker, parsed strictly. The first malformed line ends the stream.
fn start_reader(
    stdout: OwnedReadHalf,
    max_message: usize,
) -> (mpsc::Receiver<Inbound>, tokio::task::JoinHandle<()>) {
    let (sender, receiver) = mpsc::channel(64);
    let task = tokio::spawn(async move {
        let mut lines = LineReader::new(BufReader::new(stdout), max_message);
        loop {
            let inbound = match lines.next_line().await {
                Ok(Some(line)) => match serde_json::from_slice::<WorkerMessage>(&line) {
                    Ok(message) => Inbound::Message(message),
                    Err(error) => Inbound::Garbage(format!("malformed message: {error}")),
                },
                // A worker killed with a message still unread resets the connection:
                // that is the worker vanishing, not a protocol violation.
                Ok(None) => break,
                Err(LineError::Io(error))
                    if error.kind() == std::io::ErrorKind::ConnectionReset =>
                {
                    break;
                }
                Err(error) => Inbound::Garbage(error.to_string()),
            };
            let garbage = matches!(inbound, Inbound::Garbage(_));
            if sender.send(inbound).await.is_err() || garbage {
                break;
            }
        }
    });
    (receiver, task)
}
