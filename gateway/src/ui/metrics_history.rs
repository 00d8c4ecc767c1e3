//! The last hour of the gateway's own call counters, for the console's Metrics page.
//!
//! Every [`INTERVAL`] a sampler reads [`Metrics::snapshot`] (the same numbers `/metrics`
//! serves) and keeps what changed since the previous reading: per tool, calls, errors by
//! code and latency bucket counts. From those deltas the page gets, per interval, calls
//! per second and p50/p99 latency (interpolated within the histogram's buckets, as
//! Prometheus' `histogram_quantile` does), for everything, one server or one tool; and
//! errors by code per tool and per server over the hour.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::gateway::Gateway;
use crate::observe::metrics::Metrics;
use crate::observe::metrics_snapshot::{Snapshot, ToolCounters};
use crate::relay::approvals::unix_ms;

/// How often the counters are read.
pub const INTERVAL: Duration = Duration::from_secs(5);

/// Intervals kept: one hour.
const KEPT: usize = 720;

/// One interval: what changed, for the tools that were called.
struct Sample {
    at_ms: u64,
    seconds: f64,
    changed: Vec<(String, ToolCounters)>,
}

#[derive(Default)]
struct History {
    bounds: Vec<f64>,
    last: Option<(SystemTime, Snapshot)>,
    samples: VecDeque<Sample>,
}

/// The sampled history. Share it with `Arc`.
#[derive(Default)]
pub struct MetricsHistory {
    history: Mutex<History>,
}

impl MetricsHistory {
    /// Takes a first reading now and starts the sampler, which stops with the gateway.
    pub fn start(gateway: &Arc<Gateway>) -> Arc<MetricsHistory> {
        let history = Arc::new(MetricsHistory::default());
        history.sample(gateway.metrics());
        let metrics = gateway.metrics().clone();
        let shutdown = gateway.shutdown_token().clone();
        let weak: Weak<MetricsHistory> = Arc::downgrade(&history);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(INTERVAL);
            ticks.tick().await;
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    _ = ticks.tick() => {
                        let Some(history) = weak.upgrade() else { break };
                        history.sample(&metrics);
                    }
                }
            }
        });
        history
    }

    /// Reads the counters and keeps what changed since the last reading.
    fn sample(&self, metrics: &Metrics) {
        let now = SystemTime::now();
        let snapshot = metrics.snapshot();
        let mut history = self.history.lock().unwrap_or_else(|p| p.into_inner());
        if !snapshot.bounds.is_empty() {
            history.bounds = snapshot.bounds.clone();
        }
        let interval = history.last.as_ref().map(|(then, previous)| {
            let seconds = now
                .duration_since(*then)
                .unwrap_or(INTERVAL)
                .as_secs_f64()
                .max(0.001);
            let changed = snapshot
                .tools
                .iter()
                .filter_map(|(tool, counters)| {
                    let delta = delta(counters, previous.tools.get(tool));
                    (delta.calls > 0).then(|| (tool.clone(), delta))
                })
                .collect();
            (seconds, changed)
        });
        if let Some((seconds, changed)) = interval {
            history.samples.push_back(Sample {
                at_ms: unix_ms(now),
                seconds,
                changed,
            });
            if history.samples.len() > KEPT {
                history.samples.pop_front();
            }
        }
        history.last = Some((now, snapshot));
    }

    /// The page's data for `scope` (`all`, `server:NAME` or `tool:NAME`); `server_of`
    /// names a tool's server.
    pub fn report(&self, scope: Option<&str>, server_of: &dyn Fn(&str) -> String) -> Value {
        let history = self.history.lock().unwrap_or_else(|p| p.into_inner());
        let scope = scope.unwrap_or("all");
        let in_scope = |tool: &str| match scope.split_once(':') {
            Some(("server", server)) => server_of(tool) == server,
            Some(("tool", name)) => tool == name,
            _ => true,
        };
        let mut tools = BTreeSet::new();
        let mut errors_by_tool: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        let mut errors_by_server: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        let mut points = Vec::with_capacity(history.samples.len());
        for sample in &history.samples {
            let mut total = ToolCounters::default();
            for (tool, counters) in &sample.changed {
                tools.insert(tool.clone());
                for (code, n) in &counters.errors {
                    *errors_by_tool
                        .entry(tool.clone())
                        .or_default()
                        .entry(code.clone())
                        .or_default() += n;
                    *errors_by_server
                        .entry(server_of(tool))
                        .or_default()
                        .entry(code.clone())
                        .or_default() += n;
                }
                if in_scope(tool) {
                    add(&mut total, counters);
                }
            }
            let errors: u64 = total.errors.values().sum();
            points.push(json!({
                "at_ms": sample.at_ms,
                "calls_per_s": total.calls as f64 / sample.seconds,
                "calls": total.calls,
                "errors": errors,
                "errors_by_code": total.errors,
                "p50_ms": quantile(&history.bounds, &total.buckets, 0.5),
                "p99_ms": quantile(&history.bounds, &total.buckets, 0.99),
            }));
        }
        let servers: BTreeSet<String> = tools.iter().map(|t| server_of(t)).collect();
        json!({
            "interval_s": INTERVAL.as_secs(),
            "scope": scope,
            "points": points,
            "tools": tools,
            "servers": servers,
            "errors_by_tool": errors_by_tool,
            "errors_by_server": errors_by_server,
        })
    }
}

fn delta(now: &ToolCounters, before: Option<&ToolCounters>) -> ToolCounters {
    let Some(before) = before else {
        return now.clone();
    };
    ToolCounters {
        calls: now.calls.saturating_sub(before.calls),
        errors: now
            .errors
            .iter()
            .map(|(code, n)| {
                let was = before.errors.get(code).copied().unwrap_or(0);
                (code.clone(), n.saturating_sub(was))
            })
            .filter(|(_, n)| *n > 0)
            .collect(),
        buckets: now
            .buckets
            .iter()
            .enumerate()
            .map(|(i, n)| n.saturating_sub(before.buckets.get(i).copied().unwrap_or(0)))
            .collect(),
    }
}

fn add(total: &mut ToolCounters, counters: &ToolCounters) {
    total.calls += counters.calls;
    for (code, n) in &counters.errors {
        *total.errors.entry(code.clone()).or_default() += n;
    }
    if total.buckets.len() < counters.buckets.len() {
        total.buckets.resize(counters.buckets.len(), 0);
    }
    for (sum, n) in total.buckets.iter_mut().zip(&counters.buckets) {
        *sum += n;
    }
}

/// The `q` quantile in milliseconds from cumulative bucket counts (the last bucket is
/// `+Inf`), interpolated linearly within its bucket; `None` without calls.
fn quantile(bounds: &[f64], cumulative: &[u64], q: f64) -> Option<f64> {
    let total = *cumulative.last()?;
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let index = cumulative.iter().position(|&c| c as f64 >= rank)?;
    let Some(&upper) = bounds.get(index) else {
        // Beyond the last bound: all we know is "more than it".
        return bounds.last().map(|b| b * 1000.0);
    };
    let lower = if index == 0 { 0.0 } else { bounds[index - 1] };
    let below = if index == 0 { 0 } else { cumulative[index - 1] };
    let in_bucket = (cumulative[index] - below).max(1) as f64;
    let seconds = lower + (upper - lower) * ((rank - below as f64) / in_bucket);
    Some(seconds * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_within_buckets() {
        let bounds = [0.001, 0.01, 0.1];
        // 10 calls under 1 ms, 10 between 1 and 10 ms, none slower.
        let cumulative = [10, 20, 20, 20];
        let p50 = quantile(&bounds, &cumulative, 0.5).unwrap();
        assert!((p50 - 1.0).abs() < 1e-9, "{p50}");
        let p99 = quantile(&bounds, &cumulative, 0.99).unwrap();
        assert!(p99 > 9.0 && p99 <= 10.0, "{p99}");
        assert_eq!(quantile(&bounds, &[0, 0, 0, 0], 0.5), None);
        assert_eq!(quantile(&bounds, &[0, 0, 0, 5], 0.5), Some(100.0));
    }

    #[test]
    fn samples_keep_what_changed_per_interval() {
        let metrics = Metrics::new();
        let history = MetricsHistory::default();
        history.sample(&metrics);
        metrics.record_call("mcp__kv__get", None, Duration::from_millis(2));
        metrics.record_call("mcp__kv__get", Some("DENIED"), Duration::from_millis(2));
        history.sample(&metrics);
        history.sample(&metrics);
        let server_of = |tool: &str| tool.split("__").nth(1).unwrap_or("").to_owned();
        let report = history.report(Some("server:kv"), &server_of);
        let points = report["points"].as_array().unwrap();
        assert_eq!(points.len(), 2);
        assert_eq!(points[0]["calls"], 2);
        assert_eq!(points[0]["errors_by_code"]["DENIED"], 1);
        assert!(points[0]["p50_ms"].as_f64().unwrap() <= 2.5);
        assert_eq!(points[1]["calls"], 0, "nothing new in the second interval");
        assert_eq!(report["errors_by_server"]["kv"]["DENIED"], 1);
        let other = history.report(Some("server:fs"), &server_of);
        assert_eq!(other["points"][0]["calls"], 0);
    }
}
