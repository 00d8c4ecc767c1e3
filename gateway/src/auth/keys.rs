//! Where the keys that sign access tokens come from: the identity provider's JWKS, found
//! through its metadata (RFC 8414 or OpenID discovery) or named outright, fetched on first
//! use and kept.
//!
//! Identity providers rotate keys by publishing the new one and signing with it soon after,
//! so a token whose `kid` is not in the cached set makes the set be fetched again, once. A
//! provider withdraws a key (compromised, retired) by no longer publishing it, so the set is
//! also fetched again once it is [`KeyAges::refresh_after`] old, and a key is trusted only
//! as long as the provider published it recently: when the set cannot be fetched again,
//! the keys kept serve until they are [`KeyAges::max_age`] old (`[listen.oauth]
//! jwks_max_age_secs`), and then no token can be checked (the listener answers 503) until
//! the provider answers again. A stranger sending made-up key ids must not turn the gateway
//! into a fetch loop against the provider: fetches are one at a time and at most one per
//! [`REFETCH_COOLDOWN`], failed ones included; a key id still unknown after that is
//! refused, not waited for.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;

/// A cached set older than this is fetched again before use (sooner when the age bound
/// asks for it, see [`KeyAges`]).
const REFRESH_AFTER: Duration = Duration::from_secs(300);
/// Two fetches are at least this far apart, whatever the tokens ask for.
pub const REFETCH_COOLDOWN: Duration = Duration::from_secs(1);
/// How long one metadata or JWKS request may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest metadata or JWKS document accepted.
const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// Where the JWKS is: at a known URL, or named by the issuer's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyOrigin {
    Jwks(String),
    Issuer(String),
}

/// How old the cached keys may grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyAges {
    /// Keys fetched longer ago than this are never used: when the set cannot be fetched
    /// again, tokens are refused as [`KeyError::Unavailable`].
    pub max_age: Duration,
}

impl KeyAges {
    /// When a set is fetched again before use: after five minutes, or after half the
    /// maximum age when that is sooner, so a provider that does not answer for a while
    /// still leaves the kept keys some time to serve.
    pub fn refresh_after(&self) -> Duration {
        REFRESH_AFTER.min(self.max_age / 2)
    }
}

/// Why no key could be had for a token.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("no key with id {0:?} in the identity provider's key set")]
    UnknownKey(String),
    #[error("no key in the identity provider's key set fits algorithm {0:?}")]
    NoFittingKey(Algorithm),
    #[error("the identity provider's keys cannot be fetched: {0}")]
    Unavailable(String),
}

/// The signing keys of one identity provider, fetched on demand and cached.
pub struct KeySource {
    origin: KeyOrigin,
    ages: KeyAges,
    http: reqwest::Client,
    cached: RwLock<Arc<Cached>>,
    /// Held while fetching, so fetches never overlap; the JWKS URL once discovered.
    fetching: tokio::sync::Mutex<Option<String>>,
}

#[derive(Default)]
struct Cached {
    keys: Vec<Jwk>,
    /// When the provider last published `keys`: their age.
    fetched_at: Option<Instant>,
    /// When a fetch was last tried, whether it succeeded or not.
    attempted_at: Option<Instant>,
}

impl Cached {
    /// Whether the keys are younger than `age`.
    fn younger_than(&self, age: Duration) -> bool {
        self.fetched_at.is_some_and(|at| at.elapsed() < age)
    }

    fn recently_attempted(&self) -> bool {
        self.attempted_at
            .is_some_and(|at| at.elapsed() < REFETCH_COOLDOWN)
    }

    /// The keys that may have signed a token with this header.
    fn candidates(&self, kid: Option<&str>, alg: Algorithm) -> Vec<&Jwk> {
        self.keys
            .iter()
            .filter(|jwk| kid.is_none_or(|kid| jwk.common.key_id.as_deref() == Some(kid)))
            .filter(|jwk| fits(jwk, alg))
            .collect()
    }
}

/// Whether `jwk` is a public signing key of the family `alg` belongs to. Symmetric (`oct`)
/// keys never fit: a published secret is no secret.
fn fits(jwk: &Jwk, alg: Algorithm) -> bool {
    if jwk.common.public_key_use == Some(PublicKeyUse::Encryption) {
        return false;
    }
    match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => matches!(
            alg,
            Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512
        ),
        AlgorithmParameters::EllipticCurve(_) => {
            matches!(alg, Algorithm::ES256 | Algorithm::ES384)
        }
        AlgorithmParameters::OctetKeyPair(_) => alg == Algorithm::EdDSA,
        _ => false,
    }
}

impl KeySource {
    pub fn new(origin: KeyOrigin, ages: KeyAges) -> Self {
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .build()
            .unwrap_or_default();
        Self {
            origin,
            ages,
            http,
            cached: RwLock::new(Arc::default()),
            fetching: tokio::sync::Mutex::new(None),
        }
    }

    /// The keys that may verify a token signed with `alg` under key id `kid` (every fitting
    /// key when the token names none). Fetches the set when it is missing or due for a
    /// refresh, or when `kid` is unknown and the last fetch is past the cooldown; keys past
    /// the maximum age are never returned.
    pub async fn keys_for(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<Vec<DecodingKey>, KeyError> {
        let cached = self.snapshot();
        let usable = cached.younger_than(self.ages.refresh_after())
            && !cached.candidates(kid, alg).is_empty();
        let cached = if usable {
            cached
        } else {
            self.refresh(&cached).await?
        };
        if !cached.younger_than(self.ages.max_age) {
            return Err(KeyError::Unavailable(format!(
                "no key set was fetched in the last {} s (jwks_max_age_secs)",
                self.ages.max_age.as_secs()
            )));
        }
        let candidates = cached.candidates(kid, alg);
        if candidates.is_empty() {
            return Err(match kid {
                Some(kid) => KeyError::UnknownKey(kid.to_owned()),
                None => KeyError::NoFittingKey(alg),
            });
        }
        Ok(candidates
            .into_iter()
            .filter_map(|jwk| DecodingKey::from_jwk(jwk).ok())
            .collect())
    }

    fn snapshot(&self) -> Arc<Cached> {
        self.cached
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Fetches the set again unless another caller did since `seen`, or the last attempt
    /// is within the cooldown. A failed fetch keeps the old keys, whose age goes on (the
    /// caller refuses them past the maximum); with none to keep, it is the error.
    async fn refresh(&self, seen: &Arc<Cached>) -> Result<Arc<Cached>, KeyError> {
        let mut jwks_url = self.fetching.lock().await;
        let current = self.snapshot();
        if !Arc::ptr_eq(&current, seen) || current.recently_attempted() {
            return Ok(current);
        }
        let known = jwks_url.clone();
        let url = match (known, &self.origin) {
            (Some(url), _) => url,
            (None, KeyOrigin::Jwks(url)) => url.clone(),
            // Discovery runs until it succeeds once, before any key is known.
            (None, KeyOrigin::Issuer(issuer)) => {
                let url = self.discover_jwks_url(issuer).await?;
                jwks_url.insert(url).clone()
            }
        };
        let fetched = self.fetch_keys(&url).await;
        let now = Some(Instant::now());
        let (next, outcome) = match fetched {
            Ok(keys) => (
                Cached {
                    keys,
                    fetched_at: now,
                    attempted_at: now,
                },
                Ok(()),
            ),
            Err(error) => {
                let kept = current.younger_than(self.ages.max_age);
                if kept {
                    tracing::warn!(%error, "kept the identity provider's previous keys");
                }
                let next = Cached {
                    keys: if kept {
                        current.keys.clone()
                    } else {
                        Vec::new()
                    },
                    fetched_at: current.fetched_at.filter(|_| kept),
                    attempted_at: now,
                };
                (next, if kept { Ok(()) } else { Err(error) })
            }
        };
        let next = Arc::new(next);
        *self
            .cached
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = next.clone();
        outcome.map(|()| next)
    }

    async fn fetch_keys(&self, url: &str) -> Result<Vec<Jwk>, KeyError> {
        #[derive(Deserialize)]
        struct Set {
            keys: Vec<serde_json::Value>,
        }
        let set: Set = fetch_json(&self.http, url).await?;
        // One key the crate cannot read must not hide the others.
        Ok(set
            .keys
            .into_iter()
            .filter_map(|key| serde_json::from_value(key).ok())
            .collect())
    }

    /// The issuer's `jwks_uri`, from the first metadata document that answers, whose
    /// `issuer` must be the configured one (RFC 8414 section 3.3).
    async fn discover_jwks_url(&self, issuer: &str) -> Result<String, KeyError> {
        #[derive(Deserialize)]
        struct Metadata {
            issuer: String,
            jwks_uri: Option<String>,
        }
        let mut errors = Vec::new();
        for url in metadata_urls(issuer)? {
            match fetch_json::<Metadata>(&self.http, &url).await {
                Ok(metadata) if metadata.issuer != issuer => errors.push(format!(
                    "{url} names issuer {:?}, not {issuer:?}",
                    metadata.issuer
                )),
                Ok(Metadata {
                    jwks_uri: Some(jwks_uri),
                    ..
                }) => return Ok(jwks_uri),
                Ok(_) => errors.push(format!("{url} has no jwks_uri")),
                Err(error) => errors.push(error.to_string()),
            }
        }
        Err(KeyError::Unavailable(errors.join("; ")))
    }
}

/// The metadata locations of `issuer`, in the order the MCP authorization spec tries them:
/// RFC 8414 with the path inserted after `/.well-known/…`, OpenID discovery the same way,
/// then OpenID discovery appended to the issuer's path.
pub fn metadata_urls(issuer: &str) -> Result<Vec<String>, KeyError> {
    let url = url::Url::parse(issuer)
        .map_err(|error| KeyError::Unavailable(format!("issuer {issuer:?}: {error}")))?;
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    let mut urls = vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
    ];
    if !path.is_empty() {
        urls.push(format!("{origin}{path}/.well-known/openid-configuration"));
    }
    Ok(urls)
}

/// GETs `url` and reads a JSON document of at most [`MAX_DOCUMENT_BYTES`].
async fn fetch_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
) -> Result<T, KeyError> {
    let failed = |reason: String| KeyError::Unavailable(format!("{url}: {reason}"));
    let mut response = http
        .get(url)
        .header(http::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|error| failed(error.to_string()))?;
    if !response.status().is_success() {
        return Err(failed(format!("HTTP {}", response.status())));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| failed(error.to_string()))?
    {
        if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
            return Err(failed(format!("larger than {MAX_DOCUMENT_BYTES} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|error| failed(error.to_string()))
}

#[cfg(test)]
mod tests {
    use axum::response::IntoResponse;

    use super::*;

    #[test]
    fn metadata_urls_follow_the_spec_order() {
        assert_eq!(
            metadata_urls("https://idp.example").unwrap(),
            [
                "https://idp.example/.well-known/oauth-authorization-server",
                "https://idp.example/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            metadata_urls("https://idp.example/tenant1/").unwrap(),
            [
                "https://idp.example/.well-known/oauth-authorization-server/tenant1",
                "https://idp.example/.well-known/openid-configuration/tenant1",
                "https://idp.example/tenant1/.well-known/openid-configuration",
            ]
        );
        assert!(metadata_urls("not a url").is_err());
    }

    fn jwk(json: serde_json::Value) -> Jwk {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn only_public_signing_keys_of_the_token_family_fit() {
        let rsa = jwk(serde_json::json!({"kty": "RSA", "kid": "r", "n": "AQAB", "e": "AQAB"}));
        let rsa_enc = jwk(
            serde_json::json!({"kty": "RSA", "use": "enc", "kid": "e", "n": "AQAB", "e": "AQAB"}),
        );
        let oct = jwk(serde_json::json!({"kty": "oct", "kid": "s", "k": "c2VjcmV0"}));
        assert!(fits(&rsa, Algorithm::RS256) && fits(&rsa, Algorithm::PS512));
        assert!(!fits(&rsa, Algorithm::ES256) && !fits(&rsa, Algorithm::HS256));
        assert!(!fits(&rsa_enc, Algorithm::RS256));
        assert!(!fits(&oct, Algorithm::HS256));
        let cached = Cached {
            keys: vec![rsa, rsa_enc, oct],
            ..Cached::default()
        };
        assert_eq!(cached.candidates(Some("r"), Algorithm::RS256).len(), 1);
        assert_eq!(cached.candidates(None, Algorithm::RS256).len(), 1);
        assert!(cached.candidates(Some("x"), Algorithm::RS256).is_empty());
        assert!(cached.candidates(Some("s"), Algorithm::HS256).is_empty());
    }

    /// A JWKS endpoint on 127.0.0.1:0 whose answer the test sets: a key set, or 503.
    struct Provider {
        published: Arc<std::sync::Mutex<Option<serde_json::Value>>>,
        url: String,
    }

    impl Provider {
        async fn start() -> Provider {
            let published = Arc::new(std::sync::Mutex::new(None::<serde_json::Value>));
            let answer = published.clone();
            let app = axum::Router::new().route(
                "/jwks",
                axum::routing::get(move || {
                    let set = answer.lock().unwrap().clone();
                    async move {
                        match set {
                            Some(set) => axum::Json(set).into_response(),
                            None => http::StatusCode::SERVICE_UNAVAILABLE.into_response(),
                        }
                    }
                }),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}/jwks", listener.local_addr().unwrap());
            tokio::spawn(async move { axum::serve(listener, app).await });
            Provider { published, url }
        }

        /// Publishes RSA keys with these ids; `None`: the endpoint answers 503.
        fn publish(&self, kids: Option<&[&str]>) {
            let set = kids.map(|kids| {
                let keys: Vec<_> = kids
                    .iter()
                    .map(|kid| serde_json::json!({"kty": "RSA", "kid": kid, "n": "AQAB", "e": "AQAB"}))
                    .collect();
                serde_json::json!({ "keys": keys })
            });
            *self.published.lock().unwrap() = set;
        }

        fn source(&self, max_age: Duration) -> KeySource {
            KeySource::new(KeyOrigin::Jwks(self.url.clone()), KeyAges { max_age })
        }
    }

    /// Past the refetch cooldown, and past `age`.
    async fn wait_past(age: Duration) {
        tokio::time::sleep(age.max(REFETCH_COOLDOWN) + Duration::from_millis(100)).await;
    }

    #[test]
    fn sets_are_refreshed_every_five_minutes_or_at_half_the_maximum_age() {
        let refresh = |secs| {
            KeyAges {
                max_age: Duration::from_secs(secs),
            }
            .refresh_after()
        };
        assert_eq!(refresh(3600), Duration::from_secs(300));
        assert_eq!(refresh(120), Duration::from_secs(60));
    }

    #[tokio::test]
    async fn a_key_withdrawn_from_the_set_stops_being_trusted_at_the_refetch() {
        let provider = Provider::start().await;
        provider.publish(Some(&["old", "new"]));
        let max_age = Duration::from_secs(2);
        let keys = provider.source(max_age);
        assert_eq!(
            keys.keys_for(Some("old"), Algorithm::RS256)
                .await
                .unwrap()
                .len(),
            1
        );
        provider.publish(Some(&["new"]));
        // Half the maximum age: the set is due for a refresh.
        wait_past(Duration::from_secs(1)).await;
        assert!(matches!(
            keys.keys_for(Some("old"), Algorithm::RS256).await,
            Err(KeyError::UnknownKey(kid)) if kid == "old"
        ));
        assert_eq!(
            keys.keys_for(Some("new"), Algorithm::RS256)
                .await
                .unwrap()
                .len(),
            1
        );
    }

    #[tokio::test]
    async fn kept_keys_serve_while_the_set_cannot_be_fetched_until_they_are_too_old() {
        let provider = Provider::start().await;
        provider.publish(Some(&["k1"]));
        let max_age = Duration::from_secs(2);
        let keys = provider.source(max_age);
        assert!(keys.keys_for(Some("k1"), Algorithm::RS256).await.is_ok());
        provider.publish(None);
        // Due for a refresh, which fails: the keys are younger than the bound and serve.
        wait_past(Duration::from_secs(1)).await;
        assert!(keys.keys_for(Some("k1"), Algorithm::RS256).await.is_ok());
        // Older than the bound: no key, however often asked.
        wait_past(Duration::from_secs(1)).await;
        for _ in 0..2 {
            assert!(matches!(
                keys.keys_for(Some("k1"), Algorithm::RS256).await,
                Err(KeyError::Unavailable(_))
            ));
        }
        // The provider answers again: so do the keys.
        provider.publish(Some(&["k1"]));
        wait_past(REFETCH_COOLDOWN).await;
        assert!(keys.keys_for(Some("k1"), Algorithm::RS256).await.is_ok());
    }
}
