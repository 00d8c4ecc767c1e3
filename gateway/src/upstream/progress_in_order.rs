//! An upstream's progress, in order with the answers it comes before.
//!
//! rmcp's service loop hands each notification it reads to a task of its own and each
//! answer straight to the request's waiter, so a call's last progress step could reach
//! the client after the call's answer, which clients drop. [`ProgressInOrder`] wraps a
//! connection's transport and takes the progress of requests entered in order
//! ([`CallRoutes::enter_in_order`]) off as it reads it, before rmcp sees what follows:
//! by the time a request's answer is handed over, all its earlier progress waits in the
//! request's queue, and the task that awaits the answer forwards it first. Stdio tool
//! calls on the [`super::lane`] get the same order from the lane itself.

use rmcp::RoleClient;
use rmcp::model::{JsonRpcMessage, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use crate::relay::CallRoutes;

/// A transport whose progress for requests entered in order goes to their queues.
pub struct ProgressInOrder<T> {
    inner: T,
    calls: CallRoutes,
}

impl<T> ProgressInOrder<T> {
    pub fn new(inner: T, calls: CallRoutes) -> Self {
        Self { inner, calls }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for ProgressInOrder<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = self.inner.receive().await?;
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

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
