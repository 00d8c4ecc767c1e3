//! `[telemetry]`: where the gateway sends its traces (OTLP/HTTP); `crate::observe::telemetry`
//! sets the exporter up from it.

use serde::{Deserialize, Serialize};

/// `[telemetry]`: where traces go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// Base URL of an OTLP/HTTP collector (like `OTEL_EXPORTER_OTLP_ENDPOINT`); spans are
    /// posted to `<endpoint>/v1/traces`. `${VAR}` is expanded. Default: none (no export).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub otlp_endpoint: Option<String>,
    /// The `service.name` resource attribute. Default `mcp-gateway`.
    pub service_name: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            otlp_endpoint: None,
            service_name: "mcp-gateway".into(),
        }
    }
}
