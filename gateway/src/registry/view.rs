//! What one session may see of the catalog: the catalog snapshot seen through the
//! session's profile.
//!
//! Every handler that lists or looks up a tool, prompt or resource goes through a
//! [`SessionView`], so a hidden item cannot leak through an arm that forgot a check: the
//! view has no way to hand out what the profile hides. Presentation (which of the visible
//! tools a client lists in `native`, `code` or `both` mode) is decided by the gateway on
//! top of the view; the view answers only "may this session see it".

use std::sync::Arc;

use rmcp::model::{Resource, ResourceTemplate};

use super::pins::Hold;
use super::profile::Profile;
use super::{Catalog, FederatedPrompt, FederatedTool};
use crate::upstream::offer::Listed;

/// One catalog snapshot through one profile.
pub struct SessionView {
    catalog: Arc<Catalog>,
    profile: Arc<Profile>,
}

impl SessionView {
    pub fn new(catalog: Arc<Catalog>, profile: Arc<Profile>) -> Self {
        Self { catalog, profile }
    }

    /// The snapshot this view reads (to tell whether two views saw the same catalog).
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    pub fn profile(&self) -> &Arc<Profile> {
        &self.profile
    }

    /// The visible federated tools, in lexicographic order of their names.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<FederatedTool>> {
        self.catalog
            .tools
            .values()
            .filter(|tool| self.profile.sees(&tool.name))
    }

    /// A visible federated tool by its gateway name.
    pub fn tool(&self, name: &str) -> Option<&Arc<FederatedTool>> {
        self.catalog
            .tools
            .get(name)
            .filter(|_| self.profile.sees(name))
    }

    /// A visible tool held for approval with no approved definition to show (not listed).
    pub fn withheld(&self, name: &str) -> Option<&Arc<Hold>> {
        self.catalog
            .withheld
            .get(name)
            .filter(|_| self.profile.sees(name))
    }

    /// The visible prompts, in lexicographic order of their names.
    pub fn prompts(&self) -> impl Iterator<Item = &FederatedPrompt> {
        self.catalog
            .prompts
            .values()
            .filter(|prompt| self.profile.sees(&prompt.definition.name))
    }

    /// A visible prompt by its gateway name.
    pub fn prompt(&self, name: &str) -> Option<&FederatedPrompt> {
        self.catalog
            .prompts
            .get(name)
            .filter(|_| self.profile.sees(name))
    }

    /// The resources of the servers this session sees.
    pub fn resources(&self) -> impl Iterator<Item = &Listed<Resource>> {
        self.catalog
            .resources
            .iter()
            .filter(|(server, _)| self.sees_server(server))
            .map(|(_, resource)| resource)
    }

    /// The resource templates of the servers this session sees.
    pub fn resource_templates(&self) -> impl Iterator<Item = &Listed<ResourceTemplate>> {
        self.catalog
            .resource_templates
            .iter()
            .filter(|(server, _)| self.sees_server(server))
            .map(|(_, template)| template)
    }

    /// Whether the session sees `server`'s resources (and may read or subscribe to them).
    /// Decided by the names the server's tools are exposed under (its prefix), so a
    /// profile written against those names covers its resources too.
    pub fn sees_server(&self, server: &str) -> bool {
        self.profile.sees_prefix(&self.catalog.prefix(server))
    }

    /// What the servers the session sees say of themselves (`instructions`), by server
    /// name, in order.
    pub fn instructions(&self) -> impl Iterator<Item = (&str, &str)> {
        self.catalog
            .instructions
            .iter()
            .filter(|(server, _)| self.sees_server(server))
            .map(|(server, said)| (server.as_ref(), said.as_str()))
    }

    /// Whether the session sees the federated name `name`, known or not (used to tell
    /// "hidden" from "its server is down").
    pub fn sees_name(&self, name: &str) -> bool {
        self.profile.sees(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, ProfileConfig};
    use crate::registry::profile::Profiles;

    #[test]
    fn a_view_offers_only_what_the_profile_allows() {
        let mut config = Config::default();
        config.profiles.insert(
            "kv".into(),
            ProfileConfig {
                allow: vec!["mcp__kv__*".into()],
                ..Default::default()
            },
        );
        let profile = Profiles::new(&config).get(Some("kv")).unwrap();
        let view = SessionView::new(Arc::new(Catalog::default()), profile);
        assert!(view.sees_server("kv"));
        assert!(!view.sees_server("other"));
        assert!(view.sees_name("mcp__kv__get"));
        assert!(!view.sees_name("mcp__other__get"));
        assert!(
            view.tool("mcp__kv__get").is_none(),
            "an empty catalog has no tools"
        );
    }

    #[test]
    fn a_prefixed_server_is_seen_through_its_exposed_names() {
        let mut config = Config::default();
        config.profiles.insert(
            "store".into(),
            ProfileConfig {
                allow: vec!["store_*".into()],
                ..Default::default()
            },
        );
        let profile = Profiles::new(&config).get(Some("store")).unwrap();
        let mut catalog = Catalog::default();
        catalog.prefixes.insert("kv".into(), "store_".into());
        catalog
            .prefixes
            .insert("other".into(), "mcp__other__".into());
        let view = SessionView::new(Arc::new(catalog), profile);
        assert!(
            view.sees_server("kv"),
            "`store_*` covers kv's exposed names"
        );
        assert!(!view.sees_server("other"));
    }
}
