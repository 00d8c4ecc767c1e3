//! What one upstream offers: who it says it is at `initialize`, and its tools, prompts,
//! resources and resource templates, read to the end of every paginated list, with how
//! long the upstream says each list stays fresh (`ttlMs`, protocol 2026-07-28). A list is
//! read again when the upstream says it changed, and when its `ttlMs` has run out
//! ([`FreshUntil::stale`]), not before.

use std::time::{Duration, Instant};

use rmcp::model::{
    Implementation, Prompt, Resource, ResourceTemplate, ServerCapabilities, ServerPeerInfo, Tool,
};
use rmcp::service::{MergedList, ServiceError};
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
    /// Until when each list is fresh, as the upstream said.
    pub fresh_until: FreshUntil,
}

/// Until when each of an upstream's lists is fresh: `None` where the upstream gave no
/// `ttlMs`, or 0 (it says when a list changes, or never). A list past its time is read
/// again.
#[derive(Debug, Clone, Copy, Default)]
pub struct FreshUntil {
    pub tools: Option<Instant>,
    pub prompts: Option<Instant>,
    pub resources: Option<Instant>,
    pub resource_templates: Option<Instant>,
}

/// How soon after a list was read it is read again at the earliest, whatever `ttlMs` the
/// upstream gave (a few milliseconds would have the gateway list without pause).
pub const RELIST_AT_MOST_EVERY: Duration = Duration::from_secs(1);

impl FreshUntil {
    /// When the first of the lists stops being fresh (`None`: none ever does).
    pub fn next(&self) -> Option<Instant> {
        [
            self.tools,
            self.prompts,
            self.resources,
            self.resource_templates,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// What reads again the lists that are no longer fresh at `now`.
    pub fn stale(&self, now: Instant) -> Vec<UpstreamEvent> {
        let stale = |until: Option<Instant>| until.is_some_and(|until| until <= now);
        let mut events = Vec::new();
        if stale(self.tools) {
            events.push(UpstreamEvent::ToolsChanged);
        }
        if stale(self.prompts) {
            events.push(UpstreamEvent::PromptsChanged);
        }
        if stale(self.resources) || stale(self.resource_templates) {
            events.push(UpstreamEvent::ResourcesChanged);
        }
        events
    }
}

/// The items of `list` (none when there is no list), and until when the upstream says
/// they are fresh.
fn fresh<T>(list: Option<MergedList<T>>) -> (Vec<T>, Option<Instant>) {
    let Some(list) = list else {
        return (Vec::new(), None);
    };
    // `ttlMs: 0` (rmcp's servers give it unless told otherwise) promises no freshness: it
    // is taken as no hint, so the list is read again when the server says it changed,
    // not polled.
    let until = list
        .ttl_ms
        .filter(|ttl| *ttl > 0)
        .and_then(|ttl| Instant::now().checked_add(Duration::from_millis(ttl)));
    (list.items, until)
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
            offer.read_tools(peer).await?;
        }
        offer.read_prompts(peer).await?;
        offer.read_resources(peer).await?;
        Ok(offer)
    }

    /// Whether the list that `event` names differs in `other`.
    pub fn differs(&self, other: &Offer, event: &UpstreamEvent) -> bool {
        match event {
            UpstreamEvent::ToolsChanged => self.tools != other.tools,
            UpstreamEvent::PromptsChanged => self.prompts != other.prompts,
            UpstreamEvent::ResourcesChanged => {
                self.resources != other.resources
                    || self.resource_templates != other.resource_templates
            }
            UpstreamEvent::ResourceUpdated(_) => false,
        }
    }

    /// A copy with the list that `event` says changed read again.
    pub async fn refreshed(
        &self,
        peer: &Peer<RoleClient>,
        event: &UpstreamEvent,
    ) -> Result<Offer, ServiceError> {
        let mut offer = self.clone();
        match event {
            UpstreamEvent::ToolsChanged => offer.read_tools(peer).await?,
            UpstreamEvent::PromptsChanged => offer.read_prompts(peer).await?,
            UpstreamEvent::ResourcesChanged => offer.read_resources(peer).await?,
            UpstreamEvent::ResourceUpdated(_) => {}
        }
        Ok(offer)
    }

    async fn read_tools(&mut self, peer: &Peer<RoleClient>) -> Result<(), ServiceError> {
        (self.tools, self.fresh_until.tools) =
            fresh(Some(peer.list_all_tools_with_cache_hint().await?));
        Ok(())
    }

    async fn read_prompts(&mut self, peer: &Peer<RoleClient>) -> Result<(), ServiceError> {
        if self.capabilities.prompts.is_some() {
            (self.prompts, self.fresh_until.prompts) = fresh(tolerate_missing(
                peer.list_all_prompts_with_cache_hint().await,
            )?);
        }
        Ok(())
    }

    async fn read_resources(&mut self, peer: &Peer<RoleClient>) -> Result<(), ServiceError> {
        if self.capabilities.resources.is_some() {
            (self.resources, self.fresh_until.resources) = fresh(tolerate_missing(
                peer.list_all_resources_with_cache_hint().await,
            )?);
            (self.resource_templates, self.fresh_until.resource_templates) = fresh(
                tolerate_missing(peer.list_all_resource_templates_with_cache_hint().await)?,
            );
        }
        Ok(())
    }
}

/// A server that announces a capability but answers "method not found" for its list
/// offers nothing there; that must not make the whole upstream fail.
fn tolerate_missing<T>(
    result: Result<MergedList<T>, ServiceError>,
) -> Result<Option<MergedList<T>>, ServiceError> {
    match result {
        Err(ServiceError::McpError(error))
            if error.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND =>
        {
            Ok(None)
        }
        other => other.map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_stale_once_its_ttl_ran_out_and_resources_go_with_their_templates() {
        let now = Instant::now();
        let later = now + Duration::from_secs(60);
        let fresh = FreshUntil {
            tools: Some(now),
            prompts: Some(later),
            resources: None,
            resource_templates: Some(now),
        };
        assert_eq!(fresh.next(), Some(now));
        assert_eq!(
            fresh.stale(now),
            [UpstreamEvent::ToolsChanged, UpstreamEvent::ResourcesChanged]
        );
        assert!(fresh.stale(now - Duration::from_millis(1)).is_empty());
        assert_eq!(FreshUntil::default().next(), None);
        assert!(FreshUntil::default().stale(later).is_empty());
    }
}
