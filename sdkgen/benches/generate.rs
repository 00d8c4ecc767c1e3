//! Benchmark: the SDK for 5,000 synthetic tools (the target is under 50 ms).
//! Run with `cargo bench -p sdkgen`; prints the fastest and median of several runs
//! (`SDKGEN_BENCH_RUNS`, default 15).

use std::hint::black_box;
use std::time::{Duration, Instant};

use sdkgen::{Options, ToolSpec, generate};
use serde_json::json;

/// 5,000 tools on 50 servers with realistic schemas: scalars with ranges and defaults,
/// enums, arrays of objects, a nested object, a shared `$defs` type on every fifth tool,
/// and an output schema on every other one.
fn synthetic_tools() -> Vec<ToolSpec> {
    (0..5_000)
        .map(|i| {
            let server = format!("server{:02}", i % 50);
            let name = format!("tool-{i:04}");
            let mut input = json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for", "minLength": 1},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
                    "mode": {"type": "string", "enum": ["fast", "thorough", "exhaustive"]},
                    "filters": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"field": {"type": "string"}, "value": {"type": ["string", "number", "null"]}},
                        "required": ["field", "value"]
                    }},
                    "options": {"type": "object", "properties": {
                        "caseSensitive": {"type": "boolean", "default": false},
                        "tags": {"type": "array", "items": {"type": "string"}}
                    }}
                },
                "required": ["query"]
            });
            if i % 5 == 0 {
                input["properties"]["parent"] = json!({"$ref": "#/$defs/Node"});
                input["$defs"] = json!({"Node": {"type": "object", "properties": {
                    "id": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
                }, "required": ["id"]}});
            }
            let output = (i % 2 == 0).then(|| {
                json!({"type": "object", "properties": {
                    "items": {"type": "array", "items": {"type": "object", "properties": {
                        "id": {"type": "string"}, "score": {"type": "number"}}, "required": ["id"]}},
                    "total": {"type": "integer"}
                }, "required": ["items", "total"]})
            });
            ToolSpec {
                federated_name: format!("mcp__{server}__{name}"),
                server,
                name,
                title: None,
                description: Some(format!(
                    "Synthetic tool number {i}. Searches the records of its server for entries \
                     that match the query, applies the filters in order and returns at most \
                     `limit` results, best first."
                )),
                input_schema: input,
                output_schema: output,
                annotations: Some(json!({"readOnlyHint": i % 3 == 0, "destructiveHint": i % 7 == 0})),
            }
        })
        .collect()
}

fn main() {
    let tools = synthetic_tools();
    let options = Options::default();
    let mut times: Vec<Duration> = Vec::new();
    let mut size = 0;
    let runs: usize = std::env::var("SDKGEN_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(15)
        .max(1);
    for _ in 0..runs {
        let start = Instant::now();
        let sdk = black_box(generate(black_box(&tools), &options));
        times.push(start.elapsed());
        size = sdk.declarations.chars().count() + sdk.bindings.chars().count();
    }
    times.sort();
    println!(
        "sdkgen: {} tools, SDK {} chars: fastest {:.1} ms, median {:.1} ms",
        tools.len(),
        size,
        times[0].as_secs_f64() * 1e3,
        times[times.len() / 2].as_secs_f64() * 1e3
    );
}
