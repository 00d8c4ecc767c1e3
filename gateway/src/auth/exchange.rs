//! Token exchange (RFC 8693) for a server in the gateway's own trust domain
//! (`[servers.NAME.oauth] grant = "token_exchange"`): the caller's own access token, which
//! the listener took from the identity provider (`[listen.oauth]`), is traded at that
//! provider for a token whose audience is the server, with no person in the loop.
//!
//! ```toml
//! [servers.tracker.oauth]
//! grant = "token_exchange"
//! client_id = "gateway"                    # the gateway's client at the provider
//! client_secret = "${GATEWAY_SECRET}"      # sent as client_secret_post
//! scopes = ["issues:read"]                 # asked for; default: none named
//! # token_endpoint = "https://login.example.com/token"  # default: the server's
//! #                                        # authorization server's, discovered
//! ```
//!
//! The token obtained is kept per identity in that identity's sealed store (as a per-user
//! sign-in is) and used until shortly before it expires; then the caller's current token
//! is exchanged again. A caller that presented no provider token (a static token, stdio)
//! cannot be exchanged for.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rmcp::transport::auth::{CredentialStore, OAuthTokenResponse, StoredCredentials};

use super::upstream::{OAuthUpstream, probe_challenge};

const GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";
/// How long the provider may take to answer.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(15);

/// The identity provider's access token a request presented (`[listen.oauth]`): what a
/// token-exchange server trades for a token of its own. The listener's guard takes it
/// from the request beside the credentials (`crate::listener_guard::Credentials`), which
/// compare equal across a client's refreshed tokens; the relay carries it with the call
/// to the upstream that trades it. Never shown.
#[derive(Clone)]
pub struct SubjectToken(pub std::sync::Arc<str>);

impl std::fmt::Debug for SubjectToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SubjectToken(***)")
    }
}

/// Why no token was obtained.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ExchangeError {
    #[error(
        "the caller presented no access token of the identity provider ([listen.oauth]) to \
         exchange"
    )]
    NoSubjectToken,
    #[error("cannot find the token endpoint: {0}")]
    Discovery(String),
    #[error("the identity provider cannot be reached: {0}")]
    Unreachable(String),
    #[error("the identity provider refused the exchange: {0}")]
    Refused(String),
    #[error("cannot keep the exchanged token: {0}")]
    Store(String),
}

impl ExchangeError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoSubjectToken => "TOKEN_EXCHANGE_NO_SUBJECT",
            Self::Discovery(_) | Self::Unreachable(_) | Self::Store(_) => {
                "TOKEN_EXCHANGE_UNAVAILABLE"
            }
            Self::Refused(_) => "TOKEN_EXCHANGE_REFUSED",
        }
    }
}

impl OAuthUpstream {
    /// The token endpoint to exchange at: the configured one, else the server's
    /// authorization server's.
    async fn exchange_endpoint(&self) -> Result<String, ExchangeError> {
        if let Some(endpoint) = &self.settings.token_endpoint {
            return Ok(endpoint.clone());
        }
        let discovery = |e: rmcp::transport::auth::AuthError| {
            ExchangeError::Discovery(crate::redact::urls(&e.to_string()))
        };
        let manager = self.manager().await.map_err(discovery)?;
        let challenge = probe_challenge(&self.url).await;
        let resolution = manager
            .resolve_metadata_from_challenge(challenge.as_deref())
            .await
            .map_err(discovery)?;
        Ok(resolution.metadata.token_endpoint)
    }

    /// Exchanges `subject_token` for a token for this server, and keeps it in this
    /// identity's store.
    pub async fn exchange(&self, subject_token: &str) -> Result<(), ExchangeError> {
        let endpoint = self.exchange_endpoint().await?;
        let client_id = self.settings.client_id.clone().unwrap_or_default();
        // The serializer is not `Send`: it is done with before the request is awaited.
        let body = {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", GRANT)
                .append_pair("subject_token", subject_token)
                .append_pair("subject_token_type", ACCESS_TOKEN)
                .append_pair("requested_token_type", ACCESS_TOKEN)
                .append_pair("resource", &self.url)
                .append_pair("client_id", &client_id);
            if !self.settings.scopes.is_empty() {
                form.append_pair("scope", &self.settings.scopes.join(" "));
            }
            if let Some(secret) = &self.settings.client_secret {
                form.append_pair("client_secret", secret);
            }
            form.finish()
        };
        let response = reqwest::Client::new()
            .post(&endpoint)
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(http::header::ACCEPT, "application/json")
            .body(body)
            .timeout(EXCHANGE_TIMEOUT)
            .send()
            .await
            .map_err(|e| ExchangeError::Unreachable(crate::redact::urls(&e.to_string())))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| ExchangeError::Unreachable(e.to_string()))?;
        if !status.is_success() {
            return Err(ExchangeError::Refused(refusal(status, &text)));
        }
        let tokens: OAuthTokenResponse = serde_json::from_str(&text).map_err(|e| {
            ExchangeError::Refused(format!("an answer that is no token response: {e}"))
        })?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        let credentials = StoredCredentials::new(
            client_id,
            Some(tokens),
            self.settings.scopes.clone(),
            Some(now),
        );
        self.store
            .save(credentials)
            .await
            .map_err(|e| ExchangeError::Store(e.to_string()))
    }
}

/// What the provider said in refusing: its `error` and `error_description`, else the
/// status.
fn refusal(status: http::StatusCode, body: &str) -> String {
    let answer: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    match answer["error"].as_str() {
        Some(error) => {
            let description = answer["error_description"].as_str().unwrap_or_default();
            format!("{error} {description}").trim().to_owned()
        }
        None => format!("HTTP {status}"),
    }
}
