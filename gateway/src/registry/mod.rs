//! The federated catalog: every upstream's tools (and prompts) under their gateway names.
//!
//! The [`Registry`] owns the upstreams. Whenever one of them connects, drops or reports
//! `list_changed`, the catalog is rebuilt from every upstream's last known offer and
//! published on a watch channel: readers take a cheap `Arc` snapshot per request, and the
//! server layer watches it to send `list_changed` to its sessions.

pub mod naming;
pub mod profile;
pub mod resource_uri;
pub mod subscriptions;
pub mod tool;
pub mod view;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use rmcp::model::{Prompt, Resource, ResourceTemplate};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, ServerConfig};
use crate::upstream::{Health, Upstream};
pub use tool::FederatedTool;

/// A prompt re-exported under its federated name.
#[derive(Debug, Clone)]
pub struct FederatedPrompt {
    pub server: Arc<str>,
    pub original: String,
    /// The definition with the federated name.
    pub definition: Prompt,
}

/// One immutable snapshot of everything the gateway federates.
#[derive(Debug, Default)]
pub struct Catalog {
    /// By federated name, so iteration is in lexicographic order.
    pub tools: BTreeMap<String, Arc<FederatedTool>>,
    pub prompts: BTreeMap<String, FederatedPrompt>,
    /// Resources and templates under gateway URIs, with the server that owns each.
    pub resources: Vec<(Arc<str>, Resource)>,
    pub resource_templates: Vec<(Arc<str>, ResourceTemplate)>,
}

/// The upstreams and the catalog built from them.
pub struct Registry {
    upstreams: RwLock<BTreeMap<String, Arc<Upstream>>>,
    catalog: watch::Sender<Arc<Catalog>>,
    changed: mpsc::UnboundedSender<Arc<str>>,
    resource_updates: mpsc::UnboundedSender<(Arc<str>, String)>,
    shutdown: CancellationToken,
}

impl Registry {
    /// Starts every enabled upstream of `config` concurrently and waits until each has
    /// made its first connection attempt. One that fails is reported and retried in the
    /// background; the others serve.
    pub async fn start(
        config: &Config,
        shutdown: CancellationToken,
    ) -> (Arc<Registry>, mpsc::UnboundedReceiver<(Arc<str>, String)>) {
        let (changed, mut changes) = mpsc::unbounded_channel();
        let (resource_updates, updates) = mpsc::unbounded_channel();
        let registry = Arc::new(Registry {
            upstreams: RwLock::default(),
            catalog: watch::Sender::new(Arc::default()),
            changed,
            resource_updates,
            shutdown,
        });
        let first_attempts: Vec<_> = config
            .enabled_servers()
            .map(|(name, server)| registry.add(name, server.clone()))
            .collect();
        futures::future::join_all(first_attempts).await;
        registry.rebuild();
        // Rebuild on every later change; batched, since one event often comes with more.
        let weak = Arc::downgrade(&registry);
        tokio::spawn(async move {
            while changes.recv().await.is_some() {
                while changes.try_recv().is_ok() {}
                let Some(registry) = weak.upgrade() else {
                    break;
                };
                registry.rebuild();
            }
        });
        (registry, updates)
    }

    /// Starts one upstream; resolves after its first connection attempt.
    fn add(&self, name: &str, config: ServerConfig) -> impl Future<Output = ()> + use<> {
        let (upstream, first_attempt) = Upstream::start(
            name,
            config,
            self.changed.clone(),
            self.resource_updates.clone(),
            self.shutdown.child_token(),
        );
        self.write_upstreams().insert(name.to_owned(), upstream);
        async move {
            let _ = first_attempt.await;
        }
    }

    /// Applies a new configuration: added servers start, removed ones stop, changed ones
    /// restart, unchanged ones keep their connections.
    pub async fn reconfigure(&self, config: &Config) {
        let wanted: BTreeMap<&String, &ServerConfig> = config.enabled_servers().collect();
        let mut starts = Vec::new();
        let current: Vec<(String, Arc<Upstream>)> = self
            .read_upstreams()
            .iter()
            .map(|(n, u)| (n.clone(), u.clone()))
            .collect();
        for (name, upstream) in &current {
            if wanted.get(name).is_none_or(|c| **c != upstream.config) {
                upstream.stop();
                self.write_upstreams().remove(name);
            }
        }
        for (name, server) in wanted {
            if !self.read_upstreams().contains_key(name) {
                starts.push(self.add(name, server.clone()));
            }
        }
        futures::future::join_all(starts).await;
        self.rebuild();
    }

    /// The current catalog snapshot.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.borrow().clone()
    }

    /// A receiver that sees every new catalog.
    pub fn watch(&self) -> watch::Receiver<Arc<Catalog>> {
        self.catalog.subscribe()
    }

    pub fn upstream(&self, server: &str) -> Option<Arc<Upstream>> {
        self.read_upstreams().get(server).cloned()
    }

    pub fn upstreams(&self) -> Vec<Arc<Upstream>> {
        self.read_upstreams().values().cloned().collect()
    }

    /// Health of every upstream, by name.
    pub fn health(&self) -> BTreeMap<String, Health> {
        self.read_upstreams()
            .iter()
            .map(|(name, upstream)| (name.clone(), upstream.health()))
            .collect()
    }

    /// Stops every upstream (and kills their children).
    pub fn stop_all(&self) {
        for upstream in self.read_upstreams().values() {
            upstream.stop();
        }
    }

    fn read_upstreams(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<Upstream>>> {
        self.upstreams.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_upstreams(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<Upstream>>> {
        self.upstreams.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Builds a new catalog from every upstream's last known offer and publishes it.
    fn rebuild(&self) {
        let upstreams = self.upstreams();
        let offers: Vec<_> = upstreams.iter().map(|u| (u.clone(), u.offer())).collect();
        let previous = self.catalog();
        let tool_pairs = offers
            .iter()
            .flat_map(|(u, offer)| offer.tools.iter().map(|t| (&*u.name, t.name.as_ref())));
        let (tool_names, collisions) = naming::assign(tool_pairs);
        for c in &collisions {
            tracing::warn!(server = %c.server, tool = %c.name, assigned = %c.assigned, clashed_with = %c.clashed_with, "tool name collision resolved");
        }
        let prompt_pairs = offers
            .iter()
            .flat_map(|(u, offer)| offer.prompts.iter().map(|p| (&*u.name, p.name.as_str())));
        let (prompt_names, _) = naming::assign(prompt_pairs);
        let mut catalog = Catalog::default();
        for (upstream, offer) in &offers {
            for tool in &offer.tools {
                let name = &tool_names[&(upstream.name.to_string(), tool.name.to_string())];
                // Keep the compiled validators of an unchanged definition.
                let federated = match previous.tools.get(name) {
                    Some(old) if old.same_source(upstream, tool) => old.clone(),
                    _ => Arc::new(FederatedTool::new(name, upstream, tool)),
                };
                catalog.tools.insert(name.clone(), federated);
            }
            for resource in &offer.resources {
                let mut resource = resource.clone();
                resource.uri = resource_uri::to_gateway(&upstream.name, &resource.uri);
                catalog.resources.push((upstream.name.clone(), resource));
            }
            for template in &offer.resource_templates {
                let mut template = template.clone();
                template.uri_template =
                    resource_uri::template_to_gateway(&upstream.name, &template.uri_template);
                catalog
                    .resource_templates
                    .push((upstream.name.clone(), template));
            }
            for prompt in &offer.prompts {
                let name = &prompt_names[&(upstream.name.to_string(), prompt.name.clone())];
                let mut definition = prompt.clone();
                definition.name = name.clone();
                catalog.prompts.insert(
                    name.clone(),
                    FederatedPrompt {
                        server: upstream.name.clone(),
                        original: prompt.name.clone(),
                        definition,
                    },
                );
            }
        }
        self.catalog.send_replace(Arc::new(catalog));
    }
}
