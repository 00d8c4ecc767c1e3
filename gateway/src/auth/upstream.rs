//! The gateway as the OAuth client of one remote server. The protocol work — discovery of
//! the protected resource and authorization server metadata with the spec's fallbacks,
//! client registration in the spec's order, PKCE S256, `resource`, state and issuer checks,
//! refresh — is rmcp's (`rmcp::transport::auth`); this module decides when each flow runs
//! and keeps the result in the server's [`TokenStore`].
//!
//! - [`sign_in`]: `auth login`: a person in a browser (authorization code, loopback
//!   redirect) or, for `grant = "client_credentials"`, the gateway itself.
//! - [`authorized_client`]: what the upstream connection sends its requests through: adds
//!   the token, refreshes it before expiry and on a 401. For a machine client a missing or
//!   dead token is simply obtained again; a person's sign-in cannot be, so the server is
//!   reported as needing `auth login`.
//! - [`sign_out`]: revokes the tokens where the server supports RFC 7009, then forgets them.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationRequest, AuthorizationSession,
    ClientCredentialsConfig, CredentialStore,
};
use tokio::sync::oneshot;

use super::sealed::Sealer;
use super::store::TokenStore;
use crate::config::{GrantKind, UpstreamOAuth};
use crate::state::SharedState;

/// How long `auth login` waits for the browser to come back.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);
/// The name the gateway registers under.
const CLIENT_NAME: &str = "mcp-gateway";

/// One remote server that signs in with OAuth.
#[derive(Debug, Clone)]
pub struct OAuthUpstream {
    pub name: String,
    pub url: String,
    pub settings: UpstreamOAuth,
    pub store: TokenStore,
}

/// Why signing in or out did not work.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error("{0}")]
    OAuth(#[from] AuthError),
    #[error("cannot listen for the redirect on {address}: {source}")]
    Redirect {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot run the browser command: {0}")]
    Browser(std::io::Error),
    #[error("the browser command failed ({0}) before the authorization page came back")]
    BrowserFailed(std::process::ExitStatus),
    #[error("nobody came back from the authorization page within {0:?}")]
    TimedOut(Duration),
    #[error("the authorization server refused: {0}")]
    Refused(String),
    #[error("{0}")]
    NoLogin(&'static str),
}

impl SignInError {
    /// A stable code for logs and tests.
    pub fn code(&self) -> &'static str {
        match self {
            Self::OAuth(_) => "OAUTH_FAILED",
            Self::Redirect { .. } => "OAUTH_REDIRECT_LISTEN",
            Self::Browser(_) | Self::BrowserFailed(_) => "OAUTH_BROWSER",
            Self::TimedOut(_) => "OAUTH_LOGIN_TIMEOUT",
            Self::Refused(_) => "OAUTH_REFUSED",
            Self::NoLogin(_) => "OAUTH_NO_LOGIN",
        }
    }
}

/// How `auth login` shows the authorization page to the person.
pub enum Browser {
    /// Print the URL and try the desktop's opener.
    Default,
    /// Run this shell command with the URL as its one argument (`$1`).
    Command(String),
}

impl OAuthUpstream {
    pub fn new(name: &str, url: &str, settings: &UpstreamOAuth, dir: &Path) -> Self {
        Self {
            name: name.to_owned(),
            url: url.to_owned(),
            settings: settings.clone(),
            store: TokenStore::new(dir, name, url),
        }
    }

    /// The per-user server `name` as `identity` signs in to it: its own sealed store.
    pub fn for_identity(
        name: &str,
        url: &str,
        settings: &UpstreamOAuth,
        dir: &Path,
        shared: Option<&Arc<dyn SharedState>>,
        identity: &str,
        sealer: Arc<Sealer>,
    ) -> Self {
        Self {
            name: name.to_owned(),
            url: url.to_owned(),
            settings: settings.clone(),
            store: TokenStore::for_identity(dir, shared, name, url, identity, sealer),
        }
    }

    /// A manager for this server, reading and writing its token file. Metadata may sit at
    /// private addresses only when the server itself does (rmcp refuses loopback
    /// otherwise): a public server cannot point the gateway at the local network.
    pub(super) async fn manager(&self) -> Result<AuthorizationManager, AuthError> {
        let private = url::Url::parse(&self.url)
            .ok()
            .is_some_and(|url| match url.host() {
                Some(url::Host::Domain(host)) => host == "localhost",
                Some(url::Host::Ipv4(ip)) => is_private(IpAddr::V4(ip)),
                Some(url::Host::Ipv6(ip)) => is_private(IpAddr::V6(ip)),
                None => false,
            });
        let mut manager = if private {
            let mut manager =
                AuthorizationManager::new_allowing_private_addresses(self.url.as_str()).await?;
            // rmcp's address filter refuses an authorization server on another loopback
            // port; a server the operator runs on this machine or network may use one.
            manager.with_client(reqwest::Client::new())?;
            manager
        } else {
            AuthorizationManager::new(self.url.as_str()).await?
        };
        manager.set_credential_store(self.store.clone());
        Ok(manager)
    }

    /// Signs in as the configuration says, and stores the tokens.
    pub async fn sign_in(&self, browser: &Browser) -> Result<(), SignInError> {
        match self.settings.grant {
            GrantKind::TokenExchange => Err(SignInError::NoLogin(
                "this server exchanges each caller's own token (grant = \"token_exchange\"): \
                 there is nothing to sign in to",
            )),
            _ if self.settings.per_user => Err(SignInError::NoLogin(
                "this server signs each person in through their own client (per_user = true)",
            )),
            GrantKind::ClientCredentials => Ok(self.machine_sign_in().await?),
            GrantKind::AuthorizationCode => self.browser_sign_in(browser).await,
        }
    }

    /// The client credentials grant (SEP-1046): the gateway's own identity, no person.
    pub async fn machine_sign_in(&self) -> Result<(), AuthError> {
        let (Some(client_id), Some(client_secret)) =
            (&self.settings.client_id, &self.settings.client_secret)
        else {
            return Err(AuthError::ClientCredentialsError(
                "client_credentials needs client_id and client_secret".into(),
            ));
        };
        let mut manager = self.manager().await?;
        let challenge = probe_challenge(&self.url).await;
        let resolution = manager
            .resolve_metadata_from_challenge(challenge.as_deref())
            .await?;
        manager.set_metadata(resolution.metadata);
        let mut scopes = self.requested_scopes().await;
        if scopes.is_empty() {
            scopes = manager.select_scopes(None, &[]);
        }
        let config = ClientCredentialsConfig::ClientSecret {
            client_id: client_id.clone(),
            client_secret: client_secret.clone(),
            scopes,
            resource: Some(self.url.clone()),
        };
        manager.configure_client_credentials(&config)?;
        manager.exchange_client_credentials(&config).await?;
        Ok(())
    }

    /// The configured scopes and, after a step-up (403 `insufficient_scope`), the scopes
    /// already granted plus those the server asked for: re-authorization asks for the union
    /// (SEP-2350), so the larger token still does what the smaller one did. Empty leaves
    /// the choice to discovery.
    async fn requested_scopes(&self) -> Vec<String> {
        let wanted = self.store.wanted_scopes().await;
        let granted = if wanted.is_empty() {
            Vec::new()
        } else {
            let credentials = self.store.credentials().await.ok().flatten();
            credentials.map_or_else(Vec::new, |credentials| credentials.granted_scopes)
        };
        let mut scopes = self.settings.scopes.clone();
        for scope in granted.into_iter().chain(wanted) {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        scopes
    }

    /// An authorization request (PKCE, state, `resource`) whose answer comes back to
    /// `redirect_uri`: discovery, then the client identity in the spec's order.
    pub async fn authorization_session(
        &self,
        redirect_uri: &str,
    ) -> Result<AuthorizationSession, SignInError> {
        let manager = self.discovered_manager().await?;
        self.authorization_session_with(manager, redirect_uri).await
    }

    /// A manager for this server that has found its authorization server (from the
    /// server's challenge, else the well-known paths).
    pub async fn discovered_manager(&self) -> Result<AuthorizationManager, SignInError> {
        let mut manager = self.manager().await?;
        let challenge = probe_challenge(&self.url).await;
        let resolution = manager
            .resolve_metadata_from_challenge(challenge.as_deref())
            .await?;
        manager.set_metadata(resolution.metadata);
        Ok(manager)
    }

    /// [`Self::authorization_session`] on `manager`, which has found its authorization
    /// server (and may keep its PKCE verifiers elsewhere).
    pub async fn authorization_session_with(
        &self,
        manager: AuthorizationManager,
        redirect_uri: &str,
    ) -> Result<AuthorizationSession, SignInError> {
        // Without scopes of its own the request asks for the challenge's, else the
        // resource's `scopes_supported` (the spec's scope selection strategy).
        let mut request = AuthorizationRequest::new(redirect_uri)
            .with_client_name(CLIENT_NAME)
            .with_initial_scope_selection();
        let scopes = self.requested_scopes().await;
        if !scopes.is_empty() {
            request = request.with_scopes(scopes);
        }
        if let Some(client_id) = &self.settings.client_id {
            request = request.with_preregistered_client(client_id);
        }
        if let Some(secret) = &self.settings.client_secret {
            request = request.with_client_secret(secret);
        }
        if let Some(document) = &self.settings.client_metadata_url {
            request = request.with_client_metadata_url(document);
        }
        Ok(AuthorizationSession::new(manager, request)
            .await
            .map_err(|(_, error)| error)?)
    }

    /// Authorization code with PKCE on a loopback redirect (RFC 8252).
    async fn browser_sign_in(&self, browser: &Browser) -> Result<(), SignInError> {
        let address = SocketAddr::from(([127, 0, 0, 1], self.settings.redirect_port.unwrap_or(0)));
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|source| SignInError::Redirect { address, source })?;
        let port = listener
            .local_addr()
            .map_err(|source| SignInError::Redirect { address, source })?
            .port();
        let redirect_uri = format!("http://127.0.0.1:{port}/callback");
        let session = self.authorization_session(&redirect_uri).await?;
        let authorization_url = session.get_authorization_url();
        let state = query_value(authorization_url, "state").ok_or_else(|| {
            AuthError::AuthorizationFailed("the authorization request carries no state".into())
        })?;
        let (sender, receiver) = oneshot::channel();
        let callback = tokio::spawn(serve_callback(listener, state, sender));
        let outcome = match open(browser, authorization_url, &self.name) {
            Err(error) => Err(error),
            Ok(opener) => tokio::select! {
                received = tokio::time::timeout(LOGIN_TIMEOUT, receiver) => match received {
                    Ok(Ok(url)) => Ok(url),
                    Ok(Err(_)) | Err(_) => Err(SignInError::TimedOut(LOGIN_TIMEOUT)),
                },
                status = failure(opener) => Err(SignInError::BrowserFailed(status)),
            },
        };
        callback.abort();
        let url = outcome?;
        if let Some(error) = query_value(&url, "error") {
            let description = query_value(&url, "error_description").unwrap_or_default();
            return Err(SignInError::Refused(format!("{error} {description}")));
        }
        session.handle_callback_url(&url).await?;
        Ok(())
    }

    /// Revokes the stored tokens where the authorization server supports it, then forgets
    /// them. Whether the server revoked them is returned; forgetting happens regardless.
    pub async fn sign_out(&self) -> Result<bool, SignInError> {
        let revoked = match self.store.credentials().await {
            Ok(Some(credentials)) => self.revoke(&credentials).await.unwrap_or_else(|error| {
                tracing::warn!(server = %self.name, %error, "revocation failed");
                false
            }),
            _ => false,
        };
        self.store.clear().await?;
        Ok(revoked)
    }

    async fn revoke(
        &self,
        credentials: &rmcp::transport::auth::StoredCredentials,
    ) -> Result<bool, AuthError> {
        use oauth2::TokenResponse;
        let Some(tokens) = &credentials.token_response else {
            return Ok(false);
        };
        let manager = self.manager().await?;
        let metadata = manager.resolve_metadata().await?.metadata;
        let Some(endpoint) = metadata
            .additional_fields
            .get("revocation_endpoint")
            .and_then(|value| value.as_str())
        else {
            return Ok(false);
        };
        let mut revoked = false;
        let refresh = tokens
            .refresh_token()
            .map(|t| (t.secret(), "refresh_token"));
        let access = Some((tokens.access_token().secret(), "access_token"));
        for (token, hint) in refresh.into_iter().chain(access) {
            // The serializer is not `Send`: it is done with before the request is awaited.
            let body = {
                let mut form = url::form_urlencoded::Serializer::new(String::new());
                form.append_pair("token", token)
                    .append_pair("token_type_hint", hint)
                    .append_pair("client_id", &credentials.client_id);
                if let Some(secret) = &self.settings.client_secret {
                    form.append_pair("client_secret", secret);
                }
                form.finish()
            };
            let response = reqwest::Client::new()
                .post(endpoint)
                .header(
                    http::header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded",
                )
                .body(body)
                .timeout(Duration::from_secs(10))
                .send()
                .await
                .map_err(|error| AuthError::OAuthError(error.to_string()))?;
            revoked |= response.status().is_success();
        }
        Ok(revoked)
    }
}

fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_private(),
        IpAddr::V6(v6) => v6.is_loopback() || (v6.segments()[0] & 0xfe00) == 0xfc00,
    }
}

/// The `WWW-Authenticate` challenge that seeds discovery with the server's own
/// `resource_metadata` and `scope` (the spec's preferred path). An unauthenticated
/// `initialize` is sent first; a server that lets it through and guards only the operations
/// is then asked for `tools/list` on the session it opened. `None` when neither is
/// challenged: discovery then probes the well-known locations and the scopes come from
/// `scopes_supported`.
pub(super) async fn probe_challenge(url: &str) -> Option<String> {
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")}}
    });
    let response = probe(url, &initialize, None).await?;
    if !response.status().is_success() {
        return challenge_of(&response);
    }
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    challenge_of(&probe(url, &list, session.as_deref()).await?)
}

/// Posts one unauthenticated JSON-RPC message to the server.
async fn probe(
    url: &str,
    message: &serde_json::Value,
    session: Option<&str>,
) -> Option<reqwest::Response> {
    let mut request = reqwest::Client::new()
        .post(url)
        .header(http::header::ACCEPT, "application/json, text/event-stream")
        .json(message)
        .timeout(Duration::from_secs(10));
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.send().await.ok()
}

/// The `WWW-Authenticate` of a 401 or 403.
fn challenge_of(response: &reqwest::Response) -> Option<String> {
    if !matches!(response.status().as_u16(), 401 | 403) {
        return None;
    }
    response
        .headers()
        .get(http::header::WWW_AUTHENTICATE)?
        .to_str()
        .ok()
        .map(str::to_owned)
}

/// Shows the authorization page: always printed (stderr, so scripts can read stdout), and
/// handed to the browser command (whose process is returned, so its failure ends the
/// wait) or the desktop's opener.
fn open(
    browser: &Browser,
    url: &str,
    server: &str,
) -> Result<Option<tokio::process::Child>, SignInError> {
    eprintln!("To sign in to `{server}`, open:\n  {url}");
    match browser {
        Browser::Command(command) => tokio::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{command} \"$1\""))
            .arg("sh")
            .arg(url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map(Some)
            .map_err(SignInError::Browser),
        Browser::Default => {
            for opener in ["xdg-open", "open"] {
                let started = std::process::Command::new(opener)
                    .arg(url)
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn();
                if started.is_ok() {
                    break;
                }
            }
            Ok(None)
        }
    }
}

/// Resolves with the browser command's exit status if it fails; never when it succeeds
/// or there is no command (a person's browser says nothing back).
async fn failure(opener: Option<tokio::process::Child>) -> std::process::ExitStatus {
    if let Some(mut child) = opener
        && let Ok(status) = child.wait().await
        && !status.success()
    {
        return status;
    }
    std::future::pending().await
}

/// Answers the browser's return to the loopback redirect URI and passes on its full URL,
/// once one comes back with this sign-in's `state`. The state is checked first, before
/// anything else in the URL is believed: a request without it (another local program, a
/// web page aiming at the port) gets 400 and neither ends the sign-in nor, with an
/// `error=`, makes it fail.
async fn serve_callback(
    listener: tokio::net::TcpListener,
    state: String,
    sender: oneshot::Sender<String>,
) {
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    let sender = std::sync::Arc::new(std::sync::Mutex::new(Some(sender)));
    let app = axum::Router::new().route(
        "/callback",
        axum::routing::get(move |uri: http::Uri| {
            let sender = sender.clone();
            let url = format!("http://127.0.0.1:{port}{uri}");
            let ours = query_value(&url, "state").as_deref() == Some(state.as_str());
            async move {
                if !ours {
                    tracing::warn!("sign-in: ignored a callback without this sign-in's state");
                    return (
                        http::StatusCode::BAD_REQUEST,
                        "This is not the sign-in `mcp-gateway auth login` is waiting for.",
                    );
                }
                if let Some(sender) = sender.lock().unwrap_or_else(|p| p.into_inner()).take() {
                    let _ = sender.send(url);
                }
                (
                    http::StatusCode::OK,
                    "Signed in: you can close this page and return to the terminal.",
                )
            }
        }),
    );
    let _ = axum::serve(listener, app).await;
}

pub fn query_value(url: &str, key: &str) -> Option<String> {
    url::Url::parse(url)
        .ok()?
        .query_pairs()
        .find(|(name, _)| name == key)
        .map(|(_, value)| value.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `GET path` on `port`; the status.
    async fn get(port: u16, path: &str) -> u16 {
        reqwest::get(format!("http://127.0.0.1:{port}{path}"))
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    #[tokio::test]
    async fn a_step_up_asks_for_the_granted_scopes_and_the_challenged_ones() {
        use rmcp::transport::auth::StoredCredentials;
        let dir = tempfile::tempdir().unwrap();
        let settings = UpstreamOAuth {
            scopes: vec!["configured".into()],
            ..UpstreamOAuth::default()
        };
        let upstream = OAuthUpstream::new("t", "https://t.example/mcp", &settings, dir.path());
        let granted = vec!["configured".into(), "basic".into()];
        let credentials = StoredCredentials::new("c1".into(), None, granted, Some(1));
        upstream.store.save(credentials).await.unwrap();
        assert_eq!(
            upstream.requested_scopes().await,
            ["configured"],
            "no step-up: as configured"
        );
        upstream
            .store
            .want_scopes(vec!["write".into()])
            .await
            .unwrap();
        assert_eq!(
            upstream.requested_scopes().await,
            ["configured", "basic", "write"]
        );
    }

    #[tokio::test]
    async fn only_a_callback_with_the_sign_ins_state_is_taken_whatever_else_it_says() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (sender, mut receiver) = oneshot::channel();
        let server = tokio::spawn(serve_callback(listener, "s-42".into(), sender));
        for foreign in [
            "/callback?error=access_denied",
            "/callback?error=access_denied&state=s-41",
            "/callback?code=stolen&state=",
        ] {
            assert_eq!(get(port, foreign).await, 400, "{foreign}");
        }
        assert!(receiver.try_recv().is_err(), "a foreign callback was taken");
        assert_eq!(get(port, "/callback?code=c&state=s-42").await, 200);
        let url = receiver.await.unwrap();
        assert_eq!(query_value(&url, "code").as_deref(), Some("c"));
        server.abort();
    }
}
