//! The gateway's own failures: stable codes, and the one function that turns them into
//! MCP results.

use serde_json::json;

use crate::tool_result::{Block, ToolResult};

/// `_meta` key that carries the structured error of a gateway failure.
pub const ERROR_META_KEY: &str = "mcp-gateway/error";

/// Stable error codes; clients and run_code programs may match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    InvalidArgs,
    ToolNotFound,
    Denied,
    ToolTimeout,
    AbortedBeforeDispatch,
    Aborted,
    UpstreamUnavailable,
    UpstreamError,
    OutputInvalid,
    CodeRunFailed,
    /// A per-user server's caller must sign in first; the detail carries the URL.
    SignInRequired,
    /// A per-user server's sign-in did not come about (declined, refused, timed out).
    SignInFailed,
    /// The tool's definition waits for an operator's approval (it changed since it was
    /// approved, or its text was flagged): see `registry::pins`.
    ToolDefinitionChanged,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgs => "INVALID_ARGS",
            ErrorCode::ToolNotFound => "TOOL_NOT_FOUND",
            ErrorCode::Denied => "DENIED",
            ErrorCode::ToolTimeout => "TOOL_TIMEOUT",
            ErrorCode::AbortedBeforeDispatch => "ABORTED_BEFORE_DISPATCH",
            ErrorCode::Aborted => "ABORTED",
            ErrorCode::UpstreamUnavailable => "UPSTREAM_UNAVAILABLE",
            ErrorCode::UpstreamError => "UPSTREAM_ERROR",
            ErrorCode::OutputInvalid => "OUTPUT_INVALID",
            ErrorCode::CodeRunFailed => "CODE_RUN_FAILED",
            ErrorCode::SignInRequired => "SIGN_IN_REQUIRED",
            ErrorCode::SignInFailed => "SIGN_IN_FAILED",
            ErrorCode::ToolDefinitionChanged => "TOOL_DEFINITION_CHANGED",
        }
    }

    /// The error's class name, as the spec's `info.name`.
    pub fn error_name(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgs => "ToolArgsError",
            ErrorCode::ToolNotFound => "ToolNotFoundError",
            ErrorCode::Denied => "ToolDeniedError",
            ErrorCode::ToolTimeout => "ToolTimeoutError",
            ErrorCode::AbortedBeforeDispatch | ErrorCode::Aborted => "AbortError",
            ErrorCode::UpstreamUnavailable => "UpstreamUnavailableError",
            ErrorCode::UpstreamError => "UpstreamError",
            ErrorCode::OutputInvalid => "ToolOutputError",
            ErrorCode::CodeRunFailed => "CodeRunFailedError",
            ErrorCode::SignInRequired | ErrorCode::SignInFailed => "SignInError",
            ErrorCode::ToolDefinitionChanged => "ToolDefinitionChangedError",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure of the gateway's own (not a tool's own `isError` result).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ToolError {
    pub code: ErrorCode,
    pub message: String,
    /// Extra structured detail (for CODE_RUN_FAILED: `{kind}`).
    pub detail: Option<serde_json::Value>,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            detail: None,
        }
    }

    pub fn with_detail(mut self, detail: serde_json::Value) -> Self {
        self.detail = Some(detail);
        self
    }

    /// An upstream's JSON-RPC error that is about the client's request rather than the
    /// tool (a client capability the server requires, protocol 2026-07-28): the client
    /// gets it as the JSON-RPC error it is, not as a tool result (see [`protocol_error`]).
    pub fn for_the_client(error: &rmcp::ErrorData) -> Option<serde_json::Value> {
        (error.code == rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY)
            .then(|| json!({ PROTOCOL_ERROR: error }))
    }

    /// The MCP result for this failure: `isError`, a text `Error [CODE]: message`, and the
    /// structured error under `_meta["mcp-gateway/error"]`.
    pub fn to_result(&self) -> ToolResult {
        let mut result = ToolResult::error(vec![Block::text(format!(
            "Error [{}]: {}",
            self.code, self.message
        ))]);
        let mut error = json!({
            "code": self.code.as_str(),
            "name": self.code.error_name(),
            "message": self.message,
        });
        if let Some(detail) = &self.detail {
            error["detail"] = detail.clone();
        }
        result.meta_mut().insert(ERROR_META_KEY.into(), error);
        result
    }
}

/// The failure of a call that did not come to its tool's result, as the JSON-RPC error a
/// task settles with (`failed`): the upstream was unreachable, broke the protocol or
/// answered an error, the call ran out of time or was stopped. Any other failure, like a
/// tool's own `isError` result, is the task's result (`completed`).
pub fn work_failure(result: &ToolResult) -> Option<rmcp::ErrorData> {
    let error = result.meta()?.get(ERROR_META_KEY)?;
    let failed_work = [
        ErrorCode::UpstreamUnavailable,
        ErrorCode::UpstreamError,
        ErrorCode::ToolTimeout,
        ErrorCode::Aborted,
    ];
    let code = error.get("code")?.as_str()?;
    if !failed_work.iter().any(|failed| failed.as_str() == code) {
        return None;
    }
    let message = error.get("message")?.as_str()?.to_owned();
    Some(rmcp::ErrorData::internal_error(
        format!("{code}: {message}"),
        Some(error.clone()),
    ))
}

/// The key of a failure's detail that holds a JSON-RPC error for the client.
const PROTOCOL_ERROR: &str = "jsonrpc";

/// The JSON-RPC error a failed call's `result` must reach the client as, if any (see
/// [`ToolError::for_the_client`]).
pub fn protocol_error(result: &ToolResult) -> Option<rmcp::ErrorData> {
    let error = result.meta()?.get(ERROR_META_KEY)?;
    serde_json::from_value(error.get("detail")?.get(PROTOCOL_ERROR)?.clone()).ok()
}
