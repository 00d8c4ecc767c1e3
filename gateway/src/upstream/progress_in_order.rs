//! An upstream's progress, in order with the answers it comes before.
//!
//! rmcp's service loop hands each notification it reads to a task of its own and each
//! answer straight to the request's waiter, so a call's last progress step could reach
//! the client after the call's answer, which clients drop. [`ProgressInOrder`] decorates
//! a connection's transport (see [`super::decorated`]) and takes the progress of requests entered in order
//! ([`CallRoutes::enter_in_order`]) off as it reads it, before rmcp sees what follows:
//! by the time a request's answer is handed over, all its earlier progress waits in the
//! request's queue, and the task that awaits the answer forwards it first. Stdio tool
//! calls on the [`super::lane`] get the same order from the lane itself.

use rmcp::RoleClient;
use rmcp::model::{JsonRpcMessage, ServerNotification};
use rmcp::service::RxJsonRpcMessage;
use rmcp::transport::Transport;

use super::decorated::Decoration;
use crate::relay::CallRoutes;

/// Sends a transport's progress for requests entered in order to their queues.
pub struct ProgressInOrder {
    calls: CallRoutes,
}

impl ProgressInOrder {
    pub fn new(calls: CallRoutes) -> Self {
        Self { calls }
    }
}

impl Decoration for ProgressInOrder {
    async fn receive<T: Transport<RoleClient>>(
        &mut self,
        inner: &mut T,
    ) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = inner.receive().await?;
            if let JsonRpcMessage::Notification(notification) = &message
                && let ServerNotification::ProgressNotification(progress) =
                    &notification.notification
                && self.calls.queue_progress(&progress.params)
            {
                continue;
            }
            return Some(message);
        }
    }
}
