//! `run_code`'s runtime: TypeScript programs run in a fresh JavaScript runtime (deno_core
//! on QuickJS) inside a worker process of their own, with budgets, and with tool calls
//! bridged back to the gateway.
//!
//! Why a process per run and not a thread: guest code that reaches an engine op such as
//! `op_panic` aborts its whole process, and `terminate_execution` cannot interrupt a
//! program awaiting a slow op. A process can always be killed, and a killed process takes
//! nothing else with it. Why forked: a process is made by copying an idle, pristine one
//! (a fork) instead of starting the engine (tens of milliseconds). The pieces:
//!
//! - `strip`: TypeScript → JavaScript on the host (erasable syntax only), and positions
//!   mapped back to the model's code; `deep_stack`: the stack it recurses on.
//! - `runtime`: [`CodeRuntime`], which keeps the next worker ready ahead of time.
//! - `process`: exec'ing, copying, measuring, killing and reaping worker processes.
//! - `template`: inside an idle worker: making copies of itself for the next runs.
//! - `warm`: the memory of waiting workers: a runner copies what it shares with the
//!   template before its run.
//! - `confine`: the kernel's walls around a run's process (rlimits, no_new_privs,
//!   Landlock, seccomp).
//! - `run`: one run seen from the host: budgets, logs, tool calls, settling.
//! - `scheduler`: which tool calls may run at once.
//! - `protocol`: the newline-delimited JSON spoken over the worker's pipes.
//! - `worker`: inside the worker process ([`worker_main`]); `prelude.js` is the
//!   program's world.
//! - `link`: the worker's two ends of its socket: the channel it reads before its run,
//!   the link its run writes on.
//! - `probe`: [`confinement_probe_main`], the same worker reporting its walls (the calls
//!   it was refused, its limits) instead of running the program (for tests).
//! - `bridge`: [`ToolBridge`], how the gateway serves the program's tool calls.
//! - `budgets`, `outcome`, `attachments`: limits, results, and images.
//! - [`tool`]: the reserved `run_code` tool itself, which reaches the gateway only
//!   through the narrow [`tool::ToolHost`] trait.
//! - `hints`: what a failed program named that its session lacks.

mod attachments;
mod bridge;
mod budgets;
mod confine;
mod deep_stack;
mod hints;
mod link;
mod outcome;
mod probe;
mod process;
mod protocol;
mod run;
mod runtime;
mod scheduler;
mod strip;
mod template;
pub mod tool;
mod warm;
mod worker;

pub use bridge::ToolBridge;
pub use confine::{ConfinementMissing, ConfinementSupport, support as confinement_support};
pub use outcome::{CodeRunFailure, FailureKind, RunOutcome};
pub use probe::{THREADED_PROBE, confinement_probe_main};
pub use process::WorkerCommand;
pub use protocol::Bindings;
pub use runtime::CodeRuntime;
pub use strip::strip_types;
pub use worker::worker_main;
