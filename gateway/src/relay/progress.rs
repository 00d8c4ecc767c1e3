//! Progress a client reports about a request the gateway relayed to it from an upstream.
//!
//! An upstream that sends `sampling/createMessage` or `elicitation/create` with a
//! `progressToken` wants to hear how the client is getting on. The relayed request reaches
//! the client under a token of the gateway's own (tokens are per connection, so the
//! upstream's could clash with another's); while it is in flight, progress the client
//! reports under that token goes back to the upstream under the upstream's.
//!
//! The token is known only once rmcp has sent the request, so a quick client's first
//! progress can arrive before the route exists: progress about no known request is kept
//! for a moment ([`EARLY_KEPT`], at most [`EARLY_MAX`] notifications) and delivered when
//! its route is entered.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleClient};

/// How long progress about no known relayed request is kept for its route.
const EARLY_KEPT: Duration = Duration::from_secs(5);
/// How many such notifications are kept at most.
const EARLY_MAX: usize = 64;

/// Where one relayed request's progress goes: the upstream and its token.
struct Asker {
    upstream: Peer<RoleClient>,
    token: ProgressToken,
}

/// A relayed request as the client knows it: its session and the gateway's token.
type Relayed = (Arc<str>, ProgressToken);

/// Relayed request → the upstream that asked.
#[derive(Clone, Default)]
pub struct RelayedProgress(Arc<Mutex<Routes>>);

#[derive(Default)]
struct Routes {
    askers: HashMap<Relayed, Asker>,
    /// Progress that arrived before its route, oldest first.
    early: VecDeque<(Relayed, ProgressNotificationParam, Instant)>,
}

impl RelayedProgress {
    /// Sends progress the client in `session` reports under `token` to the upstream whose
    /// relayed request it is about, under the upstream's token. Progress about no relayed
    /// request in flight is kept a moment for a route about to be entered.
    pub async fn report(&self, session: &str, progress: ProgressNotificationParam) {
        let key = (Arc::from(session), progress.progress_token.clone());
        let asker = {
            let mut routes = self.lock();
            match routes.askers.get(&key) {
                Some(asker) => (asker.upstream.clone(), asker.token.clone()),
                None => {
                    routes.keep_early(key, progress);
                    return;
                }
            }
        };
        deliver(&asker.0, asker.1, progress).await;
    }

    /// Routes progress under `(session, ours)` to `upstream` as `theirs`, until the
    /// returned guard is dropped; delivers what arrived for it before.
    pub async fn enter(
        &self,
        session: Arc<str>,
        ours: ProgressToken,
        upstream: Peer<RoleClient>,
        theirs: ProgressToken,
    ) -> ProgressRoute {
        let key = (session, ours);
        let early = {
            let mut routes = self.lock();
            routes.askers.insert(
                key.clone(),
                Asker {
                    upstream: upstream.clone(),
                    token: theirs.clone(),
                },
            );
            routes.take_early(&key)
        };
        for progress in early {
            deliver(&upstream, theirs.clone(), progress).await;
        }
        ProgressRoute {
            routes: self.clone(),
            key,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Routes> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Routes {
    fn keep_early(&mut self, key: Relayed, progress: ProgressNotificationParam) {
        let now = Instant::now();
        self.early
            .retain(|(_, _, at)| now.duration_since(*at) < EARLY_KEPT);
        if self.early.len() == EARLY_MAX {
            self.early.pop_front();
        }
        self.early.push_back((key, progress, now));
    }

    fn take_early(&mut self, key: &Relayed) -> Vec<ProgressNotificationParam> {
        let mut taken = Vec::new();
        self.early.retain(|(early, progress, _)| {
            let mine = early == key;
            if mine {
                taken.push(progress.clone());
            }
            !mine
        });
        taken
    }
}

/// Sends `progress` to `upstream` under its own token.
async fn deliver(
    upstream: &Peer<RoleClient>,
    token: ProgressToken,
    progress: ProgressNotificationParam,
) {
    let mut forwarded = progress;
    forwarded.progress_token = token;
    if let Err(e) = upstream.notify_progress(forwarded).await {
        tracing::debug!("progress on a relayed request not delivered: {e}");
    }
}

/// Ends a relayed request's progress route when the request ends.
pub struct ProgressRoute {
    routes: RelayedProgress,
    key: Relayed,
}

impl Drop for ProgressRoute {
    fn drop(&mut self) {
        self.routes.lock().askers.remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(token: i64, value: f64) -> ProgressNotificationParam {
        ProgressNotificationParam::new(
            ProgressToken(rmcp::model::NumberOrString::Number(token)),
            value,
        )
    }

    #[test]
    fn early_progress_waits_for_its_own_route_within_bounds() {
        let mut routes = Routes::default();
        let key = |token: i64| -> Relayed {
            (
                "s".into(),
                ProgressToken(rmcp::model::NumberOrString::Number(token)),
            )
        };
        routes.keep_early(key(1), progress(1, 0.5));
        routes.keep_early(key(2), progress(2, 0.1));
        routes.keep_early(key(1), progress(1, 1.0));
        let taken: Vec<f64> = routes
            .take_early(&key(1))
            .iter()
            .map(|p| p.progress)
            .collect();
        assert_eq!(taken, [0.5, 1.0]);
        assert!(routes.take_early(&key(1)).is_empty(), "delivered once");
        for n in 0..(EARLY_MAX as i64 + 10) {
            routes.keep_early(key(100 + n), progress(100 + n, 0.0));
        }
        assert_eq!(routes.early.len(), EARLY_MAX);
        assert!(
            routes.take_early(&key(2)).is_empty(),
            "the oldest went first"
        );
    }
}
