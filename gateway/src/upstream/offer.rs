//! What one upstream offers: its tools, prompts, resources and resource templates, read to
//! the end of every paginated list.

use rmcp::model::{Prompt, Resource, ResourceTemplate, ServerCapabilities, Tool};
use rmcp::service::ServiceError;
use rmcp::{Peer, RoleClient};

use super::UpstreamEvent;

/// A snapshot of an upstream's lists, replaced whole on each `list_changed`.
#[derive(Debug, Clone, Default)]
pub struct Offer {
    pub capabilities: ServerCapabilities,
    pub tools: Vec<Tool>,
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    pub resource_templates: Vec<ResourceTemplate>,
}

impl Offer {
    /// Reads every list the server's capabilities announce.
    pub async fn read(
        peer: &Peer<RoleClient>,
        capabilities: ServerCapabilities,
    ) -> Result<Offer, ServiceError> {
        let mut offer = Offer {
            capabilities,
            ..Offer::default()
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
