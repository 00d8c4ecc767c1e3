//! Shared pieces of the process-level tests: a fake tool bridge that records what it saw,
//! hand-written bindings, and a runtime whose workers are `mcp-gateway __code-worker`.
#![allow(dead_code, reason = "each test file uses a different subset")]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use mcp_gateway::code::{Bindings, CodeRuntime, RunOutcome, ToolBridge, WorkerCommand};
use mcp_gateway::config::CodeBudgets;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Bindings in the shape sdkgen produces: `(hostCall) => ({ tools, callTool, ToolCallError })`.
pub const BINDINGS: &str = r#"(hostCall) => {
  class ToolCallError extends Error {
    constructor(tool, message) { super(message); this.name = "ToolCallError"; this.tool = tool; }
  }
  const call = async (name, args) => {
    const r = await hostCall(name, args);
    if (r.isError) throw new ToolCallError(name, r.content?.[0]?.text ?? "failed");
    return r.structuredContent ?? r.content;
  };
  const bind = (name) => (args) => call("mcp__t__" + name, args);
  return {
    tools: { t: { echo: bind("echo"), slow: bind("slow"), write: bind("write"), image: bind("image"),
                  fail: bind("fail"), hang: bind("hang"), raw: (a) => hostCall("mcp__t__image", a) } },
    callTool: call,
    ToolCallError,
  };
}"#;

/// One call as the fake bridge saw it.
#[derive(Debug, Clone)]
pub struct CallRecord {
    pub tool: String,
    pub args: Value,
    pub started: Instant,
    pub ended: Option<Instant>,
    pub cancelled: bool,
}

/// A bridge with tools `echo`, `slow` (sleeps `ms`), `write` (exclusive, sleeps `ms`),
/// `image`, `fail` and `hang` (never answers until cancelled).
#[derive(Default)]
pub struct FakeBridge {
    pub calls: Arc<Mutex<Vec<CallRecord>>>,
}

impl FakeBridge {
    pub fn records(&self) -> Vec<CallRecord> {
        self.calls.lock().unwrap().clone()
    }

    /// The most calls that were running at the same moment.
    pub fn max_overlap(&self) -> usize {
        let records = self.records();
        records
            .iter()
            .map(|r| {
                records
                    .iter()
                    .filter(|o| o.started <= r.started && o.ended.is_none_or(|e| e > r.started))
                    .count()
            })
            .max()
            .unwrap_or(0)
    }
}

impl ToolBridge for FakeBridge {
    fn call(
        &self,
        tool: String,
        arguments: Value,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Value> {
        let index = {
            let mut calls = self.calls.lock().unwrap();
            calls.push(CallRecord {
                tool: tool.clone(),
                args: arguments.clone(),
                started: Instant::now(),
                ended: None,
                cancelled: false,
            });
            calls.len() - 1
        };
        let calls = Arc::clone(&self.calls);
        async move {
            let ms = arguments.get("ms").and_then(Value::as_u64).unwrap_or(0);
            let result = match tool.as_str() {
                "mcp__t__echo" => json!({"content": [{"type": "text", "text": arguments.to_string()}], "structuredContent": arguments}),
                "mcp__t__slow" | "mcp__t__write" => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    json!({"content": [], "structuredContent": {"slept": ms}})
                }
                "mcp__t__image" => json!({"content": [
                    {"type": "text", "text": "a chart"},
                    {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
                ]}),
                "mcp__t__fail" => json!({"isError": true, "content": [{"type": "text", "text": "Error: denied by policy"}]}),
                "mcp__t__hang" => {
                    cancel.cancelled().await;
                    calls.lock().unwrap()[index].cancelled = true;
                    json!({"isError": true, "content": [{"type": "text", "text": "Error: cancelled"}]})
                }
                _ => json!({"isError": true, "content": [{"type": "text", "text": "Error: TOOL_NOT_FOUND"}]}),
            };
            calls.lock().unwrap()[index].ended = Some(Instant::now());
            result
        }
        .boxed()
    }

    fn is_concurrency_safe(&self, tool: &str) -> bool {
        tool != "mcp__t__write"
    }
}

pub fn worker() -> WorkerCommand {
    WorkerCommand {
        program: env!("CARGO_BIN_EXE_mcp-gateway").into(),
        args: vec!["__code-worker".to_owned()],
    }
}

pub fn runtime(budgets: CodeBudgets) -> CodeRuntime {
    CodeRuntime::new(worker(), budgets).expect("this kernel confines runs")
}

/// Run `program` with the fake bridge and the test bindings.
pub async fn run_with(rt: &CodeRuntime, bridge: &Arc<FakeBridge>, program: &str) -> RunOutcome {
    rt.run(
        program,
        &Bindings::Script(BINDINGS.into()),
        Arc::clone(bridge) as Arc<dyn ToolBridge>,
        CancellationToken::new(),
    )
    .await
}

pub async fn run(program: &str) -> RunOutcome {
    let rt = runtime(CodeBudgets::default());
    let outcome = run_with(&rt, &Arc::new(FakeBridge::default()), program).await;
    rt.shutdown().await;
    outcome
}

/// Pids of this process's live children (zombies included).
pub fn children() -> Vec<u32> {
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let ppid: u32 = after
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        if ppid == me {
            found.push(pid);
        }
    }
    found
}

/// Waits until `condition` holds, checking every few milliseconds; fails saying `what`
/// did not happen after 30 s.
pub async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} never happened"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until this process has exactly `n` children, for as long as [`until`] waits (a
/// worker's start, the engine loaded by a debug build, can take seconds on a loaded
/// machine); returns the last count.
pub async fn settle_children(n: usize) -> usize {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let count = children().len();
        if count == n || tokio::time::Instant::now() >= deadline {
            return count;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
