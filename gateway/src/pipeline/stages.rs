//! The pipeline's extension points, one small trait per stage (spec section Three).
//!
//! Built-in policies (`crate::policies`) implement these; a library user can register
//! their own with [`super::PipelineBuilder`].

use tokio_util::sync::CancellationToken;

use super::Next;
use super::error::ToolError;
use super::invocation::Invocation;
use super::outcome::{BoxFuture, GateDecision, PostDecision, ToolOutcome};
use super::trace::Step;
use crate::tool_result::{Block, ToolResult};

/// tools/pre-execute: a waterfall of gates; the first decision other than `Pass` wins.
pub trait Gate: Send + Sync {
    fn decide<'a>(&'a self, invocation: &'a Invocation) -> BoxFuture<'a, GateDecision>;
}

/// A guard: returning a reason rejects the call (DENIED). Guards run after the gate and
/// nothing later can turn their rejection back. Asynchronous because what a guard counts
/// may be shared by several replicas (`crate::state`).
pub trait Guard: Send + Sync {
    fn check<'a>(&'a self, invocation: &'a Invocation) -> BoxFuture<'a, Result<(), String>>;
}

/// tools/execute: an around-dispatch wrapper (timeout, retry, metrics). It may replace
/// only the signal it hands to `next`, and may replace the outcome it gets back. It may
/// run `next` more than once (retry).
pub trait Around: Send + Sync {
    /// Names the wrapper's span (`around <name>`).
    fn name(&self) -> &'static str;
    fn around<'a>(
        &'a self,
        invocation: &'a Invocation,
        signal: CancellationToken,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome>;
}

/// tools/post-execute: a waterfall over the outcome; runs for rejected calls too.
/// Asynchronous for the same reason as [`Guard`].
pub trait PostExecute: Send + Sync {
    /// What this stage can work out from the invocation alone, started as the call
    /// starts, so that a round trip it needs (to the shared state, say) overlaps the call
    /// instead of following it; handed to [`PostExecute::post`]. Default: nothing.
    fn prepare<'a>(&'a self, _invocation: &'a Invocation) -> BoxFuture<'a, Prepared> {
        Box::pin(std::future::ready(None))
    }

    fn post<'a>(
        &'a self,
        invocation: &'a Invocation,
        outcome: &'a ToolOutcome,
        prepared: Prepared,
    ) -> BoxFuture<'a, PostDecision>;
}

/// What a [`PostExecute::prepare`] found, for the same stage's `post`.
pub type Prepared = Option<Box<dyn std::any::Any + Send>>;

/// finalizeContent: runs exactly once per result, failures included; synchronous and
/// total; may only replace content.
pub trait Finalize: Send + Sync {
    fn finalize(&self, content: &mut Vec<Block>);
}

/// tools/result: sees the final result, cannot change it. Also told when a call starts,
/// and what each stage decided on the way ([`Step`]).
pub trait ResultObserver: Send + Sync {
    fn call_started(&self, _invocation: &Invocation) {}
    fn step(&self, _invocation: &Invocation, _step: &Step<'_>) {}
    /// `error` is the gateway's own failure, if the call failed here.
    fn result(&self, invocation: &Invocation, error: Option<&ToolError>, result: &ToolResult);
}
