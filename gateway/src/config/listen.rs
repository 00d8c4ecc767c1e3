//! The `[listen]` section: where the HTTP listener binds, who may use it and how much one
//! request or one client may take. The guard that enforces the access rules is
//! [`crate::listener_guard`]; the connection loop that enforces the connection limits is
//! [`crate::server::http::connections`].
//!
//! ```toml
//! [listen]
//! address = "127.0.0.1:8765"             # default; a non-loopback address needs tokens
//! tokens = ["${GATEWAY_TOKEN}"]          # bearer tokens, 16 characters at least; empty
//!                                        # (the default) = no auth
//! # tokens = [{ token = "${CI_TOKEN}", profile = "ci" }]   # a token bound to a profile
//! # tokens = [{ token = "${ADMIN_TOKEN}", operator = true }] # may also use the console
//! allowed_origins = ["https://app.example:8443"]  # loopback origins are always accepted
//! allowed_hosts = ["gateway.lan"]        # Host names accepted besides loopback ones
//! max_body_bytes = 4194304               # default 4 MiB; larger bodies get 413
//! header_timeout_ms = 10000              # default 10 s to send a request head, then closed
//! max_connections = 512                  # default; further clients wait to be accepted
//! ui = true                              # the operator console at /ui; default: on loopback
//! behind_proxy = false                   # true: requests come through a reverse proxy
//! public_url = "https://gateway.example"  # where browsers reach it (per-user sign-ins)
//! [listen.oauth]                         # also accept an identity provider's JWT access tokens
//! issuer = "https://login.example.com"   # see `auth::resource` for every field
//! audience = "https://gateway.example/mcp"
//! [listen.limits]                        # what one client may hold: see [`ClientLimits`]
//! max_parked_per_session = 32
//! ```

use std::fmt;
use std::net::SocketAddr;
use std::num::{NonZeroU64, NonZeroUsize};
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

/// The `[listen]` section of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ListenConfig {
    /// Address to bind. Default `127.0.0.1:8765`. Binding a non-loopback address without
    /// tokens is refused by [`crate::listener_guard::check_bind`].
    #[serde(default = "default_address")]
    pub address: SocketAddr,
    /// Bearer tokens accepted on every route, each at least [`MIN_TOKEN_LENGTH`] (16)
    /// characters once `${VAR}` is expanded. Default: none, which means no authentication
    /// (acceptable only on loopback), and whoever reaches the loopback listener is the
    /// operator. With tokens, only those marked `operator = true` open the console.
    #[serde(default)]
    pub tokens: Vec<TokenConfig>,
    /// Origins accepted besides loopback ones, such as `"https://app.example:8443"`; the
    /// scheme's default port may be left out. `"null"` admits sandboxed pages. Default: none.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Host names accepted besides `localhost`, `127.0.0.1` and `[::1]`: `"name"` (any port)
    /// or `"name:port"`. Needed when clients reach a non-loopback address. Default: none.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Largest accepted request body in bytes. Default 4 MiB (4194304).
    #[serde(default = "default_max_body_bytes")]
    pub max_body_bytes: usize,
    /// How long a client may take to send a request head (on a new connection, or between
    /// requests on a kept-alive one) before the connection is closed, so idle or trickling
    /// connections cannot pile up (slowloris). Default 10000 (10 s).
    #[serde(default = "default_header_timeout_ms")]
    pub header_timeout_ms: NonZeroU64,
    /// Connections served at once; more clients wait in the kernel's accept queue until one
    /// closes. Every open SSE stream holds one. Default 512.
    #[serde(default = "default_max_connections")]
    pub max_connections: NonZeroUsize,
    /// Whether the operator console is served at `/ui`. Default: on when `address` is a
    /// loopback address and not [`Self::behind_proxy`], off otherwise (see
    /// [`Self::ui_enabled`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ui: Option<bool>,
    /// Whether clients reach the gateway through a reverse proxy (HAProxy, nginx, an
    /// ingress) on this machine or network. Then a loopback peer is the proxy, not a local
    /// user: loopback Host names and Origins are not accepted by themselves (only
    /// `allowed_hosts` and `allowed_origins`, the public names, which must be set), tokens
    /// are required whatever the address (for the console too), and the console is off
    /// unless `ui = true`. Default false.
    #[serde(default)]
    pub behind_proxy: bool,
    /// `[listen.oauth]`: accept an identity provider's access tokens besides `tokens`.
    /// Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<super::listen_oauth::ResourceConfig>,
    /// `[listen.limits]`: what one client may hold at once.
    #[serde(default)]
    pub limits: ClientLimits,
    /// The URL people's browsers reach this listener at (`https://gateway.example`), under
    /// which per-user sign-ins begin (`/oauth/sign-in`) and come back (`/oauth/callback`).
    /// Default: `http://` and `address`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
}

/// `[listen.limits]`: how much one client may hold at once, so that nothing one client
/// sends can exhaust the gateway. An identity is what the client's credentials name (a
/// token, or an identity provider's subject); clients without credentials share one.
/// Each limit, when reached, refuses what would pass it with an error code of its own
/// (docs/error-codes.md).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientLimits {
    /// Calls of one session waiting for the input their client was asked for (protocol
    /// 2026-07-28), beyond which a call that asks is cancelled (`PARKED_SESSION_LIMIT`).
    /// Default 32.
    pub max_parked_per_session: NonZeroUsize,
    /// The same across every session of one identity (`PARKED_IDENTITY_LIMIT`). Default
    /// 128.
    pub max_parked_per_identity: NonZeroUsize,
    /// How long a parked call waits for its client's next round before a timer cancels it
    /// (`INPUT_EXPIRED`). Default 300.
    pub parked_ttl_secs: NonZeroU64,
    /// How long a question asked of a client may stay unanswered, over all its rounds,
    /// before the call is cancelled (`INPUT_EXPIRED`): a client that retries without
    /// answering cannot keep a call forever. A task of the gateway's own whose question
    /// stays unanswered this long (no `tasks/update` answers it) fails the same way, so it
    /// frees its upstream before its TTL. Default 600.
    pub input_deadline_secs: NonZeroU64,
    /// Sessions serving requests of 2026-07-28 (one per identity and profile) kept per
    /// endpoint; past it, those serving no request are ended, their parked calls with
    /// them. Default 256.
    pub stateless_sessions: NonZeroUsize,
    /// Messages in one legacy SSE `POST /message` batch (`SSE_BATCH_TOO_LONG`, 413).
    /// Default 64.
    pub max_batch: NonZeroUsize,
    /// Requests of one legacy SSE session running at once; a `POST` that would pass it
    /// is refused whole (`SSE_IN_FLIGHT_LIMIT`, 429). Default 64.
    pub max_in_flight_per_session: NonZeroUsize,
    /// The same across every legacy SSE session of one identity
    /// (`SSE_IDENTITY_IN_FLIGHT_LIMIT`, 429). Default 256.
    pub max_in_flight_per_identity: NonZeroUsize,
    /// Event streams one identity may hold open: `GET /sse`, a session's `GET /mcp` and
    /// `subscriptions/listen` (`STREAM_LIMIT`, 429). Default 64.
    pub max_streams_per_identity: NonZeroUsize,
    /// Tasks of the gateway's own one identity may have running (2026-07-28); past it, a
    /// call that runs long stays a call of its request (`TASK_LIMIT` is logged). Default
    /// 64.
    pub max_tasks_per_identity: NonZeroUsize,
}

impl Default for ClientLimits {
    fn default() -> Self {
        let count = |n: usize| NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN);
        let secs = |n: u64| NonZeroU64::new(n).unwrap_or(NonZeroU64::MIN);
        Self {
            max_parked_per_session: count(32),
            max_parked_per_identity: count(128),
            parked_ttl_secs: secs(300),
            input_deadline_secs: secs(600),
            stateless_sessions: count(256),
            max_batch: count(64),
            max_in_flight_per_session: count(64),
            max_in_flight_per_identity: count(256),
            max_streams_per_identity: count(64),
            max_tasks_per_identity: count(64),
        }
    }
}

impl ClientLimits {
    /// [`Self::parked_ttl_secs`] as a duration.
    pub fn parked_ttl(&self) -> Duration {
        Duration::from_secs(self.parked_ttl_secs.get())
    }

    /// [`Self::input_deadline_secs`] as a duration.
    pub fn input_deadline(&self) -> Duration {
        Duration::from_secs(self.input_deadline_secs.get())
    }
}

impl ListenConfig {
    /// [`Self::public_url`], else `http://` and the address.
    pub fn public_base(&self) -> String {
        self.public_url
            .clone()
            .unwrap_or_else(|| format!("http://{}", self.address))
    }

    /// [`Self::header_timeout_ms`] as a duration.
    pub fn header_timeout(&self) -> Duration {
        Duration::from_millis(self.header_timeout_ms.get())
    }

    /// Whether `/ui` is served: `ui` when set, else whether the listener is loopback-only
    /// and not behind a proxy.
    pub fn ui_enabled(&self) -> bool {
        self.ui
            .unwrap_or_else(|| self.address.ip().is_loopback() && !self.behind_proxy)
    }

    /// Whether any bearer token is configured, static or `[listen.oauth]`.
    pub fn has_tokens(&self) -> bool {
        !self.tokens.is_empty() || self.oauth.is_some()
    }

    /// What keeps this section from being served behind a proxy, when `behind_proxy` is
    /// set; `None` when nothing does.
    pub fn proxy_problem(&self) -> Option<ProxyProblem> {
        if !self.behind_proxy {
            None
        } else if !self.has_tokens() {
            Some(ProxyProblem::NoTokens)
        } else if self.allowed_hosts.is_empty() {
            Some(ProxyProblem::NoPublicHosts)
        } else {
            None
        }
    }
}

/// Why `behind_proxy = true` cannot be served as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProxyProblem {
    #[error(
        "behind_proxy = true needs tokens (or [listen.oauth]): behind a proxy every request \
         comes from the proxy, so none can be trusted as a local user's"
    )]
    NoTokens,
    #[error(
        "behind_proxy = true needs allowed_hosts: the public host names clients reach the \
         gateway by (loopback names are not accepted behind a proxy)"
    )]
    NoPublicHosts,
}

impl ProxyProblem {
    /// A stable code for logs and tests.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoTokens => "LISTEN_BEHIND_PROXY_WITHOUT_TOKENS",
            Self::NoPublicHosts => "LISTEN_BEHIND_PROXY_WITHOUT_HOSTS",
        }
    }
}

fn default_address() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8765))
}

fn default_max_body_bytes() -> usize {
    4 * 1024 * 1024
}

fn default_header_timeout_ms() -> NonZeroU64 {
    NonZeroU64::new(10_000).expect("not zero")
}

fn default_max_connections() -> NonZeroUsize {
    NonZeroUsize::new(512).expect("not zero")
}

impl Default for ListenConfig {
    fn default() -> Self {
        Self {
            address: default_address(),
            tokens: Vec::new(),
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            max_body_bytes: default_max_body_bytes(),
            header_timeout_ms: default_header_timeout_ms(),
            max_connections: default_max_connections(),
            ui: None,
            behind_proxy: false,
            oauth: None,
            limits: ClientLimits::default(),
            public_url: None,
        }
    }
}

/// One accepted bearer token: written as a plain string (a caller), or as a table
/// `{ token, profile, operator }` to bind the token to a profile or to make its holder an
/// operator, who may use the console. Debug and Serialize never show the token itself.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenConfig {
    pub token: String,
    pub profile: Option<String>,
    /// Whether whoever holds this token may use the operator console (`/ui`), which shows
    /// everyone's calls and sign-ins and changes what everyone uses. Default false: a
    /// token is a caller's only.
    pub operator: bool,
}

impl fmt::Debug for TokenConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenConfig")
            .field("token", &"***")
            .field("profile", &self.profile)
            .field("operator", &self.operator)
            .finish()
    }
}

impl Serialize for TokenConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Masked<'a> {
            token: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            profile: Option<&'a str>,
            #[serde(skip_serializing_if = "std::ops::Not::not")]
            operator: bool,
        }
        if self.profile.is_none() && !self.operator {
            return serializer.serialize_str("***");
        }
        Masked {
            token: "***",
            profile: self.profile.as_deref(),
            operator: self.operator,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for TokenConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Table {
            token: String,
            #[serde(default)]
            profile: Option<String>,
            #[serde(default)]
            operator: bool,
        }

        struct TokenVisitor;

        impl<'de> de::Visitor<'de> for TokenVisitor {
            type Value = TokenConfig;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a token string or a table { token = \"...\", profile = \"NAME\", \
                     operator = true }",
                )
            }

            fn visit_str<E: de::Error>(self, token: &str) -> Result<TokenConfig, E> {
                validate_token_text(token).map_err(E::custom)?;
                Ok(TokenConfig {
                    token: token.to_owned(),
                    profile: None,
                    operator: false,
                })
            }

            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<TokenConfig, A::Error> {
                let table = Table::deserialize(de::value::MapAccessDeserializer::new(map))?;
                validate_token_text(&table.token).map_err(de::Error::custom)?;
                Ok(TokenConfig {
                    token: table.token,
                    profile: table.profile,
                    operator: table.operator,
                })
            }
        }

        deserializer.deserialize_any(TokenVisitor)
    }
}

/// The fewest characters a bearer token may have: a short token can be guessed.
pub const MIN_TOKEN_LENGTH: usize = 16;

/// The code of a refused token, wherever it is refused (at load, or by the listener).
pub const INVALID_TOKEN: &str = "LISTEN_INVALID_TOKEN";

/// Why a token (with its `${VAR}` references expanded) cannot be used, or `Ok` when it can.
pub(crate) fn validate_token(token: &str) -> Result<(), &'static str> {
    validate_token_text(token)?;
    if token.len() < MIN_TOKEN_LENGTH {
        return Err(
            "a bearer token must have at least 16 characters (make one with `openssl rand -hex 32`)",
        );
    }
    Ok(())
}

/// What can be checked of a token as written, before `${VAR}` expansion.
fn validate_token_text(token: &str) -> Result<(), &'static str> {
    if token.is_empty() {
        return Err("empty bearer token (is the environment variable it comes from set?)");
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("a bearer token may only contain visible ASCII characters (no spaces)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_limits_have_documented_defaults_and_refuse_zero() {
        let config: ListenConfig = toml::from_str("").unwrap();
        assert_eq!(config.header_timeout(), Duration::from_secs(10));
        assert_eq!(config.max_connections.get(), 512);
        let config: ListenConfig =
            toml::from_str("header_timeout_ms = 2500\nmax_connections = 8").unwrap();
        assert_eq!(config.header_timeout(), Duration::from_millis(2500));
        assert_eq!(config.max_connections.get(), 8);
        assert!(
            config.ui_enabled(),
            "the console is on by default on loopback"
        );
        for zero in ["header_timeout_ms = 0", "max_connections = 0"] {
            let error = toml::from_str::<ListenConfig>(zero).unwrap_err();
            assert!(error.to_string().contains("nonzero"), "{zero}: {error}");
        }
    }

    #[test]
    fn client_limits_have_documented_defaults_and_refuse_zero() {
        let limits = toml::from_str::<ListenConfig>("").unwrap().limits;
        assert_eq!(limits, ClientLimits::default());
        assert_eq!(limits.max_parked_per_session.get(), 32);
        assert_eq!(limits.parked_ttl(), Duration::from_secs(300));
        let config: ListenConfig =
            toml::from_str("[limits]\nmax_batch = 4\nparked_ttl_secs = 2").unwrap();
        assert_eq!(config.limits.max_batch.get(), 4);
        assert_eq!(config.limits.parked_ttl(), Duration::from_secs(2));
        assert!(toml::from_str::<ListenConfig>("[limits]\nmax_batch = 0").is_err());
    }

    #[test]
    fn behind_a_proxy_tokens_and_public_host_names_are_needed() {
        let parse = |text: &str| toml::from_str::<ListenConfig>(text).unwrap();
        assert!(!parse("").behind_proxy, "off by default");
        assert_eq!(parse("").proxy_problem(), None);
        let proxied = "behind_proxy = true\n";
        assert_eq!(parse(proxied).proxy_problem(), Some(ProxyProblem::NoTokens));
        let tokens = "tokens = [\"a-token-of-sixteen\"]\n";
        assert_eq!(
            parse(&format!("{proxied}{tokens}")).proxy_problem(),
            Some(ProxyProblem::NoPublicHosts)
        );
        let hosts = "allowed_hosts = [\"gateway.example\"]\n";
        assert_eq!(
            parse(&format!("{proxied}{tokens}{hosts}")).proxy_problem(),
            None
        );
    }

    #[test]
    fn the_console_is_off_off_loopback_unless_enabled() {
        let wide: ListenConfig = toml::from_str("address = \"0.0.0.0:8765\"").unwrap();
        assert!(!wide.ui_enabled());
        let enabled: ListenConfig =
            toml::from_str("address = \"0.0.0.0:8765\"\nui = true").unwrap();
        assert!(enabled.ui_enabled());
        let proxied: ListenConfig = toml::from_str("behind_proxy = true").unwrap();
        assert!(!proxied.ui_enabled(), "off behind a proxy");
        let disabled: ListenConfig = toml::from_str("ui = false").unwrap();
        assert!(!disabled.ui_enabled());
    }
}
