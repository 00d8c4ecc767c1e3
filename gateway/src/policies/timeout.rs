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
