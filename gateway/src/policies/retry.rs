//! Retries calls whose upstream was unavailable, for tools where repeating is harmless.
//!
//! Only tools annotated `readOnlyHint` or `idempotentHint` are retried, and only when the
//! failure is UPSTREAM_UNAVAILABLE (the server was down or dropped before answering).
//! Attempts are bounded and spaced with doubling backoff; cancellation stops the wait.
//!
//! ```toml
//! [retry]
//! max_attempts = 3   # including the first; 1 disables retry
//! backoff_ms = 200
//! ```

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::RetrySettings;
use crate::pipeline::{Around, BoxFuture, ErrorCode, Invocation, Next, Target, ToolOutcome};

pub struct Retry {
    max_attempts: u32,
    backoff: Duration,
}

impl Retry {
    pub fn new(settings: &RetrySettings) -> Self {
        Self {
            max_attempts: settings.max_attempts.max(1),
            backoff: Duration::from_millis(settings.backoff_ms),
        }
    }
}

impl Around for Retry {
    fn name(&self) -> &'static str {
        "retry"
    }

    fn around<'a>(
        &'a self,
        invocation: &'a Invocation,
        signal: CancellationToken,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome> {
        let retryable = matches!(&invocation.target, Some(Target::Federated(t)) if t.retryable);
        if !retryable || self.max_attempts == 1 {
            return next.run(signal);
        }
        Box::pin(async move {
            let mut outcome = next.run(signal.clone()).await;
            let mut backoff = self.backoff;
            for attempt in 2..=self.max_attempts {
                if outcome.error_code() != Some(ErrorCode::UpstreamUnavailable) {
                    break;
                }
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = signal.cancelled() => break,
                }
                tracing::info!(tool = %invocation.tool, attempt, "retrying after UPSTREAM_UNAVAILABLE");
                outcome = next.run(signal.clone()).await;
                backoff *= 2;
            }
            outcome
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::model::{JsonObject, Tool, ToolAnnotations};
    use tokio::time::Instant;

    use super::*;
    use crate::config::ServerConfig;
    use crate::pipeline::testing::{
        Dispatches, Heard, Upstream, call, failure_code, registry, session, settings, settled,
    };
    use crate::pipeline::{Pipeline, PipelineBuilder};
    use crate::policies::timeout::Timeout;
    use crate::registry::{FederatedTool, Registry};
    use crate::upstream::offer::Listed;

    const UNAVAILABLE: Option<ErrorCode> = Some(ErrorCode::UpstreamUnavailable);

    /// A tool of `gone`, a server the configuration does not have: every call to it fails
    /// with UPSTREAM_UNAVAILABLE, as when its server is down.
    fn tool_of_a_server_that_is_gone(hints: ToolAnnotations) -> Target {
        let definition = Tool::new("read", "reads", Arc::new(JsonObject::new())).annotate(hints);
        let config = ServerConfig::remote_or_empty(None, None);
        let tool = FederatedTool::new(
            "mcp__gone__read",
            &"gone".into(),
            &config,
            &Listed::of_view(definition),
        );
        Target::Federated(Arc::new(tool))
    }

    /// The around chain as the gateway builds it (retry holding timeout), and an observer
    /// of the dispatches.
    fn pipeline(registry: Arc<Registry>, retry: RetrySettings) -> (Pipeline, Arc<Dispatches>) {
        let dispatches = Arc::new(Dispatches::default());
        let pipeline = PipelineBuilder::default()
            .around(Arc::new(Retry::new(&retry)))
            .around(Arc::new(Timeout))
            .observer(dispatches.clone())
            .build(registry, settings());
        (pipeline, dispatches)
    }

    /// A read-only or idempotent tool is dispatched again while its upstream is
    /// unavailable, `max_attempts` times in all, 200 ms and then 400 ms apart; the caller
    /// gets the last failure.
    #[tokio::test(start_paused = true)]
    async fn a_tool_safe_to_repeat_is_retried_up_to_the_limit() {
        let read_only = ToolAnnotations::new().read_only(true);
        let idempotent = ToolAnnotations::new().idempotent(true);
        for hints in [read_only, idempotent] {
            let (pipeline, dispatches) = pipeline(registry("").await, RetrySettings::default());
            let started = Instant::now();

            let result = pipeline
                .run(&call(&session("s"), tool_of_a_server_that_is_gone(hints)))
                .await;

            assert_eq!(
                failure_code(&result).as_deref(),
                Some("UPSTREAM_UNAVAILABLE")
            );
            assert_eq!(dispatches.seen(), [UNAVAILABLE; 3]);
            assert_eq!(started.elapsed(), Duration::from_millis(200 + 400));
        }
    }

    /// A tool that may have effects is dispatched once, and fails at once.
    #[tokio::test(start_paused = true)]
    async fn a_tool_that_may_have_effects_is_not_retried() {
        let unannotated = ToolAnnotations::new();
        let writes = ToolAnnotations::new().read_only(false).idempotent(false);
        for hints in [unannotated, writes] {
            let (pipeline, dispatches) = pipeline(registry("").await, RetrySettings::default());
            let started = Instant::now();

            let result = pipeline
                .run(&call(&session("s"), tool_of_a_server_that_is_gone(hints)))
                .await;

            assert_eq!(
                failure_code(&result).as_deref(),
                Some("UPSTREAM_UNAVAILABLE")
            );
            assert_eq!(dispatches.seen(), [UNAVAILABLE]);
            assert_eq!(started.elapsed(), Duration::ZERO);
        }
    }

    /// `max_attempts = 1` turns retry off (and 0 means the same).
    #[tokio::test(start_paused = true)]
    async fn one_attempt_is_no_retry() {
        for max_attempts in [1, 0] {
            let settings = RetrySettings {
                max_attempts,
                backoff_ms: 200,
            };
            let (pipeline, dispatches) = pipeline(registry("").await, settings);
            let read_only = ToolAnnotations::new().read_only(true);

            pipeline
                .run(&call(
                    &session("s"),
                    tool_of_a_server_that_is_gone(read_only),
                ))
                .await;

            assert_eq!(dispatches.seen(), [UNAVAILABLE]);
        }
    }

    /// The caller cancelling while the retry waits ends the wait, with no further
    /// dispatch; the call keeps its failure.
    #[tokio::test(start_paused = true)]
    async fn cancelling_during_the_backoff_stops_retrying() {
        let (pipeline, dispatches) = pipeline(registry("").await, RetrySettings::default());
        let read_only = ToolAnnotations::new().read_only(true);
        let invocation = call(&session("s"), tool_of_a_server_that_is_gone(read_only));
        let cancel = invocation.cancel.clone();
        let started = Instant::now();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            cancel.cancel();
        });

        let result = pipeline.run(&invocation).await;

        assert_eq!(
            failure_code(&result).as_deref(),
            Some("UPSTREAM_UNAVAILABLE")
        );
        assert_eq!(dispatches.seen(), [UNAVAILABLE]);
        assert_eq!(started.elapsed(), Duration::from_millis(100));
    }

    /// Only an unavailable upstream is retried: a read-only tool whose upstream answers
    /// with an error, or that times out, reaches its upstream once.
    #[tokio::test]
    async fn other_failures_are_not_retried() {
        let mut upstream = Upstream::start().await;
        let config = format!(
            "[servers.up]\nurl = \"{}\"\n[servers.up.tools.hang]\ntimeout_ms = 500\n",
            upstream.url
        );
        let registry = registry(&config).await;
        for (tool, code) in [
            ("refuse", ErrorCode::UpstreamError),
            ("hang", ErrorCode::ToolTimeout),
        ] {
            let (pipeline, dispatches) = pipeline(registry.clone(), RetrySettings::default());
            let definition = registry.catalog().tools[&format!("mcp__up__{tool}")].clone();
            assert!(definition.retryable, "{tool} is read-only");

            let invocation = call(&session("s"), Target::Federated(definition));
            let result = settled(pipeline.run(&invocation)).await;

            assert_eq!(failure_code(&result).as_deref(), Some(code.as_str()));
            assert_eq!(upstream.heard().await, Heard::Started(tool.into()));
            if code == ErrorCode::ToolTimeout {
                assert_eq!(upstream.heard().await, Heard::Cancelled(tool.into()));
            }
            assert_eq!(upstream.heard_more(), None, "{tool} was called again");
            assert_eq!(dispatches.seen().len(), 1);
        }
    }
}
