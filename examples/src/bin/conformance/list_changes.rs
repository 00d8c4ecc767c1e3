//! Tool and prompt list changes, carried to every open `subscriptions/listen` stream.
//!
//! On 2026-07-28 a client hears about changes only on a `subscriptions/listen` stream,
//! opened by one request and fed by changes that other requests cause (the suite calls
//! `test_trigger_tool_change` or `test_trigger_prompt_change` on a separate connection
//! once the stream is acknowledged). Each request is served by its own handler, so the
//! changes go through one broadcast channel that every handler shares. rmcp's
//! [`SubscriptionSink`](rmcp::service::SubscriptionSink) tags each notification with the
//! subscription's id and drops those the client did not ask for.

use rmcp::ErrorData;
use rmcp::service::{SubscriptionContext, SubscriptionSendError};
use tokio::sync::broadcast;

/// A change a listening client may want to hear about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListChange {
    Tools,
    Prompts,
}

/// The broadcast every handler of this process shares.
#[derive(Clone)]
pub struct ListChanges(broadcast::Sender<ListChange>);

impl ListChanges {
    /// Changes a stream has not taken yet are kept up to this many; a stream further
    /// behind misses the oldest (these are hints to refetch a list, not data).
    const BACKLOG: usize = 16;

    pub fn new() -> Self {
        Self(broadcast::channel(Self::BACKLOG).0)
    }

    /// Tells every open stream (none may be open: then nobody hears it).
    pub fn announce(&self, change: ListChange) {
        let _ = self.0.send(change);
    }

    /// Carries changes to one acknowledged subscription until the client cancels it or
    /// its stream closes.
    pub async fn forward(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.0.subscribe();
        loop {
            let change = tokio::select! {
                () = subscription.cancelled() => return Ok(()),
                change = changes.recv() => change,
            };
            let sink = subscription.sink();
            let sent = match change {
                Ok(ListChange::Tools) => sink.notify_tool_list_changed().await,
                Ok(ListChange::Prompts) => sink.notify_prompt_list_changed().await,
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return Ok(()),
            };
            match sent {
                Ok(()) | Err(SubscriptionSendError::NotificationNotAccepted(_)) => {}
                Err(_) => return Ok(()),
            }
        }
    }
}
