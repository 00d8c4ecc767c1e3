//! The code runtime the gateway holds: one fresh worker process per run, the next one
//! always started ahead of time.
//!
//! A spare worker is spawned as soon as the runtime exists and again whenever a run that
//! took it has settled, so a run normally finds a worker whose JavaScript runtime already
//! exists (a run that finds the spare still starting waits for it rather than starting
//! another). The next spare is not started while the run is going: starting a worker
//! costs tens of milliseconds of CPU, which on a small machine would be taken from the
//! run it is meant to serve.
//! Workers are never reused. `shutdown` aborts in-flight runs, kills the spare, and waits until
//! every worker has been reaped.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::bridge::ToolBridge;
use super::budgets::CodeBudgets;
use super::outcome::{CodeRunFailure, FailureKind, RunOutcome};
use super::process::{WorkerCommand, WorkerProcess};
use super::run::{self, Driven, RunRequest};
use super::strip;

/// Runs programs in worker processes; cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct CodeRuntime {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    command: WorkerCommand,
    budgets: CodeBudgets,
    spare: Mutex<Spare>,
    /// The bindings of the last run, installed in the next spare ahead of its run.
    last_bindings: Mutex<Option<Arc<str>>>,
    /// Signalled when a spare that was starting is ready (or failed).
    spare_changed: Notify,
    shutdown: CancellationToken,
    /// Spare-spawning tasks and in-flight runs, so `shutdown` can wait for them.
    tasks: TaskTracker,
}

#[derive(Debug)]
enum Spare {
    Empty,
    Starting,
    Ready(Box<WorkerProcess>),
}

impl CodeRuntime {
    /// A runtime whose workers are started with `worker`. When called inside a tokio
    /// runtime, the first worker starts right away; otherwise with the first run.
    pub fn new(worker: WorkerCommand, budgets: CodeBudgets) -> Self {
        let runtime = Self {
            inner: Arc::new(Inner {
                command: worker,
                budgets,
                spare: Mutex::new(Spare::Empty),
                last_bindings: Mutex::default(),
                spare_changed: Notify::new(),
                shutdown: CancellationToken::new(),
                tasks: TaskTracker::new(),
            }),
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            Inner::replenish(&runtime.inner);
        }
        runtime
    }

    /// Run a TypeScript program with the given tool bindings (a JavaScript expression
    /// `(hostCall) => ({ tools, callTool, ToolCallError })`). Never fails as a call:
    /// every problem is in the outcome's `failure`.
    pub async fn run(
        &self,
        program_ts: &str,
        bindings_js: &str,
        bridge: Arc<dyn ToolBridge>,
        cancel: CancellationToken,
    ) -> RunOutcome {
        let inner = &self.inner;
        let _in_flight = inner.tasks.token();
        if inner.shutdown.is_cancelled() {
            return aborted("the code runtime is shut down");
        }
        if cancel.is_cancelled() {
            return aborted("the run was cancelled before it started");
        }
        inner.remember_bindings(bindings_js);
        let program = match strip::strip(program_ts) {
            Ok(program) => program,
            Err(failure) => return RunOutcome::failed(failure),
        };
        let request = RunRequest {
            program: &program,
            bindings: bindings_js,
            budgets: &inner.budgets,
            bridge,
            cancel: &cancel,
            shutdown: &inner.shutdown,
            tasks: &inner.tasks,
        };
        // A worker that dies before the program shows any sign of life is replaced once.
        let mut attempts = 0;
        loop {
            attempts += 1;
            let worker = match inner.take_worker().await {
                Ok(worker) => worker,
                Err(error) => {
                    Inner::replenish(inner);
                    return RunOutcome::failed(CodeRunFailure::new(
                        FailureKind::Died,
                        format!("could not start a worker process: {error}"),
                    ));
                }
            };
            let driven = run::drive(worker, &request).await;
            Inner::replenish(inner);
            match driven {
                Driven::Finished(outcome) => return outcome,
                Driven::DiedSilently(outcome) if attempts > 1 => return outcome,
                Driven::DiedSilently(_) => {}
            }
        }
    }

    /// Abort in-flight runs, kill the spare worker, and wait until every worker is reaped.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        inner.shutdown.cancel();
        let spare = std::mem::replace(&mut *inner.lock_spare(), Spare::Empty);
        if let Spare::Ready(mut worker) = spare {
            let _ = worker.kill_and_reap().await;
        }
        inner.tasks.close();
        inner.tasks.wait().await;
    }
}

impl Inner {
    fn lock_spare(&self) -> std::sync::MutexGuard<'_, Spare> {
        self.spare
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The spare worker if there is a live one (waiting for it if it is being started,
    /// which is sooner than starting another), else a new one.
    async fn take_worker(&self) -> std::io::Result<WorkerProcess> {
        loop {
            let changed = self.spare_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            // `None`: a spare is starting; `Some(spare)`: what there is.
            let taken = {
                let mut spare = self.lock_spare();
                match std::mem::replace(&mut *spare, Spare::Empty) {
                    Spare::Ready(worker) => Some(Some(worker)),
                    Spare::Starting => {
                        *spare = Spare::Starting;
                        None
                    }
                    Spare::Empty => Some(None),
                }
            };
            match taken {
                None => changed.await,
                Some(spare) => {
                    if let Some(mut worker) = spare
                        && !worker.has_exited()
                    {
                        return Ok(*worker);
                    }
                    return WorkerProcess::spawn(&self.command, &self.budgets, None).await;
                }
            }
        }
    }

    /// Keep `bindings` for the next spare, unless they are the ones kept already.
    fn remember_bindings(&self, bindings: &str) {
        let mut last = self
            .last_bindings
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if last.as_deref() != Some(bindings) {
            *last = Some(Arc::from(bindings));
        }
    }

    /// Start the next spare in the background, unless one exists or is starting.
    fn replenish(self: &Arc<Self>) {
        {
            let mut spare = self.lock_spare();
            if !matches!(*spare, Spare::Empty) || self.shutdown.is_cancelled() {
                return;
            }
            *spare = Spare::Starting;
        }
        let inner = Arc::clone(self);
        self.tasks.spawn(async move {
            let preload = inner
                .last_bindings
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .clone();
            let spawned = WorkerProcess::spawn(&inner.command, &inner.budgets, preload).await;
            let unwanted = {
                let mut spare = inner.lock_spare();
                *spare = Spare::Empty;
                match spawned {
                    Ok(worker) if !inner.shutdown.is_cancelled() => {
                        *spare = Spare::Ready(Box::new(worker));
                        None
                    }
                    Ok(worker) => Some(worker),
                    Err(error) => {
                        // The next run spawns its own worker and tries again.
                        tracing::warn!(%error, "could not start a spare code worker");
                        None
                    }
                }
            };
            inner.spare_changed.notify_waiters();
            if let Some(mut worker) = unwanted {
                let _ = worker.kill_and_reap().await;
            }
        });
    }
}

fn aborted(message: &str) -> RunOutcome {
    RunOutcome::failed(CodeRunFailure::new(FailureKind::Aborted, message))
}
