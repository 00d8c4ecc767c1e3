//! The metrics policy: counts calls, errors by code and latency per tool, served at
//! `GET /metrics`. It observes final results rather than wrapping dispatch, so calls
//! refused before dispatch (TOOL_NOT_FOUND, DENIED, INVALID_ARGS) are counted too — an
//! around wrapper never sees them. Latency runs from the call's arrival to its result.

use std::sync::Arc;

use crate::observe::metrics::Metrics;
use crate::pipeline::{Invocation, ResultObserver, ToolError};
use crate::tool_result::ToolResult;

pub struct MetricsObserver {
    metrics: Arc<Metrics>,
}

impl MetricsObserver {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self { metrics }
    }
}

impl ResultObserver for MetricsObserver {
    fn result(&self, invocation: &Invocation, error: Option<&ToolError>, _result: &ToolResult) {
        self.metrics.record_call(
            &invocation.tool,
            error.map(|e| e.code.as_str()),
            invocation.started.elapsed(),
        );
    }
}
