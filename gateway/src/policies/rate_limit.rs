//! A guard that caps calls per downstream session in a sliding one-minute window.
//!
//! The window lives in the shared state (`crate::state`), so with several replicas the
//! cap holds for the session as a whole, not per replica; each admission is one atomic
//! step there. When the state cannot be reached the call is refused rather than let
//! through uncounted.
//!
//! ```toml
//! [guards]
//! max_calls_per_minute = 120
//! ```

use std::sync::Arc;
use std::time::Duration;

use crate::pipeline::{BoxFuture, Guard, Invocation};
use crate::state::SharedState;

const WINDOW: Duration = Duration::from_secs(60);

pub struct RateLimit {
    limit: u32,
    state: Arc<dyn SharedState>,
}

impl RateLimit {
    pub fn per_minute(limit: u32, state: Arc<dyn SharedState>) -> Self {
        Self { limit, state }
    }
}

impl Guard for RateLimit {
    fn check<'a>(&'a self, invocation: &'a Invocation) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let admitted = self
                .state
                .admit_call(&invocation.session.id, self.limit, WINDOW)
                .await
                .map_err(|e| format!("rate limit cannot be checked: {e}"))?;
            if admitted {
                Ok(())
            } else {
                Err(format!(
                    "rate limit: at most {} calls per minute per session",
                    self.limit
                ))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::advance;

    use super::*;
    use crate::config::ClusterConfig;
    use crate::pipeline::testing::{Counted, call, failure, registry, session, settings};
    use crate::pipeline::{Pipeline, PipelineBuilder, Target};
    use crate::session::Session;

    /// A pipeline whose one guard is a rate limit of `limit` calls per minute, over the
    /// default (in-memory) shared state.
    async fn limited(limit: u32) -> Pipeline {
        let state = crate::state::open(&ClusterConfig::default()).unwrap();
        PipelineBuilder::default()
            .guard(Arc::new(RateLimit::per_minute(limit, state)))
            .build(registry("").await, settings())
    }

    /// Runs one call of `tool` in `session`: `None` when it went through, else the
    /// gateway's failure `(code, message)`.
    async fn run(
        pipeline: &Pipeline,
        session: &Arc<Session>,
        tool: &Arc<Counted>,
    ) -> Option<(String, String)> {
        failure(
            &pipeline
                .run(&call(session, Target::Builtin(tool.clone())))
                .await,
        )
    }

    /// Past its budget a session's calls are DENIED without being dispatched, until the
    /// oldest call it was allowed leaves the sliding one-minute window; refused calls do
    /// not count.
    #[tokio::test(start_paused = true)]
    async fn calls_past_the_budget_are_denied_until_the_window_moves_on() {
        let pipeline = limited(2).await;
        let (session, tool) = (session("s"), Arc::new(Counted::default()));
        let message = "rate limit: at most 2 calls per minute per session";
        let denied = Some(("DENIED".to_owned(), message.to_owned()));

        assert_eq!(run(&pipeline, &session, &tool).await, None, "at 0 s");
        advance(Duration::from_secs(30)).await;
        assert_eq!(run(&pipeline, &session, &tool).await, None, "at 30 s");
        assert_eq!(run(&pipeline, &session, &tool).await, denied, "at 30 s");
        advance(Duration::from_millis(29_999)).await;
        assert_eq!(run(&pipeline, &session, &tool).await, denied, "at 59.999 s");
        assert_eq!(tool.calls(), 2);

        advance(Duration::from_millis(1)).await;
        assert_eq!(run(&pipeline, &session, &tool).await, None, "at 60 s");
        assert_eq!(run(&pipeline, &session, &tool).await, denied, "at 60 s");
        advance(Duration::from_secs(30)).await;
        assert_eq!(run(&pipeline, &session, &tool).await, None, "at 90 s");
        assert_eq!(tool.calls(), 4);
    }

    /// Each session has a budget of its own.
    #[tokio::test(start_paused = true)]
    async fn each_session_has_its_own_budget() {
        let pipeline = limited(1).await;
        let tool = Arc::new(Counted::default());
        let (a, b) = (session("a"), session("b"));

        assert_eq!(run(&pipeline, &a, &tool).await, None);
        assert!(run(&pipeline, &a, &tool).await.is_some());
        assert_eq!(run(&pipeline, &b, &tool).await, None);
        assert_eq!(tool.calls(), 2);
    }
}
