//! The gateway as an OAuth protected resource: a team puts the listener behind its identity
//! provider, and clients sign in there instead of being handed a static token. Which
//! provider, and what its scopes grant, is `[listen.oauth]` ([`ResourceConfig`]).
//!
//! A token is a JWT access token (RFC 9068) whose signature verifies with a key of the
//! provider's JWKS ([`super::keys`]) under one of the configured algorithms, whose `exp` has
//! not passed, whose `nbf` (when present) has, whose `iss` is the issuer and whose `aud`
//! names the audience. When `scopes` is set, the token must also carry one of them (else
//! 403 `insufficient_scope`), and the first listed one it carries picks the session's
//! profile. The gateway publishes its protected resource metadata (RFC 9728) at
//! `/.well-known/oauth-protected-resource` (also with the resource's path appended) and
//! names it in every 401, so a client can find the provider on its own. The token serves
//! only to admit the request: nothing the client sends is ever forwarded upstream.

use std::time::Duration;

use jsonwebtoken::{Algorithm, Validation, decode, decode_header, errors::ErrorKind};
use serde::Deserialize;

use super::keys::{KeyAges, KeyError, KeyOrigin, KeySource};
use crate::config::{ResourceConfig, SigningAlgorithm};

/// Where clients find the protected resource metadata (RFC 9728 section 3).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

impl From<SigningAlgorithm> for Algorithm {
    fn from(algorithm: SigningAlgorithm) -> Self {
        match algorithm {
            SigningAlgorithm::RS256 => Algorithm::RS256,
            SigningAlgorithm::RS384 => Algorithm::RS384,
            SigningAlgorithm::RS512 => Algorithm::RS512,
            SigningAlgorithm::PS256 => Algorithm::PS256,
            SigningAlgorithm::PS384 => Algorithm::PS384,
            SigningAlgorithm::PS512 => Algorithm::PS512,
            SigningAlgorithm::ES256 => Algorithm::ES256,
            SigningAlgorithm::ES384 => Algorithm::ES384,
            SigningAlgorithm::EdDSA => Algorithm::EdDSA,
        }
    }
}

/// A `[listen.oauth]` section the gateway cannot work with.
#[derive(Debug, thiserror::Error)]
pub enum ResourceConfigError {
    #[error("[listen.oauth] needs issuer or jwks_url: where else would the keys come from?")]
    NoKeySource,
    #[error("[listen.oauth] algorithms is empty: no token could ever be accepted")]
    NoAlgorithms,
    #[error(
        "[listen.oauth] resource {value:?} is not an http(s) URL (set resource when audience \
         is not the gateway's URL)"
    )]
    ResourceNotUrl { value: String },
}

impl ResourceConfigError {
    /// A stable code for logs and tests.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoKeySource => "OAUTH_NO_KEY_SOURCE",
            Self::NoAlgorithms => "OAUTH_NO_ALGORITHMS",
            Self::ResourceNotUrl { .. } => "OAUTH_RESOURCE_NOT_URL",
        }
    }

    /// The key of `[listen.oauth]` whose value is refused (`.algorithms`), or `""` for
    /// the table as a whole.
    pub fn field(&self) -> &'static str {
        match self {
            Self::NoKeySource => "",
            Self::NoAlgorithms => ".algorithms",
            Self::ResourceNotUrl { .. } => ".resource",
        }
    }
}

/// Who a verified token speaks for, and what it grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// `sub`, else `client_id` (a machine's own token). A token with neither is refused:
    /// sessions belong to their subject, and tokens without one would all share one.
    pub subject: Subject,
    /// The profile its first mapped scope picks, if `scopes` is configured.
    pub profile: Option<String>,
}

/// Whom a token speaks for. A machine client's own token may name no subject, only its
/// `client_id`; it is named apart from subjects, so a client whose id happens to be a
/// person's subject never passes for that person (their sessions, sign-ins and tasks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// The token's `sub`.
    Sub(String),
    /// The `client_id` of a token without `sub`.
    Client(String),
}

impl Subject {
    /// How it is named as an identity: `subject:SUB` or `client:ID`.
    pub fn identity(&self) -> String {
        match self {
            Self::Sub(sub) => format!("subject:{sub}"),
            Self::Client(id) => format!("client:{id}"),
        }
    }
}

/// Why a bearer token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRejection {
    #[error("the token is not a well-formed JWT")]
    Malformed,
    #[error("the token is signed with an algorithm that is not accepted")]
    WrongAlgorithm,
    #[error("the token's signature does not verify")]
    BadSignature,
    #[error("the token is signed with a key the identity provider does not publish")]
    UnknownKey,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token was issued by another issuer")]
    WrongIssuer,
    #[error("the token is meant for another audience")]
    WrongAudience,
    #[error("the token has no {0} claim")]
    MissingClaim(String),
    #[error("the token carries none of the scopes this gateway maps")]
    InsufficientScope,
    #[error("the identity provider's keys cannot be fetched, so no token can be checked")]
    KeysUnavailable,
}

impl TokenRejection {
    /// A stable code for logs and tests.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Malformed => "TOKEN_MALFORMED",
            Self::WrongAlgorithm => "TOKEN_WRONG_ALGORITHM",
            Self::BadSignature => "TOKEN_BAD_SIGNATURE",
            Self::UnknownKey => "TOKEN_UNKNOWN_KEY",
            Self::Expired => "TOKEN_EXPIRED",
            Self::NotYetValid => "TOKEN_NOT_YET_VALID",
            Self::WrongIssuer => "TOKEN_WRONG_ISSUER",
            Self::WrongAudience => "TOKEN_WRONG_AUDIENCE",
            Self::MissingClaim(_) => "TOKEN_MISSING_CLAIM",
            Self::InsufficientScope => "TOKEN_INSUFFICIENT_SCOPE",
            Self::KeysUnavailable => "TOKEN_KEYS_UNAVAILABLE",
        }
    }

    fn from_jwt(error: &jsonwebtoken::errors::Error) -> Self {
        match error.kind() {
            ErrorKind::ExpiredSignature => Self::Expired,
            ErrorKind::ImmatureSignature => Self::NotYetValid,
            ErrorKind::InvalidIssuer => Self::WrongIssuer,
            ErrorKind::InvalidAudience => Self::WrongAudience,
            ErrorKind::MissingRequiredClaim(claim) => Self::MissingClaim(claim.clone()),
            ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => Self::WrongAlgorithm,
            ErrorKind::InvalidToken
            | ErrorKind::Base64(_)
            | ErrorKind::Json(_)
            | ErrorKind::Utf8(_)
            | ErrorKind::InvalidClaimFormat(_) => Self::Malformed,
            _ => Self::BadSignature,
        }
    }
}

/// The checks of `[listen.oauth]`, prepared once and shared by every connection.
pub struct ResourceServer {
    config: ResourceConfig,
    resource: url::Url,
    keys: KeySource,
    validation: Validation,
}

impl ResourceServer {
    pub fn new(config: &ResourceConfig) -> Result<Self, ResourceConfigError> {
        let origin = match (&config.jwks_url, &config.issuer) {
            (Some(url), _) => KeyOrigin::Jwks(url.clone()),
            (None, Some(issuer)) => KeyOrigin::Issuer(issuer.clone()),
            (None, None) => return Err(ResourceConfigError::NoKeySource),
        };
        if config.algorithms.is_empty() {
            return Err(ResourceConfigError::NoAlgorithms);
        }
        let resource = config.resource.as_ref().unwrap_or(&config.audience);
        let resource = url::Url::parse(resource)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.has_host())
            .ok_or_else(|| ResourceConfigError::ResourceNotUrl {
                value: resource.clone(),
            })?;
        let mut validation = Validation::new(Algorithm::RS256);
        validation.algorithms = config.algorithms.iter().map(|&a| a.into()).collect();
        validation.leeway = config.leeway_secs;
        validation.validate_nbf = true;
        validation.set_audience(&[&config.audience]);
        let mut required = vec!["exp", "aud"];
        if let Some(issuer) = &config.issuer {
            validation.set_issuer(&[issuer]);
            required.push("iss");
        }
        validation.set_required_spec_claims(&required);
        Ok(Self {
            config: config.clone(),
            resource,
            keys: KeySource::new(
                origin,
                KeyAges {
                    max_age: Duration::from_secs(config.jwks_max_age_secs.get()),
                },
            ),
            validation,
        })
    }

    /// Checks `token` and tells whom it speaks for.
    pub async fn verify(&self, token: &str) -> Result<Grant, TokenRejection> {
        let claims = self.claims(token).await?;
        let profile = self.profile_for(&claims.scopes())?;
        let subject = claims.subject()?;
        Ok(Grant { subject, profile })
    }

    /// The subject of `token`, checked as [`Self::verify`] checks it but for its scopes:
    /// what a person's login at the provider proves about who they are (`super::idp_login`),
    /// whatever they may call.
    pub async fn verify_subject(&self, token: &str) -> Result<Subject, TokenRejection> {
        self.claims(token).await?.subject()
    }

    /// The issuer tokens must come from, if configured.
    pub fn issuer(&self) -> Option<&str> {
        self.config.issuer.as_deref()
    }

    /// The resource identifier clients ask the provider for.
    pub fn resource(&self) -> &url::Url {
        &self.resource
    }

    /// The client the gateway signs people in at the provider as, if configured
    /// (`client_id`, `client_secret`); else it registers one.
    pub fn login_client(&self) -> Option<(&str, Option<&str>)> {
        let id = self.config.client_id.as_deref()?;
        Some((id, self.config.client_secret.as_deref()))
    }

    async fn claims(&self, token: &str) -> Result<Claims, TokenRejection> {
        let header = decode_header(token).map_err(|e| TokenRejection::from_jwt(&e))?;
        if !self.validation.algorithms.contains(&header.alg) {
            return Err(TokenRejection::WrongAlgorithm);
        }
        let keys = match self.keys.keys_for(header.kid.as_deref(), header.alg).await {
            Ok(keys) => keys,
            Err(KeyError::UnknownKey(_) | KeyError::NoFittingKey(_)) => {
                return Err(TokenRejection::UnknownKey);
            }
            Err(error @ KeyError::Unavailable(_)) => {
                tracing::warn!(%error, "cannot check a bearer token");
                return Err(TokenRejection::KeysUnavailable);
            }
        };
        let mut outcome = Err(TokenRejection::UnknownKey);
        for key in &keys {
            outcome = decode::<Claims>(token, key, &self.validation)
                .map_err(|error| TokenRejection::from_jwt(&error));
            if !matches!(outcome, Err(TokenRejection::BadSignature)) {
                break;
            }
        }
        Ok(outcome?.claims)
    }

    /// The profile of the first configured scope among `scopes`; `None` when no scopes are
    /// configured.
    fn profile_for(&self, scopes: &[&str]) -> Result<Option<String>, TokenRejection> {
        if self.config.scopes.is_empty() {
            return Ok(None);
        }
        self.config
            .scopes
            .0
            .iter()
            .find(|(scope, _)| scopes.contains(&scope.as_str()))
            .map(|(_, profile)| Some(profile.clone()))
            .ok_or(TokenRejection::InsufficientScope)
    }

    /// The protected resource metadata document (RFC 9728 section 2).
    pub fn metadata(&self) -> serde_json::Value {
        let mut metadata = serde_json::json!({
            "resource": self.resource.as_str(),
            "bearer_methods_supported": ["header"],
            "resource_signing_alg_values_supported": self.config.algorithms,
            "resource_name": "mcp-gateway",
        });
        if let Some(issuer) = &self.config.issuer {
            metadata["authorization_servers"] = serde_json::json!([issuer]);
        }
        if !self.config.scopes.is_empty() {
            let scopes: Vec<&str> = self
                .config
                .scopes
                .0
                .iter()
                .map(|(s, _)| s.as_str())
                .collect();
            metadata["scopes_supported"] = serde_json::json!(scopes);
        }
        metadata
    }

    /// Whether `path` is one where the metadata is served: the well-known path alone, or
    /// with the resource's path appended (RFC 9728 section 3.1).
    pub fn is_metadata_path(&self, path: &str) -> bool {
        path == METADATA_PATH || path == self.metadata_path()
    }

    fn metadata_path(&self) -> String {
        format!(
            "{METADATA_PATH}{}",
            self.resource.path().trim_end_matches('/')
        )
    }

    /// The metadata's URL, on the resource's own origin, as named in challenges.
    pub fn metadata_url(&self) -> String {
        format!(
            "{}{}",
            self.resource.origin().ascii_serialization(),
            self.metadata_path()
        )
    }

    /// How to refuse a request that brought no token (`None`) or a refused one: status,
    /// `WWW-Authenticate` value and a plain-text body.
    pub fn refusal(
        &self,
        rejection: Option<&TokenRejection>,
    ) -> (http::StatusCode, String, String) {
        use http::StatusCode;
        let (status, message) = match rejection {
            None => (
                StatusCode::UNAUTHORIZED,
                "Unauthorized: send Authorization: Bearer <token> (see the resource metadata)"
                    .to_owned(),
            ),
            Some(TokenRejection::InsufficientScope) => (
                StatusCode::FORBIDDEN,
                format!("Forbidden: {}", TokenRejection::InsufficientScope),
            ),
            Some(TokenRejection::KeysUnavailable) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("Service Unavailable: {}", TokenRejection::KeysUnavailable),
            ),
            Some(rejection) => (
                StatusCode::UNAUTHORIZED,
                format!("Unauthorized: {rejection}"),
            ),
        };
        (status, self.challenge(rejection), message)
    }

    /// The `WWW-Authenticate` value that goes with refusing a request: no token, or
    /// `rejection` (RFC 6750 section 3, with RFC 9728's `resource_metadata`).
    pub fn challenge(&self, rejection: Option<&TokenRejection>) -> String {
        let metadata = format!("resource_metadata=\"{}\"", self.metadata_url());
        match rejection {
            None => format!("Bearer {metadata}"),
            Some(TokenRejection::InsufficientScope) => {
                let scopes: Vec<&str> = self
                    .config
                    .scopes
                    .0
                    .iter()
                    .map(|(s, _)| s.as_str())
                    .collect();
                format!(
                    "Bearer error=\"insufficient_scope\", scope=\"{}\", {metadata}",
                    scopes.join(" ")
                )
            }
            Some(rejection) => format!(
                "Bearer error=\"invalid_token\", error_description=\"{rejection}\", {metadata}"
            ),
        }
    }
}

/// The claims the gateway reads beyond those `jsonwebtoken` checks.
#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    client_id: Option<String>,
    /// RFC 9068: a space-separated string.
    #[serde(default)]
    scope: Option<ScopeClaim>,
    /// Some providers (Azure AD, Okta) say `scp`, often as a list.
    #[serde(default)]
    scp: Option<ScopeClaim>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ScopeClaim {
    Text(String),
    List(Vec<String>),
}

impl Claims {
    /// Whom the token speaks for: `sub`, else `client_id`; neither (or empty) is refused.
    fn subject(self) -> Result<Subject, TokenRejection> {
        let named = |claim: Option<String>| claim.filter(|value| !value.is_empty());
        named(self.sub)
            .map(Subject::Sub)
            .or_else(|| named(self.client_id).map(Subject::Client))
            .ok_or_else(|| TokenRejection::MissingClaim("sub or client_id".into()))
    }

    fn scopes(&self) -> Vec<&str> {
        [&self.scope, &self.scp]
            .into_iter()
            .flatten()
            .flat_map(|claim| -> Vec<&str> {
                match claim {
                    ScopeClaim::Text(text) => text.split_ascii_whitespace().collect(),
                    ScopeClaim::List(list) => list.iter().map(String::as_str).collect(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml_text: &str) -> ResourceConfig {
        toml::from_str(toml_text).unwrap()
    }

    const BASE: &str =
        "issuer = \"https://idp.example\"\naudience = \"http://127.0.0.1:8765/mcp\"\n";

    #[test]
    fn defaults_are_the_documented_ones() {
        let config = config(BASE);
        assert_eq!(config.algorithms, [SigningAlgorithm::RS256]);
        assert_eq!(config.leeway_secs, 30);
        assert_eq!(config.jwks_max_age_secs.get(), 3600);
        assert!(config.scopes.is_empty() && config.jwks_url.is_none());
    }

    #[test]
    fn none_and_shared_secret_algorithms_do_not_parse() {
        for bad in ["none", "HS256", "rs256"] {
            let text = format!("{BASE}algorithms = [\"{bad}\"]");
            assert!(toml::from_str::<ResourceConfig>(&text).is_err(), "{bad}");
        }
    }

    #[test]
    fn scopes_keep_their_written_order_and_pick_the_first_carried() {
        let text = format!("{BASE}[scopes]\n\"z:admin\" = \"admin\"\n\"a:read\" = \"readonly\"\n");
        let server = ResourceServer::new(&config(&text)).unwrap();
        assert_eq!(
            server.config.scopes.0,
            [
                ("z:admin".to_owned(), "admin".to_owned()),
                ("a:read".to_owned(), "readonly".to_owned())
            ]
        );
        assert_eq!(
            server.profile_for(&["a:read", "z:admin"]),
            Ok(Some("admin".to_owned()))
        );
        assert_eq!(
            server.profile_for(&["a:read"]),
            Ok(Some("readonly".to_owned()))
        );
        assert_eq!(
            server.profile_for(&["other"]),
            Err(TokenRejection::InsufficientScope)
        );
        let unmapped = ResourceServer::new(&config(BASE)).unwrap();
        assert_eq!(unmapped.profile_for(&[]), Ok(None));
    }

    #[test]
    fn bad_sections_are_refused_with_their_codes() {
        let code = |text: &str| ResourceServer::new(&config(text)).err().unwrap().code();
        assert_eq!(code("audience = \"http://x/mcp\""), "OAUTH_NO_KEY_SOURCE");
        assert_eq!(
            code(&format!("{BASE}algorithms = []")),
            "OAUTH_NO_ALGORITHMS"
        );
        assert_eq!(
            code("issuer = \"https://idp\"\naudience = \"api://gateway\""),
            "OAUTH_RESOURCE_NOT_URL"
        );
        let text = "jwks_url = \"https://idp/jwks\"\naudience = \"api://gateway\"\nresource = \"https://gw.example/mcp\"";
        assert!(ResourceServer::new(&config(text)).is_ok());
    }

    #[test]
    fn metadata_and_challenges_name_the_resource_and_its_provider() {
        let text = format!("{BASE}[scopes]\n\"mcp:read\" = \"readonly\"\n");
        let server = ResourceServer::new(&config(&text)).unwrap();
        let metadata = server.metadata();
        assert_eq!(metadata["resource"], "http://127.0.0.1:8765/mcp");
        assert_eq!(
            metadata["authorization_servers"],
            serde_json::json!(["https://idp.example"])
        );
        assert_eq!(
            metadata["scopes_supported"],
            serde_json::json!(["mcp:read"])
        );
        let url = "http://127.0.0.1:8765/.well-known/oauth-protected-resource/mcp";
        assert_eq!(server.metadata_url(), url);
        assert!(server.is_metadata_path("/.well-known/oauth-protected-resource/mcp"));
        assert!(server.is_metadata_path("/.well-known/oauth-protected-resource"));
        assert!(!server.is_metadata_path("/.well-known/oauth-protected-resource/other"));
        assert_eq!(
            server.challenge(None),
            format!("Bearer resource_metadata=\"{url}\"")
        );
        assert_eq!(
            server.challenge(Some(&TokenRejection::InsufficientScope)),
            format!(
                "Bearer error=\"insufficient_scope\", scope=\"mcp:read\", resource_metadata=\"{url}\""
            )
        );
        assert!(
            server
                .challenge(Some(&TokenRejection::Expired))
                .starts_with(
                    "Bearer error=\"invalid_token\", error_description=\"the token has expired\""
                )
        );
    }

    #[test]
    fn scopes_are_read_from_scope_and_scp() {
        let claims: Claims = serde_json::from_value(serde_json::json!({
            "scope": "a b", "scp": ["c"]
        }))
        .unwrap();
        assert_eq!(claims.scopes(), ["a", "b", "c"]);
    }

    #[test]
    fn a_token_speaks_for_its_subject_else_its_client_and_never_for_nobody() {
        let subject =
            |claims: serde_json::Value| serde_json::from_value::<Claims>(claims).unwrap().subject();
        let both = serde_json::json!({"sub": "alice", "client_id": "ide"});
        assert_eq!(subject(both), Ok(Subject::Sub("alice".to_owned())));
        let machine = serde_json::json!({"client_id": "alice"});
        let machine = subject(machine).unwrap();
        assert_eq!(machine, Subject::Client("alice".to_owned()));
        assert_eq!(machine.identity(), "client:alice");
        let person = subject(serde_json::json!({"sub": "alice"})).unwrap();
        assert_eq!(person.identity(), "subject:alice");
        for nobody in [
            serde_json::json!({}),
            serde_json::json!({"sub": null}),
            serde_json::json!({"sub": "", "client_id": ""}),
        ] {
            assert_eq!(
                subject(nobody),
                Err(TokenRejection::MissingClaim("sub or client_id".into()))
            );
        }
    }
}
