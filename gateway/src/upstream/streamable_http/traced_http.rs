//! The W3C `traceparent` (and `tracestate`) header on every request to a streamable HTTP
//! upstream whose `_meta` carries one, over the gateway's HTTP client.
//!
//! The gateway puts the trace context of each tool call in the request's `_meta` (see
//! `observe::telemetry`); HTTP servers and proxies in front of an upstream read it from
//! the header instead, so the same value goes in both places.
//!
//! Every request rmcp's transport sends passes here, so this is also where the
//! connection's [`SessionSlot`] learns the session its tool calls go in (see
//! [`super::lane`]).

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, GetMeta};
use rmcp::transport::streamable_http_client::{
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};

use super::lane::SessionSlot;
use crate::http_client::{Events, Failed, McpHttp, Target};
use crate::observe::telemetry::{TRACEPARENT, TRACESTATE};

/// A layer of the connection's HTTP client (the gateway's own, or a signed-in one over
/// it) that puts on trace headers from `_meta` and notes the session in its slot.
pub struct TracedHttp {
    inner: Arc<dyn McpHttp>,
    session: SessionSlot,
}

impl TracedHttp {
    pub fn new(inner: Arc<dyn McpHttp>, session: SessionSlot) -> Self {
        Self { inner, session }
    }
}

/// Adds `traceparent`/`tracestate` from the request's `params._meta` to `headers`.
fn with_trace_headers(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    let ClientJsonRpcMessage::Request(request) = message else {
        return headers;
    };
    let meta = request.request.get_meta();
    let found = [
        (TRACEPARENT, meta.get_traceparent()),
        (TRACESTATE, meta.get_tracestate()),
    ];
    for (key, value) in found {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(v).ok()) {
            headers.insert(HeaderName::from_static(key), value);
        }
    }
    headers
}

impl McpHttp for TracedHttp {
    fn post(
        &self,
        mut to: Target,
        message: ClientJsonRpcMessage,
        limits: StreamableHttpResponseLimits,
    ) -> BoxFuture<'_, Result<StreamableHttpPostResponse, Failed>> {
        self.session
            .note(&message, to.session_id.as_ref(), &to.headers);
        to.headers = with_trace_headers(&message, to.headers);
        self.inner.post(to, message, limits)
    }

    fn get_stream(
        &self,
        to: Target,
        last_event_id: Option<String>,
        max_event_size: usize,
    ) -> BoxFuture<'_, Result<Events, Failed>> {
        self.inner.get_stream(to, last_event_id, max_event_size)
    }

    fn delete_session(&self, to: Target) -> BoxFuture<'_, Result<(), Failed>> {
        self.inner.delete_session(to)
    }
}
