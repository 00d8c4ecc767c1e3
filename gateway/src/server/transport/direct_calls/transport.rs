//! A client's `tools/call` requests, taken off a transport of whole messages (stdio's
//! lines, legacy SSE's `POST`s) before rmcp sees them, and answered on the session's
//! [`Output`] by the task that serves them.
//!
//! It serves a call only once the session is initialized (rmcp serves the handshake), and
//! only when the request names no protocol version of its own (2026-07-28 per-request
//! metadata, which rmcp's loop scopes to the handler's task). Closing waits a while for
//! calls in flight, as rmcp's loop waits for its handlers when the client's input ends.
//! The drain waits for each answer to be written, as [`super::super::delivered`] makes it
//! do for rmcp's.

use std::io;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, GetMeta, JsonRpcMessage,
    JsonRpcRequest, RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::Transport;
use tokio_util::task::TaskTracker;

use super::Session;
use crate::drain::Drain;
use crate::lines::{LineWriter, encode};
use crate::server::transport::stdio::Writer;

/// How long closing waits for calls in flight, as rmcp's loop waits for its handlers when
/// the client's input ends.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// Where a session's messages to its client go, shared with its transport: a call
/// served here writes its answer there itself.
pub trait Output: Clone + Send + Sync + 'static {
    fn send(&self, message: ServerJsonRpcMessage) -> impl Future<Output = io::Result<()>> + Send;
}

/// A stdio client's input.
impl Output for LineWriter<Writer> {
    async fn send(&self, message: ServerJsonRpcMessage) -> io::Result<()> {
        self.write(&encode(&message)?).await
    }
}

/// A server transport that serves `tools/call` itself once its [`Session`] is set.
pub struct DirectCalls<T, O> {
    inner: T,
    output: O,
    session: Arc<OnceLock<Arc<Session>>>,
    drain: Arc<Drain>,
    tasks: TaskTracker,
}

impl<T, O: Output> DirectCalls<T, O> {
    /// `inner`, with its calls answered on `output` once `session` is set.
    pub fn new(
        inner: T,
        output: O,
        session: Arc<OnceLock<Arc<Session>>>,
        drain: Arc<Drain>,
    ) -> Self {
        Self {
            inner,
            output,
            session,
            drain,
            tasks: TaskTracker::new(),
        }
    }

    /// `message`, unless it is a call this serves itself.
    fn take(&mut self, message: ClientJsonRpcMessage) -> Option<ClientJsonRpcMessage> {
        match message {
            JsonRpcMessage::Request(JsonRpcRequest {
                id,
                request: request @ ClientRequest::CallToolRequest(_),
                jsonrpc,
            }) => match self.session.get() {
                Some(session) if request.get_meta().protocol_version().is_none() => {
                    self.serve(session, id, request);
                    None
                }
                _ => Some(JsonRpcMessage::Request(JsonRpcRequest {
                    id,
                    request,
                    jsonrpc,
                })),
            },
            JsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                    && let Some(session) = self.session.get()
                {
                    session.cancel(id);
                }
                // rmcp's handler hears of it too, as it does of any notification.
                Some(JsonRpcMessage::Notification(notification))
            }
            other => Some(other),
        }
    }

    fn serve(&self, session: &Arc<Session>, id: RequestId, request: ClientRequest) {
        let answer = session.call(id, request);
        let output = self.output.clone();
        let delivery = self.drain.delivery();
        self.tasks.spawn(async move {
            let Some(answer) = answer.await else {
                return;
            };
            if let Err(error) = output.send(answer).await {
                tracing::debug!("could not answer a tool call: {error}");
            }
            // Only now has the answer gone out.
            drop(delivery);
        });
    }
}

impl<T: Transport<RoleServer>, O: Output> Transport<RoleServer> for DirectCalls<T, O> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    /// Cancel-safe as `inner`'s is: what follows its read does not wait.
    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            let message = self.inner.receive().await?;
            if let Some(message) = self.take(message) {
                return Some(message);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.tasks.close();
        if tokio::time::timeout(CLOSE_WAIT, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("closing a session with tool calls still running");
        }
        self.inner.close().await
    }
}
