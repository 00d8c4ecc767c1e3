//! A stdio client's `tools/call` requests, served beside rmcp's service loop.
//!
//! rmcp's loop spawns a task per request, takes its answer back over a channel, spawns
//! another task to write it, and is woken once more when that task ends. With the same
//! loop on the upstream side, rmcp's loops were a quarter of the gateway's CPU forwarding
//! calls at concurrency 32 (`serve_inner`, see README's Performance). [`DirectCalls`]
//! takes a `tools/call` off the transport before rmcp sees it, runs it in a task of its own
//! through the handler rmcp would call (`Service::handle_request`, which shapes the result
//! for the session's protocol as it does for rmcp), and writes the answer itself.
//!
//! It serves a call only once the session is initialized (rmcp serves the handshake), and
//! only when the request names no protocol version of its own (2026-07-28 per-request
//! metadata, which rmcp's loop scopes to the handler's task). rmcp's rules hold: a call
//! the client cancels gets no answer, the session's cancellation cancels its calls, and
//! closing waits a while for calls in flight. The drain waits for each answer to be
//! written, as [`super::delivered`] makes it do for rmcp's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, GetExtensions, GetMeta,
    JsonRpcMessage, JsonRpcRequest, RequestId, ServerJsonRpcMessage,
};
use rmcp::service::RequestContext;
use rmcp::transport::Transport;
use rmcp::{Peer, RoleServer, Service};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::stdio::Writer;
use crate::drain::Drain;
use crate::lines::{LineWriter, encode};
use crate::server::handler::GatewayServer;

/// How long closing waits for calls in flight, as rmcp's loop waits for its handlers when
/// the client's input ends.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// The calls in flight, each with its cancellation; a call the client cancelled is no
/// longer here.
type Calls = Mutex<HashMap<RequestId, CancellationToken>>;

/// What serving a call needs, known once the session is initialized.
pub struct Session {
    pub peer: Peer<RoleServer>,
    pub server: GatewayServer,
}

/// A server transport that serves `tools/call` itself once [`Session`] is set.
pub struct DirectCalls<T> {
    inner: T,
    /// The client's input, shared with `inner`.
    writer: LineWriter<Writer>,
    session: Arc<OnceLock<Session>>,
    /// The session's cancellation, which every call's token is a child of.
    session_cancelled: CancellationToken,
    drain: Arc<Drain>,
    calls: Arc<Calls>,
    tasks: TaskTracker,
}

impl<T> DirectCalls<T> {
    pub fn new(
        inner: T,
        writer: LineWriter<Writer>,
        session: Arc<OnceLock<Session>>,
        session_cancelled: CancellationToken,
        drain: Arc<Drain>,
    ) -> Self {
        Self {
            inner,
            writer,
            session,
            session_cancelled,
            drain,
            calls: Arc::default(),
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
                    && let Some(call) = lock(&self.calls).remove(id)
                {
                    call.cancel();
                }
                // rmcp's handler hears of it too, as it does of any notification.
                Some(JsonRpcMessage::Notification(notification))
            }
            other => Some(other),
        }
    }

    fn serve(&self, session: &Session, id: RequestId, mut request: ClientRequest) {
        let call = self.session_cancelled.child_token();
        lock(&self.calls).insert(id.clone(), call.clone());
        let mut context = RequestContext::new(id.clone(), session.peer.clone());
        context.ct = call.child_token();
        context.meta = std::mem::take(request.get_meta_mut());
        context.extensions = std::mem::take(request.extensions_mut());
        let server = session.server.clone();
        let writer = self.writer.clone();
        let calls = Arc::clone(&self.calls);
        let delivery = self.drain.delivery();
        self.tasks.spawn(async move {
            let result = server.handle_request(request, context).await;
            let Some(call) = lock(&calls).remove(&id) else {
                tracing::debug!(%id, "dropping the answer to a call the client cancelled");
                return;
            };
            call.cancel();
            let answer: ServerJsonRpcMessage = match result {
                Ok(result) => JsonRpcMessage::response(result, id),
                Err(error) => JsonRpcMessage::error(error, Some(id)),
            };
            let written = match encode(&answer) {
                Ok(line) => writer.write(&line).await,
                Err(error) => Err(error),
            };
            if let Err(error) = written {
                tracing::debug!("could not answer a tool call: {error}");
            }
            // Only now has the answer gone out.
            drop(delivery);
        });
    }
}

fn lock(calls: &Calls) -> MutexGuard<'_, HashMap<RequestId, CancellationToken>> {
    calls
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for DirectCalls<T> {
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
            tracing::warn!("closing a stdio session with tool calls still running");
        }
        self.inner.close().await
    }
}
