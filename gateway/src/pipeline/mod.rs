//! The pipeline every tool call goes through, federated or from run_code (spec section
//! Three), in this order:
//!
//! ```text
//! resolve (profile) → gate (allow | deny | ask) → guards → validate arguments
//!   → around wrappers (timeout, retry, metrics) → dispatch (upstream or built-in)
//!   → post-execute → finalize content → result observers
//! ```
//!
//! The order lives in [`Pipeline::run`] and nowhere else. Stages are trait objects
//! registered in order through [`PipelineBuilder`]; built-in policies are plugins of
//! these stages (`crate::policies`).

mod ask;
pub mod error;
mod federated;
pub mod invocation;
pub mod outcome;
pub mod stages;
pub mod trace;
pub mod validate;

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::config::AskFallback;
use crate::registry::Registry;
use crate::registry::view::SessionView;
use crate::upstream::UpstreamError;
pub use error::{ErrorCode, ToolError};
use federated::FederatedExecutor;
pub use invocation::{BuiltinTool, CallRequest, Executor, Invocation, Origin, Session, Target};
pub use outcome::{AdditionalContext, BoxFuture, ContextSource, ToolOutcome};
pub use stages::{
    Around, Finalize, Gate, GateDecision, Guard, PostDecision, PostExecute, ResultObserver,
};
pub use trace::Step;

/// `_meta` key listing the provenance of attached contexts.
pub const CONTEXTS_META_KEY: &str = "mcp-gateway/contexts";

/// The rest of the around chain below one wrapper (ending in dispatch).
#[derive(Clone, Copy)]
pub struct Next<'a> {
    pipeline: &'a Pipeline,
    index: usize,
    invocation: &'a Invocation,
    target: &'a Target,
}

impl<'a> Next<'a> {
    /// Runs the rest of the chain with `signal`, which must be the signal the wrapper
    /// was given or a child of it.
    pub fn run(self, signal: CancellationToken) -> BoxFuture<'a, ToolOutcome> {
        self.pipeline
            .layer(self.index, self.invocation, self.target, signal)
    }
}

/// The stages, in registration order within each stage.
#[derive(Default)]
pub struct PipelineBuilder {
    gates: Vec<Arc<dyn Gate>>,
    guards: Vec<Arc<dyn Guard>>,
    around: Vec<Arc<dyn Around>>,
    post: Vec<Arc<dyn PostExecute>>,
    finalize: Vec<Arc<dyn Finalize>>,
    observers: Vec<Arc<dyn ResultObserver>>,
}

impl PipelineBuilder {
    pub fn gate(mut self, gate: Arc<dyn Gate>) -> Self {
        self.gates.push(gate);
        self
    }
    pub fn guard(mut self, guard: Arc<dyn Guard>) -> Self {
        self.guards.push(guard);
        self
    }
    /// Wrappers registered first are outermost.
    pub fn around(mut self, wrapper: Arc<dyn Around>) -> Self {
        self.around.push(wrapper);
        self
    }
    pub fn post(mut self, post: Arc<dyn PostExecute>) -> Self {
        self.post.push(post);
        self
    }
    pub fn finalize(mut self, finalize: Arc<dyn Finalize>) -> Self {
        self.finalize.push(finalize);
        self
    }
    pub fn observer(mut self, observer: Arc<dyn ResultObserver>) -> Self {
        self.observers.push(observer);
        self
    }

    pub fn build(self, registry: Arc<Registry>, settings: PipelineSettings) -> Pipeline {
        Pipeline {
            stages: self,
            federated: FederatedExecutor::new(registry.clone()),
            registry,
            settings,
        }
    }
}

/// What the pipeline core itself needs from the configuration.
#[derive(Debug, Clone)]
pub struct PipelineSettings {
    pub ask_fallback: AskFallback,
    /// How long a question waits in the console (`ask_fallback = "console"`).
    pub ask_timeout: std::time::Duration,
    /// Where console questions wait; owned by the gateway so reloads keep them.
    pub console_asks: Arc<crate::approvals::ConsoleAsks>,
    pub max_argument_depth: usize,
}

/// Runs tool calls through the stages.
pub struct Pipeline {
    stages: PipelineBuilder,
    /// The executor of every federated tool: its upstream.
    federated: FederatedExecutor,
    registry: Arc<Registry>,
    settings: PipelineSettings,
}

impl Pipeline {
    /// Runs one call end to end and returns what the caller sees.
    pub async fn run(&self, invocation: &Invocation) -> CallToolResult {
        for observer in &self.stages.observers {
            observer.call_started(invocation);
        }
        let pre_aborted = invocation.cancel.is_cancelled();
        let mut outcome = if pre_aborted {
            ToolOutcome::failed(aborted_before_dispatch())
        } else {
            self.execute(invocation).await
        };
        if !pre_aborted {
            self.post_execute(invocation, &mut outcome);
        }
        let (result, error) = self.finalize(outcome);
        for observer in &self.stages.observers {
            observer.result(invocation, error.as_ref(), &result);
        }
        result
    }

    /// Gate, guards, validation, then the around chain over dispatch.
    async fn execute(&self, invocation: &Invocation) -> ToolOutcome {
        let Some(target) = &invocation.target else {
            return ToolOutcome::failed(self.not_found(invocation));
        };
        if let Err(error) = self.admit(invocation).await {
            return ToolOutcome::failed(error);
        }
        if let Target::Federated(tool) = target {
            let validated = validate::arguments(
                tool,
                &invocation.arguments_value(),
                self.settings.max_argument_depth,
            );
            self.trace(invocation, Step::Validated(validated.as_ref().err()));
            if let Err(error) = validated {
                return ToolOutcome::failed(error);
            }
        }
        if invocation.cancel.is_cancelled() {
            return ToolOutcome::failed(aborted_before_dispatch());
        }
        let mut outcome = self
            .layer(0, invocation, target, invocation.cancel.clone())
            .await;
        if invocation.cancel.is_cancelled() && outcome.result.is_ok() {
            outcome.result = Err(ToolError::new(
                ErrorCode::Aborted,
                "the call was cancelled by the client",
            ));
        }
        outcome
    }

    /// Around wrapper `index` (outermost first), or dispatch after the last one.
    fn layer<'a>(
        &'a self,
        index: usize,
        invocation: &'a Invocation,
        target: &'a Target,
        signal: CancellationToken,
    ) -> BoxFuture<'a, ToolOutcome> {
        match self.stages.around.get(index) {
            None => Box::pin(self.dispatch(invocation, target, signal)),
            Some(wrapper) => {
                let next = Next {
                    pipeline: self,
                    index: index + 1,
                    invocation,
                    target,
                };
                wrapper.around(invocation, signal, next)
            }
        }
    }

    /// Why a name resolved to nothing: TOOL_NOT_FOUND, unless it names a visible tool of
    /// a configured upstream that has never come up (its tools are not known yet), which
    /// is UPSTREAM_UNAVAILABLE like any other call to a down server.
    fn not_found(&self, invocation: &Invocation) -> ToolError {
        let down = self.registry.upstreams().into_iter().find(|upstream| {
            invocation
                .tool
                .starts_with(&upstream.config.name_prefix(&upstream.name))
                && upstream.live().is_none()
                && upstream.offer().tools.is_empty()
        });
        let view = SessionView::new(self.registry.catalog(), invocation.session.profile.clone());
        match down {
            Some(upstream) if view.sees_name(&invocation.tool) => {
                upstream_failure(UpstreamError::Unavailable {
                    server: upstream.name.to_string(),
                    reason: upstream.down_reason(),
                })
            }
            _ => ToolError::new(
                ErrorCode::ToolNotFound,
                format!("no tool named `{}` is available", invocation.tool),
            ),
        }
    }

    /// The gate waterfall, then the guards. Nothing after a rejection can undo it.
    async fn admit(&self, invocation: &Invocation) -> Result<(), ToolError> {
        let mut decision = GateDecision::Pass;
        for gate in &self.stages.gates {
            decision = gate.decide(invocation).await;
            if decision != GateDecision::Pass {
                break;
            }
        }
        self.trace(invocation, Step::Gate(&decision));
        match decision {
            GateDecision::Pass | GateDecision::Allow => {}
            GateDecision::Deny { reason } => {
                return Err(ToolError::new(ErrorCode::Denied, reason));
            }
            GateDecision::Ask { reason } => {
                let asked = ask::ask(invocation, &reason, &self.settings).await;
                self.trace(invocation, Step::Asked(asked.as_ref().err()));
                asked?;
            }
        }
        if invocation.cancel.is_cancelled() {
            return Err(aborted_before_dispatch());
        }
        let refused = self
            .stages
            .guards
            .iter()
            .find_map(|guard| guard.check(invocation).err());
        self.trace(invocation, Step::Guards(refused.as_deref()));
        match refused {
            Some(reason) => Err(ToolError::new(ErrorCode::Denied, reason)),
            None => Ok(()),
        }
    }

    /// Tells every observer what a stage decided.
    fn trace(&self, invocation: &Invocation, step: Step<'_>) {
        for observer in &self.stages.observers {
            observer.step(invocation, &step);
        }
    }

    /// Sends the call to its executor: the upstream of a federated tool, or the
    /// gateway's own tool. `signal` is the caller's token or one derived from it by a
    /// wrapper (a child token), so the caller's cancellation always reaches here.
    async fn dispatch(
        &self,
        invocation: &Invocation,
        target: &Target,
        signal: CancellationToken,
    ) -> ToolOutcome {
        let executor: &dyn Executor = match target {
            Target::Federated(_) => &self.federated,
            Target::Builtin(tool) => tool.as_ref(),
        };
        let started = std::time::Instant::now();
        let outcome: ToolOutcome = executor.call(invocation, signal).await.into();
        self.trace(
            invocation,
            Step::Dispatched {
                elapsed: started.elapsed(),
                error: outcome.result.as_ref().err(),
            },
        );
        outcome
    }

    fn post_execute(&self, invocation: &Invocation, outcome: &mut ToolOutcome) {
        for post in &self.stages.post {
            let decision = post.post(invocation, outcome);
            if decision != PostDecision::Pass {
                self.trace(invocation, Step::Post(&decision));
            }
            match decision {
                PostDecision::Pass => {}
                PostDecision::ReplaceContent(content) => {
                    if let Ok(result) = &mut outcome.result {
                        result.content = content;
                    }
                }
                PostDecision::ReplaceValue(value) => {
                    if let Ok(result) = &mut outcome.result {
                        result.structured_content = Some(value);
                    }
                }
                PostDecision::Block { reason } => {
                    outcome.result = Err(ToolError::new(ErrorCode::Denied, reason));
                }
                PostDecision::Attach(contexts) => outcome.contexts.extend(contexts),
            }
        }
    }

    /// Normalizes the outcome into the caller's result: failures rendered, finalizers run
    /// once over the content, then contexts appended after it with their provenance.
    fn finalize(&self, outcome: ToolOutcome) -> (CallToolResult, Option<ToolError>) {
        let (mut result, error) = match outcome.result {
            Ok(result) => (result, None),
            Err(error) => (error.to_result(), Some(error)),
        };
        for finalize in &self.stages.finalize {
            finalize.finalize(&mut result.content);
        }
        if !outcome.contexts.is_empty() {
            let first = result.content.len();
            let provenance: Vec<_> = outcome
                .contexts
                .iter()
                .enumerate()
                .map(|(i, c)| json!({"contentIndex": first + i, "source": c.source}))
                .collect();
            result.content.extend(
                outcome
                    .contexts
                    .into_iter()
                    .map(|c| ContentBlock::text(c.text)),
            );
            result
                .meta
                .get_or_insert_default()
                .insert(CONTEXTS_META_KEY.into(), json!(provenance));
        }
        (result, error)
    }
}

fn aborted_before_dispatch() -> ToolError {
    ToolError::new(
        ErrorCode::AbortedBeforeDispatch,
        "the call was cancelled before it was dispatched",
    )
}

/// The one mapping from upstream failures to stable codes.
pub fn upstream_failure(error: UpstreamError) -> ToolError {
    let code = match &error {
        UpstreamError::Unavailable { .. } => ErrorCode::UpstreamUnavailable,
        UpstreamError::Rejected { .. } | UpstreamError::Protocol { .. } => ErrorCode::UpstreamError,
        UpstreamError::Cancelled { .. } => ErrorCode::Aborted,
    };
    ToolError::new(code, error.to_string())
}
