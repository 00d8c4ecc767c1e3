//! What a client is told when what it can see changes: its tools (the catalog, or the
//! tools its `search_tools` found), prompts or resources.
//!
//! A client that initialized (2025-11-25 and earlier) is told on the session's stream
//! from its `notifications/initialized` on ([`catalog`]). A client on 2026-07-28 has no
//! session: it opens a `subscriptions/listen` request, whose stream begins with
//! `notifications/subscriptions/acknowledged` and then carries the changes it asked for,
//! each marked with the subscription's id ([`listen`]); the updates of the resources it
//! asked for come on the same stream, through the gateway's resource subscriptions
//! (`methods::subscriptions`).

use std::sync::{Arc, Weak};

use rmcp::ErrorData;
use rmcp::model::{
    PromptListChangedNotification, RequestId, ResourceListChangedNotification, ServerNotification,
    ServerResult, SubscriptionFilter, SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams, SubscriptionsListenResult,
    ToolListChangedNotification,
};
use tokio_util::sync::CancellationToken;

use crate::gateway::Gateway;
use crate::gateway::search_tools::Found;
use crate::registry::Catalog;
use crate::registry::subscriptions::of_subscription;
use crate::relay::{ClientLink, ListKind};
use crate::server::identity;
use crate::session::Session;

/// What one session sees of the catalog, to tell when it changed.
#[derive(Clone, PartialEq)]
struct Visible {
    tools: Vec<Arc<rmcp::model::JsonObject>>,
    prompts: Vec<String>,
    resources: Vec<String>,
}

/// What the session could see when it initialized, until its watcher starts from it.
#[derive(Clone, Default)]
struct ShownAtInitialize(Option<Visible>);

impl Visible {
    fn of(gateway: &Gateway, session: &Session) -> Visible {
        let view = gateway.view(session);
        Visible {
            tools: gateway.visible_tools(session),
            prompts: view.prompts().map(|p| p.definition.name.clone()).collect(),
            resources: view
                .resources()
                .map(|r| r.uri.clone())
                .chain(view.resource_templates().map(|t| t.uri_template.clone()))
                .collect(),
        }
    }
}

/// Which lists changed.
struct Changed {
    tools: bool,
    prompts: bool,
    resources: bool,
}

/// Changes to what one session sees, as they happen.
struct Watch {
    gateway: Arc<Gateway>,
    /// The session watched, not kept alive by its watch.
    session: Weak<Session>,
    catalog: tokio::sync::watch::Receiver<Arc<Catalog>>,
    announced: tokio::sync::broadcast::Receiver<(Arc<str>, ListKind)>,
    found: Found,
    shown: Visible,
}

impl Watch {
    fn new(gateway: Arc<Gateway>, session: &Arc<Session>, shown: Visible) -> Self {
        Watch {
            catalog: gateway.registry().watch(),
            announced: gateway.downstream().announced.subscribe(),
            found: Found::of(session),
            gateway,
            session: Arc::downgrade(session),
            shown,
        }
    }

    /// The next change, or `None` once `until` is cancelled or the gateway stops.
    async fn next(&mut self, until: &CancellationToken) -> Option<Changed> {
        loop {
            let mut announced = None;
            tokio::select! {
                changed = self.catalog.changed() => changed.ok()?,
                () = self.found.changed() => {}
                heard = self.announced.recv() => announced = heard.ok(),
                () = self.gateway.shutdown_token().cancelled() => return None,
                () = until.cancelled() => return None,
            }
            // The one server the gateway stands in for says what changed, as itself.
            let passed_on = announced
                .filter(|(server, _)| {
                    identity::stood_in_for(&self.gateway).is_some_and(|one| one.name == *server)
                })
                .map(|(_, kind)| kind);
            let session = self.session.upgrade()?;
            let now = Visible::of(&self.gateway, &session);
            let changed = Changed {
                tools: now.tools != self.shown.tools || passed_on == Some(ListKind::Tools),
                prompts: now.prompts != self.shown.prompts || passed_on == Some(ListKind::Prompts),
                resources: now.resources != self.shown.resources
                    || passed_on == Some(ListKind::Resources),
            };
            self.shown = now;
            if changed.tools || changed.prompts || changed.resources {
                return Some(changed);
            }
        }
    }
}

/// Remembers what `session` can list now that its client initialized: the watcher
/// tells it of any change since, however late it starts.
pub(super) fn shown_at_initialize(gateway: &Gateway, session: &Session) {
    let shown = Visible::of(gateway, session);
    session.with_state(|initial: &mut ShownAtInitialize| initial.0 = Some(shown));
}

/// Tells an initialized client, through `link`, of every change to what it sees, until
/// its session ends.
pub(super) fn catalog(gateway: &Arc<Gateway>, session: &Arc<Session>, link: ClientLink) {
    let gateway = gateway.clone();
    let shown = session
        .with_state(|initial: &mut ShownAtInitialize| initial.0.take())
        .unwrap_or_else(|| Visible::of(&gateway, session));
    let until = session.running.closed.clone();
    // The task holds no strong reference to the session: it stops when the session ends.
    let mut watch = Watch::new(gateway, session, shown);
    tokio::spawn(async move {
        while let Some(changed) = watch.next(&until).await {
            if !send(&link, &changed, None).await {
                break;
            }
        }
    });
}

/// Serves `subscriptions/listen` (request `id` of `session`): acknowledges what of
/// `requested` the gateway can deliver (of its resources, those `subscribed` for this
/// stream), then carries those changes through `link`, the request's stream, until the
/// client closes it (`closed`).
pub(super) async fn listen(
    gateway: &Arc<Gateway>,
    session: Arc<Session>,
    (id, link, closed): (&RequestId, &ClientLink, &CancellationToken),
    requested: SubscriptionFilter,
    subscribed: Vec<String>,
) -> Result<ServerResult, ErrorData> {
    let mut offered = SubscriptionFilter::new();
    offered.tools_list_changed = Some(true);
    offered.prompts_list_changed = Some(true);
    offered.resources_list_changed = Some(true);
    offered.resource_subscriptions = Some(subscribed);
    let accepted = requested.intersection(&offered);
    let mut acknowledged = SubscriptionsAcknowledgedNotification::new(
        SubscriptionsAcknowledgedNotificationParams::new(accepted.clone()),
    );
    acknowledged.extensions.insert(of_subscription(id));
    let notification = ServerNotification::SubscriptionsAcknowledgedNotification(acknowledged);
    if !link.notify(notification).await {
        return Err(ErrorData::internal_error(
            "the subscription's stream closed",
            None,
        ));
    }
    let shown = Visible::of(gateway, &session);
    let mut watch = Watch::new(gateway.clone(), &session, shown);
    while let Some(mut changed) = watch.next(closed).await {
        changed.tools &= accepted.tools_list_changed == Some(true);
        changed.prompts &= accepted.prompts_list_changed == Some(true);
        changed.resources &= accepted.resources_list_changed == Some(true);
        if !send(link, &changed, Some(id)).await {
            break;
        }
    }
    Ok(ServerResult::SubscriptionsListenResult(
        SubscriptionsListenResult::complete(id.clone()),
    ))
}

/// Sends the notifications of `changed` through `link`, marked as the subscription's
/// when there is one; false when the client is gone.
async fn send(link: &ClientLink, changed: &Changed, subscription_id: Option<&RequestId>) -> bool {
    let mark = |extensions: &mut rmcp::model::Extensions| {
        if let Some(id) = subscription_id {
            extensions.insert(of_subscription(id));
        }
    };
    let mut notifications = Vec::new();
    if changed.tools {
        let mut notification = ToolListChangedNotification::default();
        mark(&mut notification.extensions);
        notifications.push(ServerNotification::ToolListChangedNotification(
            notification,
        ));
    }
    if changed.prompts {
        let mut notification = PromptListChangedNotification::default();
        mark(&mut notification.extensions);
        notifications.push(ServerNotification::PromptListChangedNotification(
            notification,
        ));
    }
    if changed.resources {
        let mut notification = ResourceListChangedNotification::default();
        mark(&mut notification.extensions);
        notifications.push(ServerNotification::ResourceListChangedNotification(
            notification,
        ));
    }
    for notification in notifications {
        if !link.notify(notification).await {
            return false;
        }
    }
    true
}
