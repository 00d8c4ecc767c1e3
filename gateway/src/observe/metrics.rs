//! Call metrics for `GET /metrics`: how often each tool is called, how often it fails and
//! with which code, and how long calls take.
//!
//! Three series, per federated tool name, in the Prometheus/OpenMetrics text format:
//! - `mcp_gateway_tool_calls_total{tool}` — every call, failed or not;
//! - `mcp_gateway_tool_errors_total{tool,code}` — failed calls by stable error code;
//! - `mcp_gateway_tool_call_duration_seconds{tool}` — a latency histogram (1 ms … 120 s).
//!
//! Process-wide counters show that per-definition work is not repeated per call:
//! `mcp_gateway_schema_compilations_total` (JSON Schemas compiled for validation),
//! `mcp_gateway_sdk_generations_total` (run_code SDKs generated) and
//! `mcp_gateway_search_index_builds_total` (tool-search indexes built). They grow with
//! catalog changes, never with calls. `mcp_gateway_runtime_alive_tasks` is the number of async
//! tasks alive in the gateway when the metrics are read, so a leak shows as a climb.
//!
//! [`Metrics::record_call`] is on every call's path, so it allocates nothing once a tool has
//! been seen: the tool's counter and histogram handles are cached under a read lock and looked
//! up by `&str`. Failures pay one small allocation for the `{tool,code}` label set.
//!
//! Clients can call tools that do not exist, and every distinct name would otherwise become a
//! series kept forever. So at most [`MAX_TOOL_SERIES`] tool names get their own series; calls
//! to further names are counted under `tool="_other"`.

use std::{
    collections::HashMap,
    sync::{LazyLock, PoisonError, RwLock},
    time::Duration,
};

use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

/// JSON Schemas compiled for validation, in this process.
pub static SCHEMA_COMPILATIONS: LazyLock<Counter> = LazyLock::new(Counter::default);

/// run_code SDKs generated, in this process.
pub static SDK_GENERATIONS: LazyLock<Counter> = LazyLock::new(Counter::default);

/// Tool-search indexes built, in this process.
pub static SEARCH_INDEX_BUILDS: LazyLock<Counter> = LazyLock::new(Counter::default);

/// Tools run through the search model (vectors read from disk do not count), in this
/// process.
pub static SEARCH_TOOL_EMBEDDINGS: LazyLock<Counter> = LazyLock::new(Counter::default);

/// How many distinct tool names get their own series.
pub const MAX_TOOL_SERIES: usize = 2048;

/// The label value that collects calls to tool names beyond [`MAX_TOOL_SERIES`].
pub const OTHER_TOOL: &str = "_other";

/// The `Content-Type` of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Latency bucket bounds in seconds: from a cache hit to a long build.
const DURATION_BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    tool: String,
    code: String,
}

/// A tool's handles into the families; cloning shares the same counters.
#[derive(Clone)]
struct ToolSeries {
    calls: Counter,
    duration: Histogram,
}

type DurationFamily = Family<ToolLabels, Histogram, fn() -> Histogram>;

/// The gateway's call metrics. Share it with `Arc`; every method takes `&self`.
pub struct Metrics {
    registry: Registry,
    calls: Family<ToolLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    durations: DurationFamily,
    /// Tasks alive in the async runtime, set when the metrics are encoded.
    alive_tasks: Gauge,
    /// Handles by tool name, so the hot path needs neither a label allocation nor the
    /// families' own locks.
    seen: RwLock<HashMap<Box<str>, ToolSeries>>,
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("mcp_gateway");
        let calls = Family::<ToolLabels, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let durations: DurationFamily =
            Family::new_with_constructor(|| Histogram::new(DURATION_BUCKETS));
        registry.register(
            "tool_calls",
            "Tool calls received, failed or not",
            calls.clone(),
        );
        registry.register(
            "tool_errors",
            "Tool calls that failed, by error code",
            errors.clone(),
        );
        registry.register(
            "tool_call_duration_seconds",
            "Time from a call's arrival to its result",
            durations.clone(),
        );
        registry.register(
            "schema_compilations",
            "JSON Schemas compiled for argument and result validation",
            SCHEMA_COMPILATIONS.clone(),
        );
        registry.register(
            "sdk_generations",
            "run_code SDKs generated (once per catalog and profile)",
            SDK_GENERATIONS.clone(),
        );
        registry.register(
            "search_index_builds",
            "Tool-search indexes built (once per catalog and profile)",
            SEARCH_INDEX_BUILDS.clone(),
        );
        registry.register(
            "search_tool_embeddings",
            "Tools run through the search model (once per tool definition; kept on disk)",
            SEARCH_TOOL_EMBEDDINGS.clone(),
        );
        let alive_tasks = Gauge::default();
        registry.register(
            "runtime_alive_tasks",
            "Tasks alive in the gateway's async runtime",
            alive_tasks.clone(),
        );
        Self {
            registry,
            calls,
            errors,
            durations,
            alive_tasks,
            seen: RwLock::new(HashMap::new()),
        }
    }

    /// Records one finished call: `outcome_code` is `None` for a success, else the stable
    /// error code (`TOOL_TIMEOUT`, ...).
    pub fn record_call(&self, tool: &str, outcome_code: Option<&str>, latency: Duration) {
        let (series, label) = self.series(tool);
        series.calls.inc();
        series.duration.observe(latency.as_secs_f64());
        if let Some(code) = outcome_code {
            self.errors
                .get_or_create(&ErrorLabels {
                    tool: label.to_owned(),
                    code: code.to_owned(),
                })
                .inc();
        }
    }

    /// The current values in the text exposition format (ends with `# EOF`).
    pub fn encode(&self) -> String {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let alive = runtime.metrics().num_alive_tasks();
            self.alive_tasks
                .set(i64::try_from(alive).unwrap_or(i64::MAX));
        }
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }

    /// The series for `tool` and the label value it is recorded under.
    fn series<'t>(&self, tool: &'t str) -> (ToolSeries, &'t str) {
        {
            let seen = self.seen.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(series) = seen.get(tool) {
                return (series.clone(), tool);
            }
            if seen.len() >= MAX_TOOL_SERIES
                && let Some(other) = seen.get(OTHER_TOOL)
            {
                return (other.clone(), OTHER_TOOL);
            }
        }
        let mut seen = self.seen.write().unwrap_or_else(PoisonError::into_inner);
        // The limit counts real tool names; `_other` itself is the one extra entry.
        let label = if seen.contains_key(tool) || seen.len() < MAX_TOOL_SERIES {
            tool
        } else {
            OTHER_TOOL
        };
        let series = seen
            .entry(label.into())
            .or_insert_with(|| {
                let labels = ToolLabels {
                    tool: label.to_owned(),
                };
                ToolSeries {
                    calls: self.calls.get_or_create_owned(&labels),
                    duration: self.durations.get_or_create_owned(&labels),
                }
            })
            .clone();
        (series, label)
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<&str> {
        text.lines().collect()
    }

    #[test]
    fn series_after_some_calls() {
        let metrics = Metrics::new();
        let fast = Duration::from_micros(500);
        metrics.record_call("mcp__kv__get", None, fast);
        metrics.record_call("mcp__kv__get", None, Duration::from_millis(30));
        metrics.record_call("mcp__kv__get", Some("TOOL_TIMEOUT"), Duration::from_secs(5));
        metrics.record_call("mcp__fs__write", Some("DENIED"), fast);
        let text = metrics.encode();
        let lines = lines(&text);
        for expected in [
            "# TYPE mcp_gateway_tool_calls counter",
            "mcp_gateway_tool_calls_total{tool=\"mcp__kv__get\"} 3",
            "mcp_gateway_tool_calls_total{tool=\"mcp__fs__write\"} 1",
            "# TYPE mcp_gateway_tool_errors counter",
            "mcp_gateway_tool_errors_total{tool=\"mcp__kv__get\",code=\"TOOL_TIMEOUT\"} 1",
            "mcp_gateway_tool_errors_total{tool=\"mcp__fs__write\",code=\"DENIED\"} 1",
            "# TYPE mcp_gateway_tool_call_duration_seconds histogram",
            "mcp_gateway_tool_call_duration_seconds_count{tool=\"mcp__kv__get\"} 3",
            "mcp_gateway_tool_call_duration_seconds_bucket{le=\"0.001\",tool=\"mcp__kv__get\"} 1",
            "mcp_gateway_tool_call_duration_seconds_bucket{le=\"0.05\",tool=\"mcp__kv__get\"} 2",
            "mcp_gateway_tool_call_duration_seconds_bucket{le=\"5.0\",tool=\"mcp__kv__get\"} 3",
            "mcp_gateway_tool_call_duration_seconds_bucket{le=\"+Inf\",tool=\"mcp__kv__get\"} 3",
            "mcp_gateway_tool_call_duration_seconds_count{tool=\"mcp__fs__write\"} 1",
            "# EOF",
        ] {
            assert!(lines.contains(&expected), "missing {expected:?} in\n{text}");
        }
        let sum = lines
            .iter()
            .find_map(|l| {
                l.strip_prefix("mcp_gateway_tool_call_duration_seconds_sum{tool=\"mcp__kv__get\"} ")
            })
            .unwrap();
        assert!((sum.parse::<f64>().unwrap() - 5.0305).abs() < 1e-9, "{sum}");
        assert!(
            !text.contains("mcp__fs__write\",code=\"TOOL_TIMEOUT"),
            "{text}"
        );
    }

    #[test]
    fn nothing_recorded_means_no_series() {
        let text = Metrics::new().encode();
        assert!(!text.contains("tool=\""), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn hostile_tool_names_are_escaped_and_bounded() {
        let metrics = Metrics::new();
        metrics.record_call("evil\"}\nname", Some("TOOL_NOT_FOUND"), Duration::ZERO);
        let text = metrics.encode();
        assert!(
            text.contains("mcp_gateway_tool_calls_total{tool=\"evil\\\"}\\nname\"} 1"),
            "{text}"
        );

        for i in 0..MAX_TOOL_SERIES + 10 {
            metrics.record_call(
                &format!("unknown_{i}"),
                Some("TOOL_NOT_FOUND"),
                Duration::ZERO,
            );
        }
        let text = metrics.encode();
        let call_series = text
            .lines()
            .filter(|l| l.starts_with("mcp_gateway_tool_calls_total{"))
            .count();
        assert_eq!(call_series, MAX_TOOL_SERIES + 1);
        assert!(
            text.contains("mcp_gateway_tool_calls_total{tool=\"_other\"} 11"),
            "{text}"
        );
        // A tool seen before the limit keeps its own series.
        metrics.record_call("unknown_0", None, Duration::ZERO);
        assert!(
            metrics
                .encode()
                .contains("mcp_gateway_tool_calls_total{tool=\"unknown_0\"} 2")
        );
    }
}
