//! The observer that writes `tool/call` and `tool/result` events (and, for calls made
//! from run_code, `tool/code-dispatch-start` and `tool/code-dispatch`) to the session log.
//! Secret-looking fields are masked by the log itself. Events borrow the call's parts:
//! the log serializes them once, on every call's path.

use rmcp::model::JsonObject;
use serde::Serialize;
use serde_json::Value;

use crate::observe::session_log::EventKind;
use crate::pipeline::{Invocation, Origin, ResultObserver, ToolError};
use crate::tool_result::{Block, ToolResult};

pub struct SessionLogObserver;

/// `tool/call` and `tool/code-dispatch-start`.
#[derive(Serialize)]
struct CallEvent<'a> {
    tool: &'a str,
    arguments: &'a JsonObject,
    #[serde(skip_serializing_if = "Option::is_none")]
    run: Option<&'a str>,
    /// The upstream that owns the tool, for a federated one.
    #[serde(skip_serializing_if = "Option::is_none")]
    server: Option<&'a str>,
    /// Who the caller's credentials name (`token:…`, `subject:…`, `client:…`): whose sign-in a
    /// per-user server's call used. Never a credential.
    #[serde(skip_serializing_if = "Option::is_none")]
    identity: Option<&'a str>,
}

/// `tool/result` and `tool/code-dispatch`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResultEvent<'a> {
    tool: &'a str,
    is_error: bool,
    content: &'a [Block],
    #[serde(skip_serializing_if = "Option::is_none")]
    structured_content: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorPart<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    run: Option<&'a str>,
}

/// The gateway's own failure of a call.
#[derive(Serialize)]
struct ErrorPart<'a> {
    code: &'static str,
    message: &'a str,
}

/// The run a call came from, if it came from run_code, and the event kind to log it as.
fn origin(
    invocation: &Invocation,
    client: EventKind,
    code: EventKind,
) -> (EventKind, Option<&str>) {
    match &invocation.origin {
        Origin::Client => (client, None),
        Origin::Code { run } => (code, Some(run)),
    }
}

impl ResultObserver for SessionLogObserver {
    fn call_started(&self, invocation: &Invocation) {
        let Some(log) = &invocation.session.log else {
            return;
        };
        let (kind, run) = origin(
            invocation,
            EventKind::ToolCall,
            EventKind::CodeDispatchStart,
        );
        let event = CallEvent {
            tool: &invocation.tool,
            arguments: invocation.arguments_or_empty(),
            run,
            server: invocation.server(),
            identity: invocation.identity(),
        };
        log.append(kind, &event);
    }

    fn result(&self, invocation: &Invocation, error: Option<&ToolError>, result: &ToolResult) {
        let Some(log) = &invocation.session.log else {
            return;
        };
        let (kind, run) = origin(invocation, EventKind::ToolResult, EventKind::CodeDispatch);
        let event = ResultEvent {
            tool: &invocation.tool,
            is_error: result.is_error(),
            content: result.content(),
            structured_content: result.structured_content(),
            error: error.map(|error| ErrorPart {
                code: error.code.as_str(),
                message: &error.message,
            }),
            run,
        };
        log.append(kind, &event);
    }
}
