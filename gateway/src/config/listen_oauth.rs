//! `[listen.oauth]`: the identity provider whose JWT access tokens the listener accepts,
//! besides `[listen] tokens`, and the profile each scope picks; `crate::auth::resource`
//! checks tokens against it.
//!
//! ```toml
//! [listen.oauth]
//! issuer = "https://idp.example"            # tokens' `iss`; its metadata names the JWKS
//! # jwks_url = "https://idp.example/jwks"   # the JWKS outright (then issuer is optional)
//! audience = "https://gateway.example/mcp"  # tokens' `aud` must contain it
//! # resource = "https://gateway.example/mcp" # published identifier, default: audience
//! algorithms = ["RS256"]                    # default; never `none` nor a shared secret (HS*)
//! leeway_secs = 30                          # clock skew allowed on exp and nbf, default 30
//! jwks_max_age_secs = 3600                  # keys older than this are not used, default 1 h
//! [listen.oauth.scopes]                     # scope = profile its tokens get; first listed wins
//! "mcp:admin" = "admin"
//! "mcp:read" = "readonly"
//! ```

use std::fmt;
use std::num::NonZeroU64;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de, ser::SerializeMap};

/// The `[listen.oauth]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceConfig {
    /// The authorization server whose tokens are accepted: tokens' `iss` must equal it, and
    /// unless `jwks_url` is set its metadata (RFC 8414, else OpenID discovery) names the JWKS.
    #[serde(default)]
    pub issuer: Option<String>,
    /// The JWKS URL, when it is not to be discovered from the issuer.
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// What tokens' `aud` must contain: the identifier clients ask the provider for.
    pub audience: String,
    /// The resource identifier published in the metadata, an `http(s)` URL. Default: the
    /// audience.
    #[serde(default)]
    pub resource: Option<String>,
    /// Accepted signature algorithms. Default `["RS256"]`. Only public-key algorithms exist
    /// here: `none` and the shared-secret `HS*` are not accepted.
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<SigningAlgorithm>,
    /// Seconds of clock skew allowed when checking `exp` and `nbf`. Default 30.
    #[serde(default = "default_leeway_secs")]
    pub leeway_secs: u64,
    /// How old the provider's keys may be, in seconds since the JWKS last answered: the
    /// set is fetched again every five minutes (or after half this, when sooner), and when
    /// it cannot be, the keys kept serve until they are this old; then every token is
    /// refused with 503 until the provider answers. Bounds how long a key the provider
    /// withdrew stays trusted while it cannot be asked. Default 3600 (an hour).
    #[serde(default = "default_jwks_max_age_secs")]
    pub jwks_max_age_secs: NonZeroU64,
    /// Scopes mapped to profiles, in order. Empty (the default): any valid token is
    /// admitted, with the profile of the path it uses.
    #[serde(default, skip_serializing_if = "ScopeProfiles::is_empty")]
    pub scopes: ScopeProfiles,
    /// The client the gateway signs a person in at the provider as, when a per-user sign-in
    /// must find out who is at the browser (`auth::browser`). Default: none, and the
    /// gateway registers a client of its own (RFC 7591) where the provider allows it.
    #[serde(default)]
    pub client_id: Option<String>,
    /// That client's secret, when it is a confidential one. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
}

fn default_algorithms() -> Vec<SigningAlgorithm> {
    vec![SigningAlgorithm::RS256]
}

fn default_leeway_secs() -> u64 {
    30
}

fn default_jwks_max_age_secs() -> NonZeroU64 {
    NonZeroU64::new(3600).expect("not zero")
}

/// A public-key JWS algorithm (RFC 7518); the names are the JOSE ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum SigningAlgorithm {
    RS256,
    RS384,
    RS512,
    PS256,
    PS384,
    PS512,
    ES256,
    ES384,
    EdDSA,
}

/// `[listen.oauth.scopes]`: scope → profile, in the order written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeProfiles(pub Vec<(String, String)>);

impl ScopeProfiles {
    /// Whether no scope is mapped (any valid token is admitted).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for ScopeProfiles {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (scope, profile) in &self.0 {
            map.serialize_entry(scope, profile)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ScopeProfiles {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Ordered;

        impl<'de> de::Visitor<'de> for Ordered {
            type Value = ScopeProfiles;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of scope = \"profile\"")
            }

            fn visit_map<A: de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<ScopeProfiles, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, String>()? {
                    entries.push(entry);
                }
                Ok(ScopeProfiles(entries))
            }
        }

        deserializer.deserialize_map(Ordered)
    }
}
