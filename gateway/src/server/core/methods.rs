//! The gateway's MCP methods: one route per method, whatever the transport and protocol
//! revision. Lists show what the session may see (through its [`SessionView`], never by
//! checking the profile by hand), `tools/call` goes to the gateway's pipeline, and
//! prompts, resources and completions to the upstream that owns them. No policy lives
//! here.

#![allow(
    deprecated,
    reason = "logging/setLevel and resources/subscribe are what pre-2026 clients use"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::ErrorData;
use rmcp::model::{
    CacheScope, CallToolRequestParams, ClientRequest, CompleteRequest, CompleteRequestParams,
    CustomResult, DiscoverResult, GetPromptRequest, GetPromptRequestParams,
    InitializeRequestParams, JsonObject, LoggingLevel, PaginatedRequestParams, ReadResourceRequest,
    ReadResourceRequestParams, Reference, RequestId, RequestMetaObject, ServerResult,
    SetLevelRequestParams, SubscribeRequest, SubscribeRequestParams, TASKS_EXTENSION_ID,
    UnsubscribeRequest, UnsubscribeRequestParams,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::revision::{self, Revision};
use super::watch;
use crate::config::CatalogMode;
use crate::gateway::Gateway;
use crate::listener_guard::SubjectToken;
use crate::observe::session_log::EventKind;
use crate::observe::telemetry;
use crate::pipeline::{CallRequest, Origin, error};
use crate::registry::view::SessionView;
use crate::relay::{Caller, ClientLink};
use crate::resource_uri;
use crate::server::identity;
use crate::session::Session;
use crate::tasks;
use crate::upstream::UpstreamError;

/// How long `logging/setLevel` waits for the upstreams to take a new level.
const SET_LEVEL_WAIT: Duration = Duration::from_secs(5);

/// Whether the session has listed anything yet (see [`Call::first_list`]).
#[derive(Default, Clone)]
struct ListedOnce(bool);

/// Items per page of the gateway's own lists.
const PAGE_SIZE: usize = 500;

/// One request being served, with everything its method may need.
pub(super) struct Call {
    pub gateway: Arc<Gateway>,
    pub session: Arc<Session>,
    pub id: RequestId,
    pub meta: RequestMetaObject,
    pub revision: Revision,
    /// The way to the client during this request.
    pub link: ClientLink,
    pub cancel: CancellationToken,
    pub http: Option<Arc<http::request::Parts>>,
}

impl Call {
    /// Serves `request` by its method.
    pub async fn serve(self, request: ClientRequest) -> Result<ServerResult, ErrorData> {
        self.revision.admits(&request)?;
        match request {
            ClientRequest::InitializeRequest(request) => self.initialize(request.params).await,
            ClientRequest::DiscoverRequest(_) => Ok(self.discover()),
            ClientRequest::PingRequest(_) => Ok(ServerResult::empty(())),
            ClientRequest::ListToolsRequest(request) => {
                self.first_list().await;
                self.list_tools(request.params)
            }
            ClientRequest::CallToolRequest(request) => self.call_tool(request.params).await,
            ClientRequest::ListPromptsRequest(request) => {
                self.first_list().await;
                self.list_prompts(request.params)
            }
            ClientRequest::GetPromptRequest(request) => self.get_prompt(request.params).await,
            ClientRequest::ListResourcesRequest(request) => {
                self.first_list().await;
                self.list_resources(request.params)
            }
            ClientRequest::ListResourceTemplatesRequest(request) => {
                self.first_list().await;
                self.list_resource_templates(request.params)
            }
            ClientRequest::ReadResourceRequest(request) => self.read_resource(request.params).await,
            ClientRequest::GetTaskRequest(request) => self.get_task(request.params).await,
            ClientRequest::UpdateTaskRequest(request) => self.update_task(request.params).await,
            ClientRequest::CancelTaskRequest(request) => self.cancel_task(request.params).await,
            ClientRequest::CompleteRequest(request) => self.complete(request.params).await,
            ClientRequest::SetLevelRequest(request) => self.set_level(request.params).await,
            ClientRequest::SubscribeRequest(request) => self.subscribe(request.params).await,
            ClientRequest::UnsubscribeRequest(request) => self.unsubscribe(request.params).await,
            ClientRequest::SubscriptionsListenRequest(request) => {
                let stream = (&self.id, &self.link, &self.cancel);
                let session = self.session.clone();
                watch::listen(
                    self.gateway(),
                    session,
                    stream,
                    request.params.notifications,
                )
                .await
            }
            request => Err(revision::method_not_found(&request)),
        }
    }

    pub(super) fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }

    fn view(&self) -> SessionView {
        self.gateway().view(&self.session)
    }

    /// The caller of this request, for what the upstream sends back during it.
    fn caller(&self) -> Caller {
        Caller::new(self.link.clone(), self.meta.clone(), &self.session.id).with_identity(
            self.session.owner(),
            self.http
                .as_ref()
                .and_then(|http| http.extensions.get::<SubjectToken>().cloned()),
        )
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
    ) -> Result<ServerResult, ErrorData> {
        let gateway = self.gateway();
        let session = &self.session;
        identity::settle(gateway).await;
        let mut client = request;
        client.protocol_version = revision::negotiate(&client.protocol_version);
        // Tasks are an extension of 2026-07-28: a session has none, whatever its client
        // declares, so no server is asked for one on its behalf.
        if let Some(extensions) = &mut client.capabilities.extensions {
            extensions.remove(TASKS_EXTENSION_ID);
        }
        // What the client can list from now on: the watcher tells it of any change since.
        watch::shown_at_initialize(gateway, session);
        let mut answer = identity::info(gateway, Some(session));
        answer.protocol_version = client.protocol_version.clone();
        session.set_client(Arc::new(client));
        Ok(ServerResult::InitializeResult(answer))
    }

    fn discover(&self) -> ServerResult {
        let mut info = identity::info(self.gateway(), Some(&self.session));
        // Tasks are the gateway's to keep, whoever does the work (see `crate::tasks`).
        info.capabilities
            .extensions
            .get_or_insert_default()
            .insert(TASKS_EXTENSION_ID.into(), Default::default());
        ServerResult::DiscoverResult(DiscoverResult::from_server_info(
            revision::supported().to_vec(),
            info,
        ))
    }

    /// A session's first list waits, for at most `[gateway] first_list_wait_ms`, for the
    /// upstreams still in their first connection attempt, so that a client that lists once
    /// right after `initialize` (and ignores `list_changed`) sees what they offer. The log
    /// names the upstreams the list had to go without; a hung upstream holds only this one
    /// list, and only up to the bound. Later lists never wait.
    async fn first_list(&self) {
        let session = &self.session;
        if session.with_state(|listed: &mut ListedOnce| std::mem::replace(&mut listed.0, true)) {
            return;
        }
        let gateway = self.gateway();
        let bound = Duration::from_millis(gateway.policy().config.gateway.first_list_wait_ms);
        tokio::select! {
            () = gateway.registry.first_attempts_of(|_| true, bound) => {}
            () = self.cancel.cancelled() => return,
        }
        let starting: Vec<_> = gateway
            .registry
            .upstreams()
            .iter()
            .filter(|upstream| !upstream.attempted())
            .map(|upstream| upstream.name.clone())
            .collect();
        if !starting.is_empty() {
            tracing::info!(
                session = %session.id,
                waited_ms = bound.as_millis(),
                ?starting,
                "first list sent without upstreams still starting; the client is told when they join"
            );
        }
    }

    /// A page of a list as clients see it, under `key`: each definition as its upstream
    /// wrote it (rmcp's types would drop every key they do not know), and for a client of
    /// 2026-07-28 the list's cache hints (`fresh_until`: see [`composed_hint`]).
    fn listed<'a>(
        &self,
        key: &str,
        page: impl Iterator<Item = &'a JsonObject>,
        next: Option<String>,
        fresh_until: Option<Instant>,
    ) -> ServerResult {
        let mut result = JsonObject::new();
        let page = page.map(|definition| Value::Object(definition.clone()));
        result.insert(key.into(), Value::Array(page.collect()));
        if let Some(next) = next {
            result.insert("nextCursor".into(), next.into());
        }
        if self.revision.is_stateless() {
            let (ttl_ms, cache_scope) = composed_hint(fresh_until);
            result.insert("ttlMs".into(), ttl_ms.unwrap_or(0).into());
            let cache_scope = serde_json::to_value(cache_scope).unwrap_or_default();
            result.insert("cacheScope".into(), cache_scope);
            result.insert("resultType".into(), "complete".into());
        }
        ServerResult::CustomResult(CustomResult(Value::Object(result)))
    }

    fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
    ) -> Result<ServerResult, ErrorData> {
        let session = &self.session;
        let tools = self.gateway().visible_tools(session);
        let (tools, next) = page(&tools, cursor(&request))?;
        // A search catalog's list grows with the session's searches: never cached.
        let fresh = (session.profile.catalog != CatalogMode::Search)
            .then(|| self.gateway().registry.catalog().fresh_until.tools);
        let tools = tools.iter().map(|tool| tool.as_ref());
        Ok(self.listed("tools", tools, next, fresh.flatten()))
    }

    async fn call_tool(&self, request: CallToolRequestParams) -> Result<ServerResult, ErrorData> {
        let mut caller = self.caller();
        caller.given_input = request.input_responses;
        // What the task's record keeps, should the call become a task.
        let asked = self
            .declared_tasks()
            .then(|| (request.name.to_string(), request.arguments.clone()));
        let result = self
            .gateway()
            .call(
                &self.session,
                CallRequest {
                    name: request.name.to_string(),
                    arguments: request.arguments,
                    cancel: self.cancel.clone(),
                    caller: Some(caller),
                    origin: Origin::Client,
                    trace: self.trace(),
                },
            )
            .await;
        if let Some((server, created)) = tasks::handle::carried(&result) {
            let (tool, arguments) = asked.unwrap_or_default();
            return self.upstream_task(tool, arguments, server, created).await;
        }
        match error::protocol_error(&result) {
            Some(error) => Err(error),
            None => Ok(ServerResult::CallToolResult(result)),
        }
    }

    fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
    ) -> Result<ServerResult, ErrorData> {
        let prompts: Vec<_> = self
            .view()
            .prompts()
            .map(|p| p.definition.object.clone())
            .collect();
        let (prompts, next) = page(&prompts, cursor(&request))?;
        let fresh = self.gateway().registry.catalog().fresh_until.prompts;
        let prompts = prompts.iter().map(|prompt| prompt.as_ref());
        Ok(self.listed("prompts", prompts, next, fresh))
    }

    async fn get_prompt(&self, request: GetPromptRequestParams) -> Result<ServerResult, ErrorData> {
        let view = self.view();
        let prompt = view.prompt(&request.name).ok_or_else(|| {
            ErrorData::invalid_params(format!("no prompt named `{}`", request.name), None)
        })?;
        log_event(
            &self.session,
            EventKind::PromptsGet,
            json!({"prompt": request.name, "arguments": request.arguments}),
        );
        let mut params = request;
        params.name = prompt.original.clone();
        let request = ClientRequest::GetPromptRequest(GetPromptRequest::new(params));
        match self.forward(&prompt.server, request).await? {
            result @ (ServerResult::GetPromptResult(_) | ServerResult::InputRequiredResult(_)) => {
                Ok(result)
            }
            other => Err(unexpected(&other)),
        }
    }

    fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
    ) -> Result<ServerResult, ErrorData> {
        let resources: Vec<_> = self.view().resources().map(|r| r.object.clone()).collect();
        let (resources, next) = page(&resources, cursor(&request))?;
        let fresh = self.gateway().registry.catalog().fresh_until.resources;
        let resources = resources.iter().map(|resource| resource.as_ref());
        Ok(self.listed("resources", resources, next, fresh))
    }

    fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
    ) -> Result<ServerResult, ErrorData> {
        let templates: Vec<_> = self
            .view()
            .resource_templates()
            .map(|t| t.object.clone())
            .collect();
        let (templates, next) = page(&templates, cursor(&request))?;
        let fresh = self
            .gateway()
            .registry
            .catalog()
            .fresh_until
            .resource_templates;
        let templates = templates.iter().map(|template| template.as_ref());
        Ok(self.listed("resourceTemplates", templates, next, fresh))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
    ) -> Result<ServerResult, ErrorData> {
        let (server, original) = self.owner_of(&self.view(), &request.uri)?;
        log_event(
            &self.session,
            EventKind::ResourcesRead,
            json!({"uri": request.uri}),
        );
        let mut params = request;
        params.uri = original;
        let request = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(params));
        match self.forward(&server, request).await? {
            ServerResult::ReadResourceResult(mut result) => {
                if self
                    .gateway()
                    .registry
                    .catalog()
                    .rewriting
                    .contains(&server)
                {
                    for contents in &mut result.contents {
                        resource_uri::rewrite_contents(&server, contents);
                    }
                }
                Ok(ServerResult::ReadResourceResult(result))
            }
            other => Err(unexpected(&other)),
        }
    }

    async fn subscribe(&self, request: SubscribeRequestParams) -> Result<ServerResult, ErrorData> {
        let (server, original) = self.owner_of(&self.view(), &request.uri)?;
        let link = self.session.link(self.link.client().clone());
        self.gateway()
            .subscriptions
            .subscribe(&request.uri, &self.session.id, link);
        let mut params = request;
        params.uri = original;
        let request = ClientRequest::SubscribeRequest(SubscribeRequest::new(params));
        self.forward(&server, request).await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
    ) -> Result<ServerResult, ErrorData> {
        let (server, original) = self.owner_of(&self.view(), &request.uri)?;
        if !self
            .gateway()
            .subscriptions
            .unsubscribe(&request.uri, &self.session.id)
        {
            return Ok(ServerResult::empty(()));
        }
        let mut params = request;
        params.uri = original;
        let request = ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(params));
        self.forward(&server, request).await
    }

    async fn complete(&self, request: CompleteRequestParams) -> Result<ServerResult, ErrorData> {
        let view = self.view();
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
        match self.forward(&server, request).await? {
            result @ ServerResult::CompleteResult(_) => Ok(result),
            other => Err(unexpected(&other)),
        }
    }

    /// This session's level; upstreams are told the lowest level any session wants.
    async fn set_level(&self, request: SetLevelRequestParams) -> Result<ServerResult, ErrorData> {
        let link = self.session.link(self.link.client().clone());
        adopt_level(self.gateway(), &self.session, link, request.level).await;
        // Kept with the session's shared record, for a replica that takes it over.
        let state = &self.gateway().state;
        if let Some(level) = self.session.record().log_level
            && let Err(e) = state.set_log_level(&self.session.id, &level).await
        {
            tracing::warn!(session = %&self.session.id, "log level not shared: {e}");
        }
        Ok(ServerResult::empty(()))
    }

    /// The visible server that owns a resource URI a client sent, and the URI as that
    /// server knows it.
    fn owner_of(&self, view: &SessionView, uri: &str) -> Result<(Arc<str>, String), ErrorData> {
        let not_found = || ErrorData::resource_not_found(format!("no resource `{uri}`"), None);
        let (server, original) = self
            .gateway()
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
    pub(super) async fn forward(
        &self,
        server: &str,
        request: ClientRequest,
    ) -> Result<ServerResult, ErrorData> {
        let upstream = self.gateway().registry.upstream(server).ok_or_else(|| {
            ErrorData::internal_error(format!("upstream `{server}` was removed"), None)
        })?;
        let caller = Some(self.caller());
        match Box::pin(upstream.request_for(request, &self.cancel, caller)).await {
            Ok(result) => Ok(result),
            Err(UpstreamError::Rejected { error, .. }) => Err(*error),
            Err(e) => Err(ErrorData::internal_error(e.to_string(), None)),
        }
    }

    /// The trace context the client sent with this call: `_meta.traceparent` when present,
    /// else the HTTP request's `traceparent` header.
    fn trace(&self) -> opentelemetry::Context {
        if let Some(traceparent) = self.meta.get_traceparent() {
            return telemetry::extract(Some(traceparent), self.meta.get_tracestate());
        }
        let header = |name: &str| {
            self.http
                .as_ref()
                .and_then(|parts| parts.headers.get(name))
                .and_then(|value| value.to_str().ok())
        };
        telemetry::extract(
            header(telemetry::TRACEPARENT),
            header(telemetry::TRACESTATE),
        )
    }
}

/// The cache hint of a list the gateway composes for one session: fresh as long as the
/// upstream lists it merges (`None`: as the revision's default, immediately stale), and
/// private, since what a session sees depends on its profile.
fn composed_hint(fresh_until: Option<Instant>) -> (Option<u64>, Option<CacheScope>) {
    let ttl_ms = fresh_until.map(|until| {
        let left = until.saturating_duration_since(Instant::now());
        u64::try_from(left.as_millis()).unwrap_or(u64::MAX)
    });
    (ttl_ms, Some(CacheScope::Private))
}

/// Makes `level` the session's log level; when that changes the lowest level any session
/// wants, every upstream is told before this returns (or was given time).
async fn adopt_level(gateway: &Gateway, session: &Session, link: ClientLink, level: LoggingLevel) {
    let listeners = &gateway.registry.downstream().listeners;
    let before = listeners.lowest();
    let lowest = listeners.set_level(&session.id.as_str().into(), session.reach(), link, level);
    if before != Some(lowest) {
        // Answered once the upstreams have the level (or were given time to take it), so
        // the client's next call already logs at it.
        let told = gateway
            .registry
            .upstreams()
            .into_iter()
            .map(|upstream| async move {
                upstream.set_log_level(lowest).await;
            });
        let _ = tokio::time::timeout(SET_LEVEL_WAIT, futures::future::join_all(told)).await;
    }
}

/// A session another replica opened (streamable HTTP, restored here) keeps the log level
/// its client set there.
pub(super) async fn resume_log_level(gateway: &Gateway, session: &Session) {
    let Some(client) = session.client() else {
        return;
    };
    let level = match gateway.state.touch_session(&session.id).await {
        Ok(Some(record)) => record.log_level,
        Ok(None) => None,
        Err(e) => {
            tracing::warn!(session = %session.id, "shared log level not read: {e}");
            None
        }
    };
    let level = level.and_then(|level| serde_json::from_value(level.into()).ok());
    if let Some(level) = level {
        adopt_level(gateway, session, session.link(client.clone()), level).await;
    }
}

/// `session`'s roots changed: every upstream may have asked for them, so each is told.
pub(super) async fn roots_changed(gateway: &Gateway, session: &str) {
    for upstream in gateway.registry.upstreams() {
        upstream.tell_roots_changed(session).await;
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

fn cursor(request: &Option<PaginatedRequestParams>) -> Option<&str> {
    request.as_ref().and_then(|r| r.cursor.as_deref())
}

pub(super) fn unexpected(got: &ServerResult) -> ErrorData {
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
