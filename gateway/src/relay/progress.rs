//! Progress a client reports about a request the gateway relayed to it from an upstream.
//!
//! An upstream that sends `sampling/createMessage` or `elicitation/create` with a
//! `progressToken` wants to hear how the client is getting on. The relayed request reaches
//! the client under a token of the gateway's own (tokens are per connection, so the
//! upstream's could clash with another's); while it is in flight, progress the client
//! reports under that token goes back to the upstream under the upstream's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleClient};

/// Where one relayed request's progress goes: the upstream and its token.
struct Asker {
    upstream: Peer<RoleClient>,
    token: ProgressToken,
}

/// A relayed request as the client knows it: its session and the gateway's token.
type Relayed = (Arc<str>, ProgressToken);

/// Relayed request → the upstream that asked.
#[derive(Clone, Default)]
pub struct RelayedProgress(Arc<Mutex<HashMap<Relayed, Asker>>>);

impl RelayedProgress {
    /// Sends progress the client in `session` reports under `token` to the upstream whose
    /// relayed request it is about, under the upstream's token. Returns false when no
    /// relayed request in flight has that token.
    pub async fn report(&self, session: &str, progress: ProgressNotificationParam) -> bool {
        let key = (Arc::from(session), progress.progress_token.clone());
        let Some((upstream, token)) = self
            .lock()
            .get(&key)
            .map(|asker| (asker.upstream.clone(), asker.token.clone()))
        else {
            return false;
        };
        let mut forwarded = progress;
        forwarded.progress_token = token;
        if let Err(e) = upstream.notify_progress(forwarded).await {
            tracing::debug!("progress on a relayed request not delivered: {e}");
        }
        true
    }

    /// Routes progress under `(session, ours)` to `upstream` as `theirs`, until the
    /// returned guard is dropped.
    pub fn enter(
        &self,
        session: Arc<str>,
        ours: ProgressToken,
        upstream: Peer<RoleClient>,
        theirs: ProgressToken,
    ) -> ProgressRoute {
        let key = (session, ours);
        self.lock().insert(
            key.clone(),
            Asker {
                upstream,
                token: theirs,
            },
        );
        ProgressRoute {
            routes: self.clone(),
            key,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Relayed, Asker>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Ends a relayed request's progress route when the request ends.
pub struct ProgressRoute {
    routes: RelayedProgress,
    key: Relayed,
}

impl Drop for ProgressRoute {
    fn drop(&mut self) {
        self.routes.lock().remove(&self.key);
    }
}
