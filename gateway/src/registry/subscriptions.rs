//! Resource subscriptions: which downstream sessions (and `subscriptions/listen` streams
//! of 2026-07-28 clients) asked for updates to which URI (as clients see it), and the task
//! that delivers an upstream's `notifications/resources/updated` to them under that URI
//! and subscribes each upstream connection that comes up to what sessions still hold of
//! its server: the connection before it ended without the clients seeing it (see
//! [`crate::upstream::ResourceNews::Connected`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use rmcp::model::{
    NotificationMetaObject, RequestId, ResourceUpdatedNotification,
    ResourceUpdatedNotificationParam, ServerNotification,
};
use tokio::sync::mpsc;

use super::Registry;
use crate::relay::ClientLink;
use crate::upstream::{ResourceNews, Upstream};

/// A subscribed session, or listen stream.
struct Subscriber {
    session: String,
    /// Who the session belongs to: a per-user server's subscriptions are its owner's.
    owner: Option<String>,
    link: ClientLink,
    /// The `subscriptions/listen` request whose stream `link` is: its updates are marked
    /// with its id.
    listen: Option<RequestId>,
}

/// Who is left subscribed to a URI once a session no longer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Left {
    /// No session at all: the server's subscription can end.
    pub nobody: bool,
    /// No session of the same owner: a per-user server's subscription on the owner's own
    /// connection can end.
    pub none_of_owner: bool,
}

impl Left {
    /// Whether the subscription upstream can end: on a per-user server's connection of
    /// the owner's (`per_user`), or on a server's one connection.
    pub fn ends_upstream(self, per_user: bool) -> bool {
        if per_user {
            self.none_of_owner
        } else {
            self.nobody
        }
    }
}

/// Gateway URI → the sessions subscribed to it.
#[derive(Default)]
pub struct Subscriptions {
    by_uri: Mutex<HashMap<String, Vec<Subscriber>>>,
}

impl Subscriptions {
    /// Starts delivering updates to subscribers, and subscribing the connections of
    /// `registry`'s upstreams that come up to what sessions hold.
    pub fn start(
        mut news: mpsc::UnboundedReceiver<ResourceNews>,
        registry: Weak<Registry>,
    ) -> Arc<Self> {
        let subscriptions = Arc::new(Subscriptions::default());
        let weak = Arc::downgrade(&subscriptions);
        tokio::spawn(async move {
            while let Some(news) = news.recv().await {
                let Some(subscriptions) = weak.upgrade() else {
                    break;
                };
                match news {
                    ResourceNews::Updated {
                        server,
                        uri,
                        identity,
                    } => {
                        tracing::trace!(%server, %uri, "resource updated");
                        subscriptions.deliver(&uri, identity.as_deref()).await;
                    }
                    ResourceNews::Connected(upstream) => {
                        if let Some(registry) = registry.upgrade() {
                            subscriptions.resubscribe(&registry, upstream);
                        }
                    }
                }
            }
        });
        subscriptions
    }

    /// Subscribes `upstream`'s connection that just came up, in the background, to the
    /// URIs of its server that sessions hold (of a per-user server's identity
    /// connection, sessions of that identity), as the server knows them.
    fn resubscribe(self: &Arc<Self>, registry: &Registry, upstream: Arc<Upstream>) {
        let catalog = registry.catalog();
        let uris: Vec<(String, String)> = self
            .held(upstream.identity())
            .into_iter()
            .filter_map(|uri| {
                let (server, original) = catalog.resource_owner(&uri)?;
                (server == upstream.name).then_some((uri, original))
            })
            .collect();
        if uris.is_empty() {
            return;
        }
        let subscriptions = Arc::downgrade(self);
        tokio::spawn(async move {
            let owner = upstream.identity();
            for (uri, original) in uris {
                let held = || {
                    subscriptions
                        .upgrade()
                        .is_some_and(|subscriptions| subscriptions.holds(&uri, owner))
                };
                upstream.resubscribe(&original, held).await;
            }
        });
    }

    /// The URIs some session is subscribed to; with `owner`, only those a session of
    /// that owner is.
    fn held(&self, owner: Option<&str>) -> Vec<String> {
        let by_uri = self.by_uri.lock().unwrap_or_else(|p| p.into_inner());
        by_uri
            .iter()
            .filter(|(_, subscribers)| any_of(subscribers, owner))
            .map(|(uri, _)| uri.clone())
            .collect()
    }

    /// Whether some session (of `owner`, when given) is subscribed to `uri`.
    fn holds(&self, uri: &str, owner: Option<&str>) -> bool {
        let by_uri = self.by_uri.lock().unwrap_or_else(|p| p.into_inner());
        by_uri
            .get(uri)
            .is_some_and(|subscribers| any_of(subscribers, owner))
    }

    /// Subscribes `session`, which belongs to `owner`, to `uri`: its updates go through
    /// `link`, marked as those of `listen` when it is a listen stream.
    pub fn subscribe(
        &self,
        uri: &str,
        (session, owner): (&str, Option<&str>),
        link: ClientLink,
        listen: Option<&RequestId>,
    ) {
        let mut by_uri = self.by_uri.lock().unwrap_or_else(|p| p.into_inner());
        let subscribers = by_uri.entry(uri.to_owned()).or_default();
        if !subscribers.iter().any(|s| s.session == session) {
            subscribers.push(Subscriber {
                session: session.to_owned(),
                owner: owner.map(str::to_owned),
                link,
                listen: listen.cloned(),
            });
        }
    }

    /// Removes every subscription of `session`, which ended; returns the URIs it was
    /// subscribed to, and who is left on each.
    pub fn end_session(&self, session: &str) -> Vec<(String, Left)> {
        let mut by_uri = self.by_uri.lock().unwrap_or_else(|p| p.into_inner());
        let mut ended = Vec::new();
        by_uri.retain(|uri, subscribers| {
            if let Some(left) = remove(subscribers, session) {
                ended.push((uri.clone(), left));
            }
            !subscribers.is_empty()
        });
        ended
    }

    /// Removes `session`'s subscription to `uri`; says who is left on it.
    pub fn unsubscribe(&self, uri: &str, session: &str) -> Left {
        let mut by_uri = self.by_uri.lock().unwrap_or_else(|p| p.into_inner());
        let Some(subscribers) = by_uri.get_mut(uri) else {
            return Left {
                nobody: true,
                none_of_owner: true,
            };
        };
        // A session that was not subscribed ends nothing another still holds.
        let left = remove(subscribers, session).unwrap_or(Left {
            nobody: subscribers.is_empty(),
            none_of_owner: subscribers.is_empty(),
        });
        if subscribers.is_empty() {
            by_uri.remove(uri);
        }
        left
    }

    /// Tells the subscribers of `uri` it changed; of the update a per-user server's
    /// connection of `identity` heard, only that person's: the resource behind the URI is
    /// theirs, and whether it changed is nobody else's to learn.
    async fn deliver(&self, uri: &str, identity: Option<&str>) {
        let links: Vec<_> = self
            .by_uri
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(uri)
            .map(|s| {
                s.iter()
                    .filter(|s| {
                        identity.is_none_or(|identity| s.owner.as_deref() == Some(identity))
                    })
                    .map(|s| (s.link.clone(), s.listen.clone()))
                    .collect()
            })
            .unwrap_or_default();
        for (link, listen) in links {
            let mut updated =
                ResourceUpdatedNotification::new(ResourceUpdatedNotificationParam::new(uri));
            if let Some(id) = &listen {
                updated.extensions.insert(of_subscription(id));
            }
            link.notify(ServerNotification::ResourceUpdatedNotification(updated))
                .await;
        }
    }
}

/// The `_meta` that marks a notification as one of subscription (`subscriptions/listen`
/// request) `id`.
pub fn of_subscription(id: &RequestId) -> NotificationMetaObject {
    let mut meta = NotificationMetaObject::new();
    meta.set_subscription_id(id.clone());
    meta
}

/// Whether `subscribers` has one (of `owner`, when given).
fn any_of(subscribers: &[Subscriber], owner: Option<&str>) -> bool {
    match owner {
        Some(owner) => subscribers
            .iter()
            .any(|s| s.owner.as_deref() == Some(owner)),
        None => !subscribers.is_empty(),
    }
}

/// Removes `session` from `subscribers`; who is left, when it was one of them.
fn remove(subscribers: &mut Vec<Subscriber>, session: &str) -> Option<Left> {
    let at = subscribers.iter().position(|s| s.session == session)?;
    let removed = subscribers.remove(at);
    Some(Left {
        nobody: subscribers.is_empty(),
        none_of_owner: !subscribers.iter().any(|s| s.owner == removed.owner),
    })
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

    const NOBODY: Left = Left {
        nobody: true,
        none_of_owner: true,
    };

    #[test]
    fn an_ended_session_says_who_is_left_on_each_of_its_uris() {
        let subscriptions = Subscriptions::default();
        subscriptions.subscribe("a", ("s1", Some("ann")), link(), None);
        subscriptions.subscribe("b", ("s1", Some("ann")), link(), None);
        subscriptions.subscribe("b", ("s2", Some("bob")), link(), None);
        let mut ended = subscriptions.end_session("s1");
        ended.sort_by(|x, y| x.0.cmp(&y.0));
        let someone_else = Left {
            nobody: false,
            none_of_owner: true,
        };
        assert_eq!(
            ended,
            vec![("a".to_owned(), NOBODY), ("b".to_owned(), someone_else)]
        );
        assert!(subscriptions.end_session("s1").is_empty());
        assert_eq!(
            subscriptions.end_session("s2"),
            vec![("b".to_owned(), NOBODY)]
        );
    }

    #[test]
    fn the_uris_held_are_those_of_any_session_or_of_one_owners_sessions() {
        let subscriptions = Subscriptions::default();
        subscriptions.subscribe("a", ("s1", Some("ann")), link(), None);
        subscriptions.subscribe("b", ("s2", Some("bob")), link(), None);
        subscriptions.subscribe("b", ("s3", None), link(), None);
        let mut held = subscriptions.held(None);
        held.sort();
        assert_eq!(held, ["a", "b"]);
        assert_eq!(subscriptions.held(Some("ann")), ["a"]);
        assert_eq!(subscriptions.held(Some("bob")), ["b"]);
        assert!(subscriptions.held(Some("cat")).is_empty());
        assert!(subscriptions.holds("b", None) && subscriptions.holds("b", Some("bob")));
        assert!(!subscriptions.holds("b", Some("ann")) && !subscriptions.holds("c", None));
        subscriptions.end_session("s1");
        assert!(subscriptions.held(Some("ann")).is_empty());
        assert!(!subscriptions.holds("a", None));
    }

    #[test]
    fn an_unsubscribed_session_says_whether_its_owner_is_still_subscribed() {
        let subscriptions = Subscriptions::default();
        subscriptions.subscribe("a", ("s1", Some("ann")), link(), None);
        subscriptions.subscribe("a", ("s2", Some("ann")), link(), None);
        subscriptions.subscribe("a", ("s3", Some("bob")), link(), None);
        let left = subscriptions.unsubscribe("a", "s1");
        assert!(!left.ends_upstream(false) && !left.ends_upstream(true));
        let left = subscriptions.unsubscribe("a", "s2");
        assert!(!left.ends_upstream(false) && left.ends_upstream(true));
        assert_eq!(subscriptions.unsubscribe("a", "s3"), NOBODY);
        assert_eq!(subscriptions.unsubscribe("a", "s3"), NOBODY);
    }
}
