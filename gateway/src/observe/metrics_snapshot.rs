//! The gateway's call counters as numbers, read back from the same exposition that
//! `GET /metrics` serves, so the console's charts and a Prometheus scrape can never
//! disagree. (prometheus-client keeps histogram buckets private; its text is the one
//! public view of them.)

use std::collections::BTreeMap;

use super::metrics::Metrics;

/// One tool's counters since the gateway started.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCounters {
    pub calls: u64,
    /// Failed calls by error code.
    pub errors: BTreeMap<String, u64>,
    /// Cumulative latency bucket counts, one per bound of [`Snapshot::bounds`] plus `+Inf`.
    pub buckets: Vec<u64>,
}

/// Every tool's counters at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Latency bucket upper bounds in seconds (without `+Inf`).
    pub bounds: Vec<f64>,
    pub tools: BTreeMap<String, ToolCounters>,
}

impl Metrics {
    /// The call counters now.
    pub fn snapshot(&self) -> Snapshot {
        parse(&self.encode())
    }
}

const CALLS: &str = "mcp_gateway_tool_calls_total";
const ERRORS: &str = "mcp_gateway_tool_errors_total";
const BUCKET: &str = "mcp_gateway_tool_call_duration_seconds_bucket";

fn parse(text: &str) -> Snapshot {
    let mut snapshot = Snapshot::default();
    for line in text.lines() {
        let Some((name, rest)) = line.split_once('{') else {
            continue;
        };
        if ![CALLS, ERRORS, BUCKET].contains(&name) {
            continue;
        }
        let Some((labels, value)) = labels(rest) else {
            continue;
        };
        let Some(value) = value.trim().parse::<f64>().ok().map(|v| v as u64) else {
            continue;
        };
        let Some(tool) = labels.get("tool") else {
            continue;
        };
        let counters = snapshot.tools.entry(tool.clone()).or_default();
        match name {
            CALLS => counters.calls = value,
            ERRORS => {
                if let Some(code) = labels.get("code") {
                    counters.errors.insert(code.clone(), value);
                }
            }
            _ => {
                counters.buckets.push(value);
                let le = labels.get("le").map(String::as_str);
                if let Some(bound) = le.and_then(|le| le.parse::<f64>().ok())
                    && bound.is_finite()
                    && counters.buckets.len() > snapshot.bounds.len()
                {
                    snapshot.bounds.push(bound);
                }
            }
        }
    }
    snapshot
}

/// The label set after `{` up to `}` (values unescaped), and the rest of the line.
fn labels(text: &str) -> Option<(BTreeMap<String, String>, &str)> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Some((labels, after));
        }
        rest = rest.strip_prefix(',').unwrap_or(rest);
        let (key, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                (_, c) => value.push(c),
            }
        };
        labels.insert(key.to_owned(), value);
        rest = &after[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn reads_back_what_was_recorded() {
        let metrics = Metrics::new();
        metrics.record_call("mcp__kv__get", None, Duration::from_micros(500));
        metrics.record_call("mcp__kv__get", Some("DENIED"), Duration::from_millis(30));
        metrics.record_call("odd\"}\nname", Some("TOOL_NOT_FOUND"), Duration::ZERO);
        let snapshot = metrics.snapshot();
        assert_eq!(snapshot.bounds.len(), 16);
        assert_eq!(snapshot.bounds[0], 0.001);
        let kv = &snapshot.tools["mcp__kv__get"];
        assert_eq!(kv.calls, 2);
        assert_eq!(kv.errors["DENIED"], 1);
        assert_eq!(kv.buckets.len(), 17);
        assert_eq!(kv.buckets[0], 1, "one call under 1 ms");
        assert_eq!(kv.buckets[16], 2, "+Inf holds every call");
        assert_eq!(snapshot.tools["odd\"}\nname"].errors["TOOL_NOT_FOUND"], 1);
    }
}
