//! The gateway's instruments: Prometheus metrics (and a numeric snapshot of them),
//! per-session logs and OpenTelemetry traces. What records calls with them are the
//! pipeline's result observers (`crate::policies`).

pub mod metrics;
pub mod metrics_snapshot;
pub mod session_log;
pub mod telemetry;
