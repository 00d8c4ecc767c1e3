//! What the stages decide and what a call produces before it is shown to the caller: the
//! gate's and post-execute's decisions, the outcome, and the extra contexts that policies
//! attach to it.

use std::pin::Pin;

use serde_json::Value;

use super::error::ToolError;
use crate::tool_result::{Block, ToolResult};

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
    pub result: Result<ToolResult, ToolError>,
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

impl From<Result<ToolResult, ToolError>> for ToolOutcome {
    fn from(result: Result<ToolResult, ToolError>) -> Self {
        Self {
            result,
            contexts: Vec::new(),
        }
    }
}

/// A pre-execute gate's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateDecision {
    /// No opinion: the next gate decides (allow when none does).
    Pass,
    Allow,
    Deny {
        reason: String,
    },
    /// Ask the person through the client (MCP elicitation).
    Ask {
        reason: String,
    },
}

/// A post-execute decision.
#[derive(Debug, Clone, PartialEq)]
pub enum PostDecision {
    Pass,
    ReplaceContent(Vec<Block>),
    ReplaceValue(Value),
    Block { reason: String },
    Attach(Vec<AdditionalContext>),
}
