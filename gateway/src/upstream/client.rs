//! The gateway's side of each upstream session: what it tells the upstream about itself,
//! and where the upstream's notifications go.
//!
//! Tool-list changes go to the supervisor (which refreshes the catalog); progress goes to
//! the downstream client that made the call, through the progress routes; log messages go
//! to the gateway log.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[allow(
    deprecated,
    reason = "upstreams on 2025 protocols still send log messages"
)]
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, LoggingLevel,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
    ResourceUpdatedNotificationParam,
};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, Peer, RoleClient, RoleServer};
use tokio::sync::mpsc;

/// Something an upstream told us that changes what the gateway offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamEvent {
    ToolsChanged,
    PromptsChanged,
    ResourcesChanged,
    ResourceUpdated(String),
}

/// Where progress for one in-flight upstream request goes: the downstream peer and the
/// token that peer chose.
#[derive(Clone)]
pub struct ProgressSink {
    pub peer: Peer<RoleServer>,
    pub token: ProgressToken,
}

/// Upstream progress token → downstream sink, for the calls in flight on one upstream.
#[derive(Clone, Default)]
pub struct ProgressRoutes(Arc<Mutex<HashMap<ProgressToken, ProgressSink>>>);

impl ProgressRoutes {
    /// Routes `upstream_token` to `sink` until the returned guard is dropped.
    pub fn route(&self, upstream_token: ProgressToken, sink: ProgressSink) -> RouteGuard {
        self.lock().insert(upstream_token.clone(), sink);
        RouteGuard {
            routes: self.clone(),
            token: upstream_token,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ProgressToken, ProgressSink>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn sink_for(&self, token: &ProgressToken) -> Option<ProgressSink> {
        self.lock().get(token).cloned()
    }
}

/// Removes a progress route when the call that owns it ends.
pub struct RouteGuard {
    routes: ProgressRoutes,
    token: ProgressToken,
}

impl Drop for RouteGuard {
    fn drop(&mut self) {
        self.routes.lock().remove(&self.token);
    }
}

/// The rmcp client handler for one upstream connection.
pub struct UpstreamClient {
    server: Arc<str>,
    events: mpsc::UnboundedSender<UpstreamEvent>,
    progress: ProgressRoutes,
}

impl UpstreamClient {
    pub fn new(
        server: Arc<str>,
        events: mpsc::UnboundedSender<UpstreamEvent>,
        progress: ProgressRoutes,
    ) -> Self {
        Self {
            server,
            events,
            progress,
        }
    }
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mcp-gateway", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let Some(sink) = self.progress.sink_for(&params.progress_token) else {
            return;
        };
        let mut forwarded = params;
        forwarded.progress_token = sink.token;
        if let Err(e) = sink.peer.notify_progress(forwarded).await {
            tracing::debug!(server = %self.server, "progress not delivered: {e}");
        }
    }

    #[allow(
        deprecated,
        reason = "upstreams on 2025 protocols still send log messages"
    )]
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let logger = params.logger.as_deref().unwrap_or("-");
        let data = &params.data;
        match params.level {
            LoggingLevel::Debug => {
                tracing::debug!(target: "upstream", server = %self.server, logger, "{data}")
            }
            LoggingLevel::Info | LoggingLevel::Notice => {
                tracing::info!(target: "upstream", server = %self.server, logger, "{data}")
            }
            LoggingLevel::Warning => {
                tracing::warn!(target: "upstream", server = %self.server, logger, "{data}")
            }
            _ => tracing::error!(target: "upstream", server = %self.server, logger, "{data}"),
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
