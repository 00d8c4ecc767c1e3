//! Resource subscriptions of clients on 2025-11-25 and earlier to a server spoken to at
//! 2026-07-28, which has no `resources/subscribe` (it refuses it as a removed stateful
//! RPC): each subscribed URI is a `subscriptions/listen` stream of its own, asking for
//! that URI's updates, opened on the client's first subscription and closed (cancelled)
//! when the last session unsubscribes or the connection ends. The updates it brings go
//! where a server of 2025's `notifications/resources/updated` goes. Each stream holds a
//! connection to the server, so one connection listens to at most
//! [`MAX_LISTENED_RESOURCES`] resources at once: clients cannot make the gateway open
//! streams without end (a resource template matches any number of URIs). A per-user
//! server's streams are those of the subscribing caller's own connection.
//!
//! A server spoken to in a session holds `resources/subscribe` itself, in that session:
//! the URIs subscribed in it are noted too, so that a per-user connection holding a
//! subscription is not closed as idle (which would end the session, and the
//! subscription with it).
//!
//! Both kinds die with their connection, while the clients still hold theirs at the
//! gateway and never see the server go: so each connection that comes up (again, or in a
//! new instance after a restart or reload), or whose session a streamable HTTP server
//! forgot and rmcp opened anew, is told, as [`ResourceNews::Connected`], and subscribed
//! again ([`Upstream::resubscribe`]) to what clients still hold of its server (of a
//! per-user server, what sessions of the connection's identity hold); and a stream the
//! server ends is opened again while it is held.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ErrorData;
#[allow(
    deprecated,
    reason = "resources/subscribe is what pre-2026 servers hold"
)]
use rmcp::model::{
    ClientRequest, ServerNotification, SubscribeRequest, SubscribeRequestParams,
    SubscriptionFilter, UnsubscribeRequest, UnsubscribeRequestParams,
};
use rmcp::service::Subscription;
use rmcp::{Peer, RoleClient};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use super::{Live, Upstream, UpstreamError};
use crate::relay::Caller;
use crate::session::limits::LimitError;
use crate::upstream::resource_uri;

/// How many resources of one server spoken to at 2026-07-28 clients may be subscribed to
/// at once.
pub const MAX_LISTENED_RESOURCES: usize = 256;

/// What upstreams tell the gateway's resource subscriptions.
pub enum ResourceNews {
    /// `uri` (as clients see it) of `server` changed; as the connection of `identity` heard,
    /// for a per-user server, whose resources are each person's own.
    Updated {
        server: Arc<str>,
        uri: String,
        identity: Option<Arc<str>>,
    },
    /// A connection of this upstream came up, or the session of one was renewed (see
    /// [`super::streamable_http::lane::SessionSlot`]): it holds no subscription yet.
    Connected(Arc<Upstream>),
}

/// The resource subscriptions one connection holds, by the upstream's URI: its open
/// `subscriptions/listen` streams, or the URIs subscribed to in its session.
#[derive(Default)]
pub struct ResourceListens {
    open: Mutex<HashMap<String, AbortHandle>>,
    in_session: Mutex<HashSet<String>>,
}

impl Drop for ResourceListens {
    fn drop(&mut self) {
        let open = self.open.get_mut().unwrap_or_else(|p| p.into_inner());
        for (_, task) in open.drain() {
            task.abort();
        }
    }
}

impl Upstream {
    /// Subscribes `caller` to `uri` (the upstream's own) with `subscriptions/listen`,
    /// when the server is spoken to at 2026-07-28 (a per-user server on the caller's own
    /// connection, signing in first as a call would); `None` when it is spoken to in a
    /// session, where `resources/subscribe` goes on as it is, on the connection that
    /// notes it.
    pub async fn listen_to_resource(
        &self,
        uri: &str,
        caller: Option<&Caller>,
        cancel: &CancellationToken,
    ) -> Option<Result<(), ErrorData>> {
        let user;
        let upstream = if self.per_user.is_some() {
            user = match self.connection_of(caller, cancel).await {
                Ok(user) => user,
                Err(UpstreamError::Rejected { error, .. }) => return Some(Err(*error)),
                Err(error) => return Some(Err(ErrorData::internal_error(error.to_string(), None))),
            };
            &user
        } else {
            self
        };
        let live = upstream.live()?;
        if !live.is_stateless() {
            lock(&live.listens.in_session).insert(uri.to_owned());
            return None;
        }
        Some(upstream.listen(&live, uri).await)
    }

    /// Ends the subscription [`Self::listen_to_resource`] opened to `uri` (of a per-user
    /// server, on the connection of `identity`); false when the server is spoken to in a
    /// session, where `resources/unsubscribe` goes on as it is (and the connection no
    /// longer notes it). A per-user server's identity without a connection holds no
    /// subscription there any more: nothing to end.
    pub fn stop_listening_to_resource(&self, uri: &str, identity: Option<&str>) -> bool {
        let user;
        let upstream = if self.per_user.is_some() {
            match identity.and_then(|identity| self.connected_as(identity)) {
                Some(connected) => user = connected,
                None => return true,
            }
            &user
        } else {
            self
        };
        let Some(live) = upstream.live() else {
            return false;
        };
        if !live.is_stateless() {
            lock(&live.listens.in_session).remove(uri);
            return false;
        }
        if let Some(task) = lock(&live.listens.open).remove(uri) {
            task.abort();
        }
        true
    }

    /// Subscribes the current connection, which just came up, to `uri` (the upstream's
    /// own), which clients still hold at the gateway: a `subscriptions/listen` stream to a
    /// server spoken to at 2026-07-28, else `resources/subscribe` in the new session (when
    /// the server offers subscriptions). Undone when `held` says, once it is made, that no
    /// client holds it any more (the last unsubscribed meanwhile, perhaps before it was
    /// made). What the server refuses is logged; the clients' subscriptions stay, and are
    /// made again at the next connection.
    #[allow(
        deprecated,
        reason = "resources/subscribe is what pre-2026 servers hold"
    )]
    pub async fn resubscribe(&self, uri: &str, held: impl Fn() -> bool) {
        let Some(live) = self.live() else {
            return;
        };
        let subscribed = if live.is_stateless() {
            self.listen(&live, uri)
                .await
                .map_err(|error| error.message.to_string())
        } else {
            let subscribable = live
                .offer
                .capabilities
                .resources
                .as_ref()
                .is_some_and(|resources| resources.subscribe == Some(true));
            if !subscribable {
                return;
            }
            lock(&live.listens.in_session).insert(uri.to_owned());
            let params = SubscribeRequestParams::new(uri.to_owned());
            let request = ClientRequest::SubscribeRequest(SubscribeRequest::new(params));
            self.request(&live, request, &self.shutdown, None)
                .await
                .map(drop)
                .map_err(|error| error.to_string())
        };
        if let Err(error) = subscribed {
            tracing::warn!(server = %self.name, %uri, "not subscribed again on the new connection: {error}");
            return;
        }
        if held() {
            tracing::debug!(server = %self.name, %uri, "subscribed again");
            return;
        }
        if live.is_stateless() {
            if let Some(task) = lock(&live.listens.open).remove(uri) {
                task.abort();
            }
            return;
        }
        lock(&live.listens.in_session).remove(uri);
        let params = UnsubscribeRequestParams::new(uri.to_owned());
        let request = ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(params));
        if let Err(error) = self.request(&live, request, &self.shutdown, None).await {
            tracing::debug!(server = %self.name, %uri, "not unsubscribed once nobody held it: {error}");
        }
    }

    /// Whether the connection holds a client's resource subscription: a stream open for
    /// it, or one made in its session.
    pub(super) fn holds_resource_subscriptions(&self) -> bool {
        self.live().is_some_and(|live| {
            !lock(&live.listens.in_session).is_empty()
                || lock(&live.listens.open)
                    .values()
                    .any(|task| !task.is_finished())
        })
    }

    async fn listen(&self, live: &Live, uri: &str) -> Result<(), ErrorData> {
        {
            let mut open = lock(&live.listens.open);
            // A stream the server ended is opened again.
            open.retain(|_, task| !task.is_finished());
            if open.contains_key(uri) {
                return Ok(());
            }
            if open.len() >= MAX_LISTENED_RESOURCES {
                let refused = LimitError::ResourceListens {
                    server: self.name.to_string(),
                    limit: MAX_LISTENED_RESOURCES,
                };
                return Err(refused.to_error());
            }
        }
        let mut filter = SubscriptionFilter::new();
        filter.resource_subscriptions = Some(vec![uri.to_owned()]);
        let subscription = live.peer.listen(filter.clone()).await.map_err(|error| {
            ErrorData::internal_error(
                format!("`{}` refused to listen to {uri}: {error}", self.name),
                None,
            )
        })?;
        let stream = Stream {
            server: self.name.clone(),
            rewrite: self.config.rewrite_uris,
            updates: self.resource_updates.clone(),
            peer: live.peer.clone(),
            filter,
            identity: self.identity().map(Arc::from),
        };
        let task = tokio::spawn(stream.pass_on(subscription));
        let mut open = lock(&live.listens.open);
        if let Some(earlier) = open.insert(uri.to_owned(), task.abort_handle()) {
            // Another session's subscription opened one meanwhile: one is enough.
            earlier.abort();
        }
        Ok(())
    }
}

/// The first wait before a stream that ended is opened again; doubled after each stream
/// that ended within [`REOPEN_MOST`] of opening, up to that.
const REOPEN_FIRST: Duration = Duration::from_millis(250);
/// The longest wait before a stream that ended is opened again.
const REOPEN_MOST: Duration = Duration::from_secs(30);

/// One resource's `subscriptions/listen` stream, held until it is aborted (unsubscribed,
/// or its connection ended).
struct Stream {
    server: Arc<str>,
    rewrite: bool,
    updates: mpsc::UnboundedSender<ResourceNews>,
    peer: Peer<RoleClient>,
    filter: SubscriptionFilter,
    /// Whose connection it is, of a per-user server.
    identity: Option<Arc<str>>,
}

impl Stream {
    /// Passes on the updates `subscription` brings; when the server ends it (it went away
    /// and came back, say: a server of 2026-07-28 keeps no session whose loss the gateway
    /// would see), opens it again, as a client that still holds the subscription would.
    async fn pass_on(self, mut subscription: Subscription) {
        let mut wait = REOPEN_FIRST;
        loop {
            let opened = Instant::now();
            while let Ok(Some(notification)) = subscription.next().await {
                if let ServerNotification::ResourceUpdatedNotification(updated) = notification {
                    let uri = resource_uri::expose(&self.server, self.rewrite, &updated.params.uri);
                    let updated = ResourceNews::Updated {
                        server: self.server.clone(),
                        uri,
                        identity: self.identity.clone(),
                    };
                    if self.updates.send(updated).is_err() {
                        return;
                    }
                }
            }
            if opened.elapsed() >= REOPEN_MOST {
                wait = REOPEN_FIRST;
            }
            subscription = loop {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(REOPEN_MOST);
                match self.peer.listen(self.filter.clone()).await {
                    Ok(subscription) => break subscription,
                    Err(error) => {
                        tracing::debug!(server = %self.server, "a resource's stream is not open again yet: {error}");
                    }
                }
            };
        }
    }
}

/// The lock of `mutex`, even if a holder panicked (what it guards stays whole).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
