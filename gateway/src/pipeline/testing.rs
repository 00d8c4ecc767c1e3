//! What the unit tests of the pipeline and of its policies share: the parts a pipeline is
//! built from (settings, a registry, a session, calls), a reading of the failure a caller
//! gets, and an upstream MCP server inside the test process, for the policies that act
//! only on federated tools (retry, timeout), so that their calls go through the real
//! upstream client.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::error::ERROR_META_KEY;
use super::{
    BoxFuture, BuiltinTool, ErrorCode, Executor, Invocation, Origin, PipelineSettings,
    ResultObserver, Step, Target, ToolError,
};
use crate::config::{AskFallback, Config};
use crate::registry::Registry;
use crate::registry::profile::Profiles;
use crate::session::{Opening, Session, Transport};
use crate::tool_result::{Block, ToolResult};

/// What the pipeline core needs: a call that would ask is denied, and nothing is traced.
pub fn settings() -> PipelineSettings {
    PipelineSettings {
        ask_fallback: AskFallback::Deny,
        ask_timeout: Duration::from_secs(60),
        console_asks: Arc::default(),
        max_argument_depth: 64,
        tracer: Default::default(),
    }
}

/// The registry of `config` (TOML), once each of its upstreams has had its first
/// connection attempt.
pub async fn registry(config: &str) -> Arc<Registry> {
    let config = Config::from_toml(config).expect("a valid test configuration");
    let (registry, _updates) = Registry::start(&config, CancellationToken::new()).await;
    registry.first_attempts().await;
    registry
}

/// A session of the default profile.
pub fn session(id: &str) -> Arc<Session> {
    let config = Config::from_toml("").expect("the empty configuration");
    let profile = Profiles::new(&config)
        .get(None)
        .expect("the default profile");
    Arc::new(Session::new(
        id.to_owned(),
        profile,
        None,
        Opening::own(None, Transport::Cli),
    ))
}

/// A client's call of `target` in `session`, without arguments.
pub fn call(session: &Arc<Session>, target: Target) -> Invocation {
    let tool = match &target {
        Target::Federated(tool) => tool.name.clone(),
        Target::Builtin(tool) => tool.definition(session).name.to_string(),
    };
    Invocation {
        session: session.clone(),
        tool,
        arguments: None,
        target: Some(target),
        cancel: CancellationToken::new(),
        caller: None,
        origin: Origin::Client,
        started: std::time::Instant::now(),
        trace: opentelemetry::Context::new(),
    }
}

/// `what`'s output; fails the test when it has not finished within 10 s (a call that
/// hangs instead of failing).
pub async fn settled<T>(what: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), what)
        .await
        .expect("finished within 10 s")
}

/// The gateway's failure in `result`, as a client reads it: `(code, message)`, after
/// checking the documented shape (`isError`, the text `Error [CODE]: message`, and
/// `_meta["mcp-gateway/error"]` with code, name and message). `None` for a result that
/// is no failure of the gateway's.
pub fn failure(result: &ToolResult) -> Option<(String, String)> {
    let error = result.meta()?.get(ERROR_META_KEY)?;
    let code = error["code"].as_str().expect("a code").to_owned();
    let message = error["message"].as_str().expect("a message").to_owned();
    assert!(result.is_error(), "{result:?}");
    assert!(
        error["name"]
            .as_str()
            .is_some_and(|name| name.ends_with("Error"))
    );
    let text = result.content().first().and_then(|c| c.as_text());
    assert_eq!(text, Some(format!("Error [{code}]: {message}").as_str()));
    Some((code, message))
}

/// The code of the gateway's failure in `result` (see [`failure`]).
pub fn failure_code(result: &ToolResult) -> Option<String> {
    failure(result).map(|(code, _)| code)
}

/// An observer that writes down each dispatch (a retry dispatches again) and the code it
/// failed with, as the console's pipeline trace shows them.
#[derive(Default)]
pub struct Dispatches(Mutex<Vec<Option<ErrorCode>>>);

impl Dispatches {
    pub fn seen(&self) -> Vec<Option<ErrorCode>> {
        self.0.lock().unwrap().clone()
    }
}

impl ResultObserver for Dispatches {
    fn step(&self, _invocation: &Invocation, step: &Step<'_>) {
        if let Step::Dispatched { error, .. } = step {
            self.0.lock().unwrap().push(error.map(|e| e.code));
        }
    }

    fn result(&self, _: &Invocation, _: Option<&ToolError>, _: &ToolResult) {}
}

/// A built-in tool that answers "ok" and counts its calls.
#[derive(Default)]
pub struct Counted(Mutex<u32>);

impl Counted {
    pub fn calls(&self) -> u32 {
        *self.0.lock().unwrap()
    }
}

impl BuiltinTool for Counted {
    fn definition(&self, _session: &Session) -> Tool {
        Tool::new("ok", "answers ok", Arc::new(JsonObject::new()))
    }
}

impl Executor for Counted {
    fn call<'a>(
        &'a self,
        _invocation: &'a Invocation,
        _signal: CancellationToken,
        _trace: &'a opentelemetry::Context,
    ) -> BoxFuture<'a, Result<ToolResult, ToolError>> {
        *self.0.lock().unwrap() += 1;
        Box::pin(async { Ok(ToolResult::success(vec![Block::text("ok")])) })
    }
}

/// What the test upstream did: a call to one of its tools started, or was cancelled by
/// the gateway (`notifications/cancelled`).
#[derive(Debug, PartialEq, Eq)]
pub enum Heard {
    Started(String),
    Cancelled(String),
}

/// How long the test upstream says its tool list stays fresh.
pub const LIST_TTL_MS: u64 = 60_000;

/// An MCP server on 127.0.0.1 over streamable HTTP (rmcp's own), with read-only tools:
/// `hang` answers only when its request is cancelled, `refuse` answers with a JSON-RPC
/// error, `echo` answers "echo"; its tool list is fresh for [`LIST_TTL_MS`]. It runs
/// until dropped.
pub struct Upstream {
    pub url: String,
    heard: mpsc::UnboundedReceiver<Heard>,
    _stop: DropGuard,
}

impl Upstream {
    pub async fn start() -> Upstream {
        let (tell, heard) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let tools = UpstreamTools { tell };
        let service: StreamableHttpService<UpstreamTools, LocalSessionManager> =
            StreamableHttpService::new(
                move || Ok(tools.clone()),
                Arc::default(),
                StreamableHttpServerConfig::default()
                    .with_sse_keep_alive(None)
                    .with_cancellation_token(stop.child_token()),
            );
        let router = axum::Router::new().nest_service("/mcp", service);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let stopped = stop.clone().cancelled_owned();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(stopped)
                .await;
        });
        Upstream {
            url,
            heard,
            _stop: stop.drop_guard(),
        }
    }

    /// The next thing the upstream did; fails the test if it does nothing for 10 s.
    pub async fn heard(&mut self) -> Heard {
        settled(self.heard.recv())
            .await
            .expect("the upstream is running")
    }

    /// Whether the upstream did anything not yet read by [`Self::heard`].
    pub fn heard_more(&mut self) -> Option<Heard> {
        self.heard.try_recv().ok()
    }
}

#[derive(Clone)]
struct UpstreamTools {
    tell: mpsc::UnboundedSender<Heard>,
}

impl ServerHandler for UpstreamTools {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut schema = JsonObject::new();
        schema.insert("type".into(), "object".into());
        let schema = Arc::new(schema);
        let tool = |name: &str| {
            Tool::new(name.to_owned(), name.to_owned(), schema.clone())
                .annotate(ToolAnnotations::new().read_only(true))
        };
        // Fresh for a minute, as a server of 2026-07-28 may say.
        let mut tools =
            ListToolsResult::with_all_items(vec![tool("hang"), tool("refuse"), tool("echo")]);
        tools.ttl_ms = Some(LIST_TTL_MS);
        Ok(tools)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let _ = self.tell.send(Heard::Started(name.clone()));
        match name.as_str() {
            "hang" => {
                context.ct.cancelled().await;
                let _ = self.tell.send(Heard::Cancelled(name));
                Err(ErrorData::internal_error("cancelled", None))
            }
            "echo" => Ok(CallToolResult::success(vec![ContentBlock::text("echo")]).into()),
            _ => Err(ErrorData::invalid_params("refused", None)),
        }
    }
}
