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
