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
//!
//! Each call is one trace span with a child span per stage, named as in the drawing
//! above (`gate`, `guards`, `validate`, `around <wrapper>`, `dispatch`, `post_execute`,
//! `finalize`); see `crate::observe::telemetry`.

mod ask;
pub mod error;
pub mod federated;
pub mod invocation;
pub mod outcome;
pub mod stages;
#[cfg(test)]
pub(crate) mod testing;
pub mod trace;
pub mod validate;

use std::sync::Arc;

use opentelemetry::trace::SpanKind;
use opentelemetry::{Context, KeyValue};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::config::AskFallback;
use crate::observe::telemetry::{self, Tracer, attribute};
use crate::registry::Registry;
use crate::registry::pins::Hold;
use crate::registry::view::SessionView;
use crate::tool_result::{Block, ToolResult};
use crate::upstream::UpstreamError;
pub use error::{ErrorCode, ToolError};
use federated::FederatedExecutor;
pub use invocation::{BuiltinTool, CallRequest, Executor, Invocation, Origin, Target};
pub use outcome::{
    AdditionalContext, BoxFuture, ContextSource, GateDecision, PostDecision, ToolOutcome,
};
pub use stages::{Around, Finalize, Gate, Guard, PostExecute, Prepared, ResultObserver};
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
    /// The wrapper's span: the parent of what runs below it.
    trace: &'a Context,
}

impl<'a> Next<'a> {
    /// Runs the rest of the chain with `signal`, which must be the signal the wrapper
    /// was given or a child of it.
    pub fn run(self, signal: CancellationToken) -> BoxFuture<'a, ToolOutcome> {
        self.pipeline.layer(
            self.index,
            self.invocation,
            self.target,
            signal,
            self.trace.clone(),
        )
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
    pub console_asks: Arc<crate::relay::approvals::ConsoleAsks>,
    pub max_argument_depth: usize,
    /// Where the spans of each call go (nowhere by default).
    pub tracer: Tracer,
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
    pub async fn run(&self, invocation: &Invocation) -> ToolResult {
        let call = self.call_span(invocation);
        for observer in &self.stages.observers {
            observer.call_started(invocation);
        }
        let outcome = if invocation.cancel.is_cancelled() {
            ToolOutcome::failed(aborted_before_dispatch())
        } else {
            // Post-execute stages prepare while the call runs.
            let prepare = self.stages.post.iter().map(|post| post.prepare(invocation));
            let (mut outcome, prepared) = futures::join!(
                self.execute(invocation, &call),
                futures::future::join_all(prepare)
            );
            let span = self.settings.tracer.stage("post_execute", &call);
            self.post_execute(invocation, &mut outcome, prepared).await;
            telemetry::end(&span);
            outcome
        };
        let (result, error) = self.in_span("finalize", &call, || self.finalize(outcome));
        for observer in &self.stages.observers {
            observer.result(invocation, error.as_ref(), &result);
        }
        if let Some(error) = &error {
            telemetry::record_error(&call, error.code.as_str(), &error.message);
        }
        telemetry::end(&call);
        result
    }

    /// Gate, guards, validation, then the around chain over dispatch.
    async fn execute(&self, invocation: &Invocation, call: &Context) -> ToolOutcome {
        let Some(target) = &invocation.target else {
            return ToolOutcome::failed(self.not_found(invocation));
        };
        // A definition waiting for an operator is not run, nor asked about.
        if let Target::Federated(tool) = target
            && let Some(hold) = &tool.hold
        {
            return ToolOutcome::failed(held(hold, &invocation.tool));
        }
        if let Err(error) = self.admit(invocation, call).await {
            return ToolOutcome::failed(error);
        }
        if let Target::Federated(tool) = target {
            let validated = self.in_span("validate", call, || {
                validate::arguments(
                    tool,
                    &invocation.arguments_value(),
                    self.settings.max_argument_depth,
                )
            });
            self.trace(invocation, Step::Validated(validated.as_ref().err()));
            if let Err(error) = validated {
                return ToolOutcome::failed(error);
            }
        }
        if invocation.cancel.is_cancelled() {
            return ToolOutcome::failed(aborted_before_dispatch());
        }
        let mut outcome = self
            .layer(
                0,
                invocation,
                target,
                invocation.cancel.clone(),
                call.clone(),
            )
            .await;
        if invocation.cancel.is_cancelled() && outcome.result.is_ok() {
            outcome.result = Err(ToolError::new(
                ErrorCode::Aborted,
                "the call was cancelled by the client",
            ));
        }
        outcome
    }

    /// Around wrapper `index` (outermost first), or dispatch after the last one; each in
    /// its own span under `parent`.
    fn layer<'a>(
        &'a self,
        index: usize,
        invocation: &'a Invocation,
        target: &'a Target,
        signal: CancellationToken,
        parent: Context,
    ) -> BoxFuture<'a, ToolOutcome> {
        match self.stages.around.get(index) {
            None => Box::pin(self.dispatch(invocation, target, signal, parent)),
            Some(wrapper) => Box::pin(async move {
                let span = self.settings.tracer.start(SpanKind::Internal, &parent, || {
                    (format!("around {}", wrapper.name()), Vec::new())
                });
                let next = Next {
                    pipeline: self,
                    index: index + 1,
                    invocation,
                    target,
                    trace: &span,
                };
                let outcome = wrapper.around(invocation, signal, next).await;
                end_with(&span, &outcome);
                outcome
            }),
        }
    }

    /// The span of one call, under the caller's trace context.
    fn call_span(&self, invocation: &Invocation) -> Context {
        self.settings
            .tracer
            .start(SpanKind::Server, &invocation.trace, || {
                let server = match &invocation.target {
                    Some(Target::Federated(tool)) => tool.server.to_string(),
                    Some(Target::Builtin(_)) => "gateway".to_owned(),
                    None => String::new(),
                };
                let mut attributes = vec![
                    KeyValue::new(attribute::METHOD, "tools/call"),
                    KeyValue::new(attribute::TOOL, invocation.tool.clone()),
                    KeyValue::new(attribute::SERVER, server),
                    KeyValue::new(attribute::PROFILE, invocation.session.profile.name.clone()),
                    KeyValue::new(attribute::SESSION, invocation.session.id.clone()),
                ];
                if let Origin::Code { run } = &invocation.origin {
                    attributes.push(KeyValue::new(attribute::RUN, run.clone()));
                }
                if let Some(identity) = invocation.identity() {
                    attributes.push(KeyValue::new(attribute::IDENTITY, identity.to_owned()));
                }
                (format!("tools/call {}", invocation.tool), attributes)
            })
    }

    /// Runs a synchronous stage in a span of its own under `parent`.
    fn in_span<T>(&self, name: &'static str, parent: &Context, stage: impl FnOnce() -> T) -> T {
        let span = self.settings.tracer.stage(name, parent);
        let value = stage();
        telemetry::end(&span);
        value
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
        if let Some(hold) = view.withheld(&invocation.tool) {
            return held(hold, &invocation.tool);
        }
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
    async fn admit(&self, invocation: &Invocation, call: &Context) -> Result<(), ToolError> {
        let gate = self.settings.tracer.stage("gate", call);
        let admitted = self.gate(invocation, &gate).await;
        if let Err(error) = &admitted {
            telemetry::record_error(&gate, error.code.as_str(), &error.message);
        }
        telemetry::end(&gate);
        admitted?;
        if invocation.cancel.is_cancelled() {
            return Err(aborted_before_dispatch());
        }
        let span = self.settings.tracer.stage("guards", call);
        let mut refused = None;
        for guard in &self.stages.guards {
            if let Err(reason) = guard.check(invocation).await {
                refused = Some(reason);
                break;
            }
        }
        telemetry::end(&span);
        self.trace(invocation, Step::Guards(refused.as_deref()));
        match refused {
            Some(reason) => Err(ToolError::new(ErrorCode::Denied, reason)),
            None => Ok(()),
        }
    }

    /// The first gate decision other than `Pass` wins; asking the person happens here.
    /// The decision is recorded on the gate's span and told to the observers.
    async fn gate(&self, invocation: &Invocation, span: &Context) -> Result<(), ToolError> {
        let mut decision = GateDecision::Pass;
        for gate in &self.stages.gates {
            decision = gate.decide(invocation).await;
            if decision != GateDecision::Pass {
                break;
            }
        }
        self.trace(invocation, Step::Gate(&decision));
        let label = match &decision {
            GateDecision::Pass | GateDecision::Allow => "allow",
            GateDecision::Deny { .. } => "deny",
            GateDecision::Ask { .. } => "ask",
        };
        {
            use opentelemetry::trace::TraceContextExt;
            span.span()
                .set_attribute(KeyValue::new(attribute::GATE_DECISION, label));
        }
        match decision {
            GateDecision::Pass | GateDecision::Allow => Ok(()),
            GateDecision::Deny { reason } => Err(ToolError::new(ErrorCode::Denied, reason)),
            GateDecision::Ask { reason } => {
                // Boxed: asking is rare and its future large; inline, every call's future
                // would carry it.
                let asked = Box::pin(ask::ask(invocation, &reason, &self.settings)).await;
                self.trace(invocation, Step::Asked(asked.as_ref().err()));
                asked
            }
        }
    }

    /// Whether the gate still lets `invocation` through, for a request about work it let
    /// through before (a task's `tasks/get`, `tasks/update`, `tasks/cancel`): a rule that
    /// denies it now refuses the request. Nobody is asked again: the person answered when
    /// the work began, and a client polling would ask them at every poll.
    pub async fn gate_again(&self, invocation: &Invocation) -> Result<(), ToolError> {
        for gate in &self.stages.gates {
            match gate.decide(invocation).await {
                GateDecision::Pass => continue,
                GateDecision::Deny { reason } => {
                    return Err(ToolError::new(ErrorCode::Denied, reason));
                }
                GateDecision::Allow | GateDecision::Ask { .. } => return Ok(()),
            }
        }
        Ok(())
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
        parent: Context,
    ) -> ToolOutcome {
        let span = self
            .settings
            .tracer
            .start(SpanKind::Client, &parent, || ("dispatch", Vec::new()));
        let executor: &dyn Executor = match target {
            Target::Federated(_) => &self.federated,
            Target::Builtin(tool) => tool.as_ref(),
        };
        let started = std::time::Instant::now();
        let outcome: ToolOutcome = executor.call(invocation, signal, &span).await.into();
        end_with(&span, &outcome);
        self.trace(
            invocation,
            Step::Dispatched {
                elapsed: started.elapsed(),
                error: outcome.result.as_ref().err(),
            },
        );
        outcome
    }

    async fn post_execute(
        &self,
        invocation: &Invocation,
        outcome: &mut ToolOutcome,
        prepared: Vec<Prepared>,
    ) {
        for (post, prepared) in self.stages.post.iter().zip(prepared) {
            let decision = post.post(invocation, outcome, prepared).await;
            if decision != PostDecision::Pass {
                self.trace(invocation, Step::Post(&decision));
            }
            match decision {
                PostDecision::Pass => {}
                PostDecision::ReplaceContent(content) => {
                    if let Ok(result) = &mut outcome.result {
                        *result.content_mut() = content;
                    }
                }
                PostDecision::ReplaceValue(value) => {
                    if let Ok(result) = &mut outcome.result {
                        result.set_structured_content(value);
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
    fn finalize(&self, outcome: ToolOutcome) -> (ToolResult, Option<ToolError>) {
        let (mut result, error) = match outcome.result {
            Ok(result) => (result, None),
            Err(error) => (error.to_result(), Some(error)),
        };
        for finalize in &self.stages.finalize {
            finalize.finalize(result.content_mut());
        }
        if !outcome.contexts.is_empty() {
            let first = result.content().len();
            let provenance: Vec<_> = outcome
                .contexts
                .iter()
                .enumerate()
                .map(|(i, c)| json!({"contentIndex": first + i, "source": c.source}))
                .collect();
            result
                .content_mut()
                .extend(outcome.contexts.into_iter().map(|c| Block::text(c.text)));
            result
                .meta_mut()
                .insert(CONTEXTS_META_KEY.into(), json!(provenance));
        }
        (result, error)
    }
}

/// Ends a stage span, recording the failure it produced, if any.
fn end_with(span: &Context, outcome: &ToolOutcome) {
    if let Err(error) = &outcome.result {
        telemetry::record_error(span, error.code.as_str(), &error.message);
    }
    telemetry::end(span);
}

fn aborted_before_dispatch() -> ToolError {
    ToolError::new(
        ErrorCode::AbortedBeforeDispatch,
        "the call was cancelled before it was dispatched",
    )
}

/// The refusal of a call of `tool`, whose definition is held for approval: the reasons
/// are in the message and in `detail` (`{server, tool, reasons: [{code, text}]}`).
fn held(hold: &Hold, tool: &str) -> ToolError {
    let reasons: Vec<serde_json::Value> = hold
        .reasons
        .iter()
        .map(|reason| json!({"code": reason.code(), "text": reason.to_string()}))
        .collect();
    ToolError::new(ErrorCode::ToolDefinitionChanged, hold.explain(tool))
        .with_detail(json!({"server": hold.server, "tool": hold.tool, "reasons": reasons}))
}

/// The one mapping from upstream failures to stable codes.
pub fn upstream_failure(error: UpstreamError) -> ToolError {
    let code = match &error {
        UpstreamError::Unavailable { .. } => ErrorCode::UpstreamUnavailable,
        UpstreamError::Rejected { .. } | UpstreamError::Protocol { .. } => ErrorCode::UpstreamError,
        UpstreamError::Cancelled { .. } => ErrorCode::Aborted,
        UpstreamError::SignInRequired { .. } => ErrorCode::SignInRequired,
        UpstreamError::SignInFailed { .. } => ErrorCode::SignInFailed,
    };
    let detail = match &error {
        UpstreamError::Rejected { error, .. } => ToolError::for_the_client(error),
        UpstreamError::SignInRequired { server, url } => {
            Some(serde_json::json!({"server": server, "url": url}))
        }
        UpstreamError::SignInFailed { server, reason, .. } => {
            Some(serde_json::json!({"server": server, "reason": reason}))
        }
        _ => None,
    };
    let failure = ToolError::new(code, error.to_string());
    match detail {
        Some(detail) => failure.with_detail(detail),
        None => failure,
    }
}

#[cfg(test)]
mod tests;
