//! The code runtime the gateway holds: one fresh worker process per run, the next one
//! always ready ahead of time.
//!
//! Two workers wait between runs: the template, a pristine worker that only makes copies
//! of itself (see `template`), and the runner, its latest copy, already confined and
//! waiting for a run. A run takes the runner; the next one is asked of the template a
//! moment after the run has settled, so making it competes neither with the run nor with
//! the answer's way back to the client. A run that finds the
//! next runner still being made waits for it rather than making another; one that finds
//! none makes its own. A worker is exec'd (the engine start costs tens of milliseconds
//! of CPU) only when there is no live template: it becomes the template, or, if it cannot
//! fork, the run's process itself. Workers never run twice. `shutdown` aborts in-flight
//! runs, kills the waiting workers, and waits until every worker has been reaped.
//!
//! Runs hold one of `[code] max_concurrent_runs` permits, taken without waiting: a run
//! that finds none fails `busy` at once, so the number of worker processes stays bounded
//! (the runs', plus the two that wait) however many programs clients send.

use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::bridge::ToolBridge;
use super::confine::{self, ConfinementMissing};
use super::outcome::{CodeRunFailure, FailureKind, RunOutcome};
use super::process::{WorkerCommand, WorkerProcess};
use super::protocol::Bindings;
use super::run::{self, Driven, RunRequest};
use super::strip;
use crate::config::CodeBudgets;

/// Runs programs in worker processes; cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct CodeRuntime {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    command: WorkerCommand,
    budgets: CodeBudgets,
    /// The pristine worker runners are copied from, once one has been exec'd.
    template: tokio::sync::Mutex<Option<WorkerProcess>>,
    runner: Mutex<Runner>,
    /// The bindings of the last run: the next runner makes them ready ahead.
    last_bindings: Mutex<Option<Bindings>>,
    /// Signalled when a runner that was being made is ready (or failed).
    runner_changed: Notify,
    /// One permit per run that may be in flight (`max_concurrent_runs`).
    runs: Arc<Semaphore>,
    shutdown: CancellationToken,
    /// Runner-making tasks and in-flight runs, so `shutdown` can wait for them.
    tasks: TaskTracker,
}

#[derive(Debug)]
enum Runner {
    Empty,
    Starting,
    Ready(Box<WorkerProcess>),
}

impl CodeRuntime {
    /// A runtime whose workers are started with `worker`. When called inside a tokio
    /// runtime, the first worker starts right away; otherwise with the first run. Refused
    /// when `budgets` require a confinement this kernel cannot give.
    pub fn new(worker: WorkerCommand, budgets: CodeBudgets) -> Result<Self, ConfinementMissing> {
        let support = confine::support();
        confine::require(support, budgets.require_confinement)?;
        let missing = support.missing();
        if missing.is_empty() {
            tracing::debug!(?support, "run_code processes are confined by the kernel");
        } else {
            tracing::warn!(
                ?missing,
                "this kernel lacks some of run_code's process confinement; the rest applies"
            );
        }
        let runtime = Self {
            inner: Arc::new(Inner {
                command: worker,
                template: tokio::sync::Mutex::new(None),
                runner: Mutex::new(Runner::Empty),
                last_bindings: Mutex::new(None),
                runner_changed: Notify::new(),
                runs: Arc::new(Semaphore::new(budgets.concurrent_runs())),
                budgets,
                shutdown: CancellationToken::new(),
                tasks: TaskTracker::new(),
            }),
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            Inner::replenish(&runtime.inner);
        }
        Ok(runtime)
    }

    /// The next run's worker: `ready` (waiting, confined), `starting` (being made) or
    /// `none` (the next run makes its own).
    pub fn next_runner(&self) -> &'static str {
        match &*self.inner.lock_runner() {
            Runner::Ready(_) => "ready",
            Runner::Starting => "starting",
            Runner::Empty => "none",
        }
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
        let Ok(_permit) = inner.runs.clone().try_acquire_owned() else {
            return RunOutcome::failed(CodeRunFailure::new(
                FailureKind::Busy,
                format!(
                    "{} programs are running already, the most [code] max_concurrent_runs \
                     allows; run this one when one of them has finished",
                    inner.budgets.concurrent_runs()
                ),
            ));
        };
        inner.remember(bindings);
        inner.announce_run();
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
            let worker = match Inner::take_runner(inner).await {
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
            Inner::replenish_after_the_answer(inner);
            match driven {
                Driven::Finished(outcome) => return outcome,
                Driven::DiedSilently(outcome) if attempts > 1 => return outcome,
                Driven::DiedSilently(_) => {}
            }
        }
    }

    /// Abort in-flight runs, kill the waiting workers, and wait until every worker is
    /// reaped.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        inner.shutdown.cancel();
        let runner = std::mem::replace(&mut *inner.lock_runner(), Runner::Empty);
        if let Runner::Ready(mut worker) = runner {
            let _ = worker.kill_and_reap().await;
        }
        inner.tasks.close();
        inner.tasks.wait().await;
        if let Some(mut template) = inner.template.lock().await.take() {
            let _ = template.kill_and_reap().await;
        }
    }
}

impl Inner {
    fn lock_runner(&self) -> std::sync::MutexGuard<'_, Runner> {
        self.runner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The waiting runner if there is a live one (waiting for it if it is being made,
    /// which is sooner than making another), else a new one.
    async fn take_runner(self: &Arc<Self>) -> std::io::Result<WorkerProcess> {
        loop {
            let changed = self.runner_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            // `None`: a runner is being made; `Some(runner)`: what there is (none if it
            // died while it waited).
            let taken = {
                let mut runner = self.lock_runner();
                match std::mem::replace(&mut *runner, Runner::Empty) {
                    Runner::Ready(mut worker) => Some((!worker.has_exited()).then_some(worker)),
                    Runner::Empty => Some(None),
                    Runner::Starting => {
                        *runner = Runner::Starting;
                        None
                    }
                }
            };
            match taken {
                None => changed.await,
                Some(Some(worker)) => {
                    return Ok(*worker);
                }
                Some(None) => return self.make_runner().await,
            }
        }
    }

    /// Tell the waiting runner, if there is one, that a run is being prepared: it wakes
    /// while the program is stripped.
    fn announce_run(&self) {
        if let Runner::Ready(worker) = &mut *self.lock_runner() {
            worker.announce_run();
        }
    }

    /// Keep `bindings` for the next runner to make ready, unless it has them already.
    fn remember(&self, bindings: &Bindings) {
        let mut last = self
            .last_bindings
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if last.as_ref() != Some(bindings) {
            *last = Some(bindings.clone());
        }
    }

    /// A new runner: a copy of the template, or a worker exec'd when there is no live
    /// template (it becomes the template if it can fork). A copy makes the last run's
    /// bindings ready ahead.
    async fn make_runner(&self) -> std::io::Result<WorkerProcess> {
        let bindings = self
            .last_bindings
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        let mut template = self.template.lock().await;
        if let Some(existing) = template.as_mut()
            && !existing.has_exited()
        {
            match existing.fork(bindings.clone()).await {
                Ok(copy) => {
                    drop(template);
                    return ready(copy).await;
                }
                Err(error) => {
                    tracing::warn!(%error, "the code template could not fork; starting another");
                }
            }
        }
        if let Some(mut old) = template.take() {
            let _ = old.kill_and_reap().await;
        }
        if self.shutdown.is_cancelled() {
            return Err(std::io::Error::other("the code runtime is shut down"));
        }
        let mut worker = WorkerProcess::spawn(&self.command, &self.budgets).await?;
        if !worker.forks {
            return Ok(worker);
        }
        let copy = worker.fork(bindings).await;
        *template = Some(worker);
        drop(template);
        ready(copy?).await
    }

    /// End the "being made" state of the runner slot with `worker` (or none), and wake
    /// the runs waiting for it.
    async fn settle_runner(&self, worker: Option<WorkerProcess>) {
        let unwanted = {
            let mut runner = self.lock_runner();
            *runner = Runner::Empty;
            match worker {
                Some(worker) if !self.shutdown.is_cancelled() => {
                    *runner = Runner::Ready(Box::new(worker));
                    None
                }
                other => other,
            }
        };
        self.runner_changed.notify_waiters();
        if let Some(mut worker) = unwanted {
            let _ = worker.kill_and_reap().await;
        }
    }

    /// [`Self::replenish`] once the run's answer is on its way. A run that comes first
    /// makes its own runner.
    fn replenish_after_the_answer(self: &Arc<Self>) {
        let inner = Arc::clone(self);
        self.tasks.spawn(async move {
            tokio::time::sleep(run::AFTER_THE_ANSWER).await;
            Inner::replenish(&inner);
        });
    }

    /// Make the next runner in the background, unless one exists or is being made.
    fn replenish(self: &Arc<Self>) {
        {
            let mut runner = self.lock_runner();
            if !matches!(*runner, Runner::Empty) || self.shutdown.is_cancelled() {
                return;
            }
            *runner = Runner::Starting;
        }
        let inner = Arc::clone(self);
        self.tasks.spawn(async move {
            let made = inner.make_runner().await;
            if let Err(error) = &made {
                // The next run makes its own runner and tries again.
                tracing::warn!(%error, "could not make the next code runner");
            }
            inner.settle_runner(made.ok()).await;
        });
    }
}

/// `copy` once it has confined itself and is waiting for its run.
async fn ready(mut copy: WorkerProcess) -> std::io::Result<WorkerProcess> {
    copy.wait_ready().await?;
    Ok(copy)
}

fn aborted(message: &str) -> RunOutcome {
    RunOutcome::failed(CodeRunFailure::new(FailureKind::Aborted, message))
}
