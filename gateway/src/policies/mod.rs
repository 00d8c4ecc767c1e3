//! Built-in policies: each is a plugin of one pipeline stage, configured in config.toml.
//!
//! | policy | stage | config |
//! |---|---|---|
//! | [`rules::RuleGate`] | gate | `[[policy]]`, `[gate]` |
//! | [`rate_limit::RateLimit`] | guard | `[guards] max_calls_per_minute` |
//! | [`retry::Retry`] | around | `[retry]` |
//! | [`timeout::Timeout`] | around | `timeout_ms` per server or tool |
//! | [`reminder::RepeatReminder`] | post-execute | `[reminder]` |
//! | [`max_bytes::MaxResultBytes`] | finalize | `[gateway] max_result_bytes` |
//! | [`session_log::SessionLogObserver`] | observer | `[log] sessions_dir` |
//! | [`metrics::MetricsObserver`] | observer | always on, `GET /metrics` |

pub mod activity;
pub mod max_bytes;
pub mod metrics;
pub mod rate_limit;
pub mod reminder;
pub mod retry;
pub mod rules;
pub mod session_log;
pub mod timeout;

use std::sync::Arc;

use crate::config::Config;
use crate::observe::metrics::Metrics;
use crate::pipeline::PipelineBuilder;
use crate::state::SharedState;

/// The built-in policies for `config`, registered in pipeline order; per-session counts
/// (rate-limit windows, reminder chains) live in `state`.
pub fn builtin(
    config: &Config,
    metrics: Arc<Metrics>,
    state: Arc<dyn SharedState>,
) -> PipelineBuilder {
    let mut builder =
        PipelineBuilder::default().gate(Arc::new(rules::RuleGate::new(&config.policy)));
    if let Some(limit) = config.guards.max_calls_per_minute {
        builder = builder.guard(Arc::new(rate_limit::RateLimit::per_minute(
            limit,
            state.clone(),
        )));
    }
    builder = builder
        .around(Arc::new(retry::Retry::new(&config.retry)))
        .around(Arc::new(timeout::Timeout));
    if config.reminder.enabled {
        builder = builder.post(Arc::new(reminder::RepeatReminder::new(
            &config.reminder,
            state,
        )));
    }
    builder
        .finalize(Arc::new(max_bytes::MaxResultBytes::new(
            config.gateway.max_result_bytes,
        )))
        .observer(Arc::new(session_log::SessionLogObserver))
        .observer(Arc::new(metrics::MetricsObserver::new(metrics)))
}
