//! Per-user sign-ins (`[servers.NAME.oauth] per_user = true`): each caller identity signs
//! in to the remote server as itself, while its call waits, and the gateway's own listener
//! takes the authorization server's answer.
//!
//! 1. A call of an identity with no token for the server [`SignIns::begin`]s a sign-in: an
//!    authorization request (PKCE, a single-use `state`, `resource`) whose redirect URI is
//!    the gateway's [`CALLBACK_PATH`] (under `[listen] public_url`). The `state` is bound
//!    to the server and the identity, and lives [`PENDING_TTL`]. Concurrent calls of the
//!    same identity share one sign-in, and one of them asks the person.
//! 2. The client is asked to open a page of the gateway's, [`SIGN_IN_PATH`] (a URL-mode
//!    elicitation, see `upstream::per_user`), and the call [`SignIns::wait`]s.
//! 3. That page finds out who is at the browser (`super::browser`). A browser that proves
//!    to be the identity the sign-in is for is [`SignIns::prove`]n: it gets a cookie bound
//!    to the `state` and is sent on to the authorization server. Any other person ends the
//!    sign-in there: nothing can be stored for it any more, and the waiting call fails
//!    saying why. So a link passed to someone else, or opened by a page of another site,
//!    never signs anyone in as the person it was shown to.
//! 4. The person signs in; the browser comes back to the callback, which
//!    [`SignIns::complete`]s the sign-in: the `state` is taken (so it never works twice),
//!    the browser's cookie checked, the code exchanged, the token stored sealed for that
//!    identity only, and the waiting calls woken. A callback with a wrong, used or expired
//!    `state`, from a browser without the proved cookie, presenting another identity's
//!    credentials, or with an authorization server's error stores nothing, and the waiting
//!    call fails with the reason instead of waiting on.
//!
//! Sign-ins in progress are records in the gateway's shared state ([`super::pending`]):
//! with `[cluster]`, the callback completes on whichever replica the browser reaches, and
//! the call waiting on another replica learns of it there.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use std::time::{Duration, Instant};

use rmcp::transport::auth::{AuthorizationCallback, OAuthClientConfig};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::pending::{self, Pending, PendingRecord};
use super::sealed::{SealError, Sealer};
use super::store::TokenStore;
use super::upstream::{OAuthUpstream, SignInError, query_value};
use crate::state::SharedState;

/// The path of the gateway's listener that authorization servers redirect back to.
pub const CALLBACK_PATH: &str = "/oauth/callback";
/// The path of the page a person is sent to first, which finds out who they are.
pub const SIGN_IN_PATH: &str = "/oauth/sign-in";
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
    #[error(
        "this sign-in was started for {expected}, but the person at this browser is {found}: \
         nothing was stored, and the sign-in is over"
    )]
    OtherPerson { expected: String, found: String },
    #[error(
        "this browser has not shown that it belongs to the person the sign-in was started \
         for: open the link the client showed, not the authorization server's"
    )]
    BrowserUnproven,
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
            Self::OtherPerson { .. } => "SIGN_IN_WRONG_PERSON",
            Self::BrowserUnproven => "SIGN_IN_BROWSER_UNPROVEN",
            Self::Refused(_) => "SIGN_IN_REFUSED",
            Self::Exchange(_) => "SIGN_IN_FAILED",
        }
    }

    pub fn status(&self) -> http::StatusCode {
        match self {
            Self::NoState | Self::UnknownState | Self::Refused(_) => http::StatusCode::BAD_REQUEST,
            Self::OtherIdentity | Self::OtherPerson { .. } | Self::BrowserUnproven => {
                http::StatusCode::FORBIDDEN
            }
            Self::Exchange(_) => http::StatusCode::BAD_GATEWAY,
        }
    }
}

/// A sign-in begun: the URL the person opens, and the id its elicitation carries.
#[derive(Debug, Clone)]
pub struct Begun {
    pub url: String,
    pub elicitation_id: String,
    /// The sign-in's `state`, which names it everywhere.
    state: String,
}

/// Who a completed callback signed in.
#[derive(Debug, Clone)]
pub struct Completed {
    pub server: String,
    pub identity: String,
}

/// A sign-in a browser opened: whom it is for, which the browser must prove to be.
#[derive(Debug, Clone)]
pub struct Opened {
    pub server: String,
    pub identity: String,
}

/// A browser proved to be the person a sign-in is for: the secret its cookie keeps, and
/// where it goes on to sign in.
#[derive(Debug, Clone)]
pub struct Proven {
    pub cookie_secret: String,
    pub authorization_url: String,
}

/// A sign-in ended in this process, told to the calls waiting for it here.
#[derive(Debug, Clone)]
struct Ended {
    state: String,
    failure: Option<String>,
}

/// A sign-in this process began, which later calls of the same identity join.
struct Ongoing {
    server: String,
    identity: String,
    begun: Begun,
    at: Instant,
    /// Whether a call has asked its client to open the URL already.
    asked: bool,
    /// Whether its callback came and its code is being exchanged: the calls that come
    /// meanwhile join it still, though its state no longer works for a callback.
    completing: bool,
}

/// The sign-ins in progress: their records in the shared state ([`Pending`]), which any
/// replica's callback takes, and those this process began, which its calls join.
pub struct SignIns {
    ongoing: Mutex<HashMap<String, Ongoing>>,
    ended: broadcast::Sender<Ended>,
    /// The listener's public base URL (`[listen] public_url`, else its address), under
    /// which the sign-in page and the callback are; `None` without a listener for them.
    public_url: RwLock<Option<String>>,
    /// The gateway's shared state (this process's memory, or Redis with `[cluster]`).
    state: OnceLock<Arc<dyn SharedState>>,
    /// The token key, read once, when first needed.
    sealer: OnceLock<Result<Arc<Sealer>, SealError>>,
}

impl Default for SignIns {
    fn default() -> Self {
        Self {
            ongoing: Mutex::default(),
            ended: broadcast::channel(64).0,
            public_url: RwLock::default(),
            state: OnceLock::new(),
            sealer: OnceLock::new(),
        }
    }
}

impl SignIns {
    /// Keeps sign-ins in progress in `state`, and per-user sign-ins too when replicas
    /// share it.
    pub fn keep_in(&self, state: Arc<dyn SharedState>) {
        let _ = self.state.set(state);
    }

    /// The shared state per-user sign-ins are kept in, when there are replicas.
    pub fn shared(&self) -> Option<&Arc<dyn SharedState>> {
        self.state.get().filter(|state| state.is_shared())
    }

    /// Sets the listener's public base URL (`http://127.0.0.1:8765`, no trailing slash).
    pub fn set_public_url(&self, base: Option<&str>) {
        *self
            .public_url
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) =
            base.map(|base| base.trim_end_matches('/').to_owned());
    }

    /// The listener's public base URL, as set.
    pub fn public_url(&self) -> Option<String> {
        self.public_url
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Ongoing>> {
        self.ongoing
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The records of sign-ins in progress, or why there are none.
    pub fn pending(&self) -> Result<Pending, String> {
        let state = self
            .state
            .get()
            .ok_or("the gateway keeps no state for sign-ins")?;
        let sealer = self
            .sealer
            .get_or_init(|| Sealer::from_env().map(Arc::new))
            .clone()
            .map_err(|e| format!("{}: {e}", e.code()))?;
        Ok(Pending {
            state: state.clone(),
            sealer,
            ttl: PENDING_TTL,
        })
    }

    /// The sign-in of `identity` to `upstream` (whose store is that identity's): the one
    /// this process has in progress, or a new one.
    pub async fn begin(
        &self,
        upstream: &OAuthUpstream,
        identity: &str,
    ) -> Result<Begun, PerUserError> {
        let ongoing = |ongoing: &mut HashMap<String, Ongoing>| {
            ongoing.retain(|_, o| o.at.elapsed() < PENDING_TTL);
            ongoing
                .values()
                .find(|o| o.server == upstream.name && o.identity == identity)
                .map(|o| (o.begun.clone(), o.completing))
        };
        let pending = self.pending().map_err(PerUserError::Begin)?;
        let joined = ongoing(&mut self.lock());
        if let Some((begun, completing)) = joined {
            // Its callback may have come to another replica since: then it is spent.
            if completing || pending.is_open(&begun.state).await {
                return Ok(begun);
            }
            self.lock().remove(&begun.state);
        }
        let base = self.public_url().ok_or(PerUserError::NoCallback)?;
        let redirect_uri = format!("{base}{CALLBACK_PATH}");
        let failed =
            |error: SignInError| PerUserError::Begin(crate::redact::urls(&error.to_string()));
        let mut manager = upstream.discovered_manager().await.map_err(failed)?;
        manager.set_state_store(pending.pkce());
        let session = upstream
            .authorization_session_with(manager, &redirect_uri)
            .await
            .map_err(failed)?;
        let authorization_url = session.get_authorization_url().to_owned();
        let state = query_value(&authorization_url, "state")
            .ok_or_else(|| PerUserError::Begin("the authorization URL carries no state".into()))?;
        let (client_id, _) = session
            .get_credentials()
            .await
            .map_err(|error| failed(error.into()))?;
        let record = PendingRecord {
            server: upstream.name.clone(),
            identity: identity.to_owned(),
            client_id,
            redirect_uri,
            began: pending::now(),
            authorization_url,
            browser: None,
        };
        pending
            .put(&state, &record)
            .await
            .map_err(PerUserError::Begin)?;
        let begun = Begun {
            url: sign_in_page(&base, &state),
            elicitation_id: uuid::Uuid::new_v4().simple().to_string(),
            state: state.clone(),
        };
        // Another call of the same identity may have begun one meanwhile: take that.
        let joined = {
            let mut ongoing_now = self.lock();
            let joined = ongoing(&mut ongoing_now);
            if joined.is_none() {
                ongoing_now.insert(
                    state.clone(),
                    Ongoing {
                        server: upstream.name.clone(),
                        identity: identity.to_owned(),
                        begun: begun.clone(),
                        at: Instant::now(),
                        asked: false,
                        completing: false,
                    },
                );
            }
            joined
        };
        if let Some((joined, _)) = joined {
            pending.forget(&state).await;
            return Ok(joined);
        }
        tracing::info!(server = %upstream.name, %identity, "per-user sign-in begun");
        Ok(begun)
    }

    /// Whether the call that began or joined `begun` is the one to ask the person: the
    /// first to want to. The others of the same identity wait for the same sign-in.
    pub fn ask_once(&self, begun: &Begun) -> bool {
        self.lock()
            .get_mut(&begun.state)
            .is_some_and(|ongoing| !std::mem::replace(&mut ongoing.asked, true))
    }

    /// Gives `begun` up (the person declined, or could not be asked): its state no longer
    /// works, and the calls waiting for it fail with `why`.
    pub async fn abandon(&self, begun: &Begun, why: &str) {
        self.close(begun, Some(why.to_owned())).await;
    }

    /// Ends `begun` without asking anyone: the identity it was for holds a token already
    /// (another sign-in of theirs completed meanwhile). The calls waiting for it find the
    /// token.
    pub async fn not_needed(&self, begun: &Begun) {
        self.close(begun, None).await;
    }

    async fn close(&self, begun: &Begun, failure: Option<String>) {
        self.lock().remove(&begun.state);
        if let Ok(pending) = self.pending() {
            pending.forget(&begun.state).await;
        }
        self.end(&begun.state, failure).await;
    }

    /// Tells the calls waiting for the sign-in of `state`, here and on other replicas.
    async fn end(&self, state: &str, failure: Option<String>) {
        if let (Some(why), Ok(pending)) = (&failure, self.pending()) {
            pending.tell_failed(state, why).await;
        }
        let _ = self.ended.send(Ended {
            state: state.to_owned(),
            failure,
        });
    }

    /// The sign-in of `state` that a browser opened, still waiting for its callback.
    pub async fn opened(&self, state: &str) -> Result<Opened, CallbackError> {
        let record = self.open_record(state).await?;
        Ok(Opened {
            server: record.server,
            identity: record.identity,
        })
    }

    async fn open_record(&self, state: &str) -> Result<PendingRecord, CallbackError> {
        let pending = self.pending().map_err(CallbackError::Exchange)?;
        pending
            .peek(state)
            .await
            .map_err(CallbackError::Exchange)?
            .filter(|record| !record.expired(PENDING_TTL))
            .ok_or(CallbackError::UnknownState)
    }

    /// A browser opened the sign-in of `state` and proved to be `person` (an identity as
    /// callers are named). The sign-in's own person gets a cookie secret that the callback
    /// will want, and the authorization server's URL; anyone else ends the sign-in: it
    /// stores nothing any more, and the waiting calls fail saying why.
    pub async fn prove(&self, state: &str, person: &str) -> Result<Proven, CallbackError> {
        let mut record = self.open_record(state).await?;
        if record.identity != person {
            let refusal = CallbackError::OtherPerson {
                expected: record.identity.clone(),
                found: person.to_owned(),
            };
            self.refuse(state, &record, &refusal).await;
            return Err(refusal);
        }
        let cookie_secret = super::browser::new_secret();
        record.browser = Some(super::browser::digest(&cookie_secret));
        let pending = self.pending().map_err(CallbackError::Exchange)?;
        pending
            .put(state, &record)
            .await
            .map_err(CallbackError::Exchange)?;
        tracing::info!(server = %record.server, identity = %record.identity, "the person of a sign-in opened its page");
        Ok(Proven {
            cookie_secret,
            authorization_url: record.authorization_url,
        })
    }

    /// Ends the sign-in of `state` (whose record is `record`) for `refusal`: its state
    /// never works again, and the calls waiting for it fail with the reason.
    async fn refuse(&self, state: &str, record: &PendingRecord, refusal: &CallbackError) {
        if let Ok(pending) = self.pending() {
            pending.forget(state).await;
        }
        self.lock().remove(state);
        tracing::warn!(server = %record.server, identity = %record.identity, code = refusal.code(), "per-user sign-in refused: {refusal}");
        self.end(state, Some(refusal.to_string())).await;
    }

    /// Takes the callback whose query is `query`, presented with credentials naming
    /// `presenter` (`None`: a browser without the client's credentials, as usual), by a
    /// browser whose sign-in cookie holds `browser` (if any).
    /// `upstream_of` gives the OAuth client of a per-user server as an identity, as the
    /// configuration now has it.
    pub async fn complete(
        &self,
        query: &str,
        presenter: Option<&str>,
        browser: Option<&str>,
        upstream_of: impl Fn(&str, &str) -> Option<OAuthUpstream>,
    ) -> Result<Completed, CallbackError> {
        let url = format!("http://gateway{CALLBACK_PATH}?{query}");
        let state = query_value(&url, "state")
            .filter(|state| !state.is_empty())
            .ok_or(CallbackError::NoState)?;
        let pending = self.pending().map_err(CallbackError::Exchange)?;
        // Taken at once, on every replica: whatever follows, this state never works again.
        let record = pending
            .take(&state)
            .await
            .map_err(CallbackError::Exchange)?
            .filter(|record| !record.expired(PENDING_TTL))
            .ok_or(CallbackError::UnknownState)?;
        // Calls of the same identity keep joining it until its token is kept: one that
        // began a new sign-in now would ask the person again.
        if let Some(ongoing) = self.lock().get_mut(&state) {
            ongoing.completing = true;
        }
        let checked = if presenter.is_some_and(|presenter| presenter != record.identity) {
            Err(CallbackError::OtherIdentity)
        } else {
            check_browser(&record, browser)
        };
        let outcome = match checked {
            Ok(()) => exchange(&pending, &record, &url, upstream_of).await,
            Err(refusal) => Err(refusal),
        };
        self.lock().remove(&state);
        let failure = outcome.as_ref().err().map(ToString::to_string);
        match &failure {
            None => {
                tracing::info!(server = %record.server, identity = %record.identity, "per-user sign-in completed")
            }
            Some(why) => {
                tracing::warn!(server = %record.server, identity = %record.identity, "per-user sign-in failed: {why}")
            }
        }
        self.end(&state, failure).await;
        outcome.map(|()| Completed {
            server: record.server,
            identity: record.identity,
        })
    }

    /// What [`Self::wait`] learns from: the sign-ins that end from now on. Taken before the
    /// person is asked, so one that ends while the question is still out is not missed.
    pub fn watch(&self) -> Watch {
        Watch(self.ended.subscribe())
    }

    /// Waits until the identity whose store is `store` holds a token, or its sign-in
    /// `begun` failed (as told on `watch`, or by another replica), for at most `bound`.
    pub async fn wait(
        &self,
        Watch(mut ended): Watch,
        begun: &Begun,
        store: &TokenStore,
        bound: Duration,
        cancel: &CancellationToken,
    ) -> Result<(), PerUserError> {
        let deadline = tokio::time::Instant::now() + bound;
        // With replicas, the callback may reach another one: its outcome is looked for.
        let elsewhere = self.shared().is_some();
        loop {
            if holds_token(store).await {
                return Ok(());
            }
            if elsewhere
                && let Ok(pending) = self.pending()
                && let Some(why) = pending.failure(&begun.state).await
            {
                return Err(PerUserError::Failed(why));
            }
            let next = tokio::select! {
                next = ended.recv() => Some(next),
                () = tokio::time::sleep(ELSEWHERE_POLL), if elsewhere => None,
                () = tokio::time::sleep_until(deadline) => return Err(PerUserError::TimedOut(bound)),
                () = cancel.cancelled() => return Err(PerUserError::Cancelled),
            };
            match next {
                Some(Ok(ended)) if ended.state == begun.state => {
                    if let Some(why) = ended.failure {
                        return Err(PerUserError::Failed(why));
                    }
                }
                None | Some(Ok(_) | Err(broadcast::error::RecvError::Lagged(_))) => {}
                Some(Err(broadcast::error::RecvError::Closed)) => {
                    return Err(PerUserError::Failed("the gateway is stopping".into()));
                }
            }
        }
    }
}

/// How often a call whose sign-in may come back to another replica looks for its outcome.
const ELSEWHERE_POLL: Duration = Duration::from_millis(250);

/// The page of the gateway's that a person opens to sign in with `state`.
fn sign_in_page(base: &str, state: &str) -> String {
    let mut url = url::Url::parse(&format!("{base}{SIGN_IN_PATH}")).expect("a base URL");
    url.query_pairs_mut().append_pair("state", state);
    url.into()
}

/// Whether the browser whose sign-in cookie holds `browser` is the one that proved to be
/// `record`'s person.
fn check_browser(record: &PendingRecord, browser: Option<&str>) -> Result<(), CallbackError> {
    match (&record.browser, browser) {
        (Some(proved), Some(secret)) if super::browser::matches(proved, secret) => Ok(()),
        _ => Err(CallbackError::BrowserUnproven),
    }
}

/// Exchanges the code of the callback `url` for `record`'s identity, on a client
/// configured as the one that began the sign-in (possibly on another replica).
async fn exchange(
    pending: &Pending,
    record: &PendingRecord,
    url: &str,
    upstream_of: impl Fn(&str, &str) -> Option<OAuthUpstream>,
) -> Result<(), CallbackError> {
    if let Some(error) = query_value(url, "error") {
        let description = query_value(url, "error_description").unwrap_or_default();
        return Err(CallbackError::Refused(
            format!("{error} {description}").trim().to_owned(),
        ));
    }
    let failed =
        |error: SignInError| CallbackError::Exchange(crate::redact::urls(&error.to_string()));
    let upstream = upstream_of(&record.server, &record.identity).ok_or_else(|| {
        CallbackError::Exchange(format!(
            "`{}` is no longer a per-user server",
            record.server
        ))
    })?;
    let mut manager = upstream.discovered_manager().await.map_err(failed)?;
    let mut client = OAuthClientConfig::new(record.client_id.clone(), record.redirect_uri.clone());
    if let Some(secret) = &upstream.settings.client_secret {
        client = client.with_client_secret(secret.clone());
    }
    manager
        .configure_client(client)
        .map_err(|error| failed(error.into()))?;
    manager.set_state_store(pending.pkce());
    let callback =
        AuthorizationCallback::from_redirect_url(url).map_err(|error| failed(error.into()))?;
    manager
        .exchange_code_for_token_with_issuer(
            &callback.code,
            &callback.csrf_token,
            callback.issuer.as_deref(),
        )
        .await
        .map(drop)
        .map_err(|error| failed(error.into()))
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
