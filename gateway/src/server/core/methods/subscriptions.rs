//! Subscriptions: `resources/subscribe` and `resources/unsubscribe` (2025-11-25 and
//! earlier) to one resource's updates, passed to the upstream that owns it (as a
//! `subscriptions/listen` of that URI to one spoken to at 2026-07-28, which has no
//! `resources/subscribe`); and
//! `subscriptions/listen` (2026-07-28), a stream of the list changes the client asks for
//! ([`watch`]) and of the updates of the resources it names, subscribed to as
//! `resources/subscribe` would for as long as the stream lasts.

#![allow(
    deprecated,
    reason = "resources/subscribe is what pre-2026 clients use"
)]

use std::sync::{Arc, Weak};

use rmcp::ErrorData;
use rmcp::model::{
    ClientRequest, ServerResult, SubscribeRequest, SubscribeRequestParams,
    SubscriptionsListenRequest, UnsubscribeRequest, UnsubscribeRequestParams,
};

use tokio_util::sync::CancellationToken;

use super::call::passed_on;
use super::{Call, Key, Route, Serves};
use crate::gateway::Gateway;
use crate::registry::subscriptions::Left;
use crate::server::core::watch;
use crate::upstream::{MAX_LISTENED_RESOURCES, Upstream};

impl Route for SubscribeRequest {
    const SERVES: Serves = Serves::SESSION;

    fn key(&self) -> Option<Key<'_>> {
        None
    }

    async fn serve(self, call: Call) -> Result<ServerResult, ErrorData> {
        call.subscribe(self.params).await
    }
}

impl Route for UnsubscribeRequest {
    const SERVES: Serves = Serves::SESSION;

    fn key(&self) -> Option<Key<'_>> {
        None
    }

    async fn serve(self, call: Call) -> Result<ServerResult, ErrorData> {
        call.unsubscribe(self.params).await
    }
}

impl Route for SubscriptionsListenRequest {
    const SERVES: Serves = Serves::STATELESS;

    fn key(&self) -> Option<Key<'_>> {
        None
    }

    async fn serve(self, call: Call) -> Result<ServerResult, ErrorData> {
        let requested = self.params.notifications;
        let uris = requested
            .resource_subscriptions
            .as_deref()
            .unwrap_or_default();
        let held = call.subscribe_listen(uris).await;
        let stream = (&call.id, &call.link, &call.cancel);
        let session = call.session.clone();
        let subscribed = held.uris.clone();
        watch::listen(call.gateway(), session, stream, requested, subscribed).await
        // `held` dropped: what the stream subscribed to is released.
    }
}

impl Call {
    async fn subscribe(&self, request: SubscribeRequestParams) -> Result<ServerResult, ErrorData> {
        let (server, original) = self.owner_of(&self.view(), &request.uri)?;
        let link = self.session.link(self.link.client().clone());
        let subscriber = (self.session.id.as_str(), self.session.owner());
        self.gateway()
            .subscriptions()
            .subscribe(&request.uri, subscriber, link, None);
        self.unsubscribe_when_the_session_ends();
        let mut params = request;
        params.uri = original;
        self.subscribe_upstream(&server, params).await
    }

    /// Subscribes this caller to `params.uri` (the server's own) of `server`: a
    /// `subscriptions/listen` of it to a server spoken to at 2026-07-28, else
    /// `resources/subscribe` (a per-user server's on the caller's own connection).
    async fn subscribe_upstream(
        &self,
        server: &str,
        params: SubscribeRequestParams,
    ) -> Result<ServerResult, ErrorData> {
        if let Some(upstream) = self.gateway().registry().upstream(server)
            && let Some(listened) = upstream
                .listen_to_resource(&params.uri, Some(&self.caller()), &self.cancel)
                .await
        {
            return listened.map(|()| ServerResult::empty(()));
        }
        let request = ClientRequest::SubscribeRequest(SubscribeRequest::new(params));
        self.forward(server, request).await.map(passed_on)
    }

    /// Subscribes this `subscriptions/listen` stream to the resources of `uris` (as
    /// clients see them) as a session's `resources/subscribe` would, each to its server;
    /// held until the stream ends. A URI no server this caller sees owns, or one its
    /// server refused (past [`MAX_LISTENED_RESOURCES`] streams), is left out; so is any
    /// past the first [`MAX_LISTENED_RESOURCES`] URIs of the request.
    async fn subscribe_listen(&self, uris: &[String]) -> ListenSubscriptions {
        let mut held = ListenSubscriptions {
            gateway: Arc::downgrade(self.gateway()),
            subscriber: format!("{}/listen/{}", self.session.id, uuid::Uuid::new_v4()),
            owner: self.session.owner().map(str::to_owned),
            uris: Vec::new(),
        };
        let view = self.view();
        for uri in uris.iter().take(MAX_LISTENED_RESOURCES) {
            if held.uris.contains(uri) {
                continue;
            }
            let Ok((server, original)) = self.owner_of(&view, uri) else {
                continue;
            };
            let subscriber = (held.subscriber.as_str(), self.session.owner());
            let subscriptions = self.gateway().subscriptions();
            subscriptions.subscribe(uri, subscriber, self.link.clone(), Some(&self.id));
            let params = SubscribeRequestParams::new(original);
            match self.subscribe_upstream(&server, params).await {
                Ok(_) => held.uris.push(uri.clone()),
                Err(error) => {
                    tracing::debug!(%server, %uri, "not subscribed for a listen: {}", error.message);
                    subscriptions.unsubscribe(uri, &held.subscriber);
                }
            }
        }
        held
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
    ) -> Result<ServerResult, ErrorData> {
        let (server, original) = self.owner_of(&self.view(), &request.uri)?;
        let left = self
            .gateway()
            .subscriptions()
            .unsubscribe(&request.uri, &self.session.id);
        let upstream = self.gateway().registry().upstream(&server);
        if upstream.is_some_and(|upstream| {
            let_go(&upstream, &original, left, self.session.owner()) == LetGo::Done
        }) {
            return Ok(ServerResult::empty(()));
        }
        let mut params = request;
        params.uri = original;
        let request = ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(params));
        self.forward(&server, request).await.map(passed_on)
    }

    /// A client that leaves without unsubscribing (most do) holds no subscription
    /// upstream: when its session ends, its subscriptions are released ([`release`]).
    /// Watched once per session, from its first subscription.
    fn unsubscribe_when_the_session_ends(&self) {
        if self
            .session
            .with_state(|watched: &mut SubscriptionsWatched| {
                std::mem::replace(&mut watched.0, true)
            })
        {
            return;
        }
        let gateway = Arc::downgrade(self.gateway());
        let session = self.session.id.clone();
        let owner = self.session.owner().map(str::to_owned);
        let ended = self.session.running.closed.clone();
        tokio::spawn(async move {
            ended.cancelled().await;
            if let Some(gateway) = gateway.upgrade() {
                release(&gateway, &session, owner.as_deref()).await;
            }
        });
    }
}

/// The resources a `subscriptions/listen` stream subscribed to, released when it ends
/// (dropped, whether the stream closed or its task was cancelled).
struct ListenSubscriptions {
    gateway: Weak<Gateway>,
    /// The stream, as a subscriber of the gateway's subscriptions: unique to it.
    subscriber: String,
    /// Who the session of the stream belongs to.
    owner: Option<String>,
    /// The URIs subscribed to, as clients see them.
    uris: Vec<String>,
}

impl Drop for ListenSubscriptions {
    fn drop(&mut self) {
        if self.uris.is_empty() {
            return;
        }
        let Some(gateway) = self.gateway.upgrade() else {
            return;
        };
        let subscriber = std::mem::take(&mut self.subscriber);
        let owner = self.owner.take();
        tokio::spawn(async move { release(&gateway, &subscriber, owner.as_deref()).await });
    }
}

/// Ends every subscription of `subscriber` (a session, or a listen stream), which belongs
/// to `owner`: each URI nobody else is subscribed to (of a per-user server, nobody else of
/// the same owner) is unsubscribed from its server (or the stream listening to it closed);
/// of a per-user server, on the owner's own connection, where the subscription was made.
async fn release(gateway: &Gateway, subscriber: &str, owner: Option<&str>) {
    for (uri, left) in gateway.subscriptions().end_session(subscriber) {
        let Some((server, original)) = gateway.registry().catalog().resource_owner(&uri) else {
            continue;
        };
        let Some(upstream) = gateway.registry().upstream(&server) else {
            continue;
        };
        if let_go(&upstream, &original, left, owner) == LetGo::Done {
            continue;
        }
        let params = UnsubscribeRequestParams::new(original);
        let request = ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(params));
        let unsubscribed = upstream
            .request_as_connected(owner, request, &CancellationToken::new())
            .await;
        if let Some(Err(error)) = unsubscribed {
            tracing::debug!(%server, %uri, "not unsubscribed after its subscriber ended: {error}");
        }
    }
}

/// What is left to do once a subscriber let go of a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LetGo {
    /// Nothing: others still need the subscription upstream, or it ended.
    Done,
    /// The server holds the subscription in its session: `resources/unsubscribe` ends it.
    Unsubscribe,
}

/// Lets go of `original` (the server's URI) of `upstream` for a subscriber of `owner`,
/// `left` being who is still subscribed to it: when nobody who needs it is left, the
/// stream listening to it is closed, or the server must be told.
fn let_go(upstream: &Upstream, original: &str, left: Left, owner: Option<&str>) -> LetGo {
    if left.ends_upstream(upstream.is_per_user())
        && !upstream.stop_listening_to_resource(original, owner)
    {
        LetGo::Unsubscribe
    } else {
        LetGo::Done
    }
}

/// Whether the session's end is watched for its subscriptions.
#[derive(Default, Clone)]
struct SubscriptionsWatched(bool);
