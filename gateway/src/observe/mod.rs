//! What the gateway records about itself: Prometheus metrics and per-session logs.

pub mod metrics;
pub mod session_log;
