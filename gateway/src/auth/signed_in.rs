//! The HTTP client of an OAuth upstream's connection. rmcp's `AuthClient` puts the token on
//! every request, refreshes it before it expires and once more on a 401; this wrapper adds
//! what the gateway does when that is not enough:
//!
//! - **401 after the refresh**: the sign-in is dead (revoked, or no refresh token). The
//!   tokens are forgotten and the connection is closed, so the supervisor finds the server
//!   signed out and reports `needs_login` until someone runs `mcp-gateway auth login`.
//! - **403 `insufficient_scope`**: step-up, once per connection. The scope the server asked
//!   for is remembered for the next sign-in; a machine client (`client_credentials`) gets
//!   a token with the larger scope at once and the request is sent again; a person's
//!   sign-in cannot be enlarged without the person, so the call fails naming the command.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::{AuthClient, AuthError, OAuthClientConfig};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, InsufficientScopeError, StreamableHttpClient, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};
use tokio_util::sync::CancellationToken;

use super::settings::GrantKind;
use super::upstream::OAuthUpstream;
use crate::http_client::{HttpError, UpstreamHttp};

type Error = StreamableHttpError<HttpError>;

/// See the module documentation.
#[derive(Clone)]
pub struct SignedInClient {
    inner: AuthClient<UpstreamHttp>,
    upstream: Arc<OAuthUpstream>,
    /// Cancelled when the sign-in is found dead: the connection closes on it.
    signed_out: CancellationToken,
    stepped_up: Arc<AtomicBool>,
}

impl SignedInClient {
    pub fn new(
        inner: AuthClient<UpstreamHttp>,
        upstream: OAuthUpstream,
        signed_out: CancellationToken,
    ) -> Self {
        Self {
            inner,
            upstream: Arc::new(upstream),
            signed_out,
            stepped_up: Arc::new(AtomicBool::new(false)),
        }
    }

    /// An HTTP client for the connection to `upstream` that carries the server's token;
    /// `signed_out` is cancelled when the server stops accepting the sign-in.
    /// `Err(NeedsLogin)` when there is no usable sign-in and none can be made here.
    pub async fn open(
        upstream: &OAuthUpstream,
        http: UpstreamHttp,
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
            Ok(_) => Ok(Self::new(
                AuthClient::new(http, manager),
                upstream.clone(),
                signed_out,
            )),
            Err(AuthError::AuthorizationRequired) => Err(AuthorizedClientError::NeedsLogin),
            Err(error) => Err(error.into()),
        }
    }

    fn login_command(&self) -> String {
        format!("mcp-gateway auth login {}", self.upstream.name)
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
                if let Err(error) = self.upstream.store.forget_tokens() {
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
                if let Err(error) = self.upstream.store.want_scopes(wanted) {
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
                    "the sign-in is no longer valid: run `{}`",
                    self.login_command()
                )))
            }
            StreamableHttpError::InsufficientScope(error) => {
                let scope = error.required_scope.clone().unwrap_or_default();
                StreamableHttpError::InsufficientScope(InsufficientScopeError::new(
                    format!(
                        "the server wants scope `{scope}`: run `{}` to grant it",
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
            Err(StreamableHttpError::InsufficientScope(error)) => {
                Self::ScopeTooSmall(error.required_scope.clone())
            }
            _ => Self::Passed,
        }
    }
}

impl StreamableHttpClient for SignedInClient {
    type Error = HttpError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let send = || {
            self.inner.post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
                limits,
            )
        };
        let mut result = send().await;
        if self.react(Verdict::of(&result)).await {
            result = send().await;
            self.react(Verdict::of(&result)).await;
        }
        self.explained(result)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        let result = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        self.react(Verdict::of(&result)).await;
        self.explained(result)
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        let result = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.react(Verdict::of(&result)).await;
        self.explained(result)
    }
}

/// Why no authorized client could be made.
#[derive(Debug, thiserror::Error)]
pub enum AuthorizedClientError {
    #[error("not signed in")]
    NeedsLogin,
    #[error(transparent)]
    OAuth(#[from] AuthError),
}
