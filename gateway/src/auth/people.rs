//! The per-user sign-ins of one server, as an operator sees them: who has signed in, in
//! what state (never a token), revoking one person's sign-in, and sealing every sign-in
//! again after a key rotation. `auth status`, `auth logout --user`, `auth rotate-key` and
//! the console's sign-ins panel all go through here.

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::transport::auth::AuthError;
use serde::Serialize;

use super::sealed::Sealer;
use super::status::{SignInState, SignInStatus};
use super::store::{self, Resealed};
use super::upstream::{OAuthUpstream, SignInError};
use crate::config::UpstreamOAuth;
use crate::state::SharedState;

/// One person's sign-in to a per-user server.
#[derive(Debug, Clone, Serialize)]
pub struct PersonSignIn {
    /// Who the caller's credentials name (`token:…`, `subject:…`, `client:…`).
    pub identity: String,
    #[serde(flatten)]
    pub status: SignInStatus,
}

/// The sign-ins of the per-user server `name` at `url`, where they are kept.
pub struct People<'a> {
    pub name: &'a str,
    pub url: &'a str,
    pub settings: &'a UpstreamOAuth,
    pub dir: PathBuf,
    pub shared: Option<&'a Arc<dyn SharedState>>,
    pub sealer: Arc<Sealer>,
}

impl People<'_> {
    fn upstream(&self, identity: &str) -> OAuthUpstream {
        OAuthUpstream::for_identity(
            self.name,
            self.url,
            self.settings,
            &self.dir,
            self.shared,
            identity,
            self.sealer.clone(),
        )
    }

    /// Everyone who has signed in (or was signed in and must again), by identity.
    pub async fn list(&self) -> Vec<PersonSignIn> {
        let mut found = Vec::new();
        for identity in store::identities(&self.dir, self.shared, self.name).await {
            let upstream = self.upstream(&identity);
            let mut status =
                SignInStatus::read(self.name, self.settings.grant, &upstream.store).await;
            if status.state == SignInState::NeedsLogin {
                status.hint = Some("asked to sign in again at their next call".to_owned());
            }
            found.push(PersonSignIn { identity, status });
        }
        found
    }

    /// Seals each sign-in again under the token key's current key where a previous key
    /// sealed it: by identity, what was found.
    pub async fn reseal(&self) -> Vec<(String, Result<Resealed, AuthError>)> {
        let mut outcomes = Vec::new();
        for identity in store::identities(&self.dir, self.shared, self.name).await {
            let outcome = self.upstream(&identity).store.reseal().await;
            outcomes.push((identity, outcome));
        }
        outcomes
    }

    /// Revokes `identity`'s tokens where the authorization server supports it, and forgets
    /// them; whether the server revoked them. `Ok(None)` when that identity has no sign-in.
    pub async fn sign_out(&self, identity: &str) -> Result<Option<bool>, SignInError> {
        let known = store::identities(&self.dir, self.shared, self.name).await;
        if !known.iter().any(|known| known == identity) {
            return Ok(None);
        }
        let revoked = self.upstream(identity).sign_out().await?;
        tracing::info!(server = %self.name, %identity, revoked, "per-user sign-in revoked by the operator");
        Ok(Some(revoked))
    }
}
