//! A bound on how many of an upstream's notifications are being handled at once.
//!
//! rmcp's service loop hands every notification it reads to a task of its own and reads on.
//! When an upstream sends them faster than those tasks run, the tasks pile up. tokio's
//! cooperative budget does not stop that on one worker thread: the loop's yield comes back
//! after a few dozen tasks have run, not after all it left behind, so a flood of log
//! messages grew the gateway by hundreds of MB a second and its calls went unanswered.
//!
//! [`InFlightBound`] decorates a connection's transport (see [`super::decorated`]): every
//! notification it hands over carries a permit, which rmcp's task releases when it drops the notification's context,
//! and no message is read while [`IN_FLIGHT`] permits are out. A flood then waits in the
//! upstream's pipe or socket, where it costs the gateway nothing.

use std::sync::Arc;

use rmcp::RoleClient;
use rmcp::model::{GetExtensions, JsonRpcMessage};
use rmcp::service::RxJsonRpcMessage;
use rmcp::transport::Transport;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::decorated::Decoration;

/// Notifications of one upstream connection handled at once. Generous, as a handler may
/// wait for a slow client (progress); each costs a task of a few hundred bytes.
pub const IN_FLIGHT: usize = 256;

/// Handles a transport's notifications at most [`IN_FLIGHT`] at a time.
pub struct InFlightBound {
    permits: Arc<Semaphore>,
}

/// The permit a notification carries in its extensions until its handler is done.
#[derive(Clone)]
struct Handling {
    _permit: Arc<OwnedSemaphorePermit>,
}

impl InFlightBound {
    pub fn new() -> Self {
        Self::with_limit(IN_FLIGHT)
    }

    fn with_limit(limit: usize) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(limit)),
        }
    }
}

impl Decoration for InFlightBound {
    /// Cancel-safe when the inner `receive` is: the permit is taken before anything is read.
    async fn receive<T: Transport<RoleClient>>(
        &mut self,
        inner: &mut T,
    ) -> Option<RxJsonRpcMessage<RoleClient>> {
        // The semaphore is never closed.
        let permit = Arc::clone(&self.permits).acquire_owned().await.ok()?;
        let mut message = inner.receive().await?;
        if let JsonRpcMessage::Notification(notification) = &mut message {
            notification.notification.extensions_mut().insert(Handling {
                _permit: Arc::new(permit),
            });
        }
        Some(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use futures::FutureExt;
    use rmcp::model::{ServerNotification, ToolListChangedNotification};
    use rmcp::service::TxJsonRpcMessage;

    use crate::upstream::decorated::Decorated;

    /// An upstream that always has one more notification to send.
    struct Flood;

    impl Transport<RoleClient> for Flood {
        type Error = std::io::Error;

        fn send(
            &mut self,
            _item: TxJsonRpcMessage<RoleClient>,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            std::future::ready(Ok(()))
        }

        async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
            Some(JsonRpcMessage::notification(
                ServerNotification::ToolListChangedNotification(
                    ToolListChangedNotification::default(),
                ),
            ))
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn no_message_is_read_while_every_permit_is_out_and_a_handled_one_frees_its_own() {
        let mut bounded = Decorated::new(Flood, InFlightBound::with_limit(2));
        let first = bounded.receive().await.unwrap();
        let _second = bounded.receive().await.unwrap();
        assert!(
            bounded.receive().now_or_never().is_none(),
            "a third notification was read"
        );
        drop(first);
        assert!(bounded.receive().await.is_some());
    }
}
