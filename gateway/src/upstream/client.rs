//! The gateway's side of each upstream session: what it tells the upstream about itself,
//! and where the upstream's requests and notifications go.
//!
//! The gateway declares sampling, elicitation (form and URL) and roots, so an upstream
//! offers what needs them; each such request is relayed to the client whose call it
//! belongs to (see [`crate::relay`]). Tool, prompt and resource list changes go to the
//! supervisor (which refreshes the catalog); progress and log messages go to the calling
//! client, log messages also to the gateway log. A server spoken to at 2026-07-28 may still
//! ask its client by request during a call the lane made, which rmcp would refuse: the
//! lane hands such requests to [`StreamRequests`], which relays them the same way.

#![allow(
    deprecated,
    reason = "upstreams on 2025 protocols still log, sample and ask for roots"
)]

use std::sync::Arc;

use rmcp::model::{
    ClientCapabilities, ClientConfig, ClientJsonRpcMessage, ClientResult, CreateMessageRequest,
    CreateMessageRequestParams, CreateMessageResult, CustomNotification, ElicitRequest,
    ElicitRequestParams, ElicitResult, ElicitationCapability, FormElicitationCapability, GetMeta,
    Implementation, JsonRpcRequest, ListRootsRequest, ListRootsResult, LoggingLevel,
    LoggingMessageNotification, LoggingMessageNotificationParam, PingRequest,
    ProgressNotificationParam, ProtocolVersion, RequestId, ResourceUpdatedNotificationParam,
    ServerNotification, ServerRequest, SubscriptionFilter, UrlElicitationCapability,
};
use rmcp::service::{InboundStreamOrigin, NotificationContext, RequestContext, Service};
use rmcp::{ClientHandler, ErrorData, Peer, RoleClient};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::relay::{self, CallRoutes, Caller, Downstream};

/// Something an upstream told us that changes what the gateway offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamEvent {
    ToolsChanged,
    PromptsChanged,
    ResourcesChanged,
    ResourceUpdated(String),
}

/// How many of an upstream's log messages may be on their way to clients at once; more
/// are dropped (still logged here). rmcp hands each notification to a task of its own
/// as fast as the upstream writes them, and clients that read their streams slower
/// would otherwise keep every one of those tasks, and their messages, alive.
const LOG_MESSAGES_IN_FLIGHT: usize = 64;

/// The rmcp client handler for one upstream connection.
pub struct UpstreamClient {
    server: Arc<str>,
    events: mpsc::UnboundedSender<UpstreamEvent>,
    calls: CallRoutes,
    downstream: Arc<Downstream>,
    log_messages: Semaphore,
}

impl UpstreamClient {
    pub fn new(
        server: Arc<str>,
        events: mpsc::UnboundedSender<UpstreamEvent>,
        calls: CallRoutes,
        downstream: Arc<Downstream>,
    ) -> Self {
        Self {
            server,
            events,
            calls,
            downstream,
            log_messages: Semaphore::new(LOG_MESSAGES_IN_FLIGHT),
        }
    }

    async fn relay(
        &self,
        request: ServerRequest,
        context: &RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        relay::requests::relay(
            &self.server,
            &self.downstream,
            &self.calls,
            request,
            context,
        )
        .await
    }
}

/// The requests a server spoken to at 2026-07-28 sends during a call the lane made (on
/// the call's stream over HTTP; anywhere over stdio). rmcp did not make that call, so it
/// would refuse them as belonging to none of its requests; the lane hands them here
/// instead, and each is relayed to the call's client as rmcp would have relayed it (a
/// 2025 client gets the request, a 2026 one is asked in its call's result), the answer
/// going back to the lane to send. When the server withdraws one, the lane cancels it
/// here as rmcp cancels its own (see [`super::asked`]).
pub struct StreamRequests {
    handler: UpstreamClient,
    peer: Peer<RoleClient>,
}

impl StreamRequests {
    /// Relays with `handler` (a twin of the connection's own), answering for `peer`.
    pub fn new(handler: UpstreamClient, peer: Peer<RoleClient>) -> Self {
        Self { handler, peer }
    }

    /// The lane's call `call`, on whose stream a request just came, with its client as
    /// the call's route names it now: the relaying runs later, when the call may be over.
    pub fn during(&self, call: &RequestId) -> During {
        During {
            call: call.clone(),
            caller: self.handler.calls.caller_of_call(call),
        }
    }

    /// The answer to `request`, which came on the stream of a call of the lane's
    /// (`during`), or during the lane's calls on a transport that does not tell which
    /// (`None`); no answer once `withdrawn` is cancelled (the server withdrew the
    /// request, or its call ended: the client is then told too), as the server expects
    /// none.
    pub async fn answer(
        &self,
        during: Option<During>,
        request: JsonRpcRequest<ServerRequest>,
        withdrawn: CancellationToken,
    ) -> Option<ClientJsonRpcMessage> {
        // Withdrawn before its relaying began (its call ended at once): nobody asks.
        if withdrawn.is_cancelled() {
            return None;
        }
        let JsonRpcRequest {
            id, mut request, ..
        } = request;
        let mut context = RequestContext::new(id.clone(), self.peer.clone());
        context.ct = withdrawn.clone();
        std::mem::swap(&mut context.meta, request.get_meta_mut());
        if let Some(During { call, caller }) = during {
            let extensions = &mut context.extensions;
            extensions.insert(InboundStreamOrigin::OutboundRequest(call));
            if let Some(caller) = caller {
                extensions.insert(relay::requests::Related(caller));
            }
        }
        let answered = Service::handle_request(&self.handler, request, context).await;
        if withdrawn.is_cancelled() {
            return None;
        }
        Some(match answered {
            Ok(result) => ClientJsonRpcMessage::response(result, id),
            Err(error) => ClientJsonRpcMessage::error(error, Some(id)),
        })
    }
}

/// The call of the lane's on whose stream a request came, and its client, looked up as
/// the request was read ([`StreamRequests::during`]).
pub struct During {
    call: RequestId,
    /// `None` when the call has no route (a call of the gateway's own).
    caller: Option<Caller>,
}

/// The client's answer was not the kind the request asks for.
fn mismatched(answer: &ClientResult) -> ErrorData {
    ErrorData::internal_error(
        format!("the client answered with an unexpected result: {answer:?}")
            .chars()
            .take(200)
            .collect::<String>(),
        None,
    )
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder()
            .enable_roots()
            .enable_roots_list_changed()
            .enable_sampling()
            .enable_elicitation_with(
                ElicitationCapability::new()
                    .with_form(FormElicitationCapability::new())
                    .with_url(UrlElicitationCapability::new()),
            )
            .build();
        // What `initialize` asks for, when the gateway opens a session: the last revision
        // that has one (`server/discover` names its own versions).
        ClientConfig::new(
            capabilities,
            Implementation::new("mcp-gateway", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn ping(&self, context: RequestContext<RoleClient>) -> Result<(), ErrorData> {
        let request = ServerRequest::PingRequest(PingRequest::default());
        self.relay(request, &context).await.map(drop)
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        match self.relay(request, &context).await? {
            ClientResult::CreateMessageResult(result) => Ok(*result),
            other => Err(mismatched(&other)),
        }
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        match self.relay(request, &context).await? {
            ClientResult::ElicitResult(result) => Ok(result),
            other => Err(mismatched(&other)),
        }
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let request = ServerRequest::ListRootsRequest(ListRootsRequest::default());
        match self.relay(request, &context).await? {
            ClientResult::ListRootsResult(result) => Ok(result),
            other => Err(mismatched(&other)),
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(caller) = self.calls.progress_caller(&params.progress_token) {
            caller.notify_progress(params).await;
        }
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        log_locally(&self.server, &params);
        let Ok(_in_flight) = self.log_messages.try_acquire() else {
            tracing::debug!(server = %self.server, "log message not relayed: clients lag behind");
            return;
        };
        let caller = self
            .calls
            .caller_of(context.extensions.get::<InboundStreamOrigin>())
            .ok();
        let message = relay::listeners::tagged(&self.server, params);
        for link in self
            .downstream
            .listeners
            .recipients(&message, caller.as_ref())
        {
            let notification = ServerNotification::LoggingMessageNotification(
                LoggingMessageNotification::new(message.clone()),
            );
            if !link.notify(notification).await {
                tracing::debug!(server = %self.server, "log message not delivered: the client left");
            }
        }
    }

    /// `notifications/elicitation/complete` (URL mode) goes to the client whose call
    /// started the elicitation; other unknown notifications are dropped.
    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        context: NotificationContext<RoleClient>,
    ) {
        if notification.method != "notifications/elicitation/complete" {
            return;
        }
        let Ok(caller) = self
            .calls
            .caller_of(context.extensions.get::<InboundStreamOrigin>())
        else {
            return;
        };
        let forwarded = ServerNotification::CustomNotification(notification);
        if !caller.link.notify(forwarded).await {
            tracing::debug!(server = %self.server, "elicitation completion not delivered");
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.events.send(UpstreamEvent::ToolsChanged);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.events.send(UpstreamEvent::PromptsChanged);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.events.send(UpstreamEvent::ResourcesChanged);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self
            .events
            .send(UpstreamEvent::ResourceUpdated(params.uri.to_string()));
    }
}

/// The gateway log's copy of an upstream log message.
fn log_locally(server: &str, params: &LoggingMessageNotificationParam) {
    let logger = params.logger.as_deref().unwrap_or("-");
    let data = &params.data;
    match params.level {
        LoggingLevel::Debug => tracing::debug!(target: "upstream", server, logger, "{data}"),
        LoggingLevel::Info | LoggingLevel::Notice => {
            tracing::info!(target: "upstream", server, logger, "{data}")
        }
        LoggingLevel::Warning => tracing::warn!(target: "upstream", server, logger, "{data}"),
        _ => tracing::error!(target: "upstream", server, logger, "{data}"),
    }
}

/// Listens to what a server of 2026-07-28 says changed (its tools, prompts, resources)
/// on a `subscriptions/listen` stream, for as long as the connection lasts, and passes it
/// on as a server of 2025 would have said it with notifications of its own.
pub async fn listen_for_changes(
    server: Arc<str>,
    peer: rmcp::Peer<RoleClient>,
    events: mpsc::UnboundedSender<UpstreamEvent>,
) {
    let mut filter = SubscriptionFilter::new();
    filter.tools_list_changed = Some(true);
    filter.prompts_list_changed = Some(true);
    filter.resources_list_changed = Some(true);
    let mut subscription = match peer.listen(filter).await {
        Ok(subscription) => subscription,
        Err(e) => {
            tracing::debug!(%server, "no subscription to its changes: {e}");
            return;
        }
    };
    while let Ok(Some(notification)) = subscription.next().await {
        let event = match notification {
            ServerNotification::ToolListChangedNotification(_) => UpstreamEvent::ToolsChanged,
            ServerNotification::PromptListChangedNotification(_) => UpstreamEvent::PromptsChanged,
            ServerNotification::ResourceListChangedNotification(_) => {
                UpstreamEvent::ResourcesChanged
            }
            _ => continue,
        };
        if events.send(event).is_err() {
            break;
        }
    }
}
