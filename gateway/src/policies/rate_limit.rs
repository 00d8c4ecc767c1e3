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
