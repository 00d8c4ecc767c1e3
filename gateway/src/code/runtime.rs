//! The code runtime the gateway holds: one fresh worker process per run, the next one
//! always ready ahead of time.
//!
//! One idle worker (the spare) exists at a time. A run takes it, and first asks it for a
//! copy of itself (see `template`): the copy, forked before the run's program reaches the
//! original, becomes the next spare within a millisecond or so. A run that finds the next
//! spare still being made waits for it rather than starting another. When there is no
//! spare, or it cannot fork, a worker is exec'd (the engine start costs tens of
//! milliseconds of CPU); that replacement is started once the run has settled, so it is
//! not taken from the run it is meant to serve.
//! Workers are never reused. `shutdown` aborts in-flight runs, kills the spare, and waits
//! until every worker has been reaped.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::bridge::ToolBridge;
use super::budgets::CodeBudgets;
use super::confine;
use super::outcome::{CodeRunFailure, FailureKind, RunOutcome};
use super::process::{WorkerCommand, WorkerProcess};
use super::protocol::Bindings;
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
        let support = confine::support();
        let missing = support.missing();
        if missing.is_empty() {
            tracing::info!(?support, "run_code processes are confined by the kernel");
        } else {
            tracing::warn!(
                ?missing,
                "this kernel lacks some of run_code's process confinement; the rest applies"
            );
        }
        let runtime = Self {
            inner: Arc::new(Inner {
                command: worker,
                budgets,
                spare: Mutex::new(Spare::Empty),
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

    /// Run a TypeScript program with the given tool bindings. Never fails as a call:
    /// every problem is in the outcome's `failure`.
    pub async fn run(
        &self,
        program_ts: &str,
        bindings: &Bindings,
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
        let program = match strip::strip(program_ts) {
            Ok(program) => program,
            Err(failure) => return RunOutcome::failed(failure),
        };
        let request = RunRequest {
            program: &program,
            bindings,
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
            let worker = match Inner::take_worker(inner).await {
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

    /// The spare worker if there is a live one (waiting for it if it is being made,
    /// which is sooner than starting another), else a new one. A spare that can fork
    /// leaves a copy of itself behind as the next spare.
    async fn take_worker(self: &Arc<Self>) -> std::io::Result<WorkerProcess> {
        loop {
            let changed = self.spare_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            // `None`: a spare is being made; `Some(spare)`: what there is.
            let taken = {
                let mut spare = self.lock_spare();
                match std::mem::replace(&mut *spare, Spare::Empty) {
                    Spare::Ready(mut worker) => {
                        if worker.has_exited() {
                            Some(None)
                        } else {
                            if worker.forks {
                                // Its copy is the next spare: later runs wait for it.
                                *spare = Spare::Starting;
                            }
                            Some(Some(worker))
                        }
                    }
                    Spare::Starting => {
                        *spare = Spare::Starting;
                        None
                    }
                    Spare::Empty => Some(None),
                }
            };
            match taken {
                None => changed.await,
                Some(Some(mut worker)) => {
                    if worker.forks {
                        self.copy_into_spare(&mut worker).await;
                    }
                    return Ok(*worker);
                }
                Some(None) => return WorkerProcess::spawn(&self.command, &self.budgets).await,
            }
        }
    }

    /// Ask `worker` (taken for a run, the spare slot marked as being made) for a copy of
    /// itself, and make the copy the spare once it is ready.
    async fn copy_into_spare(self: &Arc<Self>, worker: &mut WorkerProcess) {
        let copy = worker.fork().await;
        let inner = Arc::clone(self);
        self.tasks.spawn(async move {
            let ready = match copy {
                Ok(mut copy) => match copy.wait_ready().await {
                    Ok(()) => Ok(copy),
                    Err(error) => Err(error),
                },
                Err(error) => Err(error),
            };
            if let Err(error) = &ready {
                // The next run execs a worker instead.
                tracing::warn!(%error, "could not copy the idle code worker");
            }
            inner.settle_spare(ready.ok()).await;
        });
    }

    /// End the "being made" state of the spare slot with `worker` (or none), and wake
    /// the runs waiting for it.
    async fn settle_spare(&self, worker: Option<WorkerProcess>) {
        let unwanted = {
            let mut spare = self.lock_spare();
            *spare = Spare::Empty;
            match worker {
                Some(worker) if !self.shutdown.is_cancelled() => {
                    *spare = Spare::Ready(Box::new(worker));
                    None
                }
                other => other,
            }
        };
        self.spare_changed.notify_waiters();
        if let Some(mut worker) = unwanted {
            let _ = worker.kill_and_reap().await;
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
            let spawned = WorkerProcess::spawn(&inner.command, &inner.budgets).await;
            if let Err(error) = &spawned {
                // The next run spawns its own worker and tries again.
                tracing::warn!(%error, "could not start a spare code worker");
            }
            inner.settle_spare(spawned.ok()).await;
        });
    }
}

fn aborted(message: &str) -> RunOutcome {
    RunOutcome::failed(CodeRunFailure::new(FailureKind::Aborted, message))
}
