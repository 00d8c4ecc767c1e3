//! The executor of federated tools: the call goes to the upstream that owns the tool,
//! under the upstream's own name, and its answer comes back with resource links under
//! gateway URIs (unless the server passes its URIs through) and its structured value checked against the tool's output schema.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::invocation::{Executor, Invocation, Target};
use super::outcome::BoxFuture;
use super::{ErrorCode, ToolError, upstream_failure, validate};
use crate::registry::Registry;
use crate::registry::tool::FederatedTool;
use crate::tool_result::ToolResult;
use crate::upstream::UpstreamError;
use crate::upstream::resource_uri;

/// Calls federated tools on their upstreams.
pub struct FederatedExecutor {
    registry: Arc<Registry>,
}

impl FederatedExecutor {
    pub fn new(registry: Arc<Registry>) -> Self {
        Self { registry }
    }
}

/// A federated tool's answer as the client sees it: resource links under gateway URIs
/// (unless the server passes its URIs through), and its value checked against the tool's
/// output schema (OUTPUT_INVALID when it breaks it). For a call's answer, and for the
/// result of an upstream's task.
pub fn finish(
    tool: &FederatedTool,
    rewrite_uris: bool,
    mut result: ToolResult,
) -> Result<ToolResult, ToolError> {
    if rewrite_uris {
        resource_uri::rewrite_links(&tool.server, result.content_mut());
    }
    if !result.is_error() {
        validate::output(tool, result.structured_content())?;
    }
    Ok(result)
}

impl Executor for FederatedExecutor {
    fn call<'a>(
        &'a self,
        invocation: &'a Invocation,
        signal: CancellationToken,
        trace: &'a opentelemetry::Context,
    ) -> BoxFuture<'a, Result<ToolResult, ToolError>> {
        Box::pin(async move {
            let Some(Target::Federated(tool)) = &invocation.target else {
                return Err(ToolError::new(
                    ErrorCode::ToolNotFound,
                    format!("`{}` is not a federated tool", invocation.tool),
                ));
            };
            let mut rewrite_uris = true;
            let called = match self.registry.upstream(&tool.server) {
                Some(upstream) => {
                    rewrite_uris = upstream.config.rewrite_uris;
                    upstream
                        .call_tool(
                            &tool.original,
                            invocation.arguments.clone(),
                            &signal,
                            invocation.caller.clone(),
                            trace,
                        )
                        .await
                }
                None => Err(UpstreamError::Unavailable {
                    server: tool.server.to_string(),
                    reason: "removed from the configuration".into(),
                }),
            };
            let result = called.map_err(upstream_failure)?;
            // A task's handle: its result is finished when `tasks/get` carries it.
            if crate::tasks::handle::is_handle(&result) {
                return Ok(result);
            }
            finish(tool, rewrite_uris, result)
        })
    }
}
