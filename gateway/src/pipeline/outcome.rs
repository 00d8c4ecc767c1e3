//! What a call produces before it is shown to the caller, and the extra contexts that
//! policies attach to it.

use std::pin::Pin;

use rmcp::model::CallToolResult;

use super::error::ToolError;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Who attached a context (its provenance, recorded in `_meta`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ContextSource {
    pub kind: &'static str,
    pub plugin: &'static str,
}

/// Text a policy adds after the tool's own content, never replacing it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AdditionalContext {
    pub source: ContextSource,
    pub text: String,
}

/// The result of a call as it moves through post-execute and finalize.
#[derive(Debug, Clone)]
pub struct ToolOutcome {
    /// The upstream's result (which may itself be `isError`), or the gateway's failure.
    pub result: Result<CallToolResult, ToolError>,
    pub contexts: Vec<AdditionalContext>,
}

impl ToolOutcome {
    pub fn failed(error: ToolError) -> Self {
        Self::from(Err(error))
    }

    pub fn error_code(&self) -> Option<super::error::ErrorCode> {
        self.result.as_ref().err().map(|e| e.code)
    }
}

impl From<Result<CallToolResult, ToolError>> for ToolOutcome {
    fn from(result: Result<CallToolResult, ToolError>) -> Self {
        Self {
            result,
            contexts: Vec::new(),
        }
    }
}
