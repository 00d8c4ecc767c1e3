//! What one upstream offers: who it says it is at `initialize`, and its tools, prompts,
//! resources and resource templates, read to the end of every paginated list.

use rmcp::model::{
    Implementation, Prompt, Resource, ResourceTemplate, ServerCapabilities, ServerPeerInfo, Tool,
};
use rmcp::service::ServiceError;
use rmcp::{Peer, RoleClient};

use super::UpstreamEvent;

/// A snapshot of an upstream's lists, replaced whole on each `list_changed`.
#[derive(Debug, Clone, Default)]
pub struct Offer {
    pub capabilities: ServerCapabilities,
    /// The server's `serverInfo` and `instructions`, as its `initialize` result gave them.
    pub server_info: Option<Implementation>,
    pub instructions: Option<String>,
    pub tools: Vec<Tool>,
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    pub resource_templates: Vec<ResourceTemplate>,
}

impl Offer {
    /// Reads every list the server's capabilities (in its `initialize` result) announce.
    pub async fn read(
        peer: &Peer<RoleClient>,
        initialized: Option<ServerPeerInfo>,
    ) -> Result<Offer, ServiceError> {
        let mut offer = match initialized {
            Some(info) => Offer {
                capabilities: info.capabilities,
                server_info: info.server_info,
                instructions: info.instructions,
                ..Offer::default()
            },
            None => Offer::default(),
        };
        if offer.capabilities.tools.is_some() {
            offer.tools = peer.list_all_tools().await?;
        }
        offer.read_prompts(peer).await?;
        offer.read_resources(peer).await?;
        Ok(offer)
    }

    /// A copy with the list that `event` says changed read again.
    pub async fn refreshed(
        &self,
        peer: &Peer<RoleClient>,
        event: &UpstreamEvent,
    ) -> Result<Offer, ServiceError> {
        let mut offer = self.clone();
        match event {
            UpstreamEvent::ToolsChanged => offer.tools = peer.list_all_tools().await?,
            UpstreamEvent::PromptsChanged => offer.read_prompts(peer).await?,
            UpstreamEvent::ResourcesChanged => offer.read_resources(peer).await?,
            UpstreamEvent::ResourceUpdated(_) => {}
        }
        Ok(offer)
    }

    async fn read_prompts(&mut self, peer: &Peer<RoleClient>) -> Result<(), ServiceError> {
        if self.capabilities.prompts.is_some() {
            self.prompts = tolerate_missing(peer.list_all_prompts().await)?;
        }
        Ok(())
    }

    async fn read_resources(&mut self, peer: &Peer<RoleClient>) -> Result<(), ServiceError> {
        if self.capabilities.resources.is_some() {
            self.resources = tolerate_missing(peer.list_all_resources().await)?;
            self.resource_templates = tolerate_missing(peer.list_all_resource_templates().await)?;
        }
        Ok(())
    }
}

/// A server that announces a capability but answers "method not found" for its list
/// offers nothing there; that must not make the whole upstream fail.
fn tolerate_missing<T: Default>(result: Result<T, ServiceError>) -> Result<T, ServiceError> {
    match result {
        Err(ServiceError::McpError(error))
            if error.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND =>
        {
            Ok(T::default())
        }
        other => other,
    }
}
