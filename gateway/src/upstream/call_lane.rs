//! The way a connection's tool calls take beside rmcp's client, whichever kind the
//! connection is: a stdio child's or a legacy SSE server's [`Lane`], or a streamable HTTP
//! server's [`HttpLane`].
//! A call on either has an id of its own (also its progress token), one exchange of the
//! request for the upstream's answer with the call's progress before it, and a
//! cancellation that does not wait for the upstream. The gateway's own requests (the
//! lists it reads) take the lane too, and get the answer as the upstream wrote it.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequest, ClientRequest, JsonObject, ProgressNotificationParam, ProtocolVersion,
    RequestId,
};

use super::client::StreamRequests;
pub use super::lane::Unanswered;
use super::lane::{self, CallAnswer, Lane, RawAnswer};
use super::sse::Posts;
use super::streamable_http::lane::HttpLane;

/// A connection's lane.
#[derive(Clone)]
pub enum CallLane {
    Stdio(Arc<Lane>),
    Sse(Arc<Lane<Posts>>),
    Http(Arc<HttpLane>),
}

impl CallLane {
    /// Serves a server of 2026-07-28 (`revision`), which has no session, with `requests`
    /// relaying what it asks on a call's stream.
    pub fn serve_stateless(&self, revision: &ProtocolVersion, requests: StreamRequests) {
        match self {
            Self::Stdio(lane) => lane.serve_stateless(requests),
            Self::Sse(lane) => lane.serve_stateless(requests),
            Self::Http(lane) => lane.serve_stateless(revision, requests),
        }
    }

    /// A request id for the next request, unique on the connection; also its progress
    /// token.
    pub fn next_id(&self) -> RequestId {
        match self {
            Self::Stdio(lane) => lane.next_id(),
            Self::Sse(lane) => lane.next_id(),
            Self::Http(lane) => lane.next_id(),
        }
    }

    /// Sends `request` under `id` (from [`Self::next_id`]) and waits for the answer as
    /// the upstream wrote it. What else the upstream sends meanwhile (progress, its
    /// requests) takes rmcp's way, marked as this request's where the transport tells.
    pub async fn request(
        &self,
        id: &RequestId,
        request: ClientRequest,
    ) -> Result<RawAnswer, Unanswered> {
        match self {
            Self::Stdio(lane) => lane
                .request(id.clone(), request)
                .await
                .ok_or(Unanswered::Closed),
            Self::Sse(lane) => lane
                .request(id.clone(), request)
                .await
                .ok_or(Unanswered::Closed),
            Self::Http(lane) => Box::pin(lane.request(id, request)).await,
        }
    }

    /// Tells the upstream the request `id` is cancelled, without waiting.
    pub fn cancel(&self, id: RequestId, reason: &str) {
        match self {
            Self::Stdio(lane) => lane.cancel(id, reason),
            Self::Sse(lane) => lane.cancel(id, reason),
            Self::Http(lane) => lane.cancel(id, reason),
        }
    }

    /// Starts a call, entered before its request is written so that the answer cannot
    /// come first; fails once the connection has ended.
    pub fn start(&self) -> Result<LaneCall, Unanswered> {
        match self {
            Self::Stdio(lane) => lane::Call::start(lane)
                .map(LaneCall::Stdio)
                .map_err(|_| Unanswered::Closed),
            Self::Sse(lane) => lane::Call::start(lane)
                .map(LaneCall::Sse)
                .map_err(|_| Unanswered::Closed),
            Self::Http(lane) => Ok(LaneCall::Http {
                id: lane.next_id(),
                lane: Arc::clone(lane),
            }),
        }
    }
}

/// One call in flight on a lane; dropping it forgets the call.
pub enum LaneCall {
    Stdio(lane::Call),
    Sse(lane::Call<Posts>),
    Http { lane: Arc<HttpLane>, id: RequestId },
}

impl LaneCall {
    /// The call's request id, unique on the connection; also its progress token.
    pub fn id(&self) -> &RequestId {
        match self {
            Self::Stdio(call) => call.id(),
            Self::Sse(call) => call.id(),
            Self::Http { id, .. } => id,
        }
    }

    /// Sends `request` under this call's id and waits for the upstream's answer, handing
    /// each progress notification that comes before it to `progress` (and awaiting it)
    /// first. `input_schema` is the called tool's, for the routing headers its arguments
    /// travel in to an HTTP server of 2026-07-28.
    pub async fn exchange<F>(
        &mut self,
        request: CallToolRequest,
        input_schema: Option<&JsonObject>,
        progress: impl FnMut(ProgressNotificationParam) -> F,
    ) -> Result<CallAnswer, Unanswered>
    where
        F: Future<Output = ()>,
    {
        match self {
            Self::Stdio(call) => call
                .exchange(request, progress)
                .await
                .ok_or(Unanswered::Closed),
            Self::Sse(call) => call
                .exchange(request, progress)
                .await
                .ok_or(Unanswered::Closed),
            // Boxed: an HTTP exchange's future is large, and every call on a stdio lane
            // would carry its size too (and copy it, as a call's future moves into its
            // task and its boxes).
            Self::Http { lane, id } => {
                Box::pin(lane.call(id, request, input_schema, progress)).await
            }
        }
    }

    /// Tells the upstream the call is cancelled (`notifications/cancelled`) without
    /// waiting for it; an answer that comes anyway is dropped.
    pub fn cancel(self, reason: &str) {
        match self {
            Self::Stdio(call) => call.cancel(reason),
            Self::Sse(call) => call.cancel(reason),
            Self::Http { lane, id } => lane.cancel(id, reason),
        }
    }
}
