//! Upstream MCP servers: connecting to them, keeping them alive, and calling them.
//!
//! Each configured server gets one [`Upstream`] and one supervisor task. The supervisor
//! connects (stdio child, streamable HTTP or legacy SSE, see [`connect`]), reads what the
//! server offers, and then watches the connection: when it drops, calls in flight fail at
//! once with UPSTREAM_UNAVAILABLE (rmcp drops their responders, and a stdio connection's
//! [`lane`] its calls; UPSTREAM_ERROR when the gateway closed it because the server broke
//! the protocol, see [`child::Violation`]), new calls fail fast, and the supervisor
//! reconnects with capped exponential backoff, forever, until shutdown. A call on a
//! streamable HTTP connection's [`http_lane`] reads its own response, and fails when that
//! breaks.

pub mod child;
pub mod client;
mod connect;
mod http_lane;
mod lane;
mod lines;
mod notifications_in_flight;
pub mod offer;
mod per_user;
mod progress_in_order;
pub mod sse_client;
mod traced_http;

use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

#[allow(deprecated, reason = "logging/setLevel is what pre-2026 servers use")]
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, GetMeta,
    InputRequiredResult, InputResponses, JsonObject, LoggingLevel, ProgressToken,
    RequestMetaObject, ResultType, ServerResult, SetLevelRequestParams,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpError;
use rmcp::{ErrorData, Peer, RoleClient};
use serde::Serialize;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::status::SignInStatus;
use crate::auth::store::TokenStore;
use crate::config::{ServerConfig, UpstreamProtocol};
use crate::http_client::HttpError;
use crate::observe::telemetry;
use crate::relay::calls::answer_after_progress;
use crate::relay::{self, CallRoutes, Caller, Downstream, ListKind, Listeners};
use crate::resource_uri;
use crate::sandbox::{self, Confinement};
use crate::tasks;
pub use client::UpstreamEvent;
pub use connect::CONNECT_TIMEOUT;
pub use offer::Offer;

/// First reconnect delay; doubled per failure up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);

/// Whether a list read again is announced to clients (`list_changed`).
#[derive(Clone, Copy)]
enum Announce {
    /// The upstream said it changed.
    Always,
    /// Its `ttlMs` ran out: only when it differs from what clients had.
    IfChanged,
}

/// Resolves at `at`, or never when there is no `at`.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How long a stdio server's stderr is given, once its connection is over, to tell what
/// it was refused before the reason it ended is logged.
const STDERR_SETTLES: Duration = Duration::from_millis(500);

/// The start-up failures of one upstream logged as errors since it last came up: one
/// seen again, at every retry of a server down for hours, is a debug line (its health
/// keeps the latest). Attempts under `auto` alternate between two ways of opening, so one
/// failure may read two ways; past [`Self::AT_MOST`] distinct ones (errors that name a new
/// port or time at every attempt) all are debug lines.
#[derive(Default)]
struct LoggedFailures(Vec<String>);

impl LoggedFailures {
    const AT_MOST: usize = 8;

    fn log(&mut self, server: &str, error: &str) {
        if self.0.iter().any(|logged| logged == error) || self.0.len() >= Self::AT_MOST {
            tracing::debug!(server = %server, "upstream still fails to start: {error}");
        } else {
            tracing::error!(
                server = %server,
                "upstream failed to start: {error} (retrying; the same failure is not logged again)"
            );
            self.0.push(error.to_owned());
        }
    }
}

/// Why a call to an upstream did not produce a result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    /// Not connected, or the connection dropped before the answer.
    #[error("upstream `{server}` is unavailable: {reason}")]
    Unavailable { server: String, reason: String },
    /// The upstream answered with a JSON-RPC error.
    #[error("upstream `{server}` answered with an error: {error}")]
    Rejected {
        server: String,
        error: Box<ErrorData>,
    },
    /// The upstream answered something that is not a valid response.
    #[error("upstream `{server}` broke the protocol: {reason}")]
    Protocol { server: String, reason: String },
    /// The call was cancelled here; the upstream was sent `notifications/cancelled`.
    #[error("the call to `{server}` was cancelled")]
    Cancelled { server: String },
    /// A per-user server, and the caller has not signed in to it; its client cannot be
    /// asked to open the URL (no URL elicitation), so the person must open it.
    #[error("sign in to `{server}` first: open {url} in a browser, then call again")]
    SignInRequired { server: String, url: String },
    /// A per-user server's sign-in did not come about; `reason` is a stable code.
    #[error("signing in to `{server}` did not work: {message}")]
    SignInFailed {
        server: String,
        reason: &'static str,
        message: String,
    },
}

/// Lifecycle of an upstream, as `/healthz` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamState {
    Starting,
    Ready,
    Restarting,
    Failed,
    /// An OAuth server whose sign-in is missing or was revoked: `mcp-gateway auth login`.
    NeedsLogin,
    /// A per-user server: each caller identity connects with its own sign-in.
    PerUser,
    Stopped,
}

impl UpstreamState {
    /// The name `/healthz` and `status` show.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Ready => "ready",
            Self::Restarting => "restarting",
            Self::Failed => "failed",
            Self::NeedsLogin => "needs_login",
            Self::PerUser => "per_user",
            Self::Stopped => "stopped",
        }
    }
}

/// A snapshot of an upstream's health.
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    pub state: UpstreamState,
    pub restarts: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    /// The protocol revision agreed with the server, while it is connected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// An OAuth server's sign-in (`[servers.NAME.oauth]`), read when the snapshot is taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth: Option<SignInStatus>,
    /// A stdio server's confinement as of its last start, with what it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Confinement>,
}

impl Health {
    /// A connection's health before its first attempt.
    fn starting() -> Self {
        Health {
            state: UpstreamState::Starting,
            restarts: 0,
            last_error: None,
            pid: None,
            protocol: None,
            oauth: None,
            sandbox: None,
        }
    }
}

/// The `_meta` key under which a server of protocol 2026-07-28 names itself on results.
const SERVER_INFO_META_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// How many times one call may ask its client for input before the gateway gives up on it.
pub const MAX_INPUT_ROUNDS: usize = rmcp::model::DEFAULT_MRTR_MAX_ROUNDS;

/// A live connection: the peer to send requests to, and what the server offers.
pub struct Live {
    pub peer: Peer<RoleClient>,
    pub offer: Offer,
    pub pid: Option<i32>,
    /// Set when the gateway closed this connection because the server broke the protocol.
    pub violation: child::Violation,
    /// Raised when a call could not reach the server (streamable HTTP).
    pub unreachable: Unreachable,
    /// The lane of the connection's tool calls, beside rmcp's client, where it has one.
    lane: Option<CallLane>,
    /// For a server spoken to at 2026-07-28 (no session), what every request to it
    /// carries of the gateway's side: the revision, the gateway's name and capabilities.
    /// `None` for a server spoken to in a session.
    stateless: Option<RequestMetaObject>,
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

/// The way a connection's tool calls take beside rmcp's client.
#[derive(Clone)]
enum CallLane {
    /// A stdio connection's ([`lane`]).
    Stdio(Arc<lane::Lane>),
    /// A streamable HTTP connection's ([`http_lane`]).
    Http(Arc<http_lane::HttpLane>),
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
    /// clients see.
    resource_updates: mpsc::UnboundedSender<(Arc<str>, String)>,
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
        resource_updates: mpsc::UnboundedSender<(Arc<str>, String)>,
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

    /// The supervisor: connect, serve until the connection drops, back off, repeat.
    async fn supervise(self: Arc<Self>) {
        let mut backoff = FIRST_BACKOFF;
        // Under `auto`: whether the next attempt skips `server/discover`, because the last
        // one failed while starting (a server that exits, or breaks off, when asked a
        // method it does not know before `initialize`, or answers it with something that
        // is no discover result). The attempt with `initialize` follows at once; attempts
        // alternate from then on until one succeeds.
        let mut skip_discover = false;
        let mut logged_failures = LoggedFailures::default();
        loop {
            let (events_tx, mut events) = mpsc::unbounded_channel();
            let mut config = self.config.clone();
            if skip_discover {
                config.protocol = UpstreamProtocol::Session;
            }
            let sides = connect::Sides {
                events: events_tx,
                calls: self.calls.clone(),
                downstream: self.downstream.clone(),
                sandbox: self.sandbox.clone(),
            };
            let before_attempt = self.sandbox.mark();
            let attempt = tokio::select! {
                attempt = connect::connect(&self.name, &config, self.signs_in_as.as_ref(), sides) => attempt,
                () = self.shutdown.cancelled() => break,
            };
            if let Err(connect::ConnectError::Initialize(error)) = &attempt
                && self.config.protocol == UpstreamProtocol::Auto
            {
                skip_discover = !skip_discover;
                if skip_discover {
                    tracing::debug!(server = %self.name, %error, "server/discover failed; trying initialize");
                    continue;
                }
            }
            match attempt {
                Ok(connection) => {
                    backoff = FIRST_BACKOFF;
                    logged_failures = LoggedFailures::default();
                    let protocol = connection
                        .live
                        .peer
                        .peer_info()
                        .map(|info| info.protocol_version.to_string());
                    self.set_health(|h| {
                        h.state = UpstreamState::Ready;
                        h.pid = connection.live.pid;
                        h.protocol.clone_from(&protocol);
                    });
                    tracing::info!(server = %self.name, tools = connection.live.offer.tools.len(), protocol = protocol.as_deref().unwrap_or("?"), "upstream ready");
                    self.set_live(Some(connection.live.clone()));
                    if let Some(level) = self.downstream.listeners.lowest() {
                        self.set_log_level(level).await;
                    }
                    self.attempted.send_replace(true);
                    let mut relisted = Instant::now();
                    loop {
                        let relist = self.relist_at(relisted);
                        tokio::select! {
                            () = connection.closed() => break,
                            () = connection.live.unreachable.raised.cancelled() => break,
                            () = self.shutdown.cancelled() => break,
                            () = sleep_until(relist) => {
                                relisted = Instant::now();
                                self.relist().await;
                            }
                            Some(event) = events.recv() => {
                                // A flood of list_changed is one refresh, not one per event.
                                let mut batch = vec![event];
                                while let Ok(more) = events.try_recv() {
                                    if !batch.contains(&more) {
                                        batch.push(more);
                                    }
                                }
                                for event in batch {
                                    self.on_event(event).await;
                                }
                            }
                        }
                    }
                    self.set_live(None);
                    let violation = connection.live.violation.clone();
                    let unreachable = connection.live.unreachable.clone();
                    connection.close().await;
                    if self.shutdown.is_cancelled() {
                        break;
                    }
                    let why = match (violation.get(), unreachable.reason()) {
                        (Some(violation), _) => format!("closed by the gateway: {violation}"),
                        (None, Some(reason)) => format!("unreachable ({reason})"),
                        (None, None) => "connection closed".into(),
                    };
                    let why = self.with_refusals(why, before_attempt).await;
                    tracing::warn!(server = %self.name, "upstream {why}; reconnecting");
                    self.set_health(|h| {
                        h.state = UpstreamState::Restarting;
                        h.last_error = Some(why);
                        h.pid = None;
                        h.protocol = None;
                    });
                }
                Err(error) => {
                    let state = match error {
                        connect::ConnectError::NeedsLogin { .. } => UpstreamState::NeedsLogin,
                        _ => UpstreamState::Failed,
                    };
                    let error = crate::redact::urls(&error.to_string());
                    let error = self.with_refusals(error, before_attempt).await;
                    logged_failures.log(&self.name, &error);
                    self.set_health(|h| {
                        h.state = state;
                        h.last_error = Some(error);
                    });
                    self.attempted.send_replace(true);
                }
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = self.shutdown.cancelled() => break,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
            self.set_health(|h| h.restarts += 1);
        }
        self.set_health(|h| {
            h.state = UpstreamState::Stopped;
            h.pid = None;
            h.protocol = None;
        });
        self.attempted.send_replace(true);
    }

    /// `why` the connection ended, with what the sandbox refused the server since `mark`
    /// (a server that failed for it says so on its way out).
    async fn with_refusals(&self, why: String, mark: u64) -> String {
        if self.config.command.is_none() {
            return why;
        }
        let refused = self.sandbox.refusals_since(mark, STDERR_SETTLES).await;
        match refused.as_slice() {
            [] => why,
            refused => format!("{why}; the sandbox refused {}", refused.join("; ")),
        }
    }

    async fn on_event(&self, event: UpstreamEvent) {
        match event {
            UpstreamEvent::ResourceUpdated(uri) => {
                let uri = resource_uri::expose(&self.name, self.config.rewrite_uris, &uri);
                let _ = self.resource_updates.send((self.name.clone(), uri));
            }
            refresh => self.refresh(&refresh, Announce::Always).await,
        }
    }

    /// When to read again the first of the live offer's lists whose `ttlMs` runs out
    /// (`None`: none does), and never sooner than [`offer::RELIST_AT_MOST_EVERY`] after
    /// the last time, `relisted`.
    fn relist_at(&self, relisted: Instant) -> Option<Instant> {
        let next = self.live()?.offer.fresh_until.next()?;
        Some(next.max(relisted + offer::RELIST_AT_MOST_EVERY))
    }

    /// Reads again the lists whose `ttlMs` ran out; clients hear of those that changed.
    async fn relist(&self) {
        let Some(live) = self.live() else { return };
        for stale in live.offer.fresh_until.stale(Instant::now()) {
            self.refresh(&stale, Announce::IfChanged).await;
        }
    }

    /// Reads the list `refresh` names again, and tells clients as `announce` says.
    async fn refresh(&self, refresh: &UpstreamEvent, announce: Announce) {
        let Some(live) = self.live() else { return };
        // The supervisor waits on this: an upstream that never answers must not hold it.
        let read = live.offer.refreshed(&live.peer, refresh);
        let read = match tokio::time::timeout(CONNECT_TIMEOUT, read).await {
            Ok(read) => read.map_err(|e| e.to_string()),
            Err(_) => Err(format!("no answer within {CONNECT_TIMEOUT:?}")),
        };
        match read {
            Ok(offer) => {
                tracing::debug!(server = %self.name, ?refresh, "upstream offer refreshed");
                let kind = match refresh {
                    UpstreamEvent::PromptsChanged => ListKind::Prompts,
                    UpstreamEvent::ResourcesChanged => ListKind::Resources,
                    _ => ListKind::Tools,
                };
                let changed = match announce {
                    Announce::Always => true,
                    Announce::IfChanged => offer.differs(&live.offer, refresh),
                };
                self.set_live(Some(Arc::new(Live {
                    peer: live.peer.clone(),
                    offer,
                    pid: live.pid,
                    violation: live.violation.clone(),
                    unreachable: live.unreachable.clone(),
                    lane: live.lane.clone(),
                    stateless: live.stateless.clone(),
                })));
                if changed {
                    let _ = self.downstream.announced.send((self.name.clone(), kind));
                }
            }
            Err(e) => tracing::warn!(server = %self.name, "refresh failed: {e}"),
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

    /// Calls `tool` (the upstream's own name). Cancelling `cancel` sends
    /// `notifications/cancelled` for this request to this upstream only. An upstream on
    /// protocol 2026-07-28 may answer that it needs input first (`InputRequiredResult`):
    /// the caller's client is asked ([`relay::requests::fulfil`]) and the call retried
    /// with the answers, up to [`MAX_INPUT_ROUNDS`] times.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        cancel: &CancellationToken,
        caller: Option<Caller>,
        trace: &opentelemetry::Context,
    ) -> Result<CallToolResult, UpstreamError> {
        if self.per_user.is_some() {
            return Box::pin(self.call_as_caller(tool, arguments, cancel, caller, trace)).await;
        }
        // A tool known to ask its client waits for its turn (see `relay::turns`).
        let _turn = match &caller {
            Some(caller) => tokio::select! {
                turn = self.calls.turns().start(tool, &caller.session) => Some(turn),
                () = cancel.cancelled() => return Err(UpstreamError::Cancelled {
                    server: self.name.to_string(),
                }),
            },
            None => None,
        };
        let live = self
            .live()
            .ok_or_else(|| self.unavailable(self.down_reason()))?;
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        params.input_responses = caller.as_ref().and_then(|c| c.given_input.clone());
        for _round in 0..=MAX_INPUT_ROUNDS {
            let mut request = CallToolRequest::new(params.clone());
            // This call's span as the trace context (`TracedHttp` also puts it in the
            // header), in place of the client's, so the upstream's spans are children of
            // ours.
            let meta = request
                .extensions
                .get_or_insert_default::<RequestMetaObject>();
            for (key, value) in telemetry::inject(trace) {
                meta.insert(key.into(), value.into());
            }
            let answer = match &live.lane {
                Some(CallLane::Stdio(lane)) => {
                    self.call_on_lane(lane, &live, request, cancel, caller.clone(), tool)
                        .await?
                }
                Some(CallLane::Http(lane)) => {
                    let on_lane = self.call_on_http_lane(
                        lane,
                        &live,
                        request.clone(),
                        cancel,
                        caller.clone(),
                        tool,
                    );
                    match on_lane.await? {
                        Some(answer) => answer,
                        None => {
                            Box::pin(self.call_on_rmcp(
                                &live,
                                request,
                                cancel,
                                caller.clone(),
                                tool,
                            ))
                            .await?
                        }
                    }
                }
                // Boxed: rmcp's request future is large, and every call on a lane would
                // carry its size too.
                None => {
                    Box::pin(self.call_on_rmcp(&live, request, cancel, caller.clone(), tool))
                        .await?
                }
            };
            match answer {
                lane::Answer::Result(mut result) => {
                    // An older upstream leaves `resultType` out, which means "complete";
                    // say so, as the gateway's own results do.
                    result.result_type.get_or_insert(ResultType::COMPLETE);
                    forwarded(&mut result);
                    return Ok(result);
                }
                // The call became the upstream's task: its handle goes to the client (see
                // `tasks::handle`), which polls the task for the result.
                lane::Answer::Task(task) => return Ok(tasks::handle::carry(&self.name, &task)),
                lane::Answer::InputRequired(asked) => {
                    let answers = self.input_for(caller.as_ref(), &asked, cancel).await?;
                    params.input_responses = Some(answers);
                    params.request_state = asked.request_state;
                }
                lane::Answer::Error(error) => {
                    return Err(UpstreamError::Rejected {
                        server: self.name.to_string(),
                        error: Box::new(error),
                    });
                }
                lane::Answer::Malformed(reason) => {
                    return Err(UpstreamError::Protocol {
                        server: self.name.to_string(),
                        reason,
                    });
                }
            }
        }
        Err(self.too_many_rounds())
    }

    /// The answers of the caller's client to the questions of `asked`.
    async fn input_for(
        &self,
        caller: Option<&Caller>,
        asked: &InputRequiredResult,
        cancel: &CancellationToken,
    ) -> Result<InputResponses, UpstreamError> {
        let Some(caller) = caller else {
            return Err(UpstreamError::Protocol {
                server: self.name.to_string(),
                reason: "it asked for input, and this call has no client to ask".into(),
            });
        };
        let questions = asked.input_requests.clone().unwrap_or_default();
        relay::requests::fulfil(&self.name, &self.downstream, caller, questions, cancel)
            .await
            .map_err(|error| UpstreamError::Rejected {
                server: self.name.to_string(),
                error: Box::new(error),
            })
    }

    fn too_many_rounds(&self) -> UpstreamError {
        UpstreamError::Protocol {
            server: self.name.to_string(),
            reason: format!("it asked for input more than {MAX_INPUT_ROUNDS} times in one call"),
        }
    }

    /// [`Self::send`] for a tool call to a stdio upstream, on its [`lane::Lane`].
    async fn call_on_lane(
        &self,
        lane: &Arc<lane::Lane>,
        live: &Live,
        mut request: CallToolRequest,
        cancel: &CancellationToken,
        caller: Option<Caller>,
        tool: &str,
    ) -> Result<lane::Answer, UpstreamError> {
        let _in_flight = self.requests.token();
        let mut call = lane::Call::start(lane).map_err(|_| self.closed_before_answering(live))?;
        let token = ProgressToken(call.id().clone());
        let meta = request
            .extensions
            .get_or_insert_default::<RequestMetaObject>();
        self.add_lane_meta(live, caller.as_ref(), meta);
        meta.set_progress_token(token.clone());
        let _route = caller.clone().map(|caller| {
            self.calls
                .enter(call.id().clone(), token, caller, Some(tool))
        });
        // The call's progress goes to the client, when it asked for progress.
        let forward = async |progress| {
            if let Some(caller) = &caller {
                caller.notify_progress(progress).await;
            }
        };
        let answer = tokio::select! {
            answer = call.exchange(request, forward) => Some(answer),
            () = cancel.cancelled() => None,
        };
        let Some(answer) = answer else {
            call.cancel("cancelled by the gateway");
            return Err(UpstreamError::Cancelled {
                server: self.name.to_string(),
            });
        };
        answer.ok_or_else(|| self.closed_before_answering(live))
    }

    /// What a request the gateway writes itself on a lane carries in its `_meta`, besides
    /// its progress token: the client's own `_meta` and, to a server of 2026-07-28, the
    /// request's context (what rmcp adds to its own requests, and the client's side).
    fn add_lane_meta(&self, live: &Live, caller: Option<&Caller>, meta: &mut RequestMetaObject) {
        add_client_meta(caller, meta);
        if let Some(context) = &live.stateless {
            meta.extend(context.clone());
            if let Some(caller) = caller {
                meta.extend(client_context(caller, &self.downstream.listeners));
            }
        }
    }

    /// [`Self::send`] for a tool call, as a lane's answer.
    async fn call_on_rmcp(
        &self,
        live: &Live,
        request: CallToolRequest,
        cancel: &CancellationToken,
        caller: Option<Caller>,
        tool: &str,
    ) -> Result<lane::Answer, UpstreamError> {
        let request = ClientRequest::CallToolRequest(request);
        match self.send(live, request, cancel, caller, Some(tool)).await? {
            ServerResult::CallToolResult(result) => Ok(lane::Answer::Result(result)),
            ServerResult::InputRequiredResult(asked) => Ok(lane::Answer::InputRequired(asked)),
            ServerResult::CreateTaskResult(task) => Ok(lane::Answer::Task(task)),
            other => Err(self.protocol_error(&other)),
        }
    }

    /// [`Self::send`] for a tool call to a streamable HTTP upstream, on its
    /// [`http_lane::HttpLane`]; `None` when the lane has no session for it (the upstream
    /// forgot it, say), for rmcp to send it.
    async fn call_on_http_lane(
        &self,
        lane: &Arc<http_lane::HttpLane>,
        live: &Live,
        mut request: CallToolRequest,
        cancel: &CancellationToken,
        caller: Option<Caller>,
        tool: &str,
    ) -> Result<Option<lane::Answer>, UpstreamError> {
        let _in_flight = self.requests.token();
        let id = lane.next_id();
        let token = ProgressToken(id.clone());
        let meta = request
            .extensions
            .get_or_insert_default::<RequestMetaObject>();
        self.add_lane_meta(live, caller.as_ref(), meta);
        meta.set_progress_token(token.clone());
        // A call to a server of 2026-07-28 repeats the arguments its tool's schema
        // designates in headers.
        let schema = live
            .offer
            .tools
            .iter()
            .filter(|_| live.is_stateless())
            .find(|listed| listed.name == tool)
            .map(|listed| listed.input_schema.clone());
        let _route = caller
            .clone()
            .map(|caller| self.calls.enter(id.clone(), token, caller, Some(tool)));
        let forward = async |progress| {
            if let Some(caller) = &caller {
                caller.notify_progress(progress).await;
            }
        };
        let answer = tokio::select! {
            answer = lane.call(&id, request, schema.as_deref(), forward) => answer,
            () = cancel.cancelled() => {
                lane.cancel(id, "cancelled by the gateway");
                return Err(UpstreamError::Cancelled {
                    server: self.name.to_string(),
                });
            }
        };
        match answer {
            Ok(answer) => Ok(Some(answer)),
            Err(http_lane::Unanswered::NoSession) => Ok(None),
            Err(http_lane::Unanswered::Failed(reason)) => Err(self.unavailable(reason)),
            Err(http_lane::Unanswered::Unreachable(reason)) => {
                live.unreachable.raise(&reason);
                Err(self.unavailable(reason))
            }
        }
    }

    /// Sends any request to this upstream, cancellable; while it is in flight, what the
    /// upstream sends back (progress, requests, log messages) goes to `caller`. Input the
    /// upstream asks for (`InputRequiredResult`, on `prompts/get` and `resources/read`) is
    /// asked of the caller's client and the request retried, as for tool calls.
    pub async fn request(
        &self,
        live: &Live,
        mut request: ClientRequest,
        cancel: &CancellationToken,
        caller: Option<Caller>,
    ) -> Result<ServerResult, UpstreamError> {
        for _round in 0..=MAX_INPUT_ROUNDS {
            let answer = self
                .send(live, request.clone(), cancel, caller.clone(), None)
                .await?;
            let ServerResult::InputRequiredResult(asked) = answer else {
                return Ok(answer);
            };
            let answers = self.input_for(caller.as_ref(), &asked, cancel).await?;
            match &mut request {
                ClientRequest::GetPromptRequest(get) => {
                    get.params.input_responses = Some(answers);
                    get.params.request_state = asked.request_state;
                }
                ClientRequest::ReadResourceRequest(read) => {
                    read.params.input_responses = Some(answers);
                    read.params.request_state = asked.request_state;
                }
                _ => return Err(self.protocol_error(&ServerResult::InputRequiredResult(asked))),
            }
        }
        Err(self.too_many_rounds())
    }

    /// [`Self::request`] on the current connection, or for a per-user server, on the
    /// caller's own (signing it in first when it has none).
    pub async fn request_for(
        &self,
        request: ClientRequest,
        cancel: &CancellationToken,
        caller: Option<Caller>,
    ) -> Result<ServerResult, UpstreamError> {
        if self.per_user.is_some() {
            let user = self.connection_of(caller.as_ref(), cancel).await?;
            return Box::pin(user.request_for(request, cancel, caller)).await;
        }
        let live = self.require_live()?;
        Box::pin(self.request(&live, request, cancel, caller)).await
    }

    /// [`Self::request`], for a call of `tool` when it is a tool call.
    async fn send(
        &self,
        live: &Live,
        request: ClientRequest,
        cancel: &CancellationToken,
        caller: Option<Caller>,
        tool: Option<&str>,
    ) -> Result<ServerResult, UpstreamError> {
        let _in_flight = self.requests.token();
        // rmcp adds the gateway's progress token.
        let mut request = request;
        add_client_meta(caller.as_ref(), request.get_meta_mut());
        let mut options = PeerRequestOptions::no_options();
        if live.is_stateless()
            && let Some(caller) = &caller
        {
            // rmcp adds the gateway's side of the context itself.
            options.meta = Some(client_context(caller, &self.downstream.listeners));
        }
        // rmcp's writer may be stuck on a server that stopped reading: the cancellation
        // is heard while the request waits for its turn too.
        let sent = tokio::select! {
            sent = live.peer.send_cancellable_request(request, options) => sent,
            () = cancel.cancelled() => return Err(UpstreamError::Cancelled {
                server: self.name.to_string(),
            }),
        };
        let mut handle = sent.map_err(|e| self.service_error(live, e))?;
        let answer = match caller {
            Some(caller) => {
                let (_route, mut progress) = self.calls.enter_in_order(
                    handle.id.clone(),
                    handle.progress_token.clone(),
                    caller.clone(),
                    tool,
                );
                let forward = |progress| caller.notify_progress(progress);
                let answer = answer_after_progress(&mut handle.rx, &mut progress, forward);
                tokio::select! {
                    answer = answer => Some(answer),
                    () = cancel.cancelled() => None,
                }
            }
            None => tokio::select! {
                answer = &mut handle.rx => Some(answer),
                () = cancel.cancelled() => None,
            },
        };
        match answer {
            Some(Ok(Ok(result))) => Ok(result),
            Some(Ok(Err(e))) => Err(self.service_error(live, e)),
            Some(Err(_closed)) => Err(self.closed_before_answering(live)),
            None => {
                // Told in the background: the notice waits behind whatever rmcp's writer
                // is stuck on, and the caller's answer must not.
                tokio::spawn(handle.cancel(Some("cancelled by the gateway".into())));
                Err(UpstreamError::Cancelled {
                    server: self.name.to_string(),
                })
            }
        }
    }

    /// Why a request in flight on `live` got no answer: the protocol violation that made
    /// the gateway close it, the retirement of the server, or the connection's end.
    fn closed_before_answering(&self, live: &Live) -> UpstreamError {
        match live.violation.get() {
            Some(violation) => UpstreamError::Protocol {
                server: self.name.to_string(),
                reason: violation.to_owned(),
            },
            None => match self.retired.get() {
                Some(why) => {
                    self.unavailable(format!("{why}; the grace period ended before it answered"))
                }
                None => self.unavailable("the connection closed before it answered"),
            },
        }
    }

    /// The current connection, or UPSTREAM_UNAVAILABLE.
    pub fn require_live(&self) -> Result<Arc<Live>, UpstreamError> {
        self.live()
            .ok_or_else(|| self.unavailable(self.down_reason()))
    }

    pub fn protocol_error(&self, got: &ServerResult) -> UpstreamError {
        UpstreamError::Protocol {
            server: self.name.to_string(),
            reason: format!("unexpected response: {got:?}")
                .chars()
                .take(200)
                .collect(),
        }
    }

    /// Why this upstream is not connected, for error messages: its state (`starting`,
    /// `failed`, `restarting`, `stopped`) and the last error, if any.
    pub fn down_reason(&self) -> String {
        let health = self.health();
        let state = health.state.as_str();
        match health.last_error {
            Some(error) => format!("{state}: {error}"),
            None => state.to_string(),
        }
    }

    /// What `error` from rmcp's client means for the caller; one that says the server
    /// cannot be reached is also raised on `live`.
    fn service_error(&self, live: &Live, error: ServiceError) -> UpstreamError {
        if let ServiceError::TransportSend(sent) = &error
            && let Some(http) = sent.error.downcast_ref::<StreamableHttpError<HttpError>>()
            && let Some(reason) = http_lane::why_unreachable(http)
        {
            live.unreachable.raise(&reason);
            return self.unavailable(reason);
        }
        match error {
            ServiceError::McpError(error) => UpstreamError::Rejected {
                server: self.name.to_string(),
                error: Box::new(error),
            },
            ServiceError::UnexpectedResponse => UpstreamError::Protocol {
                server: self.name.to_string(),
                reason: "unexpected response type".into(),
            },
            other => self.unavailable(crate::redact::urls(&connect::worded(&other))),
        }
    }
}

/// An upstream's tool result as the gateway passes it on: its name for itself
/// (2026-07-28) does not name what the gateway's clients talk to, and no key of the
/// gateway's own may come from it (see [`tasks::handle`]).
pub fn forwarded(result: &mut CallToolResult) {
    if let Some(meta) = &mut result.meta {
        meta.0.remove(SERVER_INFO_META_KEY);
        tasks::handle::forget(&mut meta.0);
        if meta.0.is_empty() {
            result.meta = None;
        }
    }
}

/// What a server of 2026-07-28 is told of the client behind a request: the client's own
/// capabilities (so that it asks only for what the client can give) and the log level
/// the client wants, if any, in place of the gateway's: the one its request named, or the
/// one its session set with `logging/setLevel`, a method such a server does not have.
fn client_context(caller: &Caller, listeners: &Listeners) -> RequestMetaObject {
    let mut meta = RequestMetaObject::new();
    meta.set_client_capabilities(caller.link.capabilities().clone());
    if let Some(level) = caller
        .log_level
        .or_else(|| listeners.level(&caller.session))
    {
        meta.set_log_level(level);
    }
    meta
}

/// Puts the client's `_meta` in a request going upstream on its behalf, as the client sent
/// it, under what the request carries itself (a call's trace context).
fn add_client_meta(caller: Option<&Caller>, meta: &mut RequestMetaObject) {
    if let Some(client) = caller.and_then(|caller| caller.meta.as_ref()) {
        let own = std::mem::replace(meta, client.clone());
        meta.extend(own);
    }
}
