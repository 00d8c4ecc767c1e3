//! One tool call as the pipeline sees it: who asked, for what, and how to reach them.

use std::sync::{Arc, LazyLock};

use opentelemetry::Context;
use rmcp::model::{JsonObject, Tool};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::error::ToolError;
use super::outcome::BoxFuture;
use crate::registry::FederatedTool;
use crate::relay::Caller;
use crate::session::Session;
use crate::tool_result::ToolResult;

/// Where a call came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A client's `tools/call`.
    Client,
    /// A bound call from a run_code program (the run's id).
    Code { run: String },
}

/// What carries out a call once the pipeline has admitted it: the upstream of a
/// federated tool, or one of the gateway's own tools.
pub trait Executor: Send + Sync {
    fn call<'a>(
        &'a self,
        invocation: &'a Invocation,
        signal: CancellationToken,
        trace: &'a Context,
    ) -> BoxFuture<'a, Result<ToolResult, ToolError>>;
}

/// A tool the gateway implements itself (run_code): an executor with a definition of
/// its own.
pub trait BuiltinTool: Executor {
    fn definition(&self, session: &Session) -> Tool;
}

/// What a name resolved to.
#[derive(Clone)]
pub enum Target {
    Federated(Arc<FederatedTool>),
    Builtin(Arc<dyn BuiltinTool>),
}

impl Target {
    pub fn concurrency_safe(&self) -> bool {
        match self {
            Target::Federated(tool) => tool.concurrency_safe,
            Target::Builtin(_) => false,
        }
    }
}

/// A call as a transport (or a run_code program) hands it to the gateway.
pub struct CallRequest {
    pub name: String,
    pub arguments: Option<JsonObject>,
    pub cancel: CancellationToken,
    /// The client call this one serves, for what the upstream sends back during it.
    pub caller: Option<Caller>,
    pub origin: Origin,
    /// The trace context the call continues (see `observe::telemetry`).
    pub trace: Context,
}

impl CallRequest {
    /// A call the operator makes from the command line or the console: no MCP client to
    /// ask or report progress to, nothing to cancel it, a trace of its own.
    pub fn operator(name: impl Into<String>, arguments: Option<JsonObject>) -> Self {
        Self {
            name: name.into(),
            arguments,
            cancel: CancellationToken::new(),
            caller: None,
            origin: Origin::Client,
            trace: Context::new(),
        }
    }
}

/// A call on its way through the pipeline.
pub struct Invocation {
    pub session: Arc<Session>,
    /// The name the caller used (federated, or `run_code`).
    pub tool: String,
    pub arguments: Option<JsonObject>,
    /// `None` when the name is unknown or hidden from this session's profile.
    pub target: Option<Target>,
    /// The caller's cancellation; wrappers may derive, never drop it.
    pub cancel: CancellationToken,
    /// The client call behind this one: where the upstream's progress, requests and log
    /// messages go while it runs.
    pub caller: Option<Caller>,
    pub origin: Origin,
    /// When the call arrived (latency metrics).
    pub started: std::time::Instant,
    /// The caller's trace context: the parent of this call's span (empty: a new trace).
    pub trace: Context,
}

impl Invocation {
    /// The arguments as one JSON value (`{}` when none were given).
    pub fn arguments_value(&self) -> Value {
        Value::Object(self.arguments.clone().unwrap_or_default())
    }

    /// Who the caller's credentials name, if anyone (never a credential).
    pub fn identity(&self) -> Option<&str> {
        self.caller.as_ref()?.identity.as_deref()
    }

    /// The server that owns the tool, for a federated one.
    pub fn server(&self) -> Option<&str> {
        match &self.target {
            Some(Target::Federated(tool)) => Some(&tool.server),
            _ => None,
        }
    }

    /// The arguments, borrowed (an empty object when none were given).
    pub fn arguments_or_empty(&self) -> &JsonObject {
        static EMPTY: LazyLock<JsonObject> = LazyLock::new(JsonObject::new);
        self.arguments.as_ref().unwrap_or(&EMPTY)
    }
}
