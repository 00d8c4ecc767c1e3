//! The observer that writes `tool/call` and `tool/result` events (and, for calls made
//! from run_code, `tool/code-dispatch-start` and `tool/code-dispatch`) to the session log.
//! Secret-looking fields are masked by the log itself.

use rmcp::model::CallToolResult;
use serde_json::json;

use crate::observe::session_log::EventKind;
use crate::pipeline::{Invocation, Origin, ResultObserver, ToolError};

pub struct SessionLogObserver;

impl ResultObserver for SessionLogObserver {
    fn call_started(&self, invocation: &Invocation) {
        let Some(log) = &invocation.session.log else {
            return;
        };
        let mut event =
            json!({ "tool": invocation.tool, "arguments": invocation.arguments_value() });
        let kind = match &invocation.origin {
            Origin::Client => EventKind::ToolCall,
            Origin::Code { run } => {
                event["run"] = json!(run);
                EventKind::CodeDispatchStart
            }
        };
        log.append(kind, &event);
    }

    fn result(&self, invocation: &Invocation, error: Option<&ToolError>, result: &CallToolResult) {
        let Some(log) = &invocation.session.log else {
            return;
        };
        let mut event = json!({
            "tool": invocation.tool,
            "isError": result.is_error == Some(true),
            "content": result.content,
        });
        if let Some(value) = &result.structured_content {
            event["structuredContent"] = value.clone();
        }
        if let Some(error) = error {
            event["error"] = json!({"code": error.code.as_str(), "message": error.message});
        }
        let kind = match &invocation.origin {
            Origin::Client => EventKind::ToolResult,
            Origin::Code { run } => {
                event["run"] = json!(run);
                EventKind::CodeDispatch
            }
        };
        log.append(kind, &event);
    }
}
