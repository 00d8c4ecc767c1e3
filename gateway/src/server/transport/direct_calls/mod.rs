//! Tool calls served beside rmcp's service loop, because that loop costs more than the
//! call it forwards: it spawns a task per request, takes the answer back over a channel,
//! spawns another task to write it, and is woken once more when that task ends. On
//! streamable HTTP a request also crosses rmcp's session worker and becomes a one-event
//! SSE stream. With rmcp's loop on the upstream side too, the loops were a quarter of the
//! gateway's CPU forwarding calls over stdio at concurrency 32 (`serve_inner`, see
//! README's Performance).
//!
//! A [`Session`] runs a `tools/call` through the handler rmcp would call
//! (`Service::handle_request`, which shapes the result for the session's protocol as it
//! does for rmcp) and hands back the answer for its transport to deliver:
//!
//! - [`transport`]: the calls of a stdio or legacy SSE client, taken off its transport
//!   before rmcp sees them;
//! - [`http`]: a streamable HTTP `POST` of one `tools/call`, answered with plain JSON or
//!   an event stream of its own without reaching rmcp's session worker.
//!
//! rmcp's rules hold: a call the client cancels gets no answer, the session's
//! cancellation cancels its calls.

pub mod http;
pub mod transport;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::model::{
    ClientRequest, GetExtensions, GetMeta, JsonRpcMessage, RequestId, ServerJsonRpcMessage,
};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer, Service};
use tokio_util::sync::CancellationToken;

use crate::server::handler::GatewayServer;

/// One client session whose calls are served directly.
pub struct Session {
    peer: Peer<RoleServer>,
    server: GatewayServer,
    /// The session's cancellation, which every call's token is a child of.
    cancelled: CancellationToken,
    /// The calls in flight, each with its cancellation; a call the client cancelled is no
    /// longer here.
    calls: Mutex<HashMap<RequestId, CancellationToken>>,
}

impl Session {
    pub fn new(
        peer: Peer<RoleServer>,
        server: GatewayServer,
        cancelled: CancellationToken,
    ) -> Self {
        Self {
            peer,
            server,
            cancelled,
            calls: Mutex::default(),
        }
    }

    /// The client that opened the session.
    pub fn peer(&self) -> &Peer<RoleServer> {
        &self.peer
    }

    /// Serves `request` under `id`: its answer, or `None` when the client cancelled it.
    pub fn call(
        self: &Arc<Self>,
        id: RequestId,
        mut request: ClientRequest,
    ) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send + 'static {
        let call = self.cancelled.child_token();
        self.calls().insert(id.clone(), call.clone());
        let mut context = RequestContext::new(id.clone(), self.peer.clone());
        context.ct = call.child_token();
        context.meta = std::mem::take(request.get_meta_mut());
        context.extensions = std::mem::take(request.extensions_mut());
        let session = Arc::clone(self);
        async move {
            // Boxed: rmcp's dispatch is a future of a few KB, which spawning would copy
            // several times over.
            let result = Box::pin(session.server.handle_request(request, context)).await;
            let Some(call) = session.calls().remove(&id) else {
                tracing::debug!(%id, "dropping the answer to a call the client cancelled");
                return None;
            };
            call.cancel();
            Some(match result {
                Ok(result) => JsonRpcMessage::response(result, id),
                Err(error) => JsonRpcMessage::error(error, Some(id)),
            })
        }
    }

    /// Cancels call `id`, when it is one of this session's calls in flight.
    pub fn cancel(&self, id: &RequestId) {
        if let Some(call) = self.calls().remove(id) {
            call.cancel();
        }
    }

    /// Cancels every call of the session: it has ended.
    pub fn end(&self) {
        self.cancelled.cancel();
    }

    fn calls(&self) -> MutexGuard<'_, HashMap<RequestId, CancellationToken>> {
        self.calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
