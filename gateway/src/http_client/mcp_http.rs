//! What the gateway asks of an HTTP client to an MCP endpoint, as one small trait
//! ([`McpHttp`]): post a JSON-RPC message, open an event stream, end a session. The
//! gateway's own client ([`super::UpstreamHttp`]) is the bottom of a connection's stack;
//! what a connection adds on its way (the trace headers, the sign-in) is a layer: a type
//! that holds the next [`McpHttp`] and implements [`McpHttp`] itself.
//!
//! rmcp's streamable HTTP transport reaches the stack through one adapter,
//! [`RmcpHttp`], the only implementation of rmcp's `StreamableHttpClient` in the
//! gateway; the upstream's lane (`upstream::streamable_http::lane`) uses the stack as it is.
//!
//! Adding a layer: a struct holding `Arc<dyn McpHttp>`, its [`McpHttp`] implementation
//! (what it does on a post, and forwarding the rest), and one line where the connection
//! stacks its layers (`upstream::streamable_http`).

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};

use super::HttpError;

/// Why an exchange failed: rmcp's errors of streamable HTTP, over ours below them.
pub type Failed = StreamableHttpError<HttpError>;

/// The events of an SSE response.
pub type Events = BoxStream<'static, Result<Sse, SseError>>;

/// Where a request goes, and what it carries besides its body.
#[derive(Clone)]
pub struct Target {
    pub uri: Arc<str>,
    /// `Mcp-Session-Id`, once the server gave one.
    pub session_id: Option<Arc<str>>,
    /// A bearer token; `None` leaves it to a signed-in layer, if any.
    pub auth_token: Option<String>,
    /// The configured headers, `MCP-Protocol-Version`, trace and routing headers.
    pub headers: HashMap<HeaderName, HeaderValue>,
}

/// The exchanges of a streamable HTTP connection (see the module documentation).
///
/// A JSON answer to a lane's request (an id from [`super::FIRST_LANE_ID`]) comes back
/// unparsed, as the one event of an SSE stream: see [`super::UpstreamHttp`].
pub trait McpHttp: Send + Sync + 'static {
    /// Posts `message`; the server's answer, read within `limits`.
    fn post(
        &self,
        to: Target,
        message: ClientJsonRpcMessage,
        limits: StreamableHttpResponseLimits,
    ) -> BoxFuture<'_, Result<StreamableHttpPostResponse, Failed>>;

    /// Opens the session's event stream (a GET), after `last_event_id` when given; no
    /// event may be larger than `max_event_size`.
    fn get_stream(
        &self,
        to: Target,
        last_event_id: Option<String>,
        max_event_size: usize,
    ) -> BoxFuture<'_, Result<Events, Failed>>;

    /// Ends the session (a DELETE).
    fn delete_session(&self, to: Target) -> BoxFuture<'_, Result<(), Failed>>;
}

/// rmcp's streamable HTTP transport over a stack of [`McpHttp`].
#[derive(Clone)]
pub struct RmcpHttp(pub Arc<dyn McpHttp>);

fn target(
    uri: Arc<str>,
    session_id: Option<Arc<str>>,
    auth_token: Option<String>,
    headers: HashMap<HeaderName, HeaderValue>,
) -> Target {
    Target {
        uri,
        session_id,
        auth_token,
        headers,
    }
}

impl StreamableHttpClient for RmcpHttp {
    type Error = HttpError;

    fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, Failed>> + Send + '_ {
        let to = target(uri, session_id, auth_token, headers);
        self.0
            .post(to, message, StreamableHttpResponseLimits::default())
    }

    fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, Failed>> + Send + '_ {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        let to = target(uri, session_id, auth_token, headers);
        self.0.post(to, message, limits)
    }

    fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, Failed>> + Send + '_ {
        let to = target(uri, session_id, auth_token, headers);
        self.0.post(to, message, limits)
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_token: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<(), Failed>> + Send + '_ {
        let to = target(uri, Some(session_id), auth_token, headers);
        self.0.delete_session(to)
    }

    fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<Events, Failed>> + Send + '_ {
        let to = target(uri, session_id, auth_token, headers);
        let max_event_size = StreamableHttpResponseLimits::default().max_sse_event_size;
        self.0.get_stream(to, last_event_id, max_event_size)
    }

    fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Result<Events, Failed>> + Send + '_ {
        let to = target(uri, session_id, auth_token, headers);
        self.0.get_stream(to, last_event_id, max_sse_event_size)
    }
}
