//! `[servers.NAME.oauth]`: a remote server that wants OAuth 2.1 sign-in, as the MCP
//! authorization spec describes, instead of fixed `headers`.
//!
//! ```toml
//! [servers.tracker]
//! url = "https://tracker.example/mcp"
//! [servers.tracker.oauth]                   # an empty table is enough: discover, register
//! # grant = "client_credentials"            # machine-to-machine; default authorization_code
//! # grant = "token_exchange"                # each caller's own token traded (auth::exchange)
//! # client_id = "gateway"                   # pre-registered client, else…
//! # client_secret = "${TRACKER_SECRET}"     # …its secret (confidential client)
//! # client_metadata_url = "https://gw.example/client.json"  # …a client ID metadata document
//! # scopes = ["issues:read"]                # default: the server's challenge, else scopes_supported
//! # redirect_port = 8976                    # loopback port of `auth login`, default any free one
//! # per_user = true                         # each caller signs in as themselves (auth::per_user)
//! # token_endpoint = "https://login.example.com/token"  # token_exchange: default discovered
//! # idle_disconnect_secs = 900              # per person: close an unused connection
//! ```
//!
//! Client identity follows the spec's order: the configured `client_id`, else the client
//! ID metadata document when the authorization server supports it, else dynamic
//! registration (RFC 7591). The secret never appears in `config dump` or logs.

use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

/// The `[servers.NAME.oauth]` table.
#[derive(Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamOAuth {
    /// How the gateway obtains tokens. Default `authorization_code` (a person signs in
    /// once with `mcp-gateway auth login NAME`).
    #[serde(default)]
    pub grant: GrantKind,
    /// A client registered with the authorization server out of band.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// That client's secret; `${VAR}` is expanded. Shown as `***`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "masked"
    )]
    pub client_secret: Option<String>,
    /// An `https` URL of a client ID metadata document describing the gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// Scopes to ask for. Default: as the spec chooses them (the `scope` of the server's
    /// challenge, else its `scopes_supported`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// The loopback port `auth login` listens on for the redirect. Default: any free one
    /// (fine for providers that allow any loopback port, as RFC 8252 asks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_port: Option<u16>,
    /// Each caller identity signs in as itself, through the client (URL elicitation) and
    /// the gateway's own `/oauth/callback`, and its calls carry its own token only (see
    /// `auth::per_user`). Default false: one sign-in (`auth login`) for everyone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_user: bool,
    /// `grant = "token_exchange"`: the identity provider's token endpoint. Default: the
    /// token endpoint of the server's authorization server (its metadata, discovered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
    /// Per-user and token-exchange servers: a person's connection with no call for this
    /// long is closed (reopened at their next call), so idle people hold no upstream
    /// session. Default 900; 0 keeps them open.
    #[serde(
        default = "default_idle_disconnect_secs",
        skip_serializing_if = "is_default_idle_disconnect"
    )]
    pub idle_disconnect_secs: u64,
}

impl Default for UpstreamOAuth {
    /// What an empty table means.
    fn default() -> Self {
        Self {
            grant: GrantKind::default(),
            client_id: None,
            client_secret: None,
            client_metadata_url: None,
            scopes: Vec::new(),
            redirect_port: None,
            per_user: false,
            token_endpoint: None,
            idle_disconnect_secs: default_idle_disconnect_secs(),
        }
    }
}

fn default_idle_disconnect_secs() -> u64 {
    900
}

fn is_default_idle_disconnect(secs: &u64) -> bool {
    *secs == default_idle_disconnect_secs()
}

/// How tokens are obtained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantKind {
    /// A person signs in through the browser (authorization code with PKCE).
    #[default]
    AuthorizationCode,
    /// The gateway signs in as itself with `client_id` and `client_secret`.
    ClientCredentials,
    /// Each caller's own access token (from `[listen.oauth]`) is exchanged at the identity
    /// provider for one whose audience is the server (RFC 8693), with no person in the
    /// loop; per caller identity, like `per_user`.
    TokenExchange,
}

fn masked<S: Serializer>(secret: &Option<String>, serializer: S) -> Result<S::Ok, S::Error> {
    match secret {
        Some(_) => serializer.serialize_str("***"),
        None => serializer.serialize_none(),
    }
}

impl fmt::Debug for UpstreamOAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamOAuth")
            .field("grant", &self.grant)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "***"))
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scopes", &self.scopes)
            .field("redirect_port", &self.redirect_port)
            .field("per_user", &self.per_user)
            .field("token_endpoint", &self.token_endpoint)
            .field("idle_disconnect_secs", &self.idle_disconnect_secs)
            .finish()
    }
}

/// A `[servers.NAME.oauth]` table that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum OAuthSettingsError {
    #[error("OAuth sign-in needs a remote server (url), not a command")]
    NotRemote,
    #[error("grant = \"client_credentials\" needs client_id and client_secret")]
    MachineWithoutSecret,
    #[error("client_secret needs client_id")]
    SecretWithoutId,
    #[error("per_user = true signs people in: it cannot go with grant = \"client_credentials\"")]
    MachinePerUser,
    #[error("grant = \"token_exchange\" needs the gateway's client_id at the identity provider")]
    ExchangeWithoutClient,
}

impl OAuthSettingsError {
    /// A stable code for logs and tests.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotRemote => "OAUTH_NOT_REMOTE",
            Self::MachineWithoutSecret => "OAUTH_MACHINE_WITHOUT_SECRET",
            Self::SecretWithoutId => "OAUTH_SECRET_WITHOUT_ID",
            Self::MachinePerUser => "OAUTH_MACHINE_PER_USER",
            Self::ExchangeWithoutClient => "OAUTH_EXCHANGE_WITHOUT_CLIENT",
        }
    }
}

impl UpstreamOAuth {
    /// Checks the table; `remote` tells whether its server has a `url`.
    pub fn validate(&self, remote: bool) -> Result<(), OAuthSettingsError> {
        if !remote {
            return Err(OAuthSettingsError::NotRemote);
        }
        if self.client_secret.is_some() && self.client_id.is_none() {
            return Err(OAuthSettingsError::SecretWithoutId);
        }
        if self.grant == GrantKind::ClientCredentials
            && (self.client_id.is_none() || self.client_secret.is_none())
        {
            return Err(OAuthSettingsError::MachineWithoutSecret);
        }
        if self.per_user && self.grant == GrantKind::ClientCredentials {
            return Err(OAuthSettingsError::MachinePerUser);
        }
        if self.grant == GrantKind::TokenExchange && self.client_id.is_none() {
            return Err(OAuthSettingsError::ExchangeWithoutClient);
        }
        Ok(())
    }

    /// How long a person's connection may go unused, `None`: for ever.
    pub fn idle_disconnect(&self) -> Option<std::time::Duration> {
        (self.idle_disconnect_secs > 0)
            .then(|| std::time::Duration::from_secs(self.idle_disconnect_secs))
    }

    /// Whether each caller identity has its own tokens: `per_user`, or token exchange.
    pub fn per_identity(&self) -> bool {
        self.per_user || self.grant == GrantKind::TokenExchange
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_table_means_sign_in_with_discovery_and_registration() {
        let settings: UpstreamOAuth = toml::from_str("").unwrap();
        assert_eq!(settings, UpstreamOAuth::default());
        assert_eq!(
            settings.idle_disconnect(),
            Some(std::time::Duration::from_secs(900))
        );
        assert_eq!(settings.grant, GrantKind::AuthorizationCode);
        assert!(settings.client_id.is_none() && settings.scopes.is_empty());
        assert!(settings.validate(true).is_ok());
        assert_eq!(
            settings.validate(false).unwrap_err().code(),
            "OAUTH_NOT_REMOTE"
        );
    }

    #[test]
    fn the_secret_is_never_shown() {
        let settings: UpstreamOAuth = toml::from_str(
            "grant = \"client_credentials\"\nclient_id = \"gw\"\nclient_secret = \"hunter2\"",
        )
        .unwrap();
        assert!(settings.validate(true).is_ok());
        let shown = format!("{settings:?} {}", toml::to_string(&settings).unwrap());
        assert!(
            !shown.contains("hunter2") && shown.contains("***"),
            "{shown}"
        );
    }

    #[test]
    fn machines_need_a_secret_and_secrets_need_an_id() {
        let machine: UpstreamOAuth =
            toml::from_str("grant = \"client_credentials\"\nclient_id = \"gw\"").unwrap();
        assert_eq!(
            machine.validate(true).unwrap_err().code(),
            "OAUTH_MACHINE_WITHOUT_SECRET"
        );
        let orphan: UpstreamOAuth = toml::from_str("client_secret = \"s\"").unwrap();
        assert_eq!(
            orphan.validate(true).unwrap_err().code(),
            "OAUTH_SECRET_WITHOUT_ID"
        );
        assert!(toml::from_str::<UpstreamOAuth>("grant = \"password\"").is_err());
    }
}
