//! Subscriptions: `resources/subscribe` and `resources/unsubscribe` (2025-11-25 and
//! earlier) to one resource's updates, passed to the upstream that owns it (as a
//! `subscriptions/listen` of that URI to one spoken to at 2026-07-28, which has no
//! `resources/subscribe`); and
//! `subscriptions/listen` (2026-07-28), a stream of the list changes the client asks for
//! ([`watch`]).

#![allow(
    deprecated,
    reason = "resources/subscribe is what pre-2026 clients use"
)]

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{
    ClientRequest, ServerResult, SubscribeRequest, SubscribeRequestParams,
    SubscriptionsListenRequest, UnsubscribeRequest, UnsubscribeRequestParams,
};

use tokio_util::sync::CancellationToken;

use super::call::passed_on;
use super::{Call, Key, Route, Serves};
use crate::server::core::watch;

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
        let stream = (&call.id, &call.link, &call.cancel);
        let session = call.session.clone();
        watch::listen(call.gateway(), session, stream, self.params.notifications).await
    }
}

impl Call {
    async fn subscribe(&self, request: SubscribeRequestParams) -> Result<ServerResult, ErrorData> {
        let (server, original) = self.owner_of(&self.view(), &request.uri)?;
        let link = self.session.link(self.link.client().clone());
        self.gateway().subscriptions().subscribe(
            &request.uri,
            &self.session.id,
            self.session.owner(),
            link,
        );
        self.unsubscribe_when_the_session_ends();
        if let Some(upstream) = self.gateway().registry().upstream(&server)
            && let Some(listened) = upstream
                .listen_to_resource(&original, Some(&self.caller()), &self.cancel)
                .await
        {
            return listened.map(|()| ServerResult::empty(()));
        }
        let mut params = request;
        params.uri = original;
        let request = ClientRequest::SubscribeRequest(SubscribeRequest::new(params));
        self.forward(&server, request).await.map(passed_on)
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
        let per_user = upstream.as_ref().is_some_and(|u| u.is_per_user());
        if !left.ends_upstream(per_user) {
            return Ok(ServerResult::empty(()));
        }
        if let Some(upstream) = upstream
            && upstream.stop_listening_to_resource(&original, self.session.owner())
        {
            return Ok(ServerResult::empty(()));
        }
        let mut params = request;
        params.uri = original;
        let request = ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(params));
        self.forward(&server, request).await.map(passed_on)
    }

    /// A client that leaves without unsubscribing (most do) holds no subscription
    /// upstream: when its session ends, each URI no other session is subscribed to (of a
    /// per-user server, no other session of the same owner) is unsubscribed from its
    /// server (and the stream listening to it closed); of a per-user server, on the
    /// owner's own connection, where the subscription was made. Watched once per session,
    /// from its first subscription.
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
            let Some(gateway) = gateway.upgrade() else {
                return;
            };
            for (uri, left) in gateway.subscriptions().end_session(&session) {
                let Some((server, original)) = gateway.registry().catalog().resource_owner(&uri)
                else {
                    continue;
                };
                let Some(upstream) = gateway.registry().upstream(&server) else {
                    continue;
                };
                if !left.ends_upstream(upstream.is_per_user())
                    || upstream.stop_listening_to_resource(&original, owner.as_deref())
                {
                    continue;
                }
                let params = UnsubscribeRequestParams::new(original);
                let request = ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(params));
                let unsubscribed = upstream
                    .request_as_connected(owner.as_deref(), request, &CancellationToken::new())
                    .await;
                if let Some(Err(error)) = unsubscribed {
                    tracing::debug!(%server, %uri, "not unsubscribed after its session ended: {error}");
                }
            }
        });
    }
}

/// Whether the session's end is watched for its subscriptions.
#[derive(Default, Clone)]
struct SubscriptionsWatched(bool);
