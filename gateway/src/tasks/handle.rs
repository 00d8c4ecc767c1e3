//! An upstream's task handle on its way through the pipeline.
//!
//! The pipeline's stages deal in tool results. When an upstream answers a call with a
//! task (`CreateTaskResult`), that answer is the call's success: the stages before
//! dispatch ran, the timeout and retry wrappers see a call that answered (so a task is
//! never retried, and its work is not timed), and the handle rides in the result's `_meta`
//! under [`HANDLE_META_KEY`] with no content, no value to validate (its terminal result is
//! validated when `tasks/get` carries it). The session core takes it out again
//! ([`carried`]) and answers the client with the handle itself. An upstream's own result
//! never reaches the pipeline with this key (see [`crate::upstream::forwarded`]), so no
//! server can make a result pass for a task.

use rmcp::model::CreateTaskResult;
use serde_json::json;

use crate::tool_result::ToolResult;

/// The `_meta` key of a result that carries a task handle.
pub const HANDLE_META_KEY: &str = "mcp-gateway/task";

/// A result that carries `task`, created by the upstream `server`.
pub fn carry(server: &str, task: &CreateTaskResult) -> ToolResult {
    let mut result = ToolResult::success(Vec::new());
    result.meta_mut().insert(
        HANDLE_META_KEY.into(),
        json!({"server": server, "task": task}),
    );
    result
}

/// The upstream and the task handle `result` carries, if it carries one.
pub fn carried(result: &ToolResult) -> Option<(String, CreateTaskResult)> {
    let handle = result.meta()?.get(HANDLE_META_KEY)?;
    let server = handle.get("server")?.as_str()?.to_owned();
    let task = serde_json::from_value(handle.get("task")?.clone()).ok()?;
    Some((server, task))
}

/// Whether `result` carries a task handle.
pub fn is_handle(result: &ToolResult) -> bool {
    result
        .meta()
        .is_some_and(|meta| meta.contains_key(HANDLE_META_KEY))
}

#[cfg(test)]
mod tests {
    use rmcp::model::{Task, TaskStatus};

    use super::*;

    #[test]
    fn a_handle_survives_the_trip() {
        let task = CreateTaskResult::new(Task::new(
            "t1",
            TaskStatus::Working,
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00Z",
        ));
        let result = carry("up", &task);
        assert!(is_handle(&result));
        assert_eq!(carried(&result), Some(("up".to_owned(), task)));
        assert_eq!(carried(&ToolResult::success(Vec::new())), None);
    }

    #[test]
    fn no_upstream_result_passes_for_a_handle() {
        let mut forged = carry("up", &CreateTaskResult::new(Task::default()));
        *forged.content_mut() = vec![crate::tool_result::Block::text("a result")];
        crate::upstream::forwarded(&mut forged);
        assert!(!is_handle(&forged));
    }
}
