//! The W3C `traceparent` (and `tracestate`) header on every request to a streamable HTTP
//! upstream whose `_meta` carries one, over the gateway's HTTP client.
//!
//! The gateway puts the trace context of each tool call in the request's `_meta` (see
//! `observe::telemetry`); HTTP servers and proxies in front of an upstream read it from
//! the header instead, so the same value goes in both places.
//!
//! Every request rmcp's transport sends passes here, so this is also where the
//! connection's [`SessionSlot`] learns the session its tool calls go in (see
//! [`super::http_lane`]).

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, GetMeta};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};

use super::lane::SessionSlot;
use crate::observe::telemetry::{TRACEPARENT, TRACESTATE};

/// An HTTP client for rmcp's streamable HTTP transport (the gateway's own, or a signed-in
/// client over it), with trace headers from `_meta`, noting the session in its slot.
#[derive(Clone)]
pub struct TracedHttp<C> {
    client: C,
    session: SessionSlot,
}

impl<C> TracedHttp<C> {
    pub fn new(client: C, session: SessionSlot) -> Self {
        Self { client, session }
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

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for TracedHttp<C> {
    type Error = C::Error;

    fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>>>
    + Send
    + '_ {
        self.session
            .note(&message, session_id.as_ref(), &custom_headers);
        let headers = with_trace_headers(&message, custom_headers);
        self.client
            .post_message(uri, message, session_id, auth_header, headers)
    }

    fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>>>
    + Send
    + '_ {
        self.session
            .note(&message, session_id.as_ref(), &custom_headers);
        let headers = with_trace_headers(&message, custom_headers);
        self.client.post_message_with_max_sse_event_size(
            uri,
            message,
            session_id,
            auth_header,
            headers,
            max_sse_event_size,
        )
    }

    fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>>>
    + Send
    + '_ {
        self.session
            .note(&message, session_id.as_ref(), &custom_headers);
        let headers = with_trace_headers(&message, custom_headers);
        self.client.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            headers,
            limits,
        )
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<(), StreamableHttpError<Self::Error>>> + Send + '_ {
        self.client
            .delete_session(uri, session_id, auth_header, custom_headers)
    }

    fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<
        Output = Result<
            BoxStream<'static, Result<Sse, SseError>>,
            StreamableHttpError<Self::Error>,
        >,
    > + Send
    + '_ {
        self.client
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
    }

    fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<
        Output = Result<
            BoxStream<'static, Result<Sse, SseError>>,
            StreamableHttpError<Self::Error>,
        >,
    > + Send
    + '_ {
        self.client.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        )
    }
}
