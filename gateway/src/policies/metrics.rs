//! The metrics wrapper: counts calls, errors by code and latency per tool, served at
//! `GET /metrics` in Prometheus text format. Outermost, so it sees every retry and the
//! final code.

use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::observe::metrics::Metrics;
use crate::pipeline::{Around, BoxFuture, Invocation, Next, ToolOutcome};

pub struct MetricsWrapper {
    metrics: Arc<Metrics>,
}

impl MetricsWrapper {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self { metrics }
    }
}

impl Around for MetricsWrapper {
    fn around<'a>(
        &'a self,
        invocation: &'a Invocation,
        signal: CancellationToken,
        next: Next<'a>,
    ) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let started = Instant::now();
            let outcome = next.run(signal).await;
            let code = outcome.error_code().map(|c| c.as_str());
            self.metrics
                .record_call(&invocation.tool, code, started.elapsed());
            outcome
        })
    }
}
