//! A per-user server (`[servers.NAME.oauth] per_user = true`): one connection per caller
//! identity, each made with that identity's own sign-in, so a call only ever reaches the
//! server as the person who made it.
//!
//! The server's [`Upstream`] in the registry holds no connection of its own. A call finds
//! (or starts) the caller's: a child [`Upstream`] whose connection carries the caller's
//! token from its sealed store (`auth::store`). A caller without a token signs in first
//! (`auth::per_user`): a client that declared URL elicitation is asked to open the URL
//! (`elicitation/create` with `mode: "url"` on 2025-11-25; the same question inside an
//! `InputRequiredResult` on 2026-07-28, which the relay's link does) and the call goes on
//! once the callback has stored the token; any other client gets `SIGN_IN_REQUIRED` with
//! the URL, and its next call after the sign-in goes through. A sign-in the server stops
//! accepting (refresh refused) is forgotten, and the next call asks again. A
//! token-exchange server (`grant = "token_exchange"`, `auth::exchange`) works the same
//! way, its token obtained from the caller's own instead of a sign-in.
//!
//! The children share the server's offer: the first connection's tool list is the
//! server's (the registry shows it), and at start one identity already signed in is
//! connected to learn it. Until anyone has signed in, the server offers one tool of the
//! gateway's, [`SIGN_IN_TOOL`], whose call is the sign-in; the server's own tools replace
//! it (`list_changed`) once it has connected.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    ClientRequest, CustomNotification, ElicitRequestParams, ElicitationAction, JsonObject,
    ServerNotification, Tool,
};
use tokio_util::sync::CancellationToken;

use super::offer::{Listed, Offer};
use super::{Upstream, UpstreamError, UpstreamState};
use crate::auth::exchange::ExchangeError;
use crate::auth::people::People;
use crate::auth::per_user::{PerUserError, holds_token};
use crate::auth::sealed::{SealError, Sealer};
use crate::auth::signed_in::refresh_due;
use crate::auth::store::{self, NoDataDir};
use crate::auth::upstream::OAuthUpstream;
use crate::config::GrantKind;
use crate::relay::{self, Caller};
use crate::state::SharedState;
use crate::tool_result::{Block, ToolResult};

/// The tool a per-user server offers until someone has signed in to it.
pub const SIGN_IN_TOOL: &str = "sign_in";

/// What a per-user server offers before anyone has signed in: its sign-in.
pub fn sign_in_offer(server: &str) -> Arc<Offer> {
    let mut schema = serde_json::Map::new();
    schema.insert("type".into(), "object".into());
    schema.insert("properties".into(), serde_json::Map::new().into());
    let tool = Tool::new(
        SIGN_IN_TOOL,
        format!(
            "Sign in to `{server}` as yourself. Its own tools are listed once someone has \
             signed in; each person's calls reach it with their own sign-in."
        ),
        Arc::new(schema),
    );
    let mut offer = Offer::default();
    offer.capabilities.tools = Some(Default::default());
    offer.tools.push(Listed::of_view(tool));
    Arc::new(offer)
}

/// Whether a call of `tool` is the sign-in tool and not one of the server's own.
pub fn is_sign_in_only(tool: &str, offer: &Offer) -> bool {
    tool == SIGN_IN_TOOL && !offer.tools.iter().any(|t| t.name == SIGN_IN_TOOL)
}

/// The result of the sign-in tool, once signed in.
pub fn signed_in(server: &str) -> ToolResult {
    ToolResult::success(vec![Block::text(format!(
        "Signed in to `{server}`: its tools are listed now."
    ))])
}

/// How often a replica that knows no tools of a per-user server looks whether someone
/// signed in elsewhere.
const OFFER_POLL: Duration = Duration::from_secs(2);

/// How often idle identity connections are looked for, at most.
const IDLE_SWEEP: Duration = Duration::from_secs(30);

/// How long a call waits for its caller to sign in.
const SIGN_IN_WAIT: Duration = Duration::from_secs(300);

/// Whose sign-in an identity connection uses, and the key its store is sealed with.
pub struct SignsInAs {
    pub identity: Arc<str>,
    pub sealer: Arc<Sealer>,
    /// The state replicas share, where the sign-in is kept when there are replicas.
    pub shared: Option<Arc<dyn SharedState>>,
}

/// The identity connections of one per-user server.
pub struct PerUser {
    users: Mutex<HashMap<Arc<str>, Arc<Upstream>>>,
    /// When each identity last called.
    used: Mutex<HashMap<Arc<str>, Instant>>,
    /// Per identity, the turn of a token exchange (one at a time).
    exchanges: Mutex<HashMap<Arc<str>, Arc<tokio::sync::Mutex<()>>>>,
    sealer: Result<Arc<Sealer>, SealError>,
    dir: Result<PathBuf, NoDataDir>,
}

impl PerUser {
    pub fn new() -> Self {
        Self {
            users: Mutex::default(),
            used: Mutex::default(),
            exchanges: Mutex::default(),
            sealer: Sealer::from_env().map(Arc::new),
            dir: store::default_dir(),
        }
    }

    /// The key and the token folder, or why per-user sign-ins cannot be kept.
    pub fn storage(&self) -> Result<(Arc<Sealer>, PathBuf), String> {
        let sealer = self
            .sealer
            .clone()
            .map_err(|e| format!("{}: {e}", e.code()))?;
        let dir = self.dir.clone().map_err(|e| e.to_string())?;
        Ok((sealer, dir))
    }

    /// Whose sign-in a connection of `identity` uses, kept where `shared` says.
    fn signs_in_as(
        sealer: &Arc<Sealer>,
        shared: Option<&Arc<dyn SharedState>>,
        identity: &str,
    ) -> SignsInAs {
        SignsInAs {
            identity: identity.into(),
            sealer: sealer.clone(),
            shared: shared.cloned(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<Upstream>>> {
        self.users.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The turn of `identity`'s token exchanges.
    fn exchange_turn(&self, identity: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.exchanges
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(identity.into())
            .or_default()
            .clone()
    }

    /// Notes that `identity` calls now.
    fn touch(&self, identity: &Arc<str>) {
        self.used
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(identity.clone(), Instant::now());
    }

    /// Closes the connections of the identities that have not called for `idle` and have
    /// no request in flight, nor a resource subscription (which lives on the connection);
    /// they open again at the identity's next call.
    fn disconnect_idle(&self, server: &str, idle: Duration) {
        let stale: Vec<Arc<str>> = {
            let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
            let stale = used
                .iter()
                .filter(|(_, at)| at.elapsed() >= idle)
                .map(|(identity, _)| identity.clone())
                .collect::<Vec<_>>();
            for identity in &stale {
                used.remove(identity);
            }
            stale
        };
        let mut users = self.lock();
        for identity in stale {
            if users.get(&identity).is_some_and(|user| {
                user.requests.is_empty() && !user.holds_resource_subscriptions()
            }) && let Some(user) = users.remove(&identity)
            {
                tracing::info!(server, %identity, "closing an idle per-user connection");
                user.stop();
            }
        }
    }

    /// Stops every identity's connection.
    pub fn stop_all(&self) {
        for (_, user) in self.lock().drain() {
            user.stop();
        }
    }
}

impl Upstream {
    /// The supervisor of a per-user server: it has no connection of its own; it connects
    /// one identity already signed in, if any, so the server's tools are known, and stops
    /// every identity's connection at shutdown.
    pub(super) async fn supervise_per_user(self: Arc<Self>) {
        let Some(users) = &self.per_user else { return };
        match users.storage() {
            Ok((sealer, dir)) => {
                self.set_health(|h| h.state = UpstreamState::PerUser);
                let shared = self.downstream.sign_ins.shared().cloned();
                self.connect_someone(users, &sealer, &dir, shared.as_ref())
                    .await;
                self.attempted.send_replace(true);
                // With replicas, a sign-in on another replica makes the tools known here.
                while shared.is_some() && !self.has_own_offer() {
                    tokio::select! {
                        () = tokio::time::sleep(OFFER_POLL) => {}
                        () = self.shutdown.cancelled() => break,
                    }
                    self.connect_someone(users, &sealer, &dir, shared.as_ref())
                        .await;
                }
            }
            Err(why) => {
                tracing::error!(server = %self.name, "per-user sign-ins cannot be kept: {why}");
                self.set_health(|h| {
                    h.state = UpstreamState::Failed;
                    h.last_error = Some(why);
                });
                self.attempted.send_replace(true);
            }
        }
        let idle = self
            .config
            .oauth
            .as_ref()
            .and_then(|oauth| oauth.idle_disconnect());
        let sweep = idle.map_or(IDLE_SWEEP, |idle| idle.min(IDLE_SWEEP));
        loop {
            tokio::select! {
                () = tokio::time::sleep(sweep), if idle.is_some() => {
                    if let Some(idle) = idle {
                        users.disconnect_idle(&self.name, idle);
                    }
                }
                () = self.shutdown.cancelled() => break,
            }
        }
        users.stop_all();
        self.set_health(|h| h.state = UpstreamState::Stopped);
    }

    /// The sign-ins of this server, for operators; `None` when it is not per-user, `Err`
    /// when they cannot be read (no token key).
    pub fn people(&self) -> Option<Result<People<'_>, String>> {
        let (Some(users), Some(settings), Some(url)) =
            (&self.per_user, &self.config.oauth, &self.config.url)
        else {
            return None;
        };
        Some(users.storage().map(|(sealer, dir)| People {
            name: &self.name,
            url,
            settings,
            dir,
            shared: self.downstream.sign_ins.shared(),
            sealer,
        }))
    }

    /// The OAuth client of this per-user server as `identity`, with that identity's store;
    /// `None` when it is not per-user or its sign-ins cannot be kept.
    pub fn as_identity(&self, identity: &str) -> Option<OAuthUpstream> {
        let (Some(users), Some(settings), Some(url)) =
            (&self.per_user, &self.config.oauth, &self.config.url)
        else {
            return None;
        };
        let (sealer, dir) = users.storage().ok()?;
        Some(OAuthUpstream::for_identity(
            &self.name,
            url,
            settings,
            &dir,
            self.downstream.sign_ins.shared(),
            identity,
            sealer,
        ))
    }

    /// Revokes `identity`'s sign-in (see [`People::sign_out`]) and closes its connection:
    /// its next call asks it to sign in again. `Ok(None)`: it had none.
    pub async fn revoke(&self, identity: &str) -> Result<Option<bool>, String> {
        let people = self
            .people()
            .ok_or_else(|| format!("`{}` is not a per-user server", self.name))??;
        let revoked = people
            .sign_out(identity)
            .await
            .map_err(|error| error.to_string())?;
        if let Some(users) = &self.per_user
            && let Some(user) = users.lock().remove(identity)
        {
            user.stop();
        }
        Ok(revoked)
    }

    /// Connects one identity already signed in, if there is one, to learn the tools.
    async fn connect_someone(
        &self,
        users: &PerUser,
        sealer: &Arc<Sealer>,
        dir: &std::path::Path,
        shared: Option<&Arc<dyn SharedState>>,
    ) {
        let known = store::identities(dir, shared, &self.name).await;
        if let Some(first) = known.first() {
            let user = self.user(users, PerUser::signs_in_as(sealer, shared, first));
            user.first_attempt().await;
        }
    }

    /// Whether a connection has brought the server's own offer (not the sign-in tool).
    fn has_own_offer(&self) -> bool {
        self.last_offer
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Whether each caller identity has a connection of its own to the server.
    pub fn is_per_user(&self) -> bool {
        self.per_user.is_some()
    }

    /// Whose connection this is, when it is an identity connection of a per-user server.
    pub fn identity(&self) -> Option<&str> {
        self.signs_in_as.as_ref().map(|who| &*who.identity)
    }

    /// The connection of `identity`, if it has one (not signed in or connected for this).
    pub(super) fn connected_as(&self, identity: &str) -> Option<Arc<Upstream>> {
        self.per_user.as_ref()?.lock().get(identity).cloned()
    }

    /// [`Upstream::request_for`] on behalf of `identity` with nobody there to sign in (its
    /// session has ended): on the server's connection, or of a per-user server, on the
    /// connection `identity` already has. `None` when it has none: nothing of theirs is
    /// held on the server, and no sign-in is started for someone who has gone.
    pub async fn request_as_connected(
        &self,
        identity: Option<&str>,
        request: ClientRequest,
        cancel: &CancellationToken,
    ) -> Option<Result<JsonObject, UpstreamError>> {
        let upstream = match &self.per_user {
            Some(_) => &self.connected_as(identity?)?,
            None => self,
        };
        Some(Box::pin(upstream.request_for(request, cancel, None)).await)
    }

    /// The connection of `identity`, started if it has none.
    fn user(&self, users: &PerUser, who: SignsInAs) -> Arc<Upstream> {
        let mut map = users.lock();
        if let Some(user) = map.get(&who.identity) {
            return user.clone();
        }
        let identity = who.identity.clone();
        let user = self.start_user(who);
        map.insert(identity, user.clone());
        user
    }

    /// The connection of `who` after a sign-in: a new one in place of `stale` (the one
    /// from before the sign-in began, made with what is no longer there), or the one
    /// another call of the same identity started since (several wait for one sign-in).
    fn restart_user(
        &self,
        users: &PerUser,
        who: SignsInAs,
        stale: Option<&Arc<Upstream>>,
    ) -> Arc<Upstream> {
        let mut map = users.lock();
        if let Some(user) = map.get(&who.identity)
            && !stale.is_some_and(|stale| Arc::ptr_eq(stale, user))
        {
            return user.clone();
        }
        let identity = who.identity.clone();
        let user = self.start_user(who);
        if let Some(old) = map.insert(identity, user.clone()) {
            old.stop();
        }
        user
    }

    /// The connection of `caller`'s identity, signed in and connected: the caller signs in
    /// first when it has no token.
    pub(super) async fn connection_of(
        &self,
        caller: Option<&Caller>,
        cancel: &CancellationToken,
    ) -> Result<Arc<Upstream>, UpstreamError> {
        let Some(caller) = caller else {
            return Err(self.sign_in_failed(PerUserError::NoIdentity));
        };
        let Some(identity) = caller.identity.clone() else {
            return Err(self.sign_in_failed(PerUserError::NoIdentity));
        };
        let (Some(users), Some(settings), Some(url)) =
            (&self.per_user, &self.config.oauth, &self.config.url)
        else {
            return Err(self.unavailable("not a per-user server"));
        };
        let (sealer, dir) = users.storage().map_err(|why| self.unavailable(why))?;
        users.touch(&identity);
        let shared = self.downstream.sign_ins.shared();
        let who = || PerUser::signs_in_as(&sealer, shared, &identity);
        let oauth = OAuthUpstream::for_identity(
            &self.name,
            url,
            settings,
            &dir,
            shared,
            &identity,
            sealer.clone(),
        );
        let mut user = if settings.grant == GrantKind::TokenExchange {
            // A connection reads the token anew at each request: one exchanged now serves
            // the connection there is.
            self.exchange_for(users, &identity, &oauth, caller).await?;
            self.user(users, who())
        } else if holds_token(&oauth.store).await {
            self.user(users, who())
        } else {
            let stale = users.lock().get(&identity).cloned();
            self.sign_in(&identity, &oauth, caller, cancel).await?;
            self.restart_user(users, who(), stale.as_ref())
        };
        for _ in 0..2 {
            tokio::select! {
                () = user.first_attempt() => {}
                () = cancel.cancelled() => return Err(UpstreamError::Cancelled { server: self.name.to_string() }),
            }
            if user.live().is_some() {
                return Ok(user);
            }
            if user.health().state != UpstreamState::NeedsLogin {
                break;
            }
            // The server no longer takes this identity's sign-in (its refresh was
            // refused): the person signs in again, or the token is exchanged again.
            tracing::info!(server = %self.name, %identity, "per-user sign-in no longer valid; obtaining a new one");
            if let Err(error) = oauth.store.forget_tokens().await {
                tracing::warn!(server = %self.name, %identity, %error, "cannot update the token file");
            }
            if settings.grant == GrantKind::TokenExchange {
                self.exchange_for(users, &identity, &oauth, caller).await?;
            } else {
                self.sign_in(&identity, &oauth, caller, cancel).await?;
            }
            user = self.restart_user(users, who(), Some(&user));
        }
        Err(self.unavailable(user.down_reason()))
    }

    /// [`Upstream::call_tool`] on the caller's own connection. A sign-in the server stopped
    /// taking during the call (its refresh refused) is forgotten by the connection, and the
    /// call is made once more, which asks the person to sign in again: the call had not
    /// reached the tool, whose request carries no token it takes.
    pub(super) async fn call_as_caller(
        &self,
        tool: &str,
        arguments: Option<rmcp::model::JsonObject>,
        cancel: &CancellationToken,
        caller: Option<Caller>,
        trace: &opentelemetry::Context,
    ) -> Result<ToolResult, UpstreamError> {
        let mut again = true;
        loop {
            let user = self.connection_of(caller.as_ref(), cancel).await?;
            if is_sign_in_only(tool, &user.offer()) {
                return Ok(signed_in(&self.name));
            }
            let called = user
                .call_tool(tool, arguments.clone(), cancel, caller.clone(), trace)
                .await;
            let signed_out = match (&called, &user.signs_in_as) {
                (Err(_), Some(who)) => match self.as_identity(&who.identity) {
                    Some(oauth) => !holds_token(&oauth.store).await,
                    None => false,
                },
                _ => false,
            };
            if !(signed_out && std::mem::take(&mut again)) {
                return called;
            }
            tracing::info!(server = %self.name, "the sign-in died during the call; signing in again");
        }
    }

    /// Makes sure `identity` holds a token for this token-exchange server that is not about
    /// to expire: the one kept, else the caller's own token exchanged for a new one. One
    /// exchange at a time per identity: the calls that waited use its token.
    async fn exchange_for(
        &self,
        users: &PerUser,
        identity: &str,
        oauth: &OAuthUpstream,
        caller: &Caller,
    ) -> Result<(), UpstreamError> {
        let fresh = async || holds_token(&oauth.store).await && !refresh_due(&oauth.store).await;
        if fresh().await {
            return Ok(());
        }
        let turn = users.exchange_turn(identity);
        let _turn = turn.lock().await;
        if fresh().await {
            return Ok(());
        }
        let Some(subject) = &caller.subject_token else {
            return Err(self.sign_in_failed(PerUserError::Exchange(ExchangeError::NoSubjectToken)));
        };
        oauth.exchange(&subject.0).await.map_err(|error| {
            tracing::warn!(server = %self.name, %identity, code = error.code(), "token exchange failed: {error}");
            self.sign_in_failed(PerUserError::Exchange(error))
        })?;
        tracing::info!(server = %self.name, %identity, "exchanged the caller's token");
        Ok(())
    }

    /// Has `identity` sign in through `caller`'s client, and waits for the callback.
    async fn sign_in(
        &self,
        identity: &str,
        oauth: &OAuthUpstream,
        caller: &Caller,
        cancel: &CancellationToken,
    ) -> Result<(), UpstreamError> {
        let sign_ins = &self.downstream.sign_ins;
        let watch = sign_ins.watch();
        let begun = sign_ins
            .begin(oauth, identity)
            .await
            .map_err(|error| self.sign_in_failed(error))?;
        // A sign-in of theirs may have completed since the caller looked at the store
        // (the calls of one burst look at once): then nobody is asked again.
        if holds_token(&oauth.store).await {
            sign_ins.not_needed(&begun).await;
            return Ok(());
        }
        let elicits_urls = caller
            .link
            .capabilities()
            .elicitation
            .as_ref()
            .is_some_and(|elicitation| elicitation.url.is_some());
        if !elicits_urls {
            tracing::info!(server = %self.name, %identity, "sign-in required; the client cannot open URLs: told to");
            return Err(UpstreamError::SignInRequired {
                server: self.name.to_string(),
                url: begun.url,
            });
        }
        let asking = sign_ins.ask_once(&begun);
        if asking {
            let question = ElicitRequestParams::UrlElicitationParams {
                meta: None,
                message: format!(
                    "Sign in to `{}` to continue: the call waits until you have.",
                    self.name
                ),
                url: begun.url.clone(),
                elicitation_id: begun.elicitation_id.clone(),
            };
            tracing::info!(server = %self.name, %identity, "asking the client to sign in (URL elicitation)");
            let asked = relay::requests::elicit(caller, question, cancel).await;
            let refused = match asked {
                Ok(answer) if answer.action == ElicitationAction::Accept => None,
                Ok(answer) => Some(format!(
                    "the person did not open the sign-in page ({:?})",
                    answer.action
                )),
                Err(why) => Some(why),
            };
            if let Some(why) = refused {
                sign_ins.abandon(&begun, &why).await;
                return Err(self.sign_in_failed(PerUserError::Failed(why)));
            }
        }
        sign_ins
            .wait(watch, &begun, &oauth.store, SIGN_IN_WAIT, cancel)
            .await
            .map_err(|error| match error {
                PerUserError::Cancelled => UpstreamError::Cancelled {
                    server: self.name.to_string(),
                },
                error => self.sign_in_failed(error),
            })?;
        if asking {
            // The client may close what it showed for the URL now (2025-11-25).
            let done = CustomNotification::new(
                "notifications/elicitation/complete",
                Some(serde_json::json!({"elicitationId": begun.elicitation_id})),
            );
            caller
                .link
                .notify(ServerNotification::CustomNotification(done))
                .await;
        }
        Ok(())
    }

    fn sign_in_failed(&self, error: PerUserError) -> UpstreamError {
        UpstreamError::SignInFailed {
            server: self.name.to_string(),
            reason: error.code(),
            message: error.to_string(),
        }
    }
}
