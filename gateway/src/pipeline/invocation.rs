//! One tool call as the pipeline sees it: who asked, for what, and how to reach them.

use std::sync::{Arc, LazyLock, Mutex};

use opentelemetry::Context;
use rmcp::model::{JsonObject, Tool};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::error::ToolError;
use super::outcome::BoxFuture;
use crate::config::Mode;
use crate::observe::session_log::SessionLog;
use crate::registry::FederatedTool;
use crate::registry::profile::Profile;
use crate::relay::Caller;
use crate::tool_result::ToolResult;

/// One downstream session (one "agent" in the spec): its profile and its log. What
/// policies count per session (the reminder's chain, the rate limiter's window) is kept
/// under its id in the shared state (`crate::state`), so replicas count together.
pub struct CallContext {
    /// For streamable HTTP, the transport's session id (the same on every replica).
    pub id: String,
    pub profile: Arc<Profile>,
    pub log: Option<SessionLog>,
    /// What this process keeps for the session, keyed by type (the tools `search_tools`
    /// found for it); unlike [`crate::state`], not seen by other replicas.
    pub local: Mutex<http::Extensions>,
}

impl CallContext {
    pub fn new(id: String, profile: Arc<Profile>, log: Option<SessionLog>) -> Self {
        Self {
            id,
            profile,
            log,
            local: Mutex::new(http::Extensions::new()),
        }
    }

    /// Runs `f` on this process's state of type `T` for the session, creating it with
    /// `Default` first.
    pub fn with_state<T, R>(&self, f: impl FnOnce(&mut T) -> R) -> R
    where
        T: Default + Clone + Send + Sync + 'static,
    {
        let mut local = self.local.lock().unwrap_or_else(|p| p.into_inner());
        f(local.get_or_insert_default::<T>())
    }

    pub fn mode(&self) -> Mode {
        self.profile.mode
    }
}

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
    fn definition(&self, session: &CallContext) -> Tool;
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
    pub session: Arc<CallContext>,
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
