//! Per-user sign-ins (`[servers.NAME.oauth] per_user = true`): each caller identity signs
//! in to the remote server as itself, while its call waits, and the gateway's own listener
//! takes the authorization server's answer.
//!
//! 1. A call of an identity with no token for the server [`SignIns::begin`]s a sign-in: an
//!    authorization request (PKCE, a single-use `state`, `resource`) whose redirect URI is
//!    the gateway's [`CALLBACK_PATH`] (under `[listen] public_url`). The `state` is bound
//!    to the server and the identity, and lives [`PENDING_TTL`]. Concurrent calls of the
//!    same identity share one sign-in, and one of them asks the person.
//! 2. The client is asked to open the URL (a URL-mode elicitation, see
//!    `upstream::per_user`), and the call [`SignIns::wait`]s.
//! 3. The person signs in; the browser comes back to the callback, which
//!    [`SignIns::complete`]s the sign-in: the `state` is taken (so it never works twice),
//!    the code exchanged, the token stored sealed for that identity only, and the waiting
//!    calls woken. A callback with a wrong, used or expired `state`, one presenting
//!    another identity's credentials, or an authorization server's error stores nothing,
//!    and the waiting call fails with the reason instead of waiting on.
//!
//! Sign-ins in progress live in the process that began them: behind a load balancer,
//! the callback must reach that replica (HAProxy `balance source`, or sticky routing).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use rmcp::transport::auth::AuthorizationSession;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::store::TokenStore;
use super::upstream::{OAuthUpstream, SignInError, query_value};
use crate::state::SharedState;

/// The path of the gateway's listener that authorization servers redirect back to.
pub const CALLBACK_PATH: &str = "/oauth/callback";
/// How long a sign-in may take from its URL to the callback.
pub const PENDING_TTL: Duration = Duration::from_secs(600);

/// Why a sign-in could not begin, or ended without a token.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PerUserError {
    #[error("this call has no identity to sign in as (the listener takes no credentials)")]
    NoIdentity,
    #[error("no callback URL: the gateway serves no HTTP listener")]
    NoCallback,
    #[error("cannot begin the sign-in: {0}")]
    Begin(String),
    #[error("the sign-in failed: {0}")]
    Failed(String),
    #[error("nobody signed in within {0:?}")]
    TimedOut(Duration),
    #[error("the call was cancelled while it waited for the sign-in")]
    Cancelled,
    #[error(transparent)]
    Exchange(#[from] super::exchange::ExchangeError),
}

impl PerUserError {
    /// A stable code for results, logs and tests.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoIdentity => "SIGN_IN_NO_IDENTITY",
            Self::NoCallback | Self::Begin(_) => "SIGN_IN_UNAVAILABLE",
            Self::Failed(_) => "SIGN_IN_FAILED",
            Self::TimedOut(_) => "SIGN_IN_TIMEOUT",
            Self::Cancelled => "ABORTED",
            Self::Exchange(error) => error.code(),
        }
    }
}

/// Why a callback stored no token; each is answered with its own status and code.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallbackError {
    #[error("the callback carries no state")]
    NoState,
    #[error("this state belongs to no sign-in in progress: wrong, used already, or expired")]
    UnknownState,
    #[error("this sign-in belongs to another identity than the credentials presented")]
    OtherIdentity,
    #[error("the authorization server refused: {0}")]
    Refused(String),
    #[error("the code could not be exchanged for a token: {0}")]
    Exchange(String),
}

impl CallbackError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoState | Self::UnknownState => "SIGN_IN_STATE_UNKNOWN",
            Self::OtherIdentity => "SIGN_IN_STATE_FOREIGN",
            Self::Refused(_) => "SIGN_IN_REFUSED",
            Self::Exchange(_) => "SIGN_IN_FAILED",
        }
    }

    pub fn status(&self) -> http::StatusCode {
        match self {
            Self::NoState | Self::UnknownState | Self::Refused(_) => http::StatusCode::BAD_REQUEST,
            Self::OtherIdentity => http::StatusCode::FORBIDDEN,
            Self::Exchange(_) => http::StatusCode::BAD_GATEWAY,
        }
    }
}

/// A sign-in begun: the URL the person opens, and the id its elicitation carries.
#[derive(Debug, Clone)]
pub struct Begun {
    pub url: String,
    pub elicitation_id: String,
    /// The sign-in's `state`, which names it here.
    state: String,
}

/// Who a completed callback signed in.
#[derive(Debug, Clone)]
pub struct Completed {
    pub server: String,
    pub identity: String,
}

/// A sign-in ended, told to the calls waiting for it.
#[derive(Debug, Clone)]
struct Ended {
    server: String,
    identity: String,
    failure: Option<String>,
}

struct Pending {
    server: String,
    identity: String,
    begun: Begun,
    session: AuthorizationSession,
    at: Instant,
    /// Whether a call has asked its client to open the URL already.
    asked: bool,
}

/// The sign-ins in progress in this process, by `state`.
pub struct SignIns {
    pending: Mutex<HashMap<String, Pending>>,
    ended: broadcast::Sender<Ended>,
    /// Where the authorization server sends the browser back: `[listen] public_url` and
    /// [`CALLBACK_PATH`]; `None` without an HTTP listener.
    redirect_uri: RwLock<Option<String>>,
    /// The state replicas share, where sign-ins are kept when there are replicas.
    shared: std::sync::OnceLock<Arc<dyn SharedState>>,
}

impl Default for SignIns {
    fn default() -> Self {
        Self {
            pending: Mutex::default(),
            ended: broadcast::channel(64).0,
            redirect_uri: RwLock::default(),
            shared: std::sync::OnceLock::new(),
        }
    }
}

impl SignIns {
    /// Keeps sign-ins in `state`, which every replica shares.
    pub fn share(&self, state: Arc<dyn SharedState>) {
        let _ = self.shared.set(state);
    }

    /// The shared state sign-ins are kept in, when there are replicas.
    pub fn shared(&self) -> Option<&Arc<dyn SharedState>> {
        self.shared.get()
    }

    /// Sets the listener's public base URL (`http://127.0.0.1:8765`, no trailing slash).
    pub fn set_public_url(&self, base: Option<&str>) {
        let uri = base.map(|base| format!("{}{CALLBACK_PATH}", base.trim_end_matches('/')));
        *self
            .redirect_uri
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = uri;
    }

    fn redirect_uri(&self) -> Option<String> {
        self.redirect_uri
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Pending>> {
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The sign-in of `identity` to `upstream` (whose store is that identity's): the one in
    /// progress, or a new one.
    pub async fn begin(
        &self,
        upstream: &OAuthUpstream,
        identity: &str,
    ) -> Result<Begun, PerUserError> {
        let ongoing = |pending: &mut HashMap<String, Pending>| {
            pending.retain(|_, p| p.at.elapsed() < PENDING_TTL);
            pending
                .values()
                .find(|p| p.server == upstream.name && p.identity == identity)
                .map(|p| p.begun.clone())
        };
        if let Some(begun) = ongoing(&mut self.lock()) {
            return Ok(begun);
        }
        let redirect_uri = self.redirect_uri().ok_or(PerUserError::NoCallback)?;
        let session = upstream
            .authorization_session(&redirect_uri)
            .await
            .map_err(|error| PerUserError::Begin(crate::redact::urls(&error.to_string())))?;
        let url = session.get_authorization_url().to_owned();
        let state = query_value(&url, "state")
            .ok_or_else(|| PerUserError::Begin("the authorization URL carries no state".into()))?;
        let mut pending = self.lock();
        // Another call of the same identity may have begun one meanwhile: take that.
        if let Some(begun) = ongoing(&mut pending) {
            return Ok(begun);
        }
        let begun = Begun {
            url,
            elicitation_id: uuid::Uuid::new_v4().simple().to_string(),
            state: state.clone(),
        };
        tracing::info!(server = %upstream.name, %identity, "per-user sign-in begun");
        pending.insert(
            state,
            Pending {
                server: upstream.name.clone(),
                identity: identity.to_owned(),
                begun: begun.clone(),
                session,
                at: Instant::now(),
                asked: false,
            },
        );
        Ok(begun)
    }

    /// Whether the call that began or joined `begun` is the one to ask the person: the
    /// first to want to. The others of the same identity wait for the same sign-in.
    pub fn ask_once(&self, begun: &Begun) -> bool {
        self.lock()
            .get_mut(&begun.state)
            .is_some_and(|pending| !std::mem::replace(&mut pending.asked, true))
    }

    /// Gives `begun` up (the person declined, or could not be asked): its state no longer
    /// works, and the calls waiting for it fail with `why`.
    pub fn abandon(&self, begun: &Begun, why: &str) {
        if let Some(pending) = self.lock().remove(&begun.state) {
            let _ = self.ended.send(Ended {
                server: pending.server,
                identity: pending.identity,
                failure: Some(why.to_owned()),
            });
        }
    }

    /// Takes the callback whose query is `query`, presented with credentials naming
    /// `presenter` (`None`: a browser without the client's credentials, as usual).
    pub async fn complete(
        &self,
        query: &str,
        presenter: Option<&str>,
    ) -> Result<Completed, CallbackError> {
        let url = format!("http://gateway{CALLBACK_PATH}?{query}");
        let state = query_value(&url, "state")
            .filter(|state| !state.is_empty())
            .ok_or(CallbackError::NoState)?;
        // Taken at once: whatever follows, this state never works again.
        let pending = self
            .lock()
            .remove(&state)
            .filter(|p| p.at.elapsed() < PENDING_TTL)
            .ok_or(CallbackError::UnknownState)?;
        let outcome = self.exchange(&pending, &url, presenter).await;
        let failure = outcome.as_ref().err().map(ToString::to_string);
        match &failure {
            None => {
                tracing::info!(server = %pending.server, identity = %pending.identity, "per-user sign-in completed")
            }
            Some(why) => {
                tracing::warn!(server = %pending.server, identity = %pending.identity, "per-user sign-in failed: {why}")
            }
        }
        let _ = self.ended.send(Ended {
            server: pending.server.clone(),
            identity: pending.identity.clone(),
            failure,
        });
        outcome.map(|()| Completed {
            server: pending.server,
            identity: pending.identity,
        })
    }

    async fn exchange(
        &self,
        pending: &Pending,
        url: &str,
        presenter: Option<&str>,
    ) -> Result<(), CallbackError> {
        if presenter.is_some_and(|presenter| presenter != pending.identity) {
            return Err(CallbackError::OtherIdentity);
        }
        if let Some(error) = query_value(url, "error") {
            let description = query_value(url, "error_description").unwrap_or_default();
            return Err(CallbackError::Refused(
                format!("{error} {description}").trim().to_owned(),
            ));
        }
        pending
            .session
            .handle_callback_url(url)
            .await
            .map(drop)
            .map_err(|error| {
                CallbackError::Exchange(crate::redact::urls(&SignInError::from(error).to_string()))
            })
    }

    /// What [`Self::wait`] learns from: the sign-ins that end from now on. Taken before the
    /// person is asked, so one that ends while the question is still out is not missed.
    pub fn watch(&self) -> Watch {
        Watch(self.ended.subscribe())
    }

    /// Waits until `identity` holds a token in `store` for `server`, or its sign-in
    /// failed (as told on `watch`), for at most `bound`.
    pub async fn wait(
        Watch(mut ended): Watch,
        server: &str,
        identity: &str,
        store: &TokenStore,
        bound: Duration,
        cancel: &CancellationToken,
    ) -> Result<(), PerUserError> {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            if holds_token(store).await {
                return Ok(());
            }
            let next = tokio::select! {
                next = ended.recv() => next,
                () = tokio::time::sleep_until(deadline) => return Err(PerUserError::TimedOut(bound)),
                () = cancel.cancelled() => return Err(PerUserError::Cancelled),
            };
            match next {
                Ok(ended) if ended.server == server && ended.identity == identity => {
                    if let Some(why) = ended.failure {
                        return Err(PerUserError::Failed(why));
                    }
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => {
                    return Err(PerUserError::Failed("the gateway is stopping".into()));
                }
            }
        }
    }
}

/// The sign-ins that ended since it was taken ([`SignIns::watch`]).
pub struct Watch(broadcast::Receiver<Ended>);

/// Whether `store` holds an access token (usable or refreshable: the connection decides).
pub async fn holds_token(store: &TokenStore) -> bool {
    store
        .credentials()
        .await
        .ok()
        .flatten()
        .is_some_and(|credentials| credentials.token_response.is_some())
}
