//! What the gateway records about itself: Prometheus metrics, per-session logs and
//! OpenTelemetry traces.

pub mod metrics;
pub mod session_log;
pub mod telemetry;
