//! The sign-in layer of an OAuth upstream's HTTP client (see `crate::http_client::McpHttp`).
//! It puts the token on every request, refreshes it before it expires (rmcp's
//! `AuthorizationManager` does) and once more on a 401, as rmcp's `AuthClient` does, and
//! adds what the gateway does when that is not enough:
//!
//! - **401 after the refresh**, or a refresh the authorization server refused: the
//!   sign-in is dead (revoked, the client or grant gone, or no refresh token). The tokens
//!   are forgotten and the connection is closed, so the supervisor finds the server
//!   signed out and reports `needs_login` until someone runs `mcp-gateway auth login`
//!   (for a per-user server, the person's next call asks them to sign in again).
//! - **A sign-in every replica shares** (a per-user server with `[cluster]`): it is
//!   refreshed once across replicas. Before a request, a token about to expire is
//!   refreshed under a lock in the shared state by whichever replica takes it first; the
//!   others wait, read the new token and send with it.
//! - **403 `insufficient_scope`**: step-up, once per connection. The scope the server asked
//!   for is remembered for the next sign-in; a machine client (`client_credentials`) gets
//!   a token with the larger scope at once and the request is sent again; a person's
//!   sign-in cannot be enlarged without the person, so the call fails naming the command.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use oauth2::TokenResponse;
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::{AuthError, AuthorizationManager, OAuthClientConfig};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, InsufficientScopeError, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use super::store::TokenStore;
use super::upstream::OAuthUpstream;
use crate::config::GrantKind;
use crate::http_client::{Events, Failed, McpHttp, Target};

type Error = Failed;

/// See the module documentation.
pub struct SignedInClient {
    inner: Arc<dyn McpHttp>,
    manager: Mutex<AuthorizationManager>,
    upstream: OAuthUpstream,
    /// Cancelled when the sign-in is found dead: the connection closes on it.
    signed_out: CancellationToken,
    stepped_up: AtomicBool,
}

impl SignedInClient {
    /// A layer over `inner` for the connection to `upstream` that carries the server's
    /// token; `signed_out` is cancelled when the server stops accepting the sign-in.
    /// `Err(NeedsLogin)` when there is no usable sign-in and none can be made here.
    pub async fn open(
        upstream: &OAuthUpstream,
        inner: Arc<dyn McpHttp>,
        signed_out: CancellationToken,
    ) -> Result<Self, AuthorizedClientError> {
        if upstream.settings.grant == GrantKind::ClientCredentials {
            let mut current = upstream.manager().await?;
            let usable = current.initialize_from_store().await.unwrap_or(false)
                && current.get_access_token().await.is_ok();
            if !usable {
                upstream.machine_sign_in().await?;
            }
        }
        let mut manager = upstream.manager().await?;
        if !manager.initialize_from_store().await? {
            return Err(AuthorizedClientError::NeedsLogin);
        }
        if let Some(client_id) = &upstream.settings.client_id {
            // The store keeps the client id only; a confidential client needs its secret
            // to refresh.
            let mut config = OAuthClientConfig::new(client_id.clone(), "http://127.0.0.1/callback");
            if let Some(secret) = &upstream.settings.client_secret {
                config = config.with_client_secret(secret.clone());
            }
            manager.configure_client(config)?;
        }
        match manager.get_access_token().await {
            Ok(_) => Ok(Self {
                inner,
                manager: Mutex::new(manager),
                upstream: upstream.clone(),
                signed_out,
                stepped_up: AtomicBool::new(false),
            }),
            Err(AuthError::AuthorizationRequired) => Err(AuthorizedClientError::NeedsLogin),
            Err(error) => Err(error.into()),
        }
    }

    /// What makes a sign-in anew: the command, or for a per-user server, the next call.
    fn login_command(&self) -> String {
        if self.upstream.settings.per_user {
            "call again: you will be asked to sign in".to_owned()
        } else {
            format!("run `mcp-gateway auth login {}`", self.upstream.name)
        }
    }

    /// For a shared sign-in: refreshes a token about to expire, once across replicas (see
    /// the module documentation). rmcp's client then finds it fresh.
    async fn refresh_once(&self) {
        let store = &self.upstream.store;
        if !store.is_shared() {
            return;
        }
        // One refresh per process: every request of this connection waits here.
        let manager = self.manager.lock().await;
        if !refresh_due(store).await {
            return;
        }
        let lock = store.refresh_lock().await;
        // Another replica may have refreshed while this one waited for the lock.
        if refresh_due(store).await {
            match manager.refresh_token().await {
                Ok(_) => {
                    tracing::info!(server = %self.upstream.name, "refreshed the shared sign-in")
                }
                Err(error) => {
                    tracing::warn!(server = %self.upstream.name, %error, "refreshing the shared sign-in failed")
                }
            }
        }
        if let Some(lock) = lock {
            lock.release().await;
        }
    }

    /// Reacts to what the inner client's answer said; `true` asks for one more try.
    async fn react(&self, verdict: Verdict) -> bool {
        match verdict {
            Verdict::Passed => false,
            Verdict::SignInRefused
                if self.upstream.settings.grant == GrantKind::ClientCredentials =>
            {
                // A machine signs in again by itself: its "refresh".
                match self.upstream.machine_sign_in().await {
                    Ok(()) => true,
                    Err(error) => {
                        tracing::warn!(server = %self.upstream.name, %error, "signing in again failed");
                        false
                    }
                }
            }
            Verdict::SignInRefused => {
                tracing::warn!(server = %self.upstream.name, "upstream sign-in is no longer valid");
                if let Err(error) = self.upstream.store.forget_tokens().await {
                    tracing::warn!(server = %self.upstream.name, %error, "cannot update the token file");
                }
                self.signed_out.cancel();
                false
            }
            Verdict::ScopeTooSmall(None) => false,
            Verdict::ScopeTooSmall(Some(scope)) => {
                if self.stepped_up.swap(true, Ordering::SeqCst) {
                    return false;
                }
                let wanted = scope.split_whitespace().map(str::to_owned).collect();
                if let Err(error) = self.upstream.store.want_scopes(wanted).await {
                    tracing::warn!(server = %self.upstream.name, %error, "cannot update the token file");
                }
                if self.upstream.settings.grant != GrantKind::ClientCredentials {
                    return false;
                }
                match self.upstream.machine_sign_in().await {
                    Ok(()) => {
                        tracing::info!(server = %self.upstream.name, %scope, "stepped up the token's scope");
                        true
                    }
                    Err(error) => {
                        tracing::warn!(server = %self.upstream.name, %error, "step-up failed");
                        false
                    }
                }
            }
        }
    }

    /// The error a caller sees: says which command fixes it.
    fn explained<T>(&self, result: Result<T, Error>) -> Result<T, Error> {
        result.map_err(|error| match error {
            StreamableHttpError::AuthRequired(_) => {
                StreamableHttpError::AuthRequired(AuthRequiredError::new(format!(
                    "the sign-in is no longer valid: {}",
                    self.login_command()
                )))
            }
            StreamableHttpError::InsufficientScope(error) => {
                let scope = error.required_scope.clone().unwrap_or_default();
                StreamableHttpError::InsufficientScope(InsufficientScopeError::new(
                    format!(
                        "the server wants scope `{scope}`: {} to grant it",
                        self.login_command()
                    ),
                    error.required_scope,
                ))
            }
            other => other,
        })
    }
}

/// What an answer says about the sign-in.
enum Verdict {
    Passed,
    /// 401 even after rmcp's refresh.
    SignInRefused,
    /// 403 `insufficient_scope`, with the scope the server named.
    ScopeTooSmall(Option<String>),
}

impl Verdict {
    fn of<T>(result: &Result<T, Error>) -> Self {
        match result {
            Err(StreamableHttpError::AuthRequired(_)) => Self::SignInRefused,
            // No token could be had: none is left, or the authorization server answered
            // the refresh with an OAuth error (the grant or the client is gone). A refresh
            // that could not reach it is transient and leaves the sign-in be.
            Err(StreamableHttpError::Auth(
                AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_),
            )) => Self::SignInRefused,
            Err(StreamableHttpError::Auth(AuthError::TokenRefreshFailed(why)))
                if why.contains(OAUTH_ERROR_ANSWER) =>
            {
                Self::SignInRefused
            }
            Err(StreamableHttpError::InsufficientScope(error)) => {
                Self::ScopeTooSmall(error.required_scope.clone())
            }
            _ => Self::Passed,
        }
    }
}

impl SignedInClient {
    /// Runs `call` to `to` with the token (the stored one, unless the caller brought its
    /// own); on a 401 to a token, refreshes it once and runs `call` again with the new
    /// one. A request with no usable token goes out without one, and its 401 says so.
    async fn with_token<'a, T>(
        &'a self,
        mut to: Target,
        call: impl Fn(Target) -> BoxFuture<'a, Result<T, Error>>,
    ) -> Result<T, Error> {
        if to.auth_token.is_none() {
            to.auth_token = match self.manager.lock().await.get_access_token().await {
                Ok(token) => Some(token),
                Err(AuthError::AuthorizationRequired) => None,
                Err(error) => return Err(error.into()),
            };
        }
        let challenge = match call(to.clone()).await {
            Err(StreamableHttpError::AuthRequired(challenge)) => challenge,
            result => return result,
        };
        let Some(sent) = &to.auth_token else {
            return Err(StreamableHttpError::AuthRequired(challenge));
        };
        let refreshed = self.manager.lock().await.refresh_token().await;
        match refreshed {
            Ok(tokens) if tokens.access_token().secret() != sent => {
                tracing::info!(server = %self.upstream.name, "refreshed the token the server refused");
                to.auth_token = Some(tokens.access_token().secret().clone());
                call(to).await
            }
            Ok(_) => Err(StreamableHttpError::AuthRequired(challenge)),
            // No refresh token, or the authorization server refused it: a new sign-in
            // is needed, which the challenge says.
            Err(AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_)) => {
                Err(StreamableHttpError::AuthRequired(challenge))
            }
            Err(error) => Err(error.into()),
        }
    }

    /// A request sent with the token, reacted to (see [`Self::react`]) and sent once more
    /// when that asks for it.
    async fn post_signed_in(
        &self,
        to: Target,
        message: ClientJsonRpcMessage,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let send = || {
            self.with_token(to.clone(), |to| {
                self.inner.post(to, message.clone(), limits)
            })
        };
        self.refresh_once().await;
        let mut result = send().await;
        if self.react(Verdict::of(&result)).await {
            result = send().await;
            self.react(Verdict::of(&result)).await;
        }
        self.explained(result)
    }

    async fn stream_signed_in(
        &self,
        to: Target,
        last_event_id: Option<String>,
        max_event_size: usize,
    ) -> Result<Events, Error> {
        self.refresh_once().await;
        let result = self
            .with_token(to, |to| {
                self.inner
                    .get_stream(to, last_event_id.clone(), max_event_size)
            })
            .await;
        self.react(Verdict::of(&result)).await;
        self.explained(result)
    }
}

impl McpHttp for SignedInClient {
    fn post(
        &self,
        to: Target,
        message: ClientJsonRpcMessage,
        limits: StreamableHttpResponseLimits,
    ) -> BoxFuture<'_, Result<StreamableHttpPostResponse, Error>> {
        Box::pin(self.post_signed_in(to, message, limits))
    }

    fn get_stream(
        &self,
        to: Target,
        last_event_id: Option<String>,
        max_event_size: usize,
    ) -> BoxFuture<'_, Result<Events, Error>> {
        Box::pin(self.stream_signed_in(to, last_event_id, max_event_size))
    }

    fn delete_session(&self, to: Target) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(self.with_token(to, |to| self.inner.delete_session(to)))
    }
}

/// Whether the stored access token is close enough to its end that rmcp's client would
/// refresh it: a few seconds before rmcp's own margin (the lesser of 30 s and half its
/// life), so the shared refresh comes first.
pub async fn refresh_due(store: &TokenStore) -> bool {
    let Ok(Some(credentials)) = store.credentials().await else {
        return false;
    };
    let (Some(tokens), Some(received)) =
        (&credentials.token_response, credentials.token_received_at)
    else {
        return false;
    };
    let Some(lifetime) = tokens.expires_in().map(|life| life.as_secs()) else {
        return false;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let remaining = lifetime.saturating_sub(now.saturating_sub(received));
    remaining < (lifetime / 2).clamp(1, 30) + (lifetime / 4).min(EARLY_SECS)
}

/// How rmcp (through `oauth2`) says the authorization server answered with an OAuth error.
const OAUTH_ERROR_ANSWER: &str = "Server returned error response";

/// How much sooner than rmcp a shared sign-in is refreshed, at most (a quarter of a short
/// token's life at most, so a short-lived token is not refreshed at every request).
const EARLY_SECS: u64 = 3;

/// Why no authorized client could be made.
#[derive(Debug, thiserror::Error)]
pub enum AuthorizedClientError {
    #[error("not signed in")]
    NeedsLogin,
    #[error(transparent)]
    OAuth(#[from] AuthError),
}
