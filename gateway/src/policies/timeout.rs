//! The timeout policy (spec section Four): turns a tool's `timeout_ms` into a cooperative
//! deadline.
//!
//! The budget comes from the tool's definition (`[servers.X] timeout_ms` or
//! `[servers.X.tools.T] timeout_ms`); tools without one pass through untouched. On
//! expiry the derived signal is cancelled, which makes the upstream call send
//! `notifications/cancelled` to its server, and the result becomes TOOL_TIMEOUT — decided
//! by whether this wrapper's own timer fired, not by the shape of the result.

use tokio_util::sync::CancellationToken;

use crate::pipeline::{
    Around, BoxFuture, ErrorCode, Invocation, Next, Target, ToolError, ToolOutcome,
};

pub struct Timeout;

impl Around for Timeout {
    fn name(&self) -> &'static str {
        "timeout"
    }

    fn around<'a>(
        &'a self,
        invocation: &'a Invocation,
        signal: CancellationToken,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome> {
        let budget = match &invocation.target {
            Some(Target::Federated(tool)) => tool.timeout,
            _ => None,
        };
        let Some(budget) = budget else {
            return next.run(signal);
        };
        Box::pin(async move {
            let deadline = signal.child_token();
            let call = next.run(deadline.clone());
            tokio::pin!(call);
            let mut outcome = tokio::select! {
                outcome = &mut call => return outcome,
                () = tokio::time::sleep(budget) => {
                    deadline.cancel();
                    call.await
                }
            };
            outcome.result = Err(ToolError::new(
                ErrorCode::ToolTimeout,
                format!("tool call timed out after {}ms", budget.as_millis()),
            ));
            outcome
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::pipeline::error::ERROR_META_KEY;
    use crate::pipeline::testing::{
        Heard, Upstream, call, failure, failure_code, registry, session, settings, settled,
    };
    use crate::pipeline::{Pipeline, PipelineBuilder};

    /// The test upstream as server `up`, with `up_settings` (TOML after `[servers.up]`
    /// `url`); a pipeline with the timeout wrapper; and a call of one of up's tools.
    async fn timed(up_settings: &str) -> (Upstream, Pipeline, impl Fn(&str) -> Invocation) {
        let upstream = Upstream::start().await;
        let config = format!("[servers.up]\nurl = \"{}\"\n{up_settings}", upstream.url);
        let registry = registry(&config).await;
        let pipeline = PipelineBuilder::default()
            .around(Arc::new(Timeout))
            .build(registry.clone(), settings());
        let session = session("s");
        let call_of = move |tool: &str| {
            let definition = registry.catalog().tools[&format!("mcp__up__{tool}")].clone();
            call(&session, Target::Federated(definition))
        };
        (upstream, pipeline, call_of)
    }

    /// A call still running when its tool's `timeout_ms` runs out is cancelled at its
    /// upstream (`notifications/cancelled`), and the caller gets TOOL_TIMEOUT.
    #[tokio::test]
    async fn a_call_past_its_budget_is_cancelled_and_times_out() {
        let (mut upstream, pipeline, call_of) =
            timed("[servers.up.tools.hang]\ntimeout_ms = 500\n").await;

        let invocation = call_of("hang");
        let result = settled(pipeline.run(&invocation)).await;

        let timed_out = (
            "TOOL_TIMEOUT".into(),
            "tool call timed out after 500ms".into(),
        );
        assert_eq!(failure(&result), Some(timed_out));
        let meta = result.meta().unwrap();
        assert_eq!(meta[ERROR_META_KEY]["name"], "ToolTimeoutError");
        assert_eq!(upstream.heard().await, Heard::Started("hang".into()));
        assert_eq!(upstream.heard().await, Heard::Cancelled("hang".into()));
        assert!(
            !invocation.cancel.is_cancelled(),
            "the deadline is the dispatch's own signal, not the caller's"
        );
    }

    /// The caller's own cancellation inside the budget is ABORTED, not TOOL_TIMEOUT: the
    /// code says whose clock ran out. The upstream is told all the same.
    #[tokio::test]
    async fn the_callers_cancellation_is_not_a_timeout() {
        let (mut upstream, pipeline, call_of) = timed("timeout_ms = 600000\n").await;
        let invocation = call_of("hang");

        let cancel_once_started = async {
            assert_eq!(upstream.heard().await, Heard::Started("hang".into()));
            invocation.cancel.cancel();
        };
        let both = futures::future::join(pipeline.run(&invocation), cancel_once_started);
        let (result, ()) = settled(both).await;

        assert_eq!(failure_code(&result).as_deref(), Some("ABORTED"));
        assert_eq!(upstream.heard().await, Heard::Cancelled("hang".into()));
    }

    /// An answer within the budget is the caller's, a failure included.
    #[tokio::test]
    async fn an_answer_within_the_budget_is_kept() {
        let (_upstream, pipeline, call_of) = timed("timeout_ms = 600000\n").await;

        let echoed = pipeline.run(&call_of("echo")).await;
        let refused = pipeline.run(&call_of("refuse")).await;

        assert_eq!(failure(&echoed), None);
        assert_eq!(echoed.content()[0].as_text(), Some("echo"));
        assert_eq!(failure_code(&refused).as_deref(), Some("UPSTREAM_ERROR"));
    }
}
