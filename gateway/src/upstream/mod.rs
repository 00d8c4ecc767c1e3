//! Upstream MCP servers: connecting to them, keeping them alive, and calling them.
//!
//! Each configured server gets one [`Upstream`] and one supervisor task
//! ([`supervisor`]). The supervisor connects ([`connect`], each [`kind`]: a stdio child in [`stdio`], a
//! streamable HTTP server in [`streamable_http`], a legacy SSE server in [`sse`]), reads
//! what the server offers, and then watches the connection: when it drops, calls in
//! flight fail at once with UPSTREAM_UNAVAILABLE (rmcp drops their responders, and a
//! connection's [`call_lane`] its calls; UPSTREAM_ERROR when the gateway closed it because
//! the server broke the protocol, see [`stdio::Violation`]), new calls fail fast, and the
//! supervisor reconnects with capped exponential backoff, forever, until shutdown. How a
//! call reaches the server and what its failure means is [`calls`]; what `/healthz` says
//! of it, [`health`]. What an upstream's resources are called to clients, and back, is
//! [`resource_uri`].

mod asked;
mod call_lane;
mod calls;
pub mod client;
mod connect;
mod decorated;
mod health;
mod kind;
mod lane;
mod notifications_in_flight;
pub mod offer;
mod per_user;
mod progress_in_order;
mod resource_listens;
pub mod resource_uri;
mod rmcp_errors;
mod server_messages;
mod sse;
mod stdio;
mod streamable_http;
mod supervisor;

use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

#[allow(deprecated, reason = "logging/setLevel is what pre-2026 servers use")]
use rmcp::model::{LoggingLevel, RequestMetaObject, SetLevelRequestParams};
use rmcp::{Peer, RoleClient};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use self::call_lane::CallLane;
use crate::auth::status::SignInStatus;
use crate::auth::store::TokenStore;
use crate::config::ServerConfig;
use crate::relay::{CallRoutes, Downstream};
use crate::sandbox;
pub use calls::{MAX_INPUT_ROUNDS, UpstreamError, forwarded};
pub use client::UpstreamEvent;
pub use health::{Health, UpstreamState};
pub use kind::CONNECT_TIMEOUT;
pub use offer::Offer;
pub use resource_listens::{MAX_LISTENED_RESOURCES, ResourceNews};

/// A live connection: the peer to send requests to, and what the server offers.
pub struct Live {
    pub peer: Peer<RoleClient>,
    pub offer: Offer,
    pub pid: Option<i32>,
    /// Set when the gateway closed this connection because the server broke the protocol.
    pub violation: stdio::Violation,
    /// Raised when a call could not reach the server (streamable HTTP).
    pub unreachable: Unreachable,
    /// The lane of the connection's calls and requests, beside rmcp's client.
    lane: CallLane,
    /// For a server spoken to at 2026-07-28 (no session), what every request to it
    /// carries of the gateway's side: the revision, the gateway's name and capabilities.
    /// `None` for a server spoken to in a session.
    stateless: Option<RequestMetaObject>,
    /// The resource subscriptions of 2025 clients the connection holds (as
    /// `subscriptions/listen` streams to a server spoken to at 2026-07-28), kept by each
    /// offer the connection reads.
    listens: Arc<resource_listens::ResourceListens>,
}

impl Live {
    /// Whether the server is spoken to at 2026-07-28: no session, every request carries
    /// its own context.
    pub fn is_stateless(&self) -> bool {
        self.stateless.is_some()
    }
}

/// Raised by a call that could not reach a streamable HTTP upstream. No connection of
/// ours ends when such a server goes away, so without it `/healthz` would call the server
/// ready while every call to it fails; the supervisor closes the connection instead and
/// connects again with backoff, as when a child exits.
#[derive(Debug, Clone, Default)]
pub struct Unreachable {
    reason: Arc<OnceLock<String>>,
    raised: CancellationToken,
}

impl Unreachable {
    fn raise(&self, reason: &str) {
        self.reason.get_or_init(|| reason.to_owned());
        self.raised.cancel();
    }

    fn reason(&self) -> Option<&str> {
        self.reason.get().map(String::as_str)
    }
}

/// One configured upstream server.
pub struct Upstream {
    pub name: Arc<str>,
    pub config: ServerConfig,
    live: RwLock<Option<Arc<Live>>>,
    /// What the server offered when last connected, `None` until a connection has brought
    /// an offer. Kept while it is down so its tools stay known and calls to them fail with
    /// UPSTREAM_UNAVAILABLE, not TOOL_NOT_FOUND. Once set, the names it offers are settled
    /// (see [`crate::registry::naming`]): one field, so a reader never sees a settled
    /// server with the empty offer from before its connection. A per-user server's
    /// identity connections share it ([`per_user`]).
    last_offer: Arc<RwLock<Option<Arc<Offer>>>>,
    /// For a per-user server: its identity connections.
    per_user: Option<per_user::PerUser>,
    /// For an identity connection of a per-user server: whose sign-in it uses.
    signs_in_as: Option<per_user::SignsInAs>,
    health: Mutex<Health>,
    /// The requests in flight here, and the client call each serves.
    calls: CallRoutes,
    /// The client sessions that this upstream's requests and log messages go to.
    downstream: Arc<Downstream>,
    /// Tells the registry that this upstream's offer changed.
    changed: mpsc::UnboundedSender<Arc<str>>,
    /// Forwards `resources/updated` to the server layer (subscriptions), under the URI
    /// clients see, and tells it of each connection that comes up.
    resource_updates: mpsc::UnboundedSender<ResourceNews>,
    /// The requests in flight on this instance, so a retired one can let them finish.
    requests: TaskTracker,
    /// Set when this instance is retired: why its connection is going away, for the
    /// requests the grace period did not cover.
    retired: std::sync::OnceLock<&'static str>,
    /// Becomes true once the first connection attempt has finished (or the upstream
    /// stopped before it could): what one-shot commands wait for.
    attempted: watch::Sender<bool>,
    /// A stdio server's confinement as of its last start, and what it was refused.
    sandbox: sandbox::Status,
    shutdown: CancellationToken,
}

impl Upstream {
    /// Creates the upstream and starts its supervisor in the background: nothing waits
    /// for it to connect, and its tools join the catalog when it does.
    pub fn start(
        name: &str,
        config: ServerConfig,
        changed: mpsc::UnboundedSender<Arc<str>>,
        resource_updates: mpsc::UnboundedSender<ResourceNews>,
        downstream: Arc<Downstream>,
        shutdown: CancellationToken,
    ) -> Arc<Upstream> {
        let per_user = config
            .oauth
            .as_ref()
            .is_some_and(|oauth| oauth.per_identity())
            .then(per_user::PerUser::new);
        let upstream = Arc::new(Upstream {
            name: name.into(),
            config,
            live: RwLock::new(None),
            last_offer: Arc::default(),
            per_user,
            signs_in_as: None,
            health: Mutex::new(Health::starting()),
            calls: CallRoutes::default(),
            downstream,
            changed,
            resource_updates,
            requests: TaskTracker::new(),
            retired: std::sync::OnceLock::new(),
            attempted: watch::Sender::new(false),
            sandbox: sandbox::Status::default(),
            shutdown,
        });
        if upstream.per_user.is_some() {
            tokio::spawn(upstream.clone().supervise_per_user());
        } else {
            tokio::spawn(upstream.clone().supervise());
        }
        upstream
    }

    /// The connection of this per-user server as `who`, started in the background.
    fn start_user(&self, who: per_user::SignsInAs) -> Arc<Upstream> {
        let upstream = Arc::new(Upstream {
            name: self.name.clone(),
            config: self.config.clone(),
            live: RwLock::new(None),
            last_offer: self.last_offer.clone(),
            per_user: None,
            signs_in_as: Some(who),
            health: Mutex::new(Health::starting()),
            calls: CallRoutes::default(),
            downstream: self.downstream.clone(),
            changed: self.changed.clone(),
            resource_updates: self.resource_updates.clone(),
            requests: TaskTracker::new(),
            retired: std::sync::OnceLock::new(),
            attempted: watch::Sender::new(false),
            sandbox: sandbox::Status::default(),
            shutdown: self.shutdown.child_token(),
        });
        tokio::spawn(upstream.clone().supervise());
        upstream
    }

    /// Whether the first connection attempt has finished (or the upstream stopped first).
    pub fn attempted(&self) -> bool {
        *self.attempted.borrow()
    }

    /// Resolves once the first connection attempt has finished, successfully or not.
    pub async fn first_attempt(&self) {
        let mut attempted = self.attempted.subscribe();
        let _ = attempted.wait_for(|done| *done).await;
    }

    /// Tells the server that `session`'s roots changed; the `roots/list` it may send back
    /// goes to that session.
    pub async fn tell_roots_changed(&self, session: &str) {
        let Some(live) = self.live() else {
            return;
        };
        self.calls.roots_told(session.into());
        if let Err(e) = live.peer.notify_roots_list_changed().await {
            tracing::debug!(server = %self.name, "roots/list_changed not delivered: {e}");
        }
    }

    /// The current connection, if any.
    pub fn live(&self) -> Option<Arc<Live>> {
        self.live.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn health(&self) -> Health {
        let mut health = self
            .health
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let (Some(settings), Some(url), Ok(dir), None) = (
            &self.config.oauth,
            &self.config.url,
            crate::auth::store::default_dir(),
            &self.per_user,
        ) {
            let store = match &self.signs_in_as {
                Some(user) => TokenStore::for_identity(
                    &dir,
                    user.shared.as_ref(),
                    &self.name,
                    url,
                    &user.identity,
                    user.sealer.clone(),
                ),
                None => TokenStore::new(&dir, &self.name, url),
            };
            // A file is read at once; a record in the shared state would have to be
            // awaited, and is left out.
            health.oauth = futures::FutureExt::now_or_never(SignInStatus::read(
                &self.name,
                settings.grant,
                &store,
            ));
        }
        health.sandbox = self.sandbox.snapshot();
        health
    }

    /// Stops the supervisor and the connection (and kills a child's process group).
    pub fn stop(&self) {
        self.shutdown.cancel();
    }

    /// Takes this instance out of service without losing its work: the requests in
    /// flight on it may finish for up to `grace`, then it stops. The registry has already
    /// sent new requests elsewhere; `why` explains the end to the requests still running
    /// when the grace period is over.
    pub async fn retire(&self, grace: Duration, why: &'static str) {
        let _ = self.retired.set(why);
        self.requests.close();
        let in_flight = self.requests.len();
        if in_flight > 0 {
            tracing::info!(server = %self.name, in_flight, "letting requests in flight finish before stopping ({why})");
        }
        if tokio::time::timeout(grace, self.requests.wait())
            .await
            .is_err()
        {
            tracing::warn!(server = %self.name, in_flight = self.requests.len(), "grace period over; stopping with requests in flight ({why})");
        }
        self.stop();
    }

    /// Whether the supervisor has ended (after [`Self::stop`]).
    pub fn is_stopped(&self) -> bool {
        self.health().state == UpstreamState::Stopped
    }

    fn set_health(&self, update: impl FnOnce(&mut Health)) {
        update(&mut self.health.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// What the server offers, or offered when it was last connected; empty before that.
    pub fn offer(&self) -> Arc<Offer> {
        self.last_offer().unwrap_or_default()
    }

    /// The offer a connection last brought, `None` if none ever has. A per-user server
    /// nobody has signed in to yet offers its sign-in ([`per_user`]).
    pub fn last_offer(&self) -> Option<Arc<Offer>> {
        let offer = self
            .last_offer
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match (offer, &self.per_user) {
            (None, Some(_)) => Some(per_user::sign_in_offer(&self.name)),
            (offer, _) => offer,
        }
    }

    /// Whether a connection has ever brought this instance's offer.
    pub fn has_offered(&self) -> bool {
        self.last_offer().is_some()
    }

    /// Whether what this instance offers is the gateway's own sign-in tool of a per-user
    /// server nobody has signed in to yet, not the server's.
    pub fn offers_sign_in_only(&self) -> bool {
        self.per_user.is_some()
            && self
                .last_offer
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .is_none()
    }

    fn set_live(&self, live: Option<Arc<Live>>) {
        if let Some(live) = &live {
            *self.last_offer.write().unwrap_or_else(|p| p.into_inner()) =
                Some(Arc::new(live.offer.clone()));
        }
        *self.live.write().unwrap_or_else(|p| p.into_inner()) = live;
        let _ = self.changed.send(self.name.clone());
    }

    fn unavailable(&self, reason: impl Into<String>) -> UpstreamError {
        UpstreamError::Unavailable {
            server: self.name.to_string(),
            reason: reason.into(),
        }
    }

    /// Tells the upstream the lowest log level any client wants, when it offers logging.
    #[allow(deprecated, reason = "logging/setLevel is what pre-2026 servers use")]
    pub async fn set_log_level(&self, level: LoggingLevel) {
        let Some(live) = self.live() else { return };
        if live.offer.capabilities.logging.is_none() {
            return;
        }
        if let Err(e) = live.peer.set_level(SetLevelRequestParams::new(level)).await {
            tracing::debug!(server = %self.name, "logging/setLevel refused: {e}");
        }
    }
}
