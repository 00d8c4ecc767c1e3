//! The federated catalog: every upstream's tools (and prompts) under their gateway names.
//!
//! The [`Registry`] owns the upstreams. Whenever one of them connects, drops or reports
//! `list_changed`, the catalog is rebuilt from every upstream's last known offer and
//! published on a watch channel: readers take a cheap `Arc` snapshot per request, and the
//! server layer watches it to send `list_changed` to its sessions.
//!
//! A reload or a restart loses no call: a changed server's new instance starts beside the
//! old one and takes new calls once its first connection attempt is over; the old instance
//! (like a removed server) is retired, which lets its requests in flight finish for up to
//! `[gateway] shutdown_grace_ms` before it stops.

pub mod instructions;
pub mod naming;
pub mod pins;
pub mod profile;
pub mod search;
pub mod subscriptions;
pub mod tool;
pub mod view;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rmcp::model::{Prompt, Resource, ResourceTemplate};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, ServerConfig};
use crate::relay::Downstream;
use crate::upstream::offer::{FreshUntil, Listed, Offer};
use crate::upstream::resource_uri;
use crate::upstream::{Health, ResourceNews, Upstream};
use pins::{Pins, Verdict};
pub use tool::FederatedTool;

/// A prompt re-exported under its federated name.
#[derive(Debug, Clone)]
pub struct FederatedPrompt {
    pub server: Arc<str>,
    pub original: String,
    /// The definition with the federated name: the upstream's object, and the gateway's
    /// view of it.
    pub definition: Listed<Prompt>,
}

/// One immutable snapshot of everything the gateway federates.
#[derive(Debug, Default)]
pub struct Catalog {
    /// By federated name, so iteration is in lexicographic order.
    pub tools: BTreeMap<String, Arc<FederatedTool>>,
    pub prompts: BTreeMap<String, FederatedPrompt>,
    /// Resources and templates under the URIs clients see, with the server that owns each.
    pub resources: Vec<(Arc<str>, Listed<Resource>)>,
    pub resource_templates: Vec<(Arc<str>, Listed<ResourceTemplate>)>,
    /// Servers whose URIs are rewritten to `mcp-gateway://<server>/…`; the others pass
    /// theirs through.
    pub rewriting: BTreeSet<Arc<str>>,
    /// Each server's name prefix as clients see it (`mcp__<server>__` unless configured):
    /// what profiles match to decide whether a session sees the server's resources.
    pub prefixes: BTreeMap<Arc<str>, String>,
    /// Servers whose offer this catalog holds (they have connected at least once): their
    /// names are settled, see [`naming`].
    pub settled: BTreeSet<Arc<str>>,
    /// Names and URIs two servers both offered, and who kept them.
    pub collisions: Vec<naming::Collision>,
    /// What each server that gave any said of itself (its `instructions`), by server.
    pub instructions: BTreeMap<Arc<str>, String>,
    /// Tools held for an operator's approval with no approved definition to show (see
    /// [`pins`]), by the name they would have: not listed, their calls refused.
    pub withheld: BTreeMap<String, Arc<pins::Hold>>,
    /// Until when each merged list is fresh: the earliest of its upstreams' `ttlMs`;
    /// `None` when one of them gave none.
    pub fresh_until: FreshUntil,
}

impl Catalog {
    /// `server`'s name prefix as clients see it; the default one for a server the catalog
    /// does not know.
    pub fn prefix(&self, server: &str) -> String {
        self.prefixes
            .get(server)
            .cloned()
            .unwrap_or_else(|| naming::prefix(server))
    }

    /// The server that owns a URI a client sent, and that URI as the server knows it: a
    /// gateway URI names its server; a passed-through URI belongs to the server that lists
    /// it, else to the one with a matching template, else to the only pass-through server
    /// that offers resources at all.
    pub fn resource_owner(&self, uri: &str) -> Option<(Arc<str>, String)> {
        if let Some((server, original)) = resource_uri::from_gateway(uri)
            && let Some(server) = self.rewriting.get(server)
        {
            return Some((server.clone(), original));
        }
        let passed = |server: &Arc<str>| !self.rewriting.contains(server);
        let listed = self
            .resources
            .iter()
            .find(|(server, r)| passed(server) && r.uri == uri);
        let templated = || {
            self.resource_templates.iter().find(|(server, t)| {
                passed(server)
                    && (t.uri_template == uri
                        || resource_uri::matches_template(&t.uri_template, uri))
            })
        };
        let server = match (listed, templated()) {
            (Some((server, _)), _) | (None, Some((server, _))) => server.clone(),
            (None, None) => {
                let offering: BTreeSet<&Arc<str>> = self
                    .resources
                    .iter()
                    .map(|(server, _)| server)
                    .chain(self.resource_templates.iter().map(|(server, _)| server))
                    .filter(|server| passed(server))
                    .collect();
                match offering.into_iter().collect::<Vec<_>>().as_slice() {
                    [only] => (*only).clone(),
                    _ => return None,
                }
            }
        };
        Some((server, uri.to_owned()))
    }
}

/// Why [`Registry::restart`] did nothing.
#[derive(Debug, thiserror::Error)]
pub enum RestartError {
    #[error("no enabled server named `{0}`")]
    UnknownServer(String),
}

impl RestartError {
    /// A stable code for consoles and scripts.
    pub fn code(&self) -> &'static str {
        match self {
            RestartError::UnknownServer(_) => "UNKNOWN_SERVER",
        }
    }
}

/// Why an instance is retired, as the requests cut by the grace period are told.
const RESTARTED: &str = "the server was restarted";
const REMOVED: &str = "the server was removed from the configuration";

/// The upstreams and the catalog built from them.
pub struct Registry {
    /// The instances in service, by server name: every new request goes to one of these.
    upstreams: RwLock<BTreeMap<String, Arc<Upstream>>>,
    /// Instances taken out of service that are letting their requests in flight finish;
    /// kept here so that stopping the gateway stops them too.
    retiring: Mutex<Vec<Arc<Upstream>>>,
    /// How long a retired instance waits for its requests: `[gateway] shutdown_grace_ms`.
    grace: Mutex<Duration>,
    /// One reconfiguration or restart at a time.
    changes: tokio::sync::Mutex<()>,
    catalog: watch::Sender<Arc<Catalog>>,
    changed: mpsc::UnboundedSender<Arc<str>>,
    resource_updates: mpsc::UnboundedSender<ResourceNews>,
    /// The client sessions the upstreams' requests and log messages are relayed to.
    downstream: Arc<Downstream>,
    /// The approved tool definitions, which the catalog serves.
    pins: Arc<Pins>,
    shutdown: CancellationToken,
}

impl Registry {
    /// Starts every enabled upstream of `config` in the background and returns at once,
    /// with an empty catalog: each upstream's tools join as it comes up (sessions get
    /// `list_changed`), so a slow or hung one never delays the others. One that fails is
    /// logged, shown in `/healthz` and retried. [`Registry::first_attempts`] waits for
    /// them, for one-shot commands; [`Registry::first_attempts_of`] lets a call that
    /// arrives meanwhile wait for the ones it needs.
    pub async fn start(
        config: &Config,
        shutdown: CancellationToken,
    ) -> (Arc<Registry>, mpsc::UnboundedReceiver<ResourceNews>) {
        Self::start_sharing(config, shutdown, None).await
    }

    /// [`Registry::start`], with the state replicas share (`state`), where per-user
    /// sign-ins are kept when it is shared.
    pub async fn start_sharing(
        config: &Config,
        shutdown: CancellationToken,
        state: Option<Arc<dyn crate::state::SharedState>>,
    ) -> (Arc<Registry>, mpsc::UnboundedReceiver<ResourceNews>) {
        let downstream = Downstream::new(config.gate.clone());
        let (changed, mut changes) = mpsc::unbounded_channel();
        let pins = Pins::open(config, state.as_ref(), changed.clone(), shutdown.clone()).await;
        if let Some(state) = state {
            downstream.sign_ins.keep_in(state);
        }
        let (resource_updates, updates) = mpsc::unbounded_channel();
        let registry = Arc::new(Registry {
            upstreams: RwLock::default(),
            retiring: Mutex::default(),
            grace: Mutex::new(Duration::from_millis(config.gateway.shutdown_grace_ms)),
            changes: tokio::sync::Mutex::default(),
            catalog: watch::Sender::new(Arc::default()),
            changed,
            resource_updates,
            downstream: Arc::new(downstream),
            pins,
            shutdown,
        });
        for (name, server) in config.enabled_servers() {
            registry.add(name, server.clone());
        }
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

    /// Starts one upstream in service, in the background.
    fn add(&self, name: &str, config: ServerConfig) {
        tracing::debug!(server = %name, "upstream starting");
        let upstream = self.start_instance(name, config);
        self.write_upstreams().insert(name.to_owned(), upstream);
    }

    /// Resolves once every upstream has finished its first connection attempt,
    /// successfully or not, with the catalog built from what they offered.
    pub async fn first_attempts(&self) {
        futures::future::join_all(self.upstreams().iter().map(|u| u.first_attempt())).await;
        // The background rebuild may not have run yet.
        self.rebuild();
        // A one-shot command ends soon: what it pinned is kept first.
        self.pins.write().await;
    }

    /// Waits, for at most `bound`, until the upstreams in service that `which` selects
    /// have finished their first connection attempt, then rebuilds the catalog if any
    /// was still starting. A call that arrives while the gateway is still starting waits
    /// here for what it needs, instead of failing against a catalog that is not complete
    /// yet; once every first attempt is over this returns at once.
    pub async fn first_attempts_of(&self, which: impl Fn(&Upstream) -> bool, bound: Duration) {
        let starting: Vec<_> = self
            .upstreams()
            .into_iter()
            .filter(|u| !u.attempted() && which(u))
            .collect();
        if starting.is_empty() {
            return;
        }
        let attempts = futures::future::join_all(starting.iter().map(|u| u.first_attempt()));
        let _ = tokio::time::timeout(bound, attempts).await;
        // The background rebuild may not have run yet.
        self.rebuild();
    }

    /// Starts an instance of `name` without putting it in service yet.
    fn start_instance(&self, name: &str, config: ServerConfig) -> Arc<Upstream> {
        Upstream::start(
            name,
            config,
            self.changed.clone(),
            self.resource_updates.clone(),
            self.downstream.clone(),
            self.shutdown.child_token(),
        )
    }

    /// Applies a new configuration: added servers start (and join the catalog as they
    /// come up, as at start), unchanged ones keep their connections, changed ones are
    /// replaced and removed ones retired (see the module documentation), so no call in
    /// flight is lost.
    pub async fn reconfigure(&self, config: &Config) {
        let _one_at_a_time = self.changes.lock().await;
        self.downstream.set_gate(config.gate.clone());
        self.pins.set_defaults(config.pinning.clone());
        *self.grace.lock().unwrap_or_else(|p| p.into_inner()) =
            Duration::from_millis(config.gateway.shutdown_grace_ms);
        let wanted: BTreeMap<&String, &ServerConfig> = config.enabled_servers().collect();
        let current: Vec<(String, Arc<Upstream>)> = self
            .read_upstreams()
            .iter()
            .map(|(n, u)| (n.clone(), u.clone()))
            .collect();
        let mut replacements = Vec::new();
        for (name, upstream) in &current {
            match wanted.get(name) {
                None => {
                    self.write_upstreams().remove(name);
                    self.retire(upstream.clone(), REMOVED);
                }
                Some(server) if **server != upstream.config => {
                    replacements.push(self.replace(name, (*server).clone()));
                }
                Some(_) => {}
            }
        }
        for (name, server) in wanted {
            if !self.read_upstreams().contains_key(name) {
                self.add(name, server.clone());
            }
        }
        futures::future::join_all(replacements).await;
        self.rebuild();
    }

    /// The client sessions, as the relay sees them.
    pub fn downstream(&self) -> &Arc<Downstream> {
        &self.downstream
    }

    /// The approved tool definitions.
    pub fn pins(&self) -> &Arc<Pins> {
        &self.pins
    }

    /// Restarts `server` with its current configuration, losing no call: a new instance
    /// starts beside the running one and takes over as in a reload.
    pub async fn restart(&self, server: &str) -> Result<(), RestartError> {
        let _one_at_a_time = self.changes.lock().await;
        let config = self
            .upstream(server)
            .map(|upstream| upstream.config.clone())
            .ok_or_else(|| RestartError::UnknownServer(server.to_owned()))?;
        self.replace(server, config).await;
        self.rebuild();
        Ok(())
    }

    /// Starts a new instance of `name`; once its first connection attempt is over it takes
    /// the old one's place (new requests go to it) and the old one is retired.
    async fn replace(&self, name: &str, config: ServerConfig) {
        let instance = self.start_instance(name, config);
        instance.first_attempt().await;
        let old = self.write_upstreams().insert(name.to_owned(), instance);
        if let Some(old) = old {
            self.retire(old, RESTARTED);
        }
    }

    /// Lets `upstream`'s requests in flight finish, then stops it, in the background.
    fn retire(&self, upstream: Arc<Upstream>, why: &'static str) {
        let grace = *self.grace.lock().unwrap_or_else(|p| p.into_inner());
        let mut retiring = self.lock_retiring();
        retiring.retain(|old| !old.is_stopped());
        retiring.push(upstream.clone());
        tokio::spawn(async move { upstream.retire(grace, why).await });
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

    /// Stops every upstream, in service or retiring (and kills their children).
    pub fn stop_all(&self) {
        for upstream in self.read_upstreams().values() {
            upstream.stop();
        }
        for upstream in self.lock_retiring().iter() {
            upstream.stop();
        }
    }

    /// Whether every upstream, in service or retiring, has stopped.
    pub fn all_stopped(&self) -> bool {
        self.read_upstreams().values().all(|u| u.is_stopped())
            && self.lock_retiring().iter().all(|u| u.is_stopped())
    }

    fn lock_retiring(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Upstream>>> {
        self.retiring.lock().unwrap_or_else(|p| p.into_inner())
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
        // Whether an offer came from a connection is read with the offer itself: a
        // connection that lands while this runs is settled in the next catalog, not in this
        // one, which does not have its names.
        let offers: Vec<_> = upstreams
            .iter()
            .map(|u| {
                let offer = u.last_offer();
                let connected = offer.is_some();
                let prefix = u.config.name_prefix(&u.name);
                (u.clone(), connected, offer.unwrap_or_default(), prefix)
            })
            .collect();
        let previous = self.catalog();
        let mut catalog = Catalog::default();
        let settled = |server: &str| previous.settled.contains(server);
        let held_tools: naming::Owners = previous
            .tools
            .iter()
            .map(|(name, t)| (name.clone(), (t.server.to_string(), t.original.clone())))
            .collect();
        let (tool_names, collisions) = naming::assign(
            offers.iter().flat_map(|(u, _, offer, prefix)| {
                offer.tools.iter().map(move |t| naming::Offered {
                    server: &u.name,
                    name: t.name.as_ref(),
                    prefix,
                })
            }),
            &held_tools,
            settled,
        );
        catalog.collisions.extend(collisions);
        let held_prompts: naming::Owners = previous
            .prompts
            .iter()
            .map(|(name, p)| (name.clone(), (p.server.to_string(), p.original.clone())))
            .collect();
        let (prompt_names, collisions) = naming::assign(
            offers.iter().flat_map(|(u, _, offer, prefix)| {
                offer.prompts.iter().map(move |p| naming::Offered {
                    server: &u.name,
                    name: p.name.as_str(),
                    prefix,
                })
            }),
            &held_prompts,
            settled,
        );
        catalog.collisions.extend(collisions);
        for (upstream, connected, offer, prefix) in &offers {
            catalog
                .prefixes
                .insert(upstream.name.clone(), naming::exposed_prefix(prefix));
            if *connected {
                catalog.settled.insert(upstream.name.clone());
            }
            if let Some(said) = offer.instructions.as_deref().map(str::trim)
                && !said.is_empty()
            {
                let said = screened_instructions(&upstream.name, said, &previous);
                catalog.instructions.insert(upstream.name.clone(), said);
            }
            if upstream.config.rewrite_uris {
                catalog.rewriting.insert(upstream.name.clone());
            }
            let exposed: Vec<String> = offer
                .tools
                .iter()
                .map(|tool| tool_names[&(upstream.name.to_string(), tool.name.to_string())].clone())
                .collect();
            // The gateway's own sign-in tool of a per-user server is not the server's.
            let verdicts = if *connected && !upstream.offers_sign_in_only() {
                let policy = self.pins.policy_for(&upstream.config);
                self.pins
                    .judge_offer(&upstream.name, policy, offer, exposed.clone())
            } else {
                vec![Verdict::Pass; offer.tools.len()]
            };
            for ((tool, verdict), name) in offer.tools.iter().zip(verdicts).zip(exposed) {
                let (definition, hold) = match verdict {
                    Verdict::Pass => (Cow::Borrowed(tool), None),
                    Verdict::Approved { definition, hold } => {
                        (Cow::Owned(Listed::of_view(*definition)), Some(hold))
                    }
                    Verdict::Withheld(hold) => {
                        catalog.withheld.insert(name, hold);
                        continue;
                    }
                };
                // Keep the compiled validators of an unchanged definition.
                let federated = match previous.tools.get(&name) {
                    Some(old)
                        if old.same_source(&upstream.name, &upstream.config, &definition)
                            && old.hold == hold =>
                    {
                        old.clone()
                    }
                    _ => Arc::new(
                        FederatedTool::new(&name, &upstream.name, &upstream.config, &definition)
                            .held(hold),
                    ),
                };
                catalog.tools.insert(name, federated);
            }
            for prompt in &offer.prompts {
                let name = &prompt_names[&(upstream.name.to_string(), prompt.name.clone())];
                let definition = prompt.renamed("name", name.clone(), |p| &mut p.name);
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
        let (resources, collisions) = first_owner_keeps(
            &previous.resources,
            offers.iter().flat_map(|(upstream, _, offer, _)| {
                offer.resources.iter().map(|resource| {
                    let uri = resource_uri::expose(
                        &upstream.name,
                        upstream.config.rewrite_uris,
                        &resource.uri,
                    );
                    let resource = resource.renamed("uri", uri, |r| &mut r.uri);
                    (upstream.name.clone(), resource)
                })
            }),
            |r: &Listed<Resource>| r.uri.clone(),
            settled,
        );
        catalog.resources = resources;
        catalog.collisions.extend(collisions);
        let (templates, collisions) = first_owner_keeps(
            &previous.resource_templates,
            offers.iter().flat_map(|(upstream, _, offer, _)| {
                offer.resource_templates.iter().map(|template| {
                    let template = match upstream.config.rewrite_uris {
                        true => template.renamed(
                            "uriTemplate",
                            resource_uri::template_to_gateway(
                                &upstream.name,
                                &template.uri_template,
                            ),
                            |t| &mut t.uri_template,
                        ),
                        false => template.clone(),
                    };
                    (upstream.name.clone(), template)
                })
            }),
            |t: &Listed<ResourceTemplate>| t.uri_template.clone(),
            settled,
        );
        catalog.resource_templates = templates;
        catalog.fresh_until = earliest(offers.iter().map(|(_, _, offer, _)| offer.as_ref()));
        catalog.collisions.extend(collisions);
        for collision in &catalog.collisions {
            if !previous.collisions.contains(collision) {
                tracing::warn!("name collision: {collision}");
            }
        }
        self.catalog.send_replace(Arc::new(catalog));
        if self.pins.has_changes() {
            let pins = self.pins.clone();
            tokio::spawn(async move { pins.write().await });
        }
    }
}

/// What clients are given of what `server` said of itself: `said`, or when it holds text
/// aimed at the model (see [`pins::screen`]) a note that it was withheld, and why, logged
/// once (not again while `previous` already withheld it).
fn screened_instructions(server: &str, said: &str, previous: &Catalog) -> String {
    let findings = pins::screen::screen_instructions(said);
    if findings.is_empty() {
        return said.to_owned();
    }
    let reasons: Vec<String> = findings.iter().map(|f| f.suspect.to_string()).collect();
    let withheld = format!(
        "(withheld by the gateway: the text {})",
        reasons.join("; it ")
    );
    if previous.instructions.get(server) != Some(&withheld) {
        tracing::warn!(
            server,
            "instructions withheld from clients: {}",
            reasons.join("; ")
        );
    }
    withheld
}

/// Until when each merged list is fresh, from the lists of `offers`: the earliest time
/// any of them stops being fresh, or `None` when a server that offers that list gave no
/// `ttlMs` for it.
fn earliest<'a>(offers: impl Iterator<Item = &'a Offer> + Clone) -> FreshUntil {
    let earliest = |list: fn(&Offer) -> (bool, Option<Instant>)| {
        offers
            .clone()
            .map(list)
            .filter(|(offered, _)| *offered)
            .map(|(_, until)| until)
            .try_fold(None, |earliest: Option<Instant>, until| {
                let until = until?;
                Some(Some(earliest.map_or(until, |e| e.min(until))))
            })
            .flatten()
    };
    FreshUntil {
        tools: earliest(|o| (o.capabilities.tools.is_some(), o.fresh_until.tools)),
        prompts: earliest(|o| (o.capabilities.prompts.is_some(), o.fresh_until.prompts)),
        resources: earliest(|o| (o.capabilities.resources.is_some(), o.fresh_until.resources)),
        resource_templates: earliest(|o| {
            (
                o.capabilities.resources.is_some(),
                o.fresh_until.resource_templates,
            )
        }),
    }
}

/// Keeps one item per key (a resource URI or template) by the rule names follow (see
/// [`naming::assign`]): the first offered by server name, unless it [`naming::yields`] to
/// the server that held the key in `previous`; the others are reported as collisions.
fn first_owner_keeps<T>(
    previous: &[(Arc<str>, T)],
    offered: impl Iterator<Item = (Arc<str>, T)>,
    key: impl Fn(&T) -> String,
    settled: impl Fn(&str) -> bool,
) -> (Vec<(Arc<str>, T)>, Vec<naming::Collision>) {
    let held: BTreeMap<String, &Arc<str>> = previous
        .iter()
        .map(|(server, item)| (key(item), server))
        .collect();
    let mut offered: Vec<_> = offered.collect();
    // Stable: the offering order (servers by name), offers that yield to a holder last.
    offered.sort_by_key(|(server, item)| {
        let key = key(item);
        let holder = held.get(&key).map(|holder| (&***holder, key.as_str()));
        naming::yields(holder, server, &key, settled(server))
    });
    let mut owners: BTreeMap<String, Arc<str>> = BTreeMap::new();
    let mut kept = Vec::new();
    let mut collisions = Vec::new();
    for (server, item) in offered {
        let key = key(&item);
        match owners.get(&key) {
            Some(owner) if *owner != server => collisions.push(naming::Collision {
                exposed: key.clone(),
                owner: (owner.to_string(), key.clone()),
                loser: (server.to_string(), key),
                assigned: None,
            }),
            _ => {
                owners.insert(key, server.clone());
                kept.push((server, item));
            }
        }
    }
    (kept, collisions)
}
