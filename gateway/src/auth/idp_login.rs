//! A browser's login at the gateway's own identity provider (`[listen.oauth]`): how the
//! person at a browser shows that they are the caller a per-user sign-in was started for,
//! when callers are named by that provider's subjects (`super::browser`).
//!
//! The gateway is the provider's OAuth client here as any MCP client is: authorization
//! code with PKCE, the gateway's own resource as the `resource` indicator, and a client
//! registered by RFC 7591 unless `[listen.oauth] client_id` names one. The access token the
//! provider issues is checked as every caller's token is ([`ResourceServer`]), but for its
//! scopes, and only its subject is kept: the token itself is dropped at once. The login's
//! `state`, with the sign-in it is for, is a sealed record of the shared state
//! ([`super::pending`]), so the provider may send the browser back to any replica. The
//! return is taken only from the browser that began the login (a cookie whose digest the
//! record keeps): else someone could sign in at the provider as themselves and send the
//! return link to another person, whose browser would then prove them and go on to sign
//! in with its own account for them (login CSRF).

use std::sync::Arc;

use oauth2::TokenResponse;
use rmcp::transport::auth::{AuthorizationCallback, AuthorizationManager, OAuthClientConfig};

use super::pending::{LoginRecord, Pending};
use super::resource::ResourceServer;
use super::upstream::query_value;

/// Where the identity provider sends the browser back after the login.
pub const RETURN_PATH: &str = "/oauth/sign-in/verified";

/// The name the gateway registers its login client under.
const CLIENT_NAME: &str = "mcp-gateway (who is signing in)";

/// Why a browser's login at the identity provider proved nobody.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoginError {
    #[error("`[listen.oauth]` names no issuer, so no browser can sign in there")]
    NoIssuer,
    #[error("cannot reach the identity provider: {0}")]
    Provider(String),
    #[error("this login belongs to no sign-in in progress: wrong, used already, or expired")]
    UnknownState,
    #[error("this login was begun in another browser: open the sign-in link again here")]
    OtherBrowser,
    #[error("the identity provider refused: {0}")]
    Refused(String),
    #[error("the identity provider's token does not name a caller: {0}")]
    Token(String),
}

impl LoginError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoIssuer | Self::Provider(_) => "SIGN_IN_UNAVAILABLE",
            Self::UnknownState => "SIGN_IN_STATE_UNKNOWN",
            Self::OtherBrowser => "SIGN_IN_BROWSER_UNPROVEN",
            Self::Refused(_) => "SIGN_IN_REFUSED",
            Self::Token(_) => "SIGN_IN_FAILED",
        }
    }
}

/// A login begun: where the browser goes, the login's `state`, and the secret the
/// browser's cookie keeps for its return.
pub struct LoginBegun {
    pub url: String,
    pub state: String,
    pub cookie_secret: String,
}

/// A login that came back: the sign-in it is for, and who signed in (as callers are named).
pub struct LoggedIn {
    pub sign_in: String,
    pub person: String,
}

/// Logins at the identity provider of `[listen.oauth]`.
pub struct IdentityProviderLogin {
    resource: Arc<ResourceServer>,
    /// The client this process registered, with its redirect URI: registered once, not at
    /// every login.
    registered: tokio::sync::Mutex<Option<(String, String)>>,
}

impl IdentityProviderLogin {
    pub fn new(resource: Arc<ResourceServer>) -> Self {
        Self {
            resource,
            registered: tokio::sync::Mutex::default(),
        }
    }

    /// The login at the identity provider that signs the browser in and sends it back to
    /// `redirect_uri` (the gateway's [`RETURN_PATH`]) for the sign-in of `sign_in`.
    pub async fn begin(
        &self,
        pending: &Pending,
        sign_in: &str,
        redirect_uri: &str,
    ) -> Result<LoginBegun, LoginError> {
        let mut manager = self.manager(pending).await?;
        let (client_id, secret) = match self.resource.login_client() {
            Some((id, secret)) => (id.to_owned(), secret),
            None => (self.registered(&mut manager, redirect_uri).await?, None),
        };
        manager
            .configure_client(configured_client(&client_id, secret, redirect_uri))
            .map_err(provider_error)?;
        let url = manager
            .get_authorization_url(&["openid"])
            .await
            .map_err(provider_error)?;
        let state = query_value(&url, "state")
            .ok_or_else(|| LoginError::Provider("its authorization URL carries no state".into()))?;
        let cookie_secret = super::browser::new_secret();
        let record = LoginRecord {
            sign_in: sign_in.to_owned(),
            browser: super::browser::digest(&cookie_secret),
            client_id,
            redirect_uri: redirect_uri.to_owned(),
        };
        pending
            .put_login(&state, &record)
            .await
            .map_err(LoginError::Provider)?;
        Ok(LoginBegun {
            url,
            state,
            cookie_secret,
        })
    }

    /// Takes the browser's return from the identity provider, at `url` (the full URL of
    /// [`RETURN_PATH`] with its query), in a browser whose login cookie holds `browser`:
    /// who signed in, for which sign-in. The login's state never works twice.
    pub async fn finish(
        &self,
        pending: &Pending,
        url: &str,
        browser: Option<&str>,
    ) -> Result<LoggedIn, LoginError> {
        let state = query_value(url, "state").ok_or(LoginError::UnknownState)?;
        let record = pending
            .take_login(&state)
            .await
            .map_err(LoginError::Provider)?
            .ok_or(LoginError::UnknownState)?;
        if !browser.is_some_and(|secret| super::browser::matches(&record.browser, secret)) {
            return Err(LoginError::OtherBrowser);
        }
        if let Some(error) = query_value(url, "error") {
            let description = query_value(url, "error_description").unwrap_or_default();
            return Err(LoginError::Refused(
                format!("{error} {description}").trim().to_owned(),
            ));
        }
        let mut manager = self.manager(pending).await?;
        let secret = self.resource.login_client().and_then(|(_, secret)| secret);
        manager
            .configure_client(configured_client(
                &record.client_id,
                secret,
                &record.redirect_uri,
            ))
            .map_err(provider_error)?;
        let callback = AuthorizationCallback::from_redirect_url(url).map_err(provider_error)?;
        let tokens = manager
            .exchange_code_for_token_with_issuer(
                &callback.code,
                &callback.csrf_token,
                callback.issuer.as_deref(),
            )
            .await
            .map_err(provider_error)?;
        let person = self
            .resource
            .verify_subject(tokens.access_token().secret())
            .await
            .map_err(|rejection| LoginError::Token(rejection.to_string()))?
            .identity();
        Ok(LoggedIn {
            sign_in: record.sign_in,
            person,
        })
    }

    /// The client registered for `redirect_uri`: the one this process registered before,
    /// or a new one.
    async fn registered(
        &self,
        manager: &mut AuthorizationManager,
        redirect_uri: &str,
    ) -> Result<String, LoginError> {
        let mut registered = self.registered.lock().await;
        if let Some((uri, id)) = registered.as_ref()
            && uri == redirect_uri
        {
            return Ok(id.clone());
        }
        let client = manager
            .register_client(CLIENT_NAME, redirect_uri, &["openid"])
            .await
            .map_err(provider_error)?;
        *registered = Some((redirect_uri.to_owned(), client.client_id.clone()));
        Ok(client.client_id)
    }

    /// An authorization manager for the gateway's own resource, at the provider's
    /// endpoints, keeping its PKCE verifiers in the shared state.
    async fn manager(&self, pending: &Pending) -> Result<AuthorizationManager, LoginError> {
        let issuer = self.resource.issuer().ok_or(LoginError::NoIssuer)?;
        let provider = allowing_loopback(issuer).await?;
        let metadata = provider.resolve_metadata().await.map_err(provider_error)?;
        let mut manager = allowing_loopback(self.resource.resource().as_str()).await?;
        manager.set_metadata(metadata.metadata);
        manager.set_state_store(pending.pkce());
        Ok(manager)
    }
}

/// A manager for `base`, whose provider may be on this machine or network (as an
/// operator's own often is): rmcp's address filter would refuse one on another loopback
/// port.
async fn allowing_loopback(base: &str) -> Result<AuthorizationManager, LoginError> {
    let mut manager = AuthorizationManager::new_allowing_private_addresses(base)
        .await
        .map_err(provider_error)?;
    manager
        .with_client(reqwest::Client::new())
        .map_err(provider_error)?;
    Ok(manager)
}

fn configured_client(id: &str, secret: Option<&str>, redirect_uri: &str) -> OAuthClientConfig {
    let client = OAuthClientConfig::new(id, redirect_uri).with_scopes(vec!["openid".into()]);
    match secret {
        Some(secret) => client.with_client_secret(secret),
        None => client,
    }
}

fn provider_error(error: impl std::fmt::Display) -> LoginError {
    LoginError::Provider(crate::redact::urls(&error.to_string()))
}
