//! Sign-ins in progress, kept where every replica can take their callback: the gateway's
//! shared state (in memory alone, in Redis with `[cluster]`), sealed with the token key.
//! Behind a load balancer that does not route the browser back to the replica that began
//! a sign-in, the replica it reaches completes it.
//!
//! Up to four records per sign-in, each living at most [`super::per_user::PENDING_TTL`]:
//! - `signin/<state>`: whose sign-in it is (server, identity), the authorization server's
//!   URL, which browser proved to be that identity (`super::browser`), and what the
//!   exchange of its code needs (client id, redirect URI). Taken (read and deleted at
//!   once) by the one callback that uses it: a `state` never works twice, on any replica.
//! - `signin-pkce/<state>`: rmcp's PKCE verifier and expected issuer ([`PkceStore`]).
//! - `signin-ended/<state>`: why it failed, for the calls waiting on other replicas.
//! - `signin-login/<state>`: a browser's login at the gateway's own identity provider,
//!   which proves who it is, and the sign-in it is for ([`LoginRecord`]).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rmcp::transport::auth::{AuthError, StateStore, StoredAuthorizationState};
use serde::{Deserialize, Serialize};

use super::sealed::Sealer;
use crate::state::SharedState;

/// What the sealed records are sealed for (their place, in [`Sealer`] terms).
const PLACE: &str = "signin";

/// Whose sign-in a `state` names, and what exchanging its code needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PendingRecord {
    pub server: String,
    pub identity: String,
    pub client_id: String,
    pub redirect_uri: String,
    /// When it began (seconds since the epoch).
    pub began: u64,
    /// The authorization server's URL the person's browser is sent on to, once it has
    /// proved whose it is.
    pub authorization_url: String,
    /// The SHA-256 (hex) of the secret in the cookie of the browser that proved to be
    /// `identity`'s; `None` until one has. The callback needs that cookie.
    #[serde(default)]
    pub browser: Option<String>,
}

/// A browser's login at the gateway's identity provider, under the login's own `state`:
/// the sign-in it proves the browser for, and what exchanging its code needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoginRecord {
    /// The `state` of the sign-in the browser opened.
    pub sign_in: String,
    /// The SHA-256 (hex) of the secret in the cookie of the browser that began the login:
    /// the return must come to that browser, so that nobody can deliver their own login
    /// into someone else's browser.
    pub browser: String,
    pub client_id: String,
    pub redirect_uri: String,
}

impl PendingRecord {
    /// Whether it is older than `ttl`.
    pub fn expired(&self, ttl: Duration) -> bool {
        now().saturating_sub(self.began) >= ttl.as_secs()
    }
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// The sign-ins in progress in the shared state.
#[derive(Clone)]
pub struct Pending {
    pub state: Arc<dyn SharedState>,
    pub sealer: Arc<Sealer>,
    pub ttl: Duration,
}

impl Pending {
    fn key(kind: &str, state: &str) -> String {
        format!("{kind}/{state}")
    }

    /// Keeps `record` under `state`.
    pub async fn put(&self, state: &str, record: &PendingRecord) -> Result<(), String> {
        self.put_sealed("signin", state, record).await
    }

    /// Takes the record of `state`: it is gone for everyone once read. `Ok(None)` when
    /// there is none (made up, taken already, lapsed) or it does not open.
    pub async fn take(&self, state: &str) -> Result<Option<PendingRecord>, String> {
        self.take_sealed("signin", state).await
    }

    /// The record of `state`, left in place. `Ok(None)` as for [`Self::take`].
    pub async fn peek(&self, state: &str) -> Result<Option<PendingRecord>, String> {
        let sealed = self
            .state
            .get_record(&Self::key("signin", state))
            .await
            .map_err(|e| e.to_string())?;
        Ok(sealed.and_then(|sealed| self.open(&sealed)))
    }

    /// Keeps the login `record` under the login's own `state`.
    pub async fn put_login(&self, state: &str, record: &LoginRecord) -> Result<(), String> {
        self.put_sealed("signin-login", state, record).await
    }

    async fn put_sealed(
        &self,
        kind: &str,
        state: &str,
        record: &impl Serialize,
    ) -> Result<(), String> {
        let json = serde_json::to_vec(record).map_err(|e| e.to_string())?;
        self.state
            .put_record(
                &Self::key(kind, state),
                self.sealer.seal(PLACE, &json),
                Some(self.ttl),
            )
            .await
            .map_err(|e| e.to_string())
    }

    /// Takes the login record of `state`, as [`Self::take`] does a sign-in's.
    pub async fn take_login(&self, state: &str) -> Result<Option<LoginRecord>, String> {
        self.take_sealed("signin-login", state).await
    }

    async fn take_sealed<T: serde::de::DeserializeOwned>(
        &self,
        kind: &str,
        state: &str,
    ) -> Result<Option<T>, String> {
        let taken = self
            .state
            .take_record(&Self::key(kind, state))
            .await
            .map_err(|e| e.to_string())?;
        Ok(taken.and_then(|sealed| self.open(&sealed)))
    }

    fn open<T: serde::de::DeserializeOwned>(&self, sealed: &[u8]) -> Option<T> {
        let clear = self.sealer.open(PLACE, sealed).ok()?;
        serde_json::from_slice(&clear).ok()
    }

    /// Whether the sign-in of `state` still waits for its callback.
    pub async fn is_open(&self, state: &str) -> bool {
        self.state
            .get_record(&Self::key("signin", state))
            .await
            .is_ok_and(|record| record.is_some())
    }

    /// Forgets the sign-in of `state` (given up).
    pub async fn forget(&self, state: &str) {
        let _ = self.state.delete_record(&Self::key("signin", state)).await;
    }

    /// Tells the calls waiting on other replicas that the sign-in of `state` failed.
    pub async fn tell_failed(&self, state: &str, why: &str) {
        let _ = self
            .state
            .put_record(
                &Self::key("signin-ended", state),
                why.as_bytes().to_vec(),
                Some(self.ttl),
            )
            .await;
    }

    /// Why the sign-in of `state` failed, if another replica said it did.
    pub async fn failure(&self, state: &str) -> Option<String> {
        let record = self
            .state
            .get_record(&Self::key("signin-ended", state))
            .await
            .ok()??;
        Some(String::from_utf8_lossy(&record).into_owned())
    }

    /// rmcp's store of PKCE verifiers, in the shared state.
    pub fn pkce(&self) -> PkceStore {
        PkceStore(self.clone())
    }
}

/// rmcp's [`StateStore`] over the shared state: the PKCE verifier of a sign-in, sealed,
/// for whichever replica takes its callback.
#[derive(Clone)]
pub struct PkceStore(Pending);

#[async_trait::async_trait]
impl StateStore for PkceStore {
    async fn save(
        &self,
        csrf_token: &str,
        state: StoredAuthorizationState,
    ) -> Result<(), AuthError> {
        let json =
            serde_json::to_vec(&state).map_err(|e| AuthError::InternalError(e.to_string()))?;
        let pending = &self.0;
        pending
            .state
            .put_record(
                &Pending::key("signin-pkce", csrf_token),
                pending.sealer.seal(PLACE, &json),
                Some(pending.ttl),
            )
            .await
            .map_err(|e| AuthError::InternalError(e.to_string()))
    }

    async fn load(&self, csrf_token: &str) -> Result<Option<StoredAuthorizationState>, AuthError> {
        let pending = &self.0;
        let sealed = pending
            .state
            .get_record(&Pending::key("signin-pkce", csrf_token))
            .await
            .map_err(|e| AuthError::InternalError(e.to_string()))?;
        Ok(sealed.and_then(|sealed| {
            let clear = pending.sealer.open(PLACE, &sealed).ok()?;
            serde_json::from_slice(&clear).ok()
        }))
    }

    async fn delete(&self, csrf_token: &str) -> Result<(), AuthError> {
        self.0
            .state
            .delete_record(&Pending::key("signin-pkce", csrf_token))
            .await
            .map_err(|e| AuthError::InternalError(e.to_string()))
    }
}
