//! Resource subscriptions: which downstream sessions asked for updates to which URI (as
//! clients see it), and the task that delivers an upstream's
//! `notifications/resources/updated` to them under that URI.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    ResourceUpdatedNotification, ResourceUpdatedNotificationParam, ServerNotification,
};
use tokio::sync::mpsc;

use crate::relay::ClientLink;

/// A subscribed session: its id and the way to notify it.
type Subscriber = (String, ClientLink);

/// Gateway URI → the sessions subscribed to it.
#[derive(Default)]
pub struct Subscriptions {
    by_uri: Mutex<HashMap<String, Vec<Subscriber>>>,
}

impl Subscriptions {
    /// Starts delivering `(server, uri as clients see it)` updates to subscribers.
    pub fn start(mut updates: mpsc::UnboundedReceiver<(Arc<str>, String)>) -> Arc<Self> {
        let subscriptions = Arc::new(Subscriptions::default());
        let weak = Arc::downgrade(&subscriptions);
        tokio::spawn(async move {
            while let Some((server, uri)) = updates.recv().await {
                let Some(subscriptions) = weak.upgrade() else {
                    break;
                };
                tracing::trace!(%server, %uri, "resource updated");
                subscriptions.deliver(&uri).await;
            }
        });
        subscriptions
    }

    pub fn subscribe(&self, uri: &str, session: &str, link: ClientLink) {
        let mut by_uri = self.by_uri.lock().unwrap_or_else(|p| p.into_inner());
        let subscribers = by_uri.entry(uri.to_owned()).or_default();
        if !subscribers.iter().any(|(id, _)| id == session) {
            subscribers.push((session.to_owned(), link));
        }
    }

    /// Removes every subscription of `session`, which ended; returns the URIs no session
    /// is left on.
    pub fn end_session(&self, session: &str) -> Vec<String> {
        let mut by_uri = self.by_uri.lock().unwrap_or_else(|p| p.into_inner());
        let mut left = Vec::new();
        by_uri.retain(|uri, subscribers| {
            let before = subscribers.len();
            subscribers.retain(|(id, _)| id != session);
            if subscribers.is_empty() && before > 0 {
                left.push(uri.clone());
            }
            !subscribers.is_empty()
        });
        left
    }

    /// Removes `session`'s subscription; returns whether no session is left on `uri`.
    pub fn unsubscribe(&self, uri: &str, session: &str) -> bool {
        let mut by_uri = self.by_uri.lock().unwrap_or_else(|p| p.into_inner());
        let Some(subscribers) = by_uri.get_mut(uri) else {
            return true;
        };
        subscribers.retain(|(id, _)| id != session);
        let empty = subscribers.is_empty();
        if empty {
            by_uri.remove(uri);
        }
        empty
    }

    async fn deliver(&self, uri: &str) {
        let links: Vec<_> = self
            .by_uri
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(uri)
            .map(|s| s.iter().map(|(_, link)| link.clone()).collect())
            .unwrap_or_default();
        for link in links {
            let updated = ServerNotification::ResourceUpdatedNotification(
                ResourceUpdatedNotification::new(ResourceUpdatedNotificationParam::new(uri)),
            );
            link.notify(updated).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
    use tokio_util::sync::CancellationToken;

    use super::*;

    fn link() -> ClientLink {
        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("test", "1"),
        );
        let (messages, _) = mpsc::channel(1);
        ClientLink::new(
            messages,
            Arc::default(),
            Arc::new(client),
            CancellationToken::new(),
        )
    }

    #[test]
    fn an_ended_session_leaves_only_the_uris_no_other_session_holds() {
        let subscriptions = Subscriptions::default();
        subscriptions.subscribe("a", "s1", link());
        subscriptions.subscribe("b", "s1", link());
        subscriptions.subscribe("b", "s2", link());
        assert_eq!(subscriptions.end_session("s1"), vec!["a".to_owned()]);
        assert!(subscriptions.end_session("s1").is_empty());
        assert_eq!(subscriptions.end_session("s2"), vec!["b".to_owned()]);
    }
}
