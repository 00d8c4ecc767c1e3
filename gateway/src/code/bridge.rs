//! The seam between a run and the rest of the gateway: how a bound call from the program
//! reaches a tool. The gateway implements [`ToolBridge`] with its pipeline (a nested
//! invocation in the caller's session); this module only calls it.

use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Where the program's tool calls go.
pub trait ToolBridge: Send + Sync + 'static {
    /// One bound call from the program; returns the MCP `CallToolResult` as JSON
    /// (`{content, structuredContent?, isError?, _meta?}`). A call the caller may not make
    /// is an `isError` result, never a panic. `cancel` fires when the run settles first.
    fn call(
        &self,
        tool: String,
        arguments: Value,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Value>;

    /// Whether calls to `tool` may overlap with other concurrency-safe calls.
    fn is_concurrency_safe(&self, tool: &str) -> bool;
}
