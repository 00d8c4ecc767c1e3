//! This process among the replicas, alike for both stores: its name, new at every start,
//! and the channels through which what the replicas publish (events of standalone
//! streams, news of mailboxes) reaches this process's listeners. The memory store hears
//! only itself; Redis's subscription hears every replica.

use tokio::sync::broadcast;

use super::{PUBLISHED_BACKLOG, Published, StoredEvent};

#[derive(Clone)]
pub(super) struct Replica {
    name: String,
    published: broadcast::Sender<Published>,
    new_messages: broadcast::Sender<String>,
}

impl Replica {
    pub fn new() -> Self {
        Self {
            name: uuid::Uuid::new_v4().simple().to_string(),
            published: broadcast::channel(PUBLISHED_BACKLOG).0,
            new_messages: broadcast::channel(PUBLISHED_BACKLOG).0,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Event `id` (`payload`) of `session`'s standalone stream, as this replica publishes it.
    pub fn publication(&self, session: &str, id: String, payload: String) -> Published {
        Published {
            origin: self.name.clone(),
            session: session.to_owned(),
            event: StoredEvent { id, payload },
        }
    }

    /// Hands a published event to this process's listeners.
    pub fn heard_published(&self, event: Published) {
        // No receiver is no error: nobody holds a stream to deliver to.
        let _ = self.published.send(event);
    }

    /// Tells this process's listeners that a message was left in `mailbox`.
    pub fn heard_of_mail(&self, mailbox: String) {
        let _ = self.new_messages.send(mailbox);
    }

    pub fn published(&self) -> broadcast::Receiver<Published> {
        self.published.subscribe()
    }

    pub fn new_messages(&self) -> broadcast::Receiver<String> {
        self.new_messages.subscribe()
    }
}
