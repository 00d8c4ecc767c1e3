//! What the gateway records about itself: Prometheus metrics (and a numeric snapshot of
//! them), per-session logs, the recent calls across sessions and the open sessions.

pub mod activity;
pub mod metrics;
pub mod metrics_snapshot;
pub mod session_log;
pub mod sessions;
