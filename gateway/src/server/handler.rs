//! The downstream MCP server: one [`GatewayServer`] per client session, whatever the
//! transport. It lists what the session may see (through the session's
//! [`SessionView`], never by checking the profile by hand) and hands every call to the
//! gateway's pipeline; it holds no policy of its own.

use std::sync::{Arc, OnceLock};

#[allow(
    deprecated,
    reason = "resources/subscribe and logging are what pre-2026 clients use"
)]
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientRequest, CompleteRequest, CompleteRequestParams,
    CompleteResult, DiscoverResult, GetPromptRequest, GetPromptRequestParams, GetPromptResponse,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    LoggingLevel, PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequest,
    ReadResourceRequestParams, ReadResourceResponse, Reference, ServerConfig, ServerResult,
    SetLevelRequestParams, SubscribeRequest, SubscribeRequestParams, UnsubscribeRequest,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;

use crate::gateway::Gateway;
use crate::observe::session_log::EventKind;
use crate::observe::sessions::Transport;
use crate::observe::telemetry;
use crate::pipeline::{CallRequest, Origin, Session};
use crate::registry::resource_uri;
use crate::registry::view::SessionView;
use crate::relay::Caller;
use crate::search_tools::Found;
use crate::server::http::security::Credentials;
use crate::server::identity;
use crate::server::transport::shared_sessions::TransportSession;
use crate::upstream::UpstreamError;

/// How often a session's watcher checks that its client is still connected.
const SESSION_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// How long `logging/setLevel` waits for the upstreams to take a new level.
const SET_LEVEL_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Items per page of the gateway's own lists.
const PAGE_SIZE: usize = 500;

/// The profile a session gets, on every transport: a token bound to a profile wins over
/// the profile the transport chose (the HTTP path, or `--profile` on stdio); `None` is the
/// default profile.
pub fn session_profile(chosen: Option<&str>, credentials: Option<&Credentials>) -> Option<String> {
    credentials
        .and_then(|credentials| credentials.profile.clone())
        .or_else(|| chosen.map(str::to_owned))
}

/// The handler for one downstream session.
#[derive(Clone)]
pub struct GatewayServer {
    gateway: Arc<Gateway>,
    /// The profile the transport chose (HTTP path or `--profile`); on streamable HTTP a
    /// token bound to a profile overrides it at `initialize` ([`session_profile`]).
    profile: Option<String>,
    /// How the client reached the gateway (shown in the console's Sessions page).
    transport: Transport,
    session: Arc<OnceLock<Arc<Session>>>,
}

impl GatewayServer {
    pub fn new(gateway: Arc<Gateway>, profile: Option<String>, transport: Transport) -> Self {
        Self {
            gateway,
            profile,
            transport,
            session: Arc::default(),
        }
    }

    /// The session, created on first use with the transport's profile. (Over HTTP every
    /// request comes from the session's opener: `BoundSessions` and the SSE transport
    /// refuse other credentials before any message reaches the handler.)
    fn session(&self) -> Result<&Arc<Session>, ErrorData> {
        self.session_for(self.profile.as_deref(), None)
    }

    /// The session and what it may see now.
    fn view(&self) -> Result<(&Arc<Session>, SessionView), ErrorData> {
        let session = self.session()?;
        Ok((session, self.gateway.view(session)))
    }

    /// The session, created with `profile` under the transport's session `id` if there
    /// is one.
    fn session_for(
        &self,
        profile: Option<&str>,
        id: Option<&str>,
    ) -> Result<&Arc<Session>, ErrorData> {
        if let Some(session) = self.session.get() {
            return Ok(session);
        }
        let session = self
            .gateway
            .new_session_under(profile, self.transport, id)
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    format!("unknown profile `{}`", profile.unwrap_or("")),
                    None,
                )
            })?;
        Ok(self.session.get_or_init(|| session))
    }

    /// Makes `level` this session's log level; when that changes the lowest level any
    /// session wants, every upstream is told before this returns (or was given time).
    #[allow(deprecated, reason = "logging/setLevel is what pre-2026 clients use")]
    async fn adopt_level(
        &self,
        session: &Session,
        peer: rmcp::Peer<RoleServer>,
        level: LoggingLevel,
    ) {
        let sessions = &self.gateway.registry.downstream().sessions;
        let before = sessions.lowest();
        let lowest = sessions.set_level(&session.id.as_str().into(), peer, level);
        if before != Some(lowest) {
            // Answered once the upstreams have the level (or were given time to take it),
            // so the client's next call already logs at it.
            let told = self
                .gateway
                .registry
                .upstreams()
                .into_iter()
                .map(|upstream| async move {
                    upstream.set_log_level(lowest).await;
                });
            let _ = tokio::time::timeout(SET_LEVEL_WAIT, futures::future::join_all(told)).await;
        }
    }

    /// A session another replica opened (streamable HTTP, restored here) keeps the log
    /// level its client set there.
    async fn resume_log_level(&self, peer: &rmcp::Peer<RoleServer>) {
        let Some(session) = self.session.get() else {
            return;
        };
        let level = match self.gateway.state.touch_session(&session.id).await {
            Ok(Some(record)) => record.log_level,
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(session = %session.id, "shared log level not read: {e}");
                None
            }
        };
        let level = level.and_then(|level| serde_json::from_value(level.into()).ok());
        if let Some(level) = level {
            self.adopt_level(session, peer.clone(), level).await;
        }
    }

    /// Watches the catalog, and the tools the session found with `search_tools`, and
    /// tells this client when what it can see changes: its tools, prompts or resources.
    fn watch_catalog(&self, peer: rmcp::Peer<RoleServer>) {
        let Some(session) = self.session.get() else {
            return;
        };
        let session = session.clone();
        let gateway = self.gateway.clone();
        let mut catalog = gateway.registry.watch();
        let sessions = gateway.registry.downstream().clone();
        sessions
            .sessions
            .join(session.id.as_str().into(), peer.clone());
        let found = Found::of(&session);
        let mut shown = session
            .with_state(|initial: &mut ShownAtInitialize| initial.0.take())
            .unwrap_or_else(|| Visible::of(&gateway, &session));
        tokio::spawn(async move {
            // The session ends with its transport; check now and then, so a closed
            // session's state (and its log file) is released without waiting for a change.
            let mut alive_check = tokio::time::interval(SESSION_CHECK);
            loop {
                tokio::select! {
                    changed = catalog.changed() => if changed.is_err() { break },
                    () = found.changed() => {}
                    () = gateway.shutdown.cancelled() => break,
                    _ = alive_check.tick() => {
                        if peer.is_transport_closed() {
                            break;
                        }
                        continue;
                    }
                }
                let now = Visible::of(&gateway, &session);
                let sent = async {
                    if now.tools != shown.tools {
                        peer.notify_tool_list_changed().await?;
                    }
                    if now.prompts != shown.prompts {
                        peer.notify_prompt_list_changed().await?;
                    }
                    if now.resources != shown.resources {
                        peer.notify_resource_list_changed().await?;
                    }
                    Ok::<_, rmcp::service::ServiceError>(())
                };
                if sent.await.is_err() {
                    break;
                }
                shown = now;
            }
            sessions.sessions.leave(&session.id);
        });
    }
}

/// What one session sees of the catalog, to tell when it changed.
#[derive(Clone, PartialEq)]
struct Visible {
    tools: Vec<rmcp::model::Tool>,
    prompts: Vec<String>,
    resources: Vec<String>,
}

/// What the session could see when it initialized, until its watcher starts from it.
#[derive(Clone, Default)]
struct ShownAtInitialize(Option<Visible>);

impl Visible {
    fn of(gateway: &Gateway, session: &Session) -> Visible {
        let view = gateway.view(session);
        Visible {
            tools: gateway.visible_tools(session),
            prompts: view.prompts().map(|p| p.definition.name.clone()).collect(),
            resources: view
                .resources()
                .map(|r| r.uri.clone())
                .chain(view.resource_templates().map(|t| t.uri_template.clone()))
                .collect(),
        }
    }
}

/// One page of `items` after `cursor` (an index), and the next cursor.
fn page<T: Clone>(
    items: &[T],
    cursor: Option<&str>,
) -> Result<(Vec<T>, Option<String>), ErrorData> {
    let start = match cursor {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .map_err(|_| ErrorData::invalid_params(format!("bad cursor `{c}`"), None))?,
    };
    let end = (start + PAGE_SIZE).min(items.len());
    let next = (end < items.len()).then(|| end.to_string());
    Ok((items.get(start..end).unwrap_or_default().to_vec(), next))
}

impl ServerHandler for GatewayServer {
    fn get_info(&self) -> ServerConfig {
        identity::info(&self.gateway, self.session.get().map(|s| &**s))
    }

    /// The gateway speaks the `initialize` lifecycle; a `server/discover` opener gets
    /// "method not found", and clients such as the Python SDK then fall back to it.
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        Err(ErrorData::method_not_found::<
            rmcp::model::DiscoverRequestMethod,
        >())
    }

    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let profile = session_profile(self.profile.as_deref(), credentials(&context).as_ref());
        // On streamable HTTP the session is known by the transport's id on every replica
        // (a restored session replays this handshake on another replica under that id).
        let transport = context.extensions.get::<TransportSession>();
        let session = self.session_for(profile.as_deref(), transport.map(|t| t.id.as_ref()))?;
        self.gateway.sessions.set_client(
            &session.id,
            &request.client_info.name,
            &request.client_info.version,
        );
        identity::settle(&self.gateway).await;
        // What the client can list from now on: the watcher tells it of any change since,
        // however late its task starts (requests do not wait for `initialized` to be handled).
        let shown = Visible::of(&self.gateway, session);
        session.with_state(|initial: &mut ShownAtInitialize| initial.0 = Some(shown));
        let answer = self.negotiate_initialize(&request)?;
        if let Some(transport) = transport {
            transport.initialized(&context.peer, self, &answer.protocol_version);
        }
        Ok(answer)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let peer = context.peer;
        self.watch_catalog(peer.clone());
        self.resume_log_level(&peer).await;
    }

    /// This session's level; upstreams are told the lowest level any session wants.
    #[allow(deprecated, reason = "logging/setLevel is what pre-2026 clients use")]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let session = self.session()?;
        self.adopt_level(session, context.peer, request.level).await;
        // Kept with the session's shared record, for a replica that takes it over.
        if let Ok(serde_json::Value::String(level)) = serde_json::to_value(request.level)
            && let Err(e) = self.gateway.state.set_log_level(&session.id, &level).await
        {
            tracing::warn!(session = %session.id, "log level not shared: {e}");
        }
        Ok(())
    }

    /// Progress the client reports about a request relayed to it goes to the upstream
    /// that asked.
    async fn on_progress(
        &self,
        progress: ProgressNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        let Ok(session) = self.session() else { return };
        let relayed = &self.gateway.registry.downstream().relayed_progress;
        relayed.report(&session.id, progress).await;
    }

    /// The client's roots changed: every upstream may have asked for them, so each is told.
    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        for upstream in self.gateway.registry.upstreams() {
            if let Some(live) = upstream.live()
                && let Err(e) = live.peer.notify_roots_list_changed().await
            {
                tracing::debug!(server = %upstream.name, "roots/list_changed not delivered: {e}");
            }
        }
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.gateway.visible_tools(self.session()?);
        let (tools, next) = page(&tools, cursor(&request))?;
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = next;
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let session = self.session()?.clone();
        let caller = Caller::of(&context, &session.id);
        let result = self
            .gateway
            .call(
                &session,
                CallRequest {
                    name: request.name.to_string(),
                    arguments: request.arguments,
                    cancel: context.ct.clone(),
                    caller: Some(caller),
                    origin: Origin::Client,
                    trace: caller_trace(&context),
                },
            )
            .await;
        Ok(result.into())
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let (_, view) = self.view()?;
        let prompts: Vec<_> = view.prompts().map(|p| p.definition.clone()).collect();
        let (prompts, next) = page(&prompts, cursor(&request))?;
        let mut result = ListPromptsResult::with_all_items(prompts);
        result.next_cursor = next;
        Ok(result)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let (session, view) = self.view()?;
        let prompt = view.prompt(&request.name).ok_or_else(|| {
            ErrorData::invalid_params(format!("no prompt named `{}`", request.name), None)
        })?;
        log_event(
            session,
            EventKind::PromptsGet,
            json!({"prompt": request.name, "arguments": request.arguments}),
        );
        let mut params = request;
        params.name = prompt.original.clone();
        let request = ClientRequest::GetPromptRequest(GetPromptRequest::new(params));
        match self
            .forward(&prompt.server, request, session, &context)
            .await?
        {
            ServerResult::GetPromptResult(result) => Ok(result.into()),
            other => Err(unexpected(&other)),
        }
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let (_, view) = self.view()?;
        let resources: Vec<_> = view.resources().cloned().collect();
        let (resources, next) = page(&resources, cursor(&request))?;
        let mut result = ListResourcesResult::with_all_items(resources);
        result.next_cursor = next;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let (_, view) = self.view()?;
        let templates: Vec<_> = view.resource_templates().cloned().collect();
        let (templates, next) = page(&templates, cursor(&request))?;
        let mut result = ListResourceTemplatesResult::with_all_items(templates);
        result.next_cursor = next;
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let (session, view) = self.view()?;
        let (server, original) = self.owner_of(&view, &request.uri)?;
        log_event(
            session,
            EventKind::ResourcesRead,
            json!({"uri": request.uri}),
        );
        let mut params = request;
        params.uri = original;
        let request = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(params));
        match self.forward(&server, request, session, &context).await? {
            ServerResult::ReadResourceResult(mut result) => {
                if self.gateway.registry.catalog().rewriting.contains(&server) {
                    for contents in &mut result.contents {
                        resource_uri::rewrite_contents(&server, contents);
                    }
                }
                Ok(result.into())
            }
            other => Err(unexpected(&other)),
        }
    }

    #[allow(
        deprecated,
        reason = "legacy subscriptions are what 2025-era clients use"
    )]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let (session, view) = self.view()?;
        let (server, original) = self.owner_of(&view, &request.uri)?;
        self.gateway
            .subscriptions
            .subscribe(&request.uri, &session.id, context.peer.clone());
        let mut params = request;
        params.uri = original;
        let request = ClientRequest::SubscribeRequest(SubscribeRequest::new(params));
        self.forward(&server, request, session, &context)
            .await
            .map(drop)
    }

    #[allow(
        deprecated,
        reason = "legacy subscriptions are what 2025-era clients use"
    )]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let (session, view) = self.view()?;
        let (server, original) = self.owner_of(&view, &request.uri)?;
        if !self
            .gateway
            .subscriptions
            .unsubscribe(&request.uri, &session.id)
        {
            return Ok(());
        }
        let mut params = request;
        params.uri = original;
        let request = ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(params));
        self.forward(&server, request, session, &context)
            .await
            .map(drop)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let (session, view) = self.view()?;
        let mut params = request;
        let server = match &mut params.r#ref {
            Reference::Prompt(prompt) => {
                let federated = view.prompt(&prompt.name).ok_or_else(|| {
                    ErrorData::invalid_params(format!("no prompt named `{}`", prompt.name), None)
                })?;
                prompt.name = federated.original.clone();
                federated.server.clone()
            }
            Reference::Resource(template) => {
                let (server, original) = self.owner_of(&view, &template.uri)?;
                template.uri = original;
                server
            }
            _ => {
                return Err(ErrorData::invalid_params(
                    "unsupported completion reference",
                    None,
                ));
            }
        };
        let request = ClientRequest::CompleteRequest(CompleteRequest::new(params));
        match self.forward(&server, request, session, &context).await? {
            ServerResult::CompleteResult(result) => Ok(result),
            other => Err(unexpected(&other)),
        }
    }
}

impl GatewayServer {
    /// The visible server that owns a resource URI a client sent, and the URI as that
    /// server knows it.
    fn owner_of(&self, view: &SessionView, uri: &str) -> Result<(Arc<str>, String), ErrorData> {
        let not_found = || ErrorData::resource_not_found(format!("no resource `{uri}`"), None);
        let (server, original) = self
            .gateway
            .registry
            .catalog()
            .resource_owner(uri)
            .ok_or_else(not_found)?;
        if !view.sees_server(&server) {
            return Err(not_found());
        }
        Ok((server, original))
    }

    /// Sends a request to the upstream `server`, cancelled with the client's request;
    /// what the upstream sends back meanwhile goes to this client.
    async fn forward(
        &self,
        server: &str,
        request: ClientRequest,
        session: &Session,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let upstream = self.gateway.registry.upstream(server).ok_or_else(|| {
            ErrorData::internal_error(format!("upstream `{server}` was removed"), None)
        })?;
        let live = upstream
            .require_live()
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let caller = Caller::of(context, &session.id);
        // Boxed: rmcp's dispatch of a request is a future as large as its largest
        // handler's, so an upstream request inline here would make every tool call's
        // future (moved whole into its task) twice as large.
        match Box::pin(upstream.request(&live, request, &context.ct, Some(caller))).await {
            Ok(result) => Ok(result),
            Err(UpstreamError::Rejected { error, .. }) => Err(*error),
            Err(e) => Err(ErrorData::internal_error(e.to_string(), None)),
        }
    }
}

/// The credentials of the streamable HTTP request behind `context`, or `None` when the
/// request did not come over streamable HTTP.
fn credentials(context: &RequestContext<RoleServer>) -> Option<Credentials> {
    let parts = context.extensions.get::<http::request::Parts>()?;
    parts.extensions.get::<Credentials>().cloned()
}

/// The trace context the client sent with this call: `_meta.traceparent` when present,
/// else the HTTP request's `traceparent` header (streamable HTTP).
fn caller_trace(context: &RequestContext<RoleServer>) -> opentelemetry::Context {
    if let Some(traceparent) = context.meta.get_traceparent() {
        return telemetry::extract(Some(traceparent), context.meta.get_tracestate());
    }
    let headers = context
        .extensions
        .get::<http::request::Parts>()
        .map(|parts| &parts.headers);
    let header = |name: &str| {
        headers
            .and_then(|headers| headers.get(name))
            .and_then(|value| value.to_str().ok())
    };
    telemetry::extract(
        header(telemetry::TRACEPARENT),
        header(telemetry::TRACESTATE),
    )
}

fn cursor(request: &Option<PaginatedRequestParams>) -> Option<&str> {
    request.as_ref().and_then(|r| r.cursor.as_deref())
}

fn unexpected(got: &ServerResult) -> ErrorData {
    ErrorData::internal_error(
        format!("unexpected upstream response: {got:?}")
            .chars()
            .take(200)
            .collect::<String>(),
        None,
    )
}

fn log_event(session: &Session, kind: EventKind, event: serde_json::Value) {
    if let Some(log) = &session.log {
        log.append(kind, &event);
    }
}
