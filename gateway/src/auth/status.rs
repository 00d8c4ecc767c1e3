//! Where one OAuth server's sign-in stands, read from its token file: what `auth status`
//! prints and what `/healthz` shows as each OAuth upstream's `oauth` field (the web
//! console reads it there). It says whether the gateway holds a token, until when, whether
//! it can be refreshed and with which scopes; never the token itself.

use oauth2::TokenResponse;
use serde::Serialize;

use super::store::TokenStore;
use crate::config::GrantKind;

/// One server's sign-in, as shown to people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SignInStatus {
    pub state: SignInState,
    /// How tokens are obtained (`authorization_code` or `client_credentials`).
    pub grant: GrantKind,
    /// When the access token expires (RFC 3339), if the server said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Whether a refresh token is held.
    pub refreshable: bool,
    /// The scopes granted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// Scopes the server asked for (403 `insufficient_scope`) that the next sign-in asks for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub wanted_scopes: Vec<String>,
    /// What to do about it, when something is to be done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// Whether the gateway holds a token for the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SignInState {
    SignedIn,
    /// No token and none can be had without a person: `mcp-gateway auth login NAME`.
    NeedsLogin,
    /// No token yet; a machine client (`client_credentials`) gets one by itself.
    SignedOut,
    /// The token file cannot be read.
    Unreadable,
}

impl SignInState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SignedIn => "signed_in",
            Self::NeedsLogin => "needs_login",
            Self::SignedOut => "signed_out",
            Self::Unreadable => "unreadable",
        }
    }
}

impl SignInStatus {
    /// The status of server `name`, whose tokens `store` keeps.
    pub async fn read(name: &str, grant: GrantKind, store: &TokenStore) -> Self {
        let mut status = SignInStatus {
            state: SignInState::SignedIn,
            grant,
            expires_at: None,
            refreshable: false,
            scopes: Vec::new(),
            wanted_scopes: store.wanted_scopes().await,
            hint: None,
        };
        let credentials = match store.credentials().await {
            Ok(credentials) => credentials,
            Err(error) => {
                status.state = SignInState::Unreadable;
                status.hint = Some(error.to_string());
                return status;
            }
        };
        let Some((credentials, tokens)) = credentials
            .as_ref()
            .and_then(|c| c.token_response.as_ref().map(|t| (c, t)))
        else {
            (status.state, status.hint) = match grant {
                GrantKind::ClientCredentials => (
                    SignInState::SignedOut,
                    Some("signs in by itself when serving".to_owned()),
                ),
                GrantKind::TokenExchange => (
                    SignInState::SignedOut,
                    Some("exchanged again at the caller's next call".to_owned()),
                ),
                GrantKind::AuthorizationCode => (
                    SignInState::NeedsLogin,
                    Some(format!("run `mcp-gateway auth login {name}`")),
                ),
            };
            return status;
        };
        status.expires_at = tokens
            .expires_in()
            .zip(credentials.token_received_at)
            .and_then(|(lifetime, received)| {
                let at = received.saturating_add(lifetime.as_secs());
                time::OffsetDateTime::from_unix_timestamp(i64::try_from(at).ok()?).ok()
            })
            .and_then(|at| {
                at.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            });
        status.refreshable = tokens.refresh_token().is_some();
        status.scopes = credentials.granted_scopes.clone();
        if !status.wanted_scopes.is_empty() && grant == GrantKind::AuthorizationCode {
            status.hint = Some(format!(
                "the server wants {}: run `mcp-gateway auth login {name}` again",
                status.wanted_scopes.join(" ")
            ));
        }
        status
    }

    /// One tab-separated line of `auth status` (after the server's name).
    pub fn line(&self) -> String {
        let mut fields = vec![self.state.as_str().to_owned()];
        if self.state == SignInState::SignedIn {
            fields.push(self.expires_at.as_ref().map_or_else(
                || "no expiry given".to_owned(),
                |at| format!("expires {at}"),
            ));
            fields.push(
                if self.refreshable {
                    "refreshable"
                } else {
                    "not refreshable"
                }
                .to_owned(),
            );
            fields.push(format!("scopes: {}", self.scopes.join(" ")));
        }
        fields.extend(self.hint.clone());
        fields.join("\t")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::transport::auth::{CredentialStore, StoredCredentials};

    #[tokio::test]
    async fn a_person_without_tokens_needs_login_and_a_machine_signs_in_by_itself() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path(), "t", "https://t.example/mcp");
        let person = SignInStatus::read("t", GrantKind::AuthorizationCode, &store).await;
        assert_eq!(person.state, SignInState::NeedsLogin);
        assert_eq!(person.line(), "needs_login\trun `mcp-gateway auth login t`");
        let machine = SignInStatus::read("t", GrantKind::ClientCredentials, &store).await;
        assert_eq!(machine.state, SignInState::SignedOut);
        // A registered client without tokens (revoked) still needs a login.
        store
            .save(StoredCredentials::new("c".into(), None, vec![], None))
            .await
            .unwrap();
        let revoked = SignInStatus::read("t", GrantKind::AuthorizationCode, &store).await;
        assert_eq!(revoked.state, SignInState::NeedsLogin);
    }
}
