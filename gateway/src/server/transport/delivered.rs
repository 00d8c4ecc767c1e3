//! A transport filter that tells the drain which requests still owe their client an
//! answer, because the drain must not close a session between the moment a call finishes
//! and the moment its result has gone out (see [`crate::drain`]).
//!
//! [`Delivered`] wraps the stdio and legacy SSE transports. Every request it reads takes a
//! [`Delivery`]; the delivery is released once the transport has sent the response or
//! error with that id (written to stdout; queued on the SSE stream, which writes what is
//! queued before it ends), or when the client cancels the request (it expects no answer
//! then), or when the session ends. Streamable HTTP answers each request on its own `POST`
//! response, so the listener counts those bodies instead.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ClientNotification, RequestId, ServerJsonRpcMessage};
use rmcp::transport::Transport;

use crate::drain::{Delivery, Drain};

/// A server transport that counts its unanswered requests in the drain.
pub struct Delivered<T> {
    inner: T,
    drain: Arc<Drain>,
    owed: HashMap<RequestId, Delivery>,
}

impl<T> Delivered<T> {
    pub fn new(inner: T, drain: Arc<Drain>) -> Self {
        Self {
            inner,
            drain,
            owed: HashMap::new(),
        }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Delivered<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answered = match &item {
            ServerJsonRpcMessage::Response(response) => self.owed.remove(&response.id),
            ServerJsonRpcMessage::Error(error) => {
                error.id.as_ref().and_then(|id| self.owed.remove(id))
            }
            _ => None,
        };
        let sent = self.inner.send(item);
        async move {
            let result = sent.await;
            // Only now has the answer gone out.
            drop(answered);
            result
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        let message = self.inner.receive().await?;
        match &message {
            ClientJsonRpcMessage::Request(request) => {
                self.owed.insert(request.id.clone(), self.drain.delivery());
            }
            ClientJsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                {
                    self.owed.remove(id);
                }
            }
            _ => {}
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
