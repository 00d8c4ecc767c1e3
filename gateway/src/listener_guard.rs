//! The listener's guard: what must be true of an HTTP request before any handler sees it.
//!
//! Whoever reaches the gateway's socket can call every federated tool, including ones that
//! write files or run code. So the listener is safe by default and every route — `/mcp`,
//! `/sse`, `/message`, `/metrics`, `/healthz` — goes through the same checks:
//!
//! ```toml
//! [listen]
//! tokens = ["${GATEWAY_TOKEN}"]          # bearer tokens; empty (the default) = no auth
//! # tokens = [{ token = "${ADMIN_TOKEN}", operator = true }]  # may also use the console
//! allowed_origins = ["https://app.example:8443"]  # loopback origins are always accepted
//! allowed_hosts = ["gateway.lan"]        # Host names accepted besides loopback ones
//! max_body_bytes = 4194304               # default 4 MiB; larger bodies get 413
//! ```
//!
//! (The whole section, with its defaults, is documented in [`crate::config::listen`].)
//!
//! The checks run in this order, each answering on its own:
//! 1. **Host** (403): a loopback name (`localhost`, `127.0.0.1`, `[::1]`, any port) or an entry
//!    of `allowed_hosts`. A web page that rebinds its DNS name to 127.0.0.1 still sends its
//!    own name as Host, so this defeats DNS rebinding.
//! 2. **Origin** (403), only when the header is present (browsers send it; CLI clients do
//!    not): a loopback origin or an entry of `allowed_origins`. This stops a foreign web page
//!    from posting to the gateway. The guard answers no CORS preflight on purpose: allowing
//!    cross-origin reads from browsers would widen access, not narrow it.
//!
//! With `[listen] behind_proxy = true`, a reverse proxy passes every client's request on
//! from its own (often loopback) address, with whatever Host and Origin the client sent:
//! loopback names prove nothing then, and only `allowed_hosts` and `allowed_origins` pass
//! steps 1 and 2. Such a listener must have tokens (see [`ListenConfig::proxy_problem`]),
//! so step 3 always applies, and the console always asks for one.
//! 3. **Bearer token** (401 with `WWW-Authenticate: Bearer`), when tokens or `[listen.oauth]`
//!    are configured. Tokens are compared as SHA-256 digests with `subtle`, against every
//!    configured token without an early exit, so the time taken reveals neither a prefix,
//!    the token's length nor which token matched. A token that is none of them is checked
//!    as the identity provider's JWT access token ([`crate::auth::resource`]); its refusals
//!    are 401 `invalid_token`, 403 `insufficient_scope` or 503, each naming the protected
//!    resource metadata, which is served at `/.well-known/oauth-protected-resource…`
//!    without a token.
//! 4. **Body size** (413): a `Content-Length` above the limit is refused before reading; a
//!    body of unknown length (chunked) is read up to the limit and handed on as a buffered
//!    body, so every handler — rmcp's streamable HTTP service included — sees at most
//!    `max_body_bytes` and the client gets a 413, not a handler's read error. MCP messages are
//!    single JSON documents, so buffering costs nothing that streaming would have saved.
//!
//! The operator console (`/ui`, when `[listen] ui` is on) is the one exception to step 3:
//! a browser cannot attach a bearer header to a page load, so the console checks the token
//! itself, once, at its login, with [`SecurityGuard::verify_token`], admits only an
//! operator's ([`SecurityGuard::is_operator`]: a token marked `operator = true`, or anyone
//! when no tokens are configured), and then admits its own cookie (`crate::ui::auth`).
//! Host, Origin and body size are checked for it all the same.
//!
//! Unauthenticated requests never reach the body check: a stranger learns only "401".
//! On success the request carries its [`Credentials`]: which token was presented and the
//! profile bound to it, if any. Sessions are bound to the credentials that opened them. `/healthz` is not exempt: it shows each upstream's state and last error,
//! which are for the operator, so `status --listen` must send the token too.
//!
//! A person's browser on a per-user sign-in is the other (its page `/oauth/sign-in`, the
//! identity provider's return and the callback `/oauth/callback`): it has no bearer token,
//! and the sign-in's single-use `state` with the browser's proof of who it is authorize it
//! (see `auth::per_user`, `auth::browser`); Host and Origin are checked as for any path.
//!
//! [`check_bind`] is the start-up half: a non-loopback address without tokens is refused.

// What every request passes through: nothing here may panic on what a client sends.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::{
    convert::Infallible,
    future::Future,
    net::{IpAddr, SocketAddr},
    pin::Pin,
    str::FromStr,
    sync::Arc,
    task::{Context, Poll},
};

use axum::body::{Body, HttpBody};
use http::{
    HeaderMap, HeaderValue, Request, Response, StatusCode, header, request::Parts, uri::Authority,
};
use sha2::{Digest, Sha256};
use subtle::{Choice, ConditionallySelectable, ConstantTimeEq};
use tower::{Layer, Service};

use crate::auth::exchange::SubjectToken;
pub use crate::auth::resource::Subject;
use crate::auth::resource::{ResourceConfigError, ResourceServer, TokenRejection};
use crate::config::listen::{ListenConfig, ProxyProblem, validate_token};
use crate::config::{Config, ConfigError};

/// A configuration the guard cannot work with, found at start or reload.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    #[error(
        "refusing to listen on {address}: it is not a loopback address and [listen] tokens is \
         empty, so anyone who can reach this machine could call every tool. Set [listen] \
         tokens (for example tokens = [\"${{GATEWAY_TOKEN}}\"]) or listen on 127.0.0.1"
    )]
    NonLoopbackWithoutTokens { address: SocketAddr },
    #[error("[listen] tokens: entry {index}: {reason}")]
    InvalidToken { index: usize, reason: &'static str },
    #[error(
        "[listen] tokens: entry {index} repeats entry {first} (or shares its identity, the start \
         of its SHA-256); each token must be unique"
    )]
    DuplicateToken { index: usize, first: usize },
    #[error("[listen] allowed_hosts: {value:?} is not a host name or host:port")]
    InvalidAllowedHost { index: usize, value: String },
    #[error(
        "[listen] allowed_origins: {value:?} is not an origin such as \"https://app.example:8443\" \
         or \"null\""
    )]
    InvalidAllowedOrigin { index: usize, value: String },
    #[error("[listen] max_body_bytes must be at least 1")]
    ZeroBodyLimit,
    #[error(
        "[listen] public_url must be an http(s) URL with no path, query or fragment, such as \
         \"https://gateway.example\" (got {0:?})"
    )]
    InvalidPublicUrl(String),
    #[error("[listen] {0}")]
    BehindProxy(ProxyProblem),
    #[error(transparent)]
    OAuth(#[from] ResourceConfigError),
}

impl SecurityError {
    /// A stable code for logs and tests.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NonLoopbackWithoutTokens { .. } => "LISTEN_NON_LOOPBACK_WITHOUT_TOKENS",
            Self::InvalidToken { .. } => crate::config::listen::INVALID_TOKEN,
            Self::DuplicateToken { .. } => "LISTEN_DUPLICATE_TOKEN",
            Self::InvalidAllowedHost { .. } => "LISTEN_INVALID_ALLOWED_HOST",
            Self::InvalidAllowedOrigin { .. } => "LISTEN_INVALID_ALLOWED_ORIGIN",
            Self::ZeroBodyLimit => "LISTEN_ZERO_BODY_LIMIT",
            Self::InvalidPublicUrl(_) => "LISTEN_INVALID_PUBLIC_URL",
            Self::BehindProxy(problem) => problem.code(),
            Self::OAuth(error) => error.code(),
        }
    }

    /// The configuration key whose value is refused.
    pub fn key(&self) -> String {
        match self {
            Self::NonLoopbackWithoutTokens { .. } => "listen.address".into(),
            Self::InvalidToken { index, .. } | Self::DuplicateToken { index, .. } => {
                format!("listen.tokens[{index}]")
            }
            Self::InvalidAllowedHost { index, .. } => format!("listen.allowed_hosts[{index}]"),
            Self::InvalidAllowedOrigin { index, .. } => {
                format!("listen.allowed_origins[{index}]")
            }
            Self::ZeroBodyLimit => "listen.max_body_bytes".into(),
            Self::InvalidPublicUrl(_) => "listen.public_url".into(),
            Self::BehindProxy(_) => "listen.behind_proxy".into(),
            Self::OAuth(error) => format!("listen.oauth{}", error.field()),
        }
    }
}

/// Everything `serve` refuses of `[listen]`, as refusals of the configuration that name
/// the file, the key, the line and the code; `config check` runs the same, so the two
/// never disagree.
pub fn guard_for(config: &Config) -> Result<SecurityGuard, ConfigError> {
    let refuse =
        |error: SecurityError| config.refusal(error.key(), format!("{}: {error}", error.code()));
    check_bind(config.listen.address, config.listen.has_tokens()).map_err(refuse)?;
    SecurityGuard::new(&config.listen).map_err(refuse)
}

/// Refuses to bind a non-loopback address when no bearer token (static or OAuth) is
/// configured.
pub fn check_bind(address: SocketAddr, has_tokens: bool) -> Result<(), SecurityError> {
    if has_tokens || is_loopback(address.ip()) {
        Ok(())
    } else {
        Err(SecurityError::NonLoopbackWithoutTokens { address })
    }
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Whether `path` is one a person's browser opens during a per-user sign-in, with no
/// bearer token: the sign-in page, the identity provider's return, and the callback.
fn is_sign_in_path(path: &str) -> bool {
    use crate::auth::{idp_login, per_user};
    [
        per_user::SIGN_IN_PATH,
        idp_login::RETURN_PATH,
        per_user::CALLBACK_PATH,
    ]
    .contains(&path)
}

/// The readiness route, open to load balancers' probes without a token or Host check.
pub const READINESS_PATH: &str = "/readyz";

/// Inserted into every admitted request: who presented it. Two requests come from the same
/// client as far as the gateway can tell when their credentials are equal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The static bearer token that was presented, or `None` (none configured, or OAuth).
    pub token: Option<TokenId>,
    /// Whom the identity provider's token that was presented speaks for, if that was one.
    pub subject: Option<Subject>,
    /// The profile bound to that token, or `None` (no tokens, or a token without a profile).
    pub profile: Option<String>,
}

impl Credentials {
    /// No token: none is needed here.
    fn anonymous() -> Self {
        Self {
            token: None,
            subject: None,
            profile: None,
        }
    }

    /// How a session's owner is recorded in the shared state and shown in logs: the
    /// token's [`TokenId`] (`token:…`), or whom the identity provider's token names
    /// (`subject:…`, or `client:…` for a machine's token without a subject), never the
    /// token itself.
    pub fn identity(&self) -> Option<String> {
        match (&self.token, &self.subject) {
            (Some(token), _) => Some(format!("token:{token}")),
            (None, Some(subject)) => Some(subject.identity()),
            (None, None) => None,
        }
    }
}

/// One of the configured tokens, named by the first 128 bits of its SHA-256 (as 32 hex
/// digits, `token:1a2b…` in logs and session records): the same whatever the token's
/// place in `[listen] tokens` and on every replica, too long for two tokens to share by
/// chance (each identity has sign-ins and tasks of its own), and an operator can tell
/// which token it is (`printf %s "$TOKEN" | sha256sum | cut -c1-32`) without it ever
/// being shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenId([u8; TOKEN_ID_BYTES]);

/// How much of a token's SHA-256 names it.
const TOKEN_ID_BYTES: usize = 16;

impl TokenId {
    fn of(digest: &[u8; 32]) -> Self {
        let mut id = [0u8; TOKEN_ID_BYTES];
        id.iter_mut().zip(digest).for_each(|(to, from)| *to = *from);
        Self(id)
    }
}

impl std::fmt::Display for TokenId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
    }
}

/// The checks, prepared from a [`ListenConfig`]; shared by every connection.
pub struct SecurityGuard {
    tokens: Vec<KnownToken>,
    oauth: Option<Arc<ResourceServer>>,
    /// Whether `/ui` is served (and so authenticates by its own cookie).
    console: bool,
    /// Whether loopback Host names and Origins pass by themselves: not behind a proxy.
    trust_loopback: bool,
    allowed_hosts: Vec<HostRule>,
    allowed_origins: Vec<OriginRule>,
    max_body_bytes: usize,
}

struct KnownToken {
    digest: [u8; 32],
    id: TokenId,
    profile: Option<String>,
    /// Marked `operator = true`: may use the console.
    operator: bool,
}

struct HostRule {
    host: String,
    port: Option<u16>,
}

#[derive(PartialEq, Eq)]
enum OriginRule {
    Null,
    Tuple {
        scheme: String,
        host: String,
        port: u16,
    },
}

const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

impl SecurityGuard {
    /// Validates the configuration and prepares the checks.
    pub fn new(config: &ListenConfig) -> Result<Self, SecurityError> {
        if config.max_body_bytes == 0 {
            return Err(SecurityError::ZeroBodyLimit);
        }
        if let Some(public) = &config.public_url
            && !is_base_url(public)
        {
            return Err(SecurityError::InvalidPublicUrl(public.clone()));
        }
        if let Some(problem) = config.proxy_problem() {
            return Err(SecurityError::BehindProxy(problem));
        }
        let mut tokens: Vec<KnownToken> = Vec::with_capacity(config.tokens.len());
        for (index, entry) in config.tokens.iter().enumerate() {
            validate_token(&entry.token)
                .map_err(|reason| SecurityError::InvalidToken { index, reason })?;
            let digest = sha256(entry.token.as_bytes());
            let id = TokenId::of(&digest);
            if let Some(first) = tokens.iter().position(|known| known.id == id) {
                return Err(SecurityError::DuplicateToken { index, first });
            }
            tokens.push(KnownToken {
                digest,
                id,
                profile: entry.profile.clone(),
                operator: entry.operator,
            });
        }
        let allowed_hosts = parse_all(&config.allowed_hosts, parse_authority, |index, value| {
            SecurityError::InvalidAllowedHost { index, value }
        })?;
        let mut allowed_origins = parse_all(
            &config.allowed_origins,
            |value| parse_origin(value.strip_suffix('/').unwrap_or(value)),
            |index, value| SecurityError::InvalidAllowedOrigin { index, value },
        )?;
        // The gateway's own pages (the console, a per-user sign-in's form) post from the
        // origin people reach it at.
        if let Some(own) = config
            .public_url
            .as_deref()
            .and_then(|url| url::Url::parse(url).ok())
            .and_then(|url| parse_origin(&url.origin().ascii_serialization()))
        {
            allowed_origins.push(own);
        }
        let oauth = config
            .oauth
            .as_ref()
            .map(ResourceServer::new)
            .transpose()?
            .map(Arc::new);
        Ok(Self {
            tokens,
            oauth,
            console: config.ui_enabled(),
            trust_loopback: !config.behind_proxy,
            allowed_hosts,
            allowed_origins,
            max_body_bytes: config.max_body_bytes,
        })
    }

    /// The OAuth resource server of `[listen.oauth]`, for the metadata route.
    pub fn resource_server(&self) -> Option<Arc<ResourceServer>> {
        self.oauth.clone()
    }

    /// Runs every check; returns the request to pass on (with its [`Credentials`] and a
    /// bounded body) or the rejection to answer with.
    async fn admit(&self, request: Request<Body>) -> Result<Request<Body>, Rejection> {
        let (mut parts, body) = request.into_parts();
        if parts.method == http::Method::GET && parts.uri.path() == READINESS_PATH {
            // Says only "ready" or not; probes know neither tokens nor the public Host.
            return Ok(Request::from_parts(parts, Body::empty()));
        }
        self.check_host(&parts)?;
        self.check_origin(&parts.headers)?;
        let path = parts.uri.path();
        // The resource metadata is how a client finds where to get a token; the console
        // admits its own login cookie (or nothing but its login page).
        let public = self
            .oauth
            .as_ref()
            .is_some_and(|oauth| oauth.is_metadata_path(path))
            || (self.console && is_console_path(path));
        let credentials = if public {
            Credentials::anonymous()
        } else if is_sign_in_path(path) {
            // A person's browser on a per-user sign-in (its page, the identity provider's
            // return, the authorization server's callback) carries no bearer token: the
            // sign-in's single-use state, and the browser's proof of who it is, are what
            // authorize it. Credentials it does present must be good, and must be the
            // sign-in's identity's.
            if headers_carry_token(&parts.headers) {
                self.authenticate(&parts.headers).await?
            } else {
                Credentials::anonymous()
            }
        } else {
            self.authenticate(&parts.headers).await?
        };
        let body = self.bounded_body(&parts.headers, body).await?;
        if credentials.subject.is_some()
            && let Some(token) = parts
                .headers
                .get(header::AUTHORIZATION)
                .and_then(bearer_token)
                .and_then(|token| std::str::from_utf8(token).ok())
        {
            parts.extensions.insert(SubjectToken(token.into()));
        }
        parts.extensions.insert(credentials);
        Ok(Request::from_parts(parts, body))
    }

    fn check_host(&self, parts: &Parts) -> Result<(), Rejection> {
        // HTTP/2 carries the host in `:authority`, which hyper exposes through the URI.
        let raw = match parts.headers.get(header::HOST) {
            Some(value) => value.to_str().ok(),
            None => parts.uri.authority().map(Authority::as_str),
        };
        let allowed = raw.and_then(parse_authority).is_some_and(|host| {
            (self.trust_loopback && LOOPBACK_NAMES.contains(&host.host.as_str()))
                || self.allowed_hosts.iter().any(|rule| {
                    rule.host == host.host && rule.port.is_none_or(|port| host.port == Some(port))
                })
        });
        if allowed {
            Ok(())
        } else {
            tracing::warn!(host = ?raw, "rejected a request: foreign Host");
            Err(Rejection::ForeignHost)
        }
    }

    fn check_origin(&self, headers: &HeaderMap) -> Result<(), Rejection> {
        let Some(value) = headers.get(header::ORIGIN) else {
            return Ok(());
        };
        let origin = value.to_str().ok().and_then(parse_origin);
        let allowed = origin.is_some_and(|origin| {
            let loopback = self.trust_loopback
                && matches!(&origin, OriginRule::Tuple { host, .. }
                    if LOOPBACK_NAMES.contains(&host.as_str()));
            loopback || self.allowed_origins.contains(&origin)
        });
        if allowed {
            Ok(())
        } else {
            tracing::warn!(origin = ?value, "rejected a request: foreign Origin");
            Err(Rejection::ForeignOrigin)
        }
    }

    async fn authenticate(&self, headers: &HeaderMap) -> Result<Credentials, Rejection> {
        if self.tokens.is_empty() && self.oauth.is_none() {
            return Ok(Credentials::anonymous());
        }
        let Some(presented) = headers.get(header::AUTHORIZATION).and_then(bearer_token) else {
            return Err(Rejection::MissingToken);
        };
        if let Some(credentials) = self.verify_token(presented) {
            return Ok(credentials);
        }
        let Some(oauth) = &self.oauth else {
            tracing::warn!("rejected a request: wrong bearer token");
            return Err(Rejection::WrongToken);
        };
        let presented = std::str::from_utf8(presented).map_err(|_| Rejection::WrongToken)?;
        match oauth.verify(presented).await {
            Ok(grant) => Ok(Credentials {
                token: None,
                subject: Some(grant.subject),
                profile: grant.profile,
            }),
            Err(rejection) => {
                tracing::warn!(code = rejection.code(), "rejected a request: {rejection}");
                Err(Rejection::Token(rejection))
            }
        }
    }

    /// Whether any token is configured, static or `[listen.oauth]` (else every request is
    /// admitted without one).
    pub fn tokens_required(&self) -> bool {
        !self.tokens.is_empty() || self.oauth.is_some()
    }

    /// Whether `credentials` are an operator's, who may use the console: a static token
    /// marked `operator = true`, or, on a listener that takes no credentials at all
    /// (loopback only), whoever reaches it, the local user. A caller's token is none.
    pub fn is_operator(&self, credentials: &Credentials) -> bool {
        if !self.tokens_required() {
            return true;
        }
        credentials.token.is_some_and(|id| {
            self.tokens
                .iter()
                .any(|known| known.id == id && known.operator)
        })
    }

    /// The credentials of a presented static token, or `None` when it is none of the
    /// configured ones; in constant time (see the module doc). An identity provider's token
    /// is never one (the console logs in with static tokens only). With neither tokens nor
    /// `[listen.oauth]` configured, anything.
    pub fn verify_token(&self, presented: &[u8]) -> Option<Credentials> {
        if !self.tokens_required() {
            return Some(Credentials::anonymous());
        }
        let digest = sha256(presented);
        let mut found = Choice::from(0);
        let mut index = 0u32;
        for (i, known) in self.tokens.iter().enumerate() {
            let equal = known.digest.ct_eq(&digest);
            found |= equal;
            index.conditional_assign(&(i as u32), equal);
        }
        if !bool::from(found) {
            return None;
        }
        let known = self.tokens.get(index as usize)?;
        Some(Credentials {
            token: Some(known.id),
            subject: None,
            profile: known.profile.clone(),
        })
    }

    async fn bounded_body(&self, headers: &HeaderMap, body: Body) -> Result<Body, Rejection> {
        let limit = self.max_body_bytes;
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|length| length > limit as u64) {
            return Err(Rejection::TooLarge { limit });
        }
        // A body whose length is known (hyper enforces Content-Length framing) passes as is.
        if body
            .size_hint()
            .upper()
            .is_some_and(|upper| upper <= limit as u64)
        {
            return Ok(body);
        }
        let mut body = body;
        let mut buffer = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            let frame = frame.map_err(|_| Rejection::UnreadableBody)?;
            if let Ok(data) = frame.into_data() {
                if buffer.len() + data.len() > limit {
                    return Err(Rejection::TooLarge { limit });
                }
                buffer.extend_from_slice(&data);
            }
        }
        Ok(Body::from(buffer))
    }
}

/// Whether `text` is an http(s) URL that is only a scheme, host and port (what
/// `/oauth/callback` is appended to).
fn is_base_url(text: &str) -> bool {
    url::Url::parse(text).is_ok_and(|url| {
        matches!(url.scheme(), "http" | "https")
            && url.host().is_some()
            && url.path() == "/"
            && url.query().is_none()
            && url.fragment().is_none()
            && url.username().is_empty()
    })
}

/// Whether the request presents a bearer token.
fn headers_carry_token(headers: &HeaderMap) -> bool {
    headers.contains_key(header::AUTHORIZATION)
}

/// `/ui` and everything under it.
fn is_console_path(path: &str) -> bool {
    path.strip_prefix("/ui")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

fn parse_all<T>(
    values: &[String],
    parse: impl Fn(&str) -> Option<T>,
    invalid: impl Fn(usize, String) -> SecurityError,
) -> Result<Vec<T>, SecurityError> {
    values
        .iter()
        .enumerate()
        .map(|(index, value)| parse(value).ok_or_else(|| invalid(index, value.clone())))
        .collect()
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The token of an `Authorization: Bearer <token>` header (scheme case-insensitive).
fn bearer_token(value: &HeaderValue) -> Option<&[u8]> {
    let bytes = value.as_bytes();
    let (scheme, rest) = bytes.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") || !rest.starts_with(b" ") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// `host[:port]` with the host lowercased; IPv6 hosts keep their brackets.
fn parse_authority(value: &str) -> Option<HostRule> {
    if value.is_empty() || value.contains(['@', '/']) {
        return None;
    }
    let authority = Authority::from_str(value).ok()?;
    Some(HostRule {
        host: authority.host().to_ascii_lowercase(),
        port: authority.port_u16(),
    })
}

/// `scheme://host[:port]` with the default port made explicit, or `null`.
fn parse_origin(value: &str) -> Option<OriginRule> {
    if value.eq_ignore_ascii_case("null") {
        return Some(OriginRule::Null);
    }
    let (scheme, authority) = value.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let rule = parse_authority(authority)?;
    let port = rule.port.or(match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    })?;
    Some(OriginRule::Tuple {
        scheme,
        host: rule.host,
        port,
    })
}

/// Why a request was turned away; each maps to one HTTP answer.
#[derive(Debug)]
enum Rejection {
    ForeignHost,
    ForeignOrigin,
    MissingToken,
    WrongToken,
    /// The identity provider's token was refused.
    Token(TokenRejection),
    TooLarge {
        limit: usize,
    },
    UnreadableBody,
}

impl Rejection {
    /// The answer; with `[listen.oauth]`, token refusals carry its challenge.
    fn into_response(self, oauth: Option<&ResourceServer>) -> Response<Body> {
        const CHALLENGE: &str = "Bearer realm=\"mcp-gateway\"";
        const INVALID: &str = "Bearer realm=\"mcp-gateway\", error=\"invalid_token\"";
        let refusal = match (&self, oauth) {
            (Self::MissingToken, Some(oauth)) => Some(oauth.refusal(None)),
            (Self::WrongToken, Some(oauth)) => {
                Some(oauth.refusal(Some(&TokenRejection::Malformed)))
            }
            (Self::Token(rejection), Some(oauth)) => Some(oauth.refusal(Some(rejection))),
            _ => None,
        };
        if let Some((status, challenge, message)) = refusal {
            let mut response = Response::new(Body::from(message));
            *response.status_mut() = status;
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            if let Ok(value) = HeaderValue::from_str(&challenge) {
                headers.insert(header::WWW_AUTHENTICATE, value);
            }
            return response;
        }
        let (status, message, challenge) = match self {
            Self::ForeignHost => (
                StatusCode::FORBIDDEN,
                "Forbidden: the Host header is not one this gateway serves (loopback, unless \
                 behind_proxy, or [listen] allowed_hosts)"
                    .into(),
                None,
            ),
            Self::ForeignOrigin => (
                StatusCode::FORBIDDEN,
                "Forbidden: the Origin header is not one this gateway serves (loopback, unless \
                 behind_proxy, or [listen] allowed_origins)"
                    .into(),
                None,
            ),
            Self::MissingToken => (
                StatusCode::UNAUTHORIZED,
                "Unauthorized: send Authorization: Bearer <token>".into(),
                Some(CHALLENGE),
            ),
            Self::WrongToken | Self::Token(_) => (
                StatusCode::UNAUTHORIZED,
                "Unauthorized: the bearer token is not valid".into(),
                Some(INVALID),
            ),
            Self::TooLarge { limit } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("Payload Too Large: bodies are limited to {limit} bytes (max_body_bytes)"),
                None,
            ),
            Self::UnreadableBody => (
                StatusCode::BAD_REQUEST,
                "Bad Request: the request body could not be read".into(),
                None,
            ),
        };
        let mut response = Response::new(Body::from(message));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        let text = HeaderValue::from_static("text/plain; charset=utf-8");
        headers.insert(header::CONTENT_TYPE, text);
        if let Some(challenge) = challenge {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(challenge),
            );
        }
        response
    }
}

/// Applies a [`SecurityGuard`] to every request: `router.layer(SecurityLayer::new(guard))`,
/// called after the last route so that every route and the fallback are covered.
#[derive(Clone)]
pub struct SecurityLayer {
    guard: Arc<SecurityGuard>,
}

impl SecurityLayer {
    pub fn new(guard: Arc<SecurityGuard>) -> Self {
        Self { guard }
    }
}

impl<S> Layer<S> for SecurityLayer {
    type Service = Security<S>;

    fn layer(&self, inner: S) -> Security<S> {
        Security {
            guard: Arc::clone(&self.guard),
            inner,
        }
    }
}

/// The service made by [`SecurityLayer`].
#[derive(Clone)]
pub struct Security<S> {
    guard: Arc<SecurityGuard>,
    inner: S,
}

impl<S> Service<Request<Body>> for Security<S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        // The clone that was polled ready is the one that serves this request.
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        let guard = Arc::clone(&self.guard);
        Box::pin(async move {
            match guard.admit(request).await {
                Ok(request) => {
                    let mut ready = ready;
                    ready.call(request).await
                }
                Err(rejection) => Ok(rejection.into_response(guard.oauth.as_deref())),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::listen::TokenConfig;

    use axum::{
        Extension, Router,
        body::Bytes,
        routing::{get, post},
    };
    use tower::ServiceExt;

    const TOKEN: &str = "s3cret-token-for-unit-tests";
    const OTHER: &str = "other-token-for-unit-tests";
    const ADMIN: &str = "admin-token-for-unit-tests";
    const LOOPBACK: &str = "127.0.0.1:8765";

    fn config(tokens: &[(&str, Option<&str>)]) -> ListenConfig {
        ListenConfig {
            tokens: tokens
                .iter()
                .map(|(token, profile)| TokenConfig {
                    token: (*token).to_owned(),
                    profile: profile.map(str::to_owned),
                    operator: false,
                })
                .collect(),
            allowed_origins: vec!["https://app.example".to_owned()],
            allowed_hosts: vec!["gateway.lan".to_owned(), "pinned.lan:9000".to_owned()],
            max_body_bytes: 64,
            ..ListenConfig::default()
        }
    }

    async fn echo(Extension(credentials): Extension<Credentials>, body: Bytes) -> String {
        format!(
            "identity={:?} profile={:?} bytes={}",
            credentials.identity(),
            credentials.profile,
            body.len()
        )
    }

    fn app(config: &ListenConfig) -> Router {
        Router::new()
            .route("/mcp", post(echo))
            .route("/healthz", get(|| async { "ok" }))
            .layer(SecurityLayer::new(Arc::new(
                SecurityGuard::new(config).unwrap(),
            )))
    }

    /// A request with the given headers (`None` values are left out).
    fn request(
        path: &str,
        headers: &[(header::HeaderName, Option<&str>)],
        body: Body,
    ) -> Request<Body> {
        let method = if path == "/mcp" { "POST" } else { "GET" };
        let mut builder = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            if let Some(value) = value {
                builder = builder.header(name, *value);
            }
        }
        builder.body(body).unwrap()
    }

    fn post_mcp(host: &str, authorization: Option<&str>, body: Body) -> Request<Body> {
        let headers = [
            (header::HOST, Some(host)),
            (header::AUTHORIZATION, authorization),
        ];
        request("/mcp", &headers, body)
    }

    async fn send(
        config: &ListenConfig,
        request: Request<Body>,
    ) -> (StatusCode, HeaderMap, String) {
        let response = app(config).oneshot(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        (
            parts.status,
            parts.headers,
            String::from_utf8(body.to_vec()).unwrap(),
        )
    }

    async fn status(config: &ListenConfig, request: Request<Body>) -> StatusCode {
        send(config, request).await.0
    }

    #[tokio::test]
    async fn no_tokens_configured_admits_loopback_requests_without_a_profile() {
        let (status, _, body) =
            send(&config(&[]), post_mcp(LOOPBACK, None, Body::from("{}"))).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, "identity=None profile=None bytes=2");
    }

    #[tokio::test]
    async fn missing_token_is_401_with_a_bearer_challenge() {
        let request = post_mcp(LOOPBACK, None, Body::from("{}"));
        let (status, headers, body) = send(&config(&[(TOKEN, None)]), request).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let challenge = headers[header::WWW_AUTHENTICATE].to_str().unwrap();
        assert!(challenge.starts_with("Bearer"), "{challenge}");
        assert!(body.contains("Authorization: Bearer"), "{body}");
    }

    #[tokio::test]
    async fn wrong_token_is_401_with_a_bearer_challenge() {
        let config = config(&[(TOKEN, None)]);
        let long = format!("Bearer {TOKEN}-and-more");
        let basic = format!("Basic {TOKEN}");
        for wrong in [
            "Bearer s3cret-token-for-unit-testS",
            &long,
            "Bearer s",
            "Bearer ",
            &basic,
            TOKEN,
        ] {
            let (status, headers, _) =
                send(&config, post_mcp(LOOPBACK, Some(wrong), Body::empty())).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{wrong}");
            assert!(
                headers[header::WWW_AUTHENTICATE]
                    .to_str()
                    .unwrap()
                    .starts_with("Bearer")
            );
        }
    }

    #[tokio::test]
    async fn right_token_is_admitted_with_its_profile() {
        let config = config(&[(OTHER, Some("ci")), (TOKEN, None), (ADMIN, Some("admin"))]);
        // Identities are the first 128 bits of each token's SHA-256.
        for (authorization, expected) in [
            (
                "Bearer s3cret-token-for-unit-tests",
                "identity=Some(\"token:986d13eab24ab12c8facaf60c9c41082\") profile=None bytes=2",
            ),
            (
                "bearer  admin-token-for-unit-tests",
                "identity=Some(\"token:49d0ebae6589b827135cfc2f56690481\") profile=Some(\"admin\") bytes=2",
            ),
            (
                "BEARER other-token-for-unit-tests",
                "identity=Some(\"token:62f1e48e4108f6aad8e24e4c2d97f1d4\") profile=Some(\"ci\") bytes=2",
            ),
        ] {
            let request = post_mcp(LOOPBACK, Some(authorization), Body::from("{}"));
            let (status, _, body) = send(&config, request).await;
            assert_eq!(
                (status, body.as_str()),
                (StatusCode::OK, expected),
                "{authorization}"
            );
        }
    }

    #[test]
    fn a_tokens_identity_stays_when_the_list_changes_around_it() {
        let identity = |tokens: &[(&str, Option<&str>)]| {
            SecurityGuard::new(&config(tokens))
                .unwrap()
                .verify_token(TOKEN.as_bytes())
                .and_then(|credentials| credentials.identity())
        };
        let alone = identity(&[(TOKEN, None)]);
        assert_eq!(
            alone.as_deref(),
            Some("token:986d13eab24ab12c8facaf60c9c41082")
        );
        assert_eq!(
            identity(&[(OTHER, None), (ADMIN, None), (TOKEN, None)]),
            alone
        );
    }

    #[test]
    fn only_tokens_marked_operator_are_operators_and_without_tokens_everyone_is() {
        let mut listen = config(&[(TOKEN, None), (ADMIN, None), (OTHER, Some("ci"))]);
        listen.tokens[1].operator = true;
        let guard = SecurityGuard::new(&listen).unwrap();
        let operator = |token: &str| {
            let credentials = guard.verify_token(token.as_bytes()).unwrap();
            guard.is_operator(&credentials)
        };
        assert!(operator(ADMIN));
        assert!(!operator(TOKEN), "a caller's token");
        assert!(!operator(OTHER), "a profile's token");
        assert!(!guard.is_operator(&Credentials::anonymous()));
        let open = SecurityGuard::new(&config(&[])).unwrap();
        assert!(
            open.is_operator(&Credentials::anonymous()),
            "the local user"
        );
    }

    #[test]
    fn a_machine_token_without_a_subject_is_named_apart_from_a_person() {
        let named = |subject: Subject| Credentials {
            token: None,
            subject: Some(subject),
            profile: None,
        };
        let person = named(Subject::Sub("alice".into()));
        let machine = named(Subject::Client("alice".into()));
        assert_eq!(person.identity().as_deref(), Some("subject:alice"));
        assert_eq!(machine.identity().as_deref(), Some("client:alice"));
        assert_ne!(person, machine);
    }

    #[tokio::test]
    async fn healthz_and_unknown_routes_are_guarded_like_every_route() {
        let config = config(&[(TOKEN, None)]);
        let bearer = format!("Bearer {TOKEN}");
        for (path, authorization, expected) in [
            ("/healthz", None, StatusCode::UNAUTHORIZED),
            ("/healthz", Some(bearer.as_str()), StatusCode::OK),
            ("/nowhere", None, StatusCode::UNAUTHORIZED),
            ("/nowhere", Some(bearer.as_str()), StatusCode::NOT_FOUND),
        ] {
            let headers = [
                (header::HOST, Some("localhost")),
                (header::AUTHORIZATION, authorization),
            ];
            let got = status(&config, request(path, &headers, Body::empty())).await;
            assert_eq!(got, expected, "{path} {authorization:?}");
        }
    }

    #[tokio::test]
    async fn the_console_checks_its_own_login_only_when_it_is_served() {
        // On (the loopback default), `/ui` passes to the console's own cookie check
        // (this test app has no console: 404); off, it is guarded like any other path.
        // Host and Origin are checked either way.
        let app_with = |ui: Option<bool>| ListenConfig {
            ui,
            ..config(&[(TOKEN, None)])
        };
        let ui_get = |host: &str, origin: Option<&str>| {
            request(
                "/ui/api/servers",
                &[(header::HOST, Some(host)), (header::ORIGIN, origin)],
                Body::empty(),
            )
        };
        for (ui, expected) in [
            (None, StatusCode::NOT_FOUND),
            (Some(true), StatusCode::NOT_FOUND),
            (Some(false), StatusCode::UNAUTHORIZED),
        ] {
            let got = status(&app_with(ui), ui_get(LOOPBACK, None)).await;
            assert_eq!(got, expected, "ui = {ui:?}");
        }
        let foreign_host = status(&app_with(None), ui_get("evil.example", None)).await;
        assert_eq!(foreign_host, StatusCode::FORBIDDEN);
        let foreign_origin = ui_get(LOOPBACK, Some("https://evil.example"));
        assert_eq!(
            status(&app_with(None), foreign_origin).await,
            StatusCode::FORBIDDEN
        );
    }

    #[tokio::test]
    async fn foreign_origin_is_403_and_loopback_or_listed_origins_pass() {
        let config = config(&[]);
        for (origin, expected) in [
            ("https://evil.example", StatusCode::FORBIDDEN),
            ("http://app.example", StatusCode::FORBIDDEN), // scheme differs from the entry
            ("https://app.example:444", StatusCode::FORBIDDEN),
            ("http://localhost.evil.example", StatusCode::FORBIDDEN),
            ("null", StatusCode::FORBIDDEN),
            ("garbage", StatusCode::FORBIDDEN),
            ("http://localhost:3000", StatusCode::OK),
            ("https://127.0.0.1", StatusCode::OK),
            ("http://[::1]:8080", StatusCode::OK),
            ("https://app.example", StatusCode::OK),
            ("https://APP.example:443", StatusCode::OK),
        ] {
            let headers = [
                (header::HOST, Some(LOOPBACK)),
                (header::ORIGIN, Some(origin)),
            ];
            let got = status(&config, request("/mcp", &headers, Body::from("{}"))).await;
            assert_eq!(got, expected, "{origin}");
        }
    }

    #[tokio::test]
    async fn the_public_urls_origin_is_the_gateways_own() {
        let mut config = config(&[]);
        config.public_url = Some("https://gw.example:8443".into());
        for (origin, expected) in [
            ("https://gw.example:8443", StatusCode::OK),
            ("https://gw.example", StatusCode::FORBIDDEN),
            ("http://gw.example:8443", StatusCode::FORBIDDEN),
        ] {
            let headers = [
                (header::HOST, Some(LOOPBACK)),
                (header::ORIGIN, Some(origin)),
            ];
            let got = status(&config, request("/mcp", &headers, Body::from("{}"))).await;
            assert_eq!(got, expected, "{origin}");
        }
    }

    #[tokio::test]
    async fn foreign_or_missing_host_is_403_and_loopback_or_listed_hosts_pass() {
        let config = config(&[]);
        for (host, expected) in [
            (Some("evil.example"), StatusCode::FORBIDDEN),
            (Some("evil.example:8765"), StatusCode::FORBIDDEN),
            (Some("localhost.evil.example"), StatusCode::FORBIDDEN),
            (Some("192.168.1.5:8765"), StatusCode::FORBIDDEN),
            (Some("pinned.lan:9001"), StatusCode::FORBIDDEN),
            (Some("user@localhost"), StatusCode::FORBIDDEN),
            (None, StatusCode::FORBIDDEN),
            (Some("localhost"), StatusCode::OK),
            (Some("LOCALHOST:8765"), StatusCode::OK),
            (Some("127.0.0.1:1"), StatusCode::OK),
            (Some("[::1]:8765"), StatusCode::OK),
            (Some("gateway.lan:8765"), StatusCode::OK),
            (Some("pinned.lan:9000"), StatusCode::OK),
        ] {
            let got = status(
                &config,
                request("/mcp", &[(header::HOST, host)], Body::from("{}")),
            )
            .await;
            assert_eq!(got, expected, "{host:?}");
        }
    }

    /// [`config`] with `behind_proxy = true`, public name `gateway.lan`.
    fn behind_proxy(tokens: &[(&str, Option<&str>)]) -> ListenConfig {
        ListenConfig {
            behind_proxy: true,
            ..config(tokens)
        }
    }

    #[tokio::test]
    async fn behind_a_proxy_loopback_names_pass_no_check() {
        let config = behind_proxy(&[(TOKEN, None)]);
        let bearer = format!("Bearer {TOKEN}");
        let with = |host: &str, origin: Option<&str>| {
            let headers = [
                (header::HOST, Some(host)),
                (header::ORIGIN, origin),
                (header::AUTHORIZATION, Some(bearer.as_str())),
            ];
            request("/mcp", &headers, Body::from("{}"))
        };
        for (host, origin, expected) in [
            ("localhost", None, StatusCode::FORBIDDEN),
            (LOOPBACK, None, StatusCode::FORBIDDEN),
            ("[::1]:8765", None, StatusCode::FORBIDDEN),
            (
                "gateway.lan",
                Some("http://localhost:3000"),
                StatusCode::FORBIDDEN,
            ),
            ("gateway.lan", Some("https://app.example"), StatusCode::OK),
            ("gateway.lan:443", None, StatusCode::OK),
        ] {
            let got = status(&config, with(host, origin)).await;
            assert_eq!(got, expected, "{host} {origin:?}");
        }
    }

    #[tokio::test]
    async fn behind_a_proxy_the_console_is_off_unless_asked_for_and_tokens_are_needed() {
        let ui_get = || {
            request(
                "/ui/api/servers",
                &[(header::HOST, Some("gateway.lan"))],
                Body::empty(),
            )
        };
        // Off by default: `/ui` is guarded like any path (401 without a token).
        let off = behind_proxy(&[(TOKEN, None)]);
        assert!(!off.ui_enabled());
        assert_eq!(status(&off, ui_get()).await, StatusCode::UNAUTHORIZED);
        let on = ListenConfig {
            ui: Some(true),
            ..behind_proxy(&[(TOKEN, None)])
        };
        let guard = SecurityGuard::new(&on).unwrap();
        assert!(guard.tokens_required(), "the console asks for a token");
        assert!(guard.verify_token(b"").is_none());
        let code = |config: &ListenConfig| SecurityGuard::new(config).err().unwrap().code();
        assert_eq!(
            code(&behind_proxy(&[])),
            "LISTEN_BEHIND_PROXY_WITHOUT_TOKENS"
        );
        let nameless = ListenConfig {
            allowed_hosts: Vec::new(),
            ..behind_proxy(&[(TOKEN, None)])
        };
        assert_eq!(code(&nameless), "LISTEN_BEHIND_PROXY_WITHOUT_HOSTS");
    }

    #[tokio::test]
    async fn host_is_checked_before_the_token() {
        let bearer = format!("Bearer {TOKEN}");
        let request = post_mcp("evil.example", Some(&bearer), Body::empty());
        assert_eq!(
            status(&config(&[(TOKEN, None)]), request).await,
            StatusCode::FORBIDDEN
        );
    }

    #[tokio::test]
    async fn oversized_body_with_content_length_is_413() {
        let headers = [
            (header::HOST, Some(LOOPBACK)),
            (header::CONTENT_LENGTH, Some("65")),
        ];
        let request = request("/mcp", &headers, Body::from("x".repeat(65)));
        let (status, _, message) = send(&config(&[]), request).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(message.contains("64 bytes"), "{message}");
    }

    #[tokio::test]
    async fn body_at_the_limit_passes() {
        let (status, _, body) = send(
            &config(&[]),
            post_mcp(LOOPBACK, None, Body::from("x".repeat(64))),
        )
        .await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::OK, "identity=None profile=None bytes=64")
        );
    }

    fn chunked(chunks: usize) -> Body {
        let chunks = std::iter::repeat_n(Ok::<_, Infallible>("0123456789"), chunks);
        Body::from_stream(futures::stream::iter(chunks))
    }

    #[tokio::test]
    async fn oversized_chunked_body_is_413() {
        let got = status(&config(&[]), post_mcp(LOOPBACK, None, chunked(7))).await;
        assert_eq!(got, StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[tokio::test]
    async fn chunked_body_within_the_limit_arrives_whole() {
        let (status, _, body) = send(&config(&[]), post_mcp(LOOPBACK, None, chunked(6))).await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::OK, "identity=None profile=None bytes=60")
        );
    }

    #[tokio::test]
    async fn oversized_body_of_an_unauthenticated_request_gets_401_not_413() {
        let request = post_mcp(LOOPBACK, None, Body::from("x".repeat(100)));
        assert_eq!(
            status(&config(&[(TOKEN, None)]), request).await,
            StatusCode::UNAUTHORIZED
        );
    }

    #[test]
    fn loopback_bind_without_tokens_is_fine() {
        for address in [
            "127.0.0.1:8765",
            "[::1]:8765",
            "127.0.0.2:1",
            "[::ffff:127.0.0.1]:80",
        ] {
            assert!(
                check_bind(address.parse().unwrap(), false).is_ok(),
                "{address}"
            );
        }
    }

    #[test]
    fn non_loopback_bind_without_tokens_is_refused_with_the_reason() {
        for address in ["0.0.0.0:8765", "[::]:8765", "192.168.1.5:8765"] {
            let error = check_bind(address.parse().unwrap(), false).unwrap_err();
            assert_eq!(error.code(), "LISTEN_NON_LOOPBACK_WITHOUT_TOKENS");
            let message = error.to_string();
            for part in [address, "not a loopback address", "tokens", "127.0.0.1"] {
                assert!(message.contains(part), "{part:?} not in {message}");
            }
        }
        assert!(check_bind("0.0.0.0:8765".parse().unwrap(), true).is_ok());
    }

    #[test]
    fn config_parses_with_documented_defaults() {
        let config: ListenConfig = toml::from_str("").unwrap();
        assert_eq!(config, ListenConfig::default());
        assert_eq!(config.address, "127.0.0.1:8765".parse().unwrap());
        assert_eq!(config.max_body_bytes, 4_194_304);
        assert!(config.tokens.is_empty() && config.allowed_hosts.is_empty());
    }

    #[test]
    fn config_parses_both_token_forms_and_hides_them() {
        let config: ListenConfig = toml::from_str(
            r#"
            address = "0.0.0.0:9000"
            tokens = ["plain-token-of-16+", { token = "bound-token-of-16+", profile = "ci" },
                      { token = "admin-token-of-16+", operator = true }]
            allowed_origins = ["http://localhost:3000"]
            allowed_hosts = ["gateway.lan"]
            max_body_bytes = 1024
            "#,
        )
        .unwrap();
        assert_eq!(
            (
                config.tokens[0].token.as_str(),
                config.tokens[0].profile.as_deref()
            ),
            ("plain-token-of-16+", None)
        );
        assert_eq!(
            (
                config.tokens[1].token.as_str(),
                config.tokens[1].profile.as_deref()
            ),
            ("bound-token-of-16+", Some("ci"))
        );
        assert!(config.tokens[2].operator && config.tokens[2].profile.is_none());
        assert!(!config.tokens[0].operator && !config.tokens[1].operator);
        let shown = format!("{config:?} {}", serde_json::to_string(&config).unwrap());
        assert!(
            !shown.contains("plain-token")
                && !shown.contains("bound-token")
                && !shown.contains("admin-token"),
            "{shown}"
        );
        assert!(shown.contains("\"operator\":true"), "{shown}");
        assert!(shown.contains("ci"), "{shown}");
        assert!(SecurityGuard::new(&config).is_ok());
    }

    #[test]
    fn config_rejects_unknown_fields_empty_tokens_and_bad_entries() {
        for bad in [
            "adress = \"127.0.0.1:1\"",
            "tokens = [\"\"]",
            "tokens = [\"has space\"]",
            "tokens = [{ token = \"t\", profile = \"p\", extra = 1 }]",
            "tokens = [{ token = \"t\", operator = \"yes\" }]",
        ] {
            assert!(toml::from_str::<ListenConfig>(bad).is_err(), "{bad}");
        }
        let error = toml::from_str::<ListenConfig>("tokens = [\"\"]").unwrap_err();
        assert!(
            error.to_string().contains("environment variable"),
            "{error}"
        );

        let code = |config: &ListenConfig| SecurityGuard::new(config).err().unwrap().code();
        let mut config = config(&[(TOKEN, None), (TOKEN, Some("ci"))]);
        assert_eq!(code(&config), "LISTEN_DUPLICATE_TOKEN");
        config = self::config(&[("fifteen-chars-x", None)]);
        assert_eq!(code(&config), "LISTEN_INVALID_TOKEN");
        config.tokens.clear();
        config.allowed_hosts = vec!["bad host/x".to_owned()];
        assert_eq!(code(&config), "LISTEN_INVALID_ALLOWED_HOST");
        config.allowed_hosts.clear();
        config.allowed_origins = vec!["app.example".to_owned()];
        assert_eq!(code(&config), "LISTEN_INVALID_ALLOWED_ORIGIN");
        config.allowed_origins.clear();
        config.max_body_bytes = 0;
        assert_eq!(code(&config), "LISTEN_ZERO_BODY_LIMIT");
    }

    #[test]
    fn a_public_url_is_a_scheme_a_host_and_a_port() {
        for good in [
            "https://gateway.example",
            "http://127.0.0.1:8765/",
            "https://g.example:8443",
        ] {
            assert!(is_base_url(good), "{good}");
        }
        for bad in [
            "gateway.example",
            "ftp://g.example",
            "https://g.example/mcp",
            "https://u@g.example",
            "https://g.example/?a=1",
            "https://g.example#x",
        ] {
            assert!(!is_base_url(bad), "{bad}");
        }
    }
}
