//! Resource subscriptions of clients on 2025-11-25 and earlier to a server spoken to at
//! 2026-07-28, which has no `resources/subscribe` (it refuses it as a removed stateful
//! RPC): each subscribed URI is a `subscriptions/listen` stream of its own, asking for
//! that URI's updates, opened on the client's first subscription and closed (cancelled)
//! when the last session unsubscribes or the connection ends. The updates it brings go
//! where a server of 2025's `notifications/resources/updated` goes. Each stream holds a
//! connection to the server, so one connection listens to at most
//! [`MAX_LISTENED_RESOURCES`] resources at once: clients cannot make the gateway open
//! streams without end (a resource template matches any number of URIs).

use std::collections::HashMap;
use std::sync::Mutex;

use rmcp::ErrorData;
use rmcp::model::{ServerNotification, SubscriptionFilter};
use tokio::task::AbortHandle;

use super::{Live, Upstream};
use crate::upstream::resource_uri;

/// How many resources of one server spoken to at 2026-07-28 clients may be subscribed to
/// at once.
pub const MAX_LISTENED_RESOURCES: usize = 256;

/// The open `subscriptions/listen` streams of one connection, by the upstream's URI.
#[derive(Default)]
pub struct ResourceListens {
    open: Mutex<HashMap<String, AbortHandle>>,
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
    /// Subscribes to `uri` (the upstream's own) with `subscriptions/listen`, when the
    /// server is spoken to at 2026-07-28; `None` when it is spoken to in a session, where
    /// `resources/subscribe` goes on as it is.
    pub async fn listen_to_resource(&self, uri: &str) -> Option<Result<(), ErrorData>> {
        let live = self.live().filter(|live| live.is_stateless())?;
        Some(self.listen(&live, uri).await)
    }

    /// Ends the subscription [`Self::listen_to_resource`] opened to `uri`; false when the
    /// server is spoken to in a session, where `resources/unsubscribe` goes on as it is.
    pub fn stop_listening_to_resource(&self, uri: &str) -> bool {
        let Some(live) = self.live().filter(|live| live.is_stateless()) else {
            return false;
        };
        let mut open = live.listens.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(task) = open.remove(uri) {
            task.abort();
        }
        true
    }

    async fn listen(&self, live: &Live, uri: &str) -> Result<(), ErrorData> {
        {
            let mut open = live.listens.open.lock().unwrap_or_else(|p| p.into_inner());
            // A stream the server ended is opened again.
            open.retain(|_, task| !task.is_finished());
            if open.contains_key(uri) {
                return Ok(());
            }
            if open.len() >= MAX_LISTENED_RESOURCES {
                return Err(ErrorData::invalid_request(
                    format!(
                        "at most {MAX_LISTENED_RESOURCES} resources of `{}` can be subscribed \
                         to at once",
                        self.name
                    ),
                    None,
                ));
            }
        }
        let mut filter = SubscriptionFilter::new();
        filter.resource_subscriptions = Some(vec![uri.to_owned()]);
        let mut subscription = live.peer.listen(filter).await.map_err(|error| {
            ErrorData::internal_error(
                format!("`{}` refused to listen to {uri}: {error}", self.name),
                None,
            )
        })?;
        let server = self.name.clone();
        let rewrite = self.config.rewrite_uris;
        let updates = self.resource_updates.clone();
        let task = tokio::spawn(async move {
            while let Ok(Some(notification)) = subscription.next().await {
                if let ServerNotification::ResourceUpdatedNotification(updated) = notification {
                    let uri = resource_uri::expose(&server, rewrite, &updated.params.uri);
                    if updates.send((server.clone(), uri)).is_err() {
                        break;
                    }
                }
            }
        });
        let mut open = live.listens.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(earlier) = open.insert(uri.to_owned(), task.abort_handle()) {
            // Another session's subscription opened one meanwhile: one is enough.
            earlier.abort();
        }
        Ok(())
    }
}
