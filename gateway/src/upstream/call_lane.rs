//! The way a connection's tool calls take beside rmcp's client, whichever kind the
//! connection is: a stdio child's or a legacy SSE server's [`Lane`], or a streamable HTTP
//! server's [`HttpLane`].
//! A call on either has an id of its own (also its progress token), one exchange of the
//! request for the upstream's answer with the call's progress before it, and a
//! cancellation that does not wait for the upstream. The gateway's own requests (the
//! lists it reads) take the lane too, and get the answer as the upstream wrote it. A
//! request an HTTP upstream gives back for want of a session is sent on the lane again
//! once rmcp has renewed the session ([`CallLane::in_session`]).

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

    /// Resolves once a streamable HTTP upstream that forgot the connection's session has
    /// a new one; never for a stdio or legacy SSE lane, whose session ends only with the
    /// connection.
    pub async fn session_renewed(&self) {
        match self {
            Self::Http(lane) => lane.session_renewed().await,
            Self::Stdio(_) | Self::Sse(_) => std::future::pending().await,
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

    /// Sends `request` with `send` on this lane, which gives `None` when an HTTP lane has
    /// no session for it: the upstream forgot it (404) and never saw the request, so it is
    /// safe to send again. `renew` then has rmcp's client open a new session (see
    /// [`renew_session`]), and the request goes on the lane once more, its answer read as
    /// the upstream wrote it. `Err` with the request when even then the lane had no
    /// session, for rmcp's client to send; `Err(None)` from a stdio or legacy SSE lane,
    /// which never loses its session and keeps no copy.
    ///
    /// [`renew_session`]: super::streamable_http::lane::renew_session
    pub async fn in_session<R, T, E, F>(
        &self,
        request: R,
        mut send: impl FnMut(R) -> F,
        renew: impl Future<Output = Result<(), E>>,
    ) -> Result<Result<T, Option<R>>, E>
    where
        R: Clone,
        F: Future<Output = Result<Option<T>, E>>,
    {
        let Self::Http(_) = self else {
            return Ok(send(request).await?.ok_or(None));
        };
        let again = request.clone();
        if let Some(answer) = send(request).await? {
            return Ok(Ok(answer));
        }
        renew.await?;
        let last = again.clone();
        Ok(send(again).await?.ok_or(Some(last)))
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
