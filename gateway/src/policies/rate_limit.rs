//! A guard that caps calls per downstream session in a sliding one-minute window.
//!
//! ```toml
//! [guards]
//! max_calls_per_minute = 120
//! ```

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::pipeline::{Guard, Invocation};

const WINDOW: Duration = Duration::from_secs(60);

pub struct RateLimit {
    limit: usize,
}

/// The session's recent call times (kept in the session's policy state).
#[derive(Default, Clone)]
struct Window(VecDeque<Instant>);

impl RateLimit {
    pub fn per_minute(limit: u32) -> Self {
        Self {
            limit: limit as usize,
        }
    }
}

impl Guard for RateLimit {
    fn check(&self, invocation: &Invocation) -> Result<(), String> {
        let now = Instant::now();
        invocation.session.with_state(|window: &mut Window| {
            while window
                .0
                .front()
                .is_some_and(|t| now.duration_since(*t) >= WINDOW)
            {
                window.0.pop_front();
            }
            if window.0.len() >= self.limit {
                return Err(format!(
                    "rate limit: at most {} calls per minute per session",
                    self.limit
                ));
            }
            window.0.push_back(now);
            Ok(())
        })
    }
}
