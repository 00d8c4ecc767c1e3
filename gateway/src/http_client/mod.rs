//! The HTTP client of streamable HTTP upstreams: pooled connections that the task using
//! one drives itself ([`pool`]), and that acknowledge what they receive at once.
//!
//! Many MCP servers write an answer in two pieces. rmcp's `StreamableHttpService` sends
//! the response head with an SSE priming event first, then the message; served by
//! `axum::serve` with its defaults, Nagle's algorithm holds the second piece until the
//! first is acknowledged, and Linux delays that acknowledgement by up to 40 ms on a
//! connection that looks interactive. Through a client that leaves acknowledgements to the
//! kernel, every call to such a server took 44 ms. Here each connection re-arms
//! `TCP_QUICKACK` after every read that brought data ([`QuickAck`]), which sends the
//! pending acknowledgement at once: the server's next piece leaves without waiting.
//!
//! A JSON answer to one of a lane's requests (ids from [`FIRST_LANE_ID`], see
//! `upstream::lane`) is handed on unparsed, as the one event of a stream: the lane reads
//! what the server wrote, keys and content types rmcp's types do not know included, and
//! no time goes to parsing the answer into rmcp's types only to write it out again.
//!
//! The rest is rmcp's streamable HTTP client contract on hyper, as rmcp's own reqwest
//! client keeps it: the same statuses, content types, body limits and errors. The
//! gateway asks it through [`McpHttp`], on which a connection stacks its layers
//! ([`mcp_http`]). TLS is rustls with the platform's verifier, as with reqwest. Redirects are
//! not followed: a server's MCP endpoint is its configured URL.

use std::borrow::Cow;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::stream::StreamExt;
use http::header::{
    ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE,
};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnectorBuilder;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use rmcp::ErrorData;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, NumberOrString, ServerJsonRpcMessage,
};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_MCP_PROTOCOL_VERSION, HEADER_SESSION_ID,
    JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};
use tokio::net::TcpStream;

pub use mcp_http::{Events, Failed, McpHttp, RmcpHttp, Target};
use pool::{DrivenBody, Pool};

mod mcp_http;
mod pool;

/// What went wrong below the MCP layer.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("could not connect: {}", with_causes(.0.as_ref()))]
    Connect(Box<dyn std::error::Error + Send + Sync>),
    #[error("{0}")]
    Exchange(#[from] hyper::Error),
    #[error("{0}")]
    Http(#[from] http::Error),
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("an SSE event of more than {0} bytes")]
    EventTooLarge(usize),
}

type Error = Failed;

/// The first request id of the upstream lanes; rmcp numbers its own requests with a
/// `u32` counter from 0, so ids from here on never meet them.
pub const FIRST_LANE_ID: i64 = 1 << 32;

/// Whether `message` is a request one of the lanes wrote.
fn is_lane_request(message: &ClientJsonRpcMessage) -> bool {
    matches!(message, ClientJsonRpcMessage::Request(request)
        if matches!(request.id, NumberOrString::Number(id) if id >= FIRST_LANE_ID))
}

/// `body` as the one event of an SSE stream.
fn one_event(body: Vec<u8>) -> Events {
    let event = Sse::default().data(String::from_utf8_lossy(&body).into_owned());
    futures::stream::once(async move { Ok(event) }).boxed()
}

/// `error` and the chain of what caused it: the connector's "tcp connect error" is
/// followed by why ("Connection refused", say).
pub fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        text.push_str(": ");
        text.push_str(&next.to_string());
        cause = next.source();
    }
    text
}

/// See the module documentation. Cheap to clone: clones share one connection pool.
#[derive(Clone)]
pub struct UpstreamHttp {
    pool: Pool,
}

impl UpstreamHttp {
    /// A client with the platform's TLS roots.
    pub fn new() -> io::Result<Self> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let verifier =
            rustls_platform_verifier::Verifier::new(provider.clone()).map_err(io::Error::other)?;
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(io::Error::other)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(QuickAckConnector(tcp));
        Ok(Self {
            pool: Pool::new(connector),
        })
    }

    async fn send(&self, request: Request<Full<Bytes>>) -> Result<Response<DrivenBody>, Error> {
        self.pool
            .send(request)
            .await
            .map_err(StreamableHttpError::Client)
    }
}

/// A request to `to` with the headers every request carries.
fn request(method: Method, to: Target) -> Result<http::request::Builder, Error> {
    let mut builder = Request::builder()
        .method(method)
        .uri(to.uri.as_ref())
        .header(
            ACCEPT,
            format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}"),
        );
    if let Some(token) = to.auth_token {
        builder = builder.header(AUTHORIZATION, format!("Bearer {token}"));
    }
    for (name, value) in to.headers {
        let reserved = [ACCEPT.as_str(), HEADER_SESSION_ID, HEADER_LAST_EVENT_ID]
            .iter()
            .any(|r| name.as_str().eq_ignore_ascii_case(r));
        if reserved
            && !name
                .as_str()
                .eq_ignore_ascii_case(HEADER_MCP_PROTOCOL_VERSION)
        {
            return Err(StreamableHttpError::ReservedHeaderConflict(
                name.to_string(),
            ));
        }
        builder = builder.header(name, value);
    }
    if let Some(session_id) = to.session_id {
        builder = builder.header(HEADER_SESSION_ID, session_id.as_ref());
    }
    Ok(builder)
}

/// The errors a 401 or 403 with a challenge stands for.
fn auth_error(status: StatusCode, headers: &HeaderMap) -> Option<Error> {
    let challenge = headers.get(WWW_AUTHENTICATE)?;
    let Ok(challenge) = challenge.to_str() else {
        return Some(StreamableHttpError::UnexpectedServerResponse(Cow::from(
            "invalid www-authenticate header value",
        )));
    };
    match status {
        StatusCode::UNAUTHORIZED => Some(StreamableHttpError::AuthRequired(
            AuthRequiredError::new(challenge.to_owned()),
        )),
        StatusCode::FORBIDDEN => Some(StreamableHttpError::InsufficientScope(
            InsufficientScopeError::new(challenge.to_owned(), scope_of(challenge)),
        )),
        _ => None,
    }
}

/// The `scope` a `WWW-Authenticate` challenge asks for, quoted or not.
fn scope_of(challenge: &str) -> Option<String> {
    let start = challenge.to_ascii_lowercase().find("scope=")? + "scope=".len();
    let value = challenge.get(start..)?;
    let scope = match value.strip_prefix('"') {
        Some(quoted) => &quoted[..quoted.find('"')?],
        None => {
            let end = value
                .find(|c: char| c == ',' || c == ';' || c.is_whitespace())
                .unwrap_or(value.len());
            &value[..end]
        }
    };
    (!scope.is_empty()).then(|| scope.to_owned())
}

/// Rate limits and server errors, with their `Retry-After`.
fn status_error(status: StatusCode, headers: &HeaderMap) -> Option<HttpStatusError> {
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let retry_after = headers
        .get(RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    Some(HttpStatusError::new(status.as_u16(), retry_after))
}

fn is(headers: &HeaderMap, mime: &str) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(mime))
}

fn content_type(headers: &HeaderMap) -> Option<String> {
    headers
        .get(CONTENT_TYPE)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
}

/// Up to `limit` bytes of `body`; `Err` past it when `refuse` (else the prefix).
async fn read_body(body: DrivenBody, limit: usize, refuse: bool) -> Result<Vec<u8>, Error> {
    let mut data = body.into_data_stream();
    let mut read = Vec::new();
    while let Some(chunk) = data.next().await {
        let chunk = chunk.map_err(|error| StreamableHttpError::Client(error.into()))?;
        if read.len() + chunk.len() > limit {
            if refuse {
                return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: limit });
            }
            read.extend_from_slice(&chunk[..limit - read.len()]);
            break;
        }
        read.extend_from_slice(&chunk);
    }
    Ok(read)
}

/// The events of an SSE body, none larger than `max_event` bytes.
fn events(body: DrivenBody, max_event: usize) -> Events {
    let mut pending = 0usize;
    let mut last = BytesMut::new();
    let bounded = body.into_data_stream().map(move |chunk| {
        let chunk = chunk.map_err(HttpError::from)?;
        for &byte in chunk.iter() {
            // An event ends at an empty line: two line ends in a row.
            let ends = byte == b'\n' && matches!(last.as_ref(), [b'\n'] | [b'\n', b'\r']);
            last.clear();
            if byte == b'\n' || byte == b'\r' {
                last.extend_from_slice(&[byte]);
            }
            pending = if ends { 0 } else { pending + 1 };
            if pending > max_event {
                return Err(HttpError::EventTooLarge(max_event));
            }
        }
        Ok::<Bytes, HttpError>(chunk)
    });
    SseStream::from_bytes_stream(bounded).boxed()
}

impl McpHttp for UpstreamHttp {
    fn post(
        &self,
        to: Target,
        message: ClientJsonRpcMessage,
        limits: StreamableHttpResponseLimits,
    ) -> BoxFuture<'_, Result<StreamableHttpPostResponse, Error>> {
        Box::pin(self.post_message(to, message, limits))
    }

    fn get_stream(
        &self,
        to: Target,
        last_event_id: Option<String>,
        max_event_size: usize,
    ) -> BoxFuture<'_, Result<Events, Error>> {
        Box::pin(self.open_stream(to, last_event_id, max_event_size))
    }

    fn delete_session(&self, to: Target) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(self.delete(to))
    }
}

impl UpstreamHttp {
    async fn post_message(
        &self,
        to: Target,
        message: ClientJsonRpcMessage,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let body = serde_json::to_vec(&message)
            .map_err(|error| StreamableHttpError::Client(error.into()))?;
        let session_was_attached = to.session_id.is_some();
        let request = request(Method::POST, to)?
            .header(CONTENT_TYPE, JSON_MIME_TYPE)
            .body(Full::new(Bytes::from(body)))
            .map_err(|error| StreamableHttpError::Client(error.into()))?;
        let response = self.send(request).await?;
        let status = response.status();
        let headers = response.headers();
        if let Some(error) = auth_error(status, headers) {
            return Err(error);
        }
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_was_attached {
            return Err(StreamableHttpError::SessionExpired);
        }
        let is_json = is(headers, JSON_MIME_TYPE);
        let is_sse = is(headers, EVENT_STREAM_MIME_TYPE);
        let content_type = content_type(headers);
        let empty = headers
            .get(CONTENT_LENGTH)
            .is_some_and(|length| length.as_bytes() == b"0");
        let new_session = headers
            .get(HEADER_SESSION_ID)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let awaits_no_response = !matches!(message, ClientJsonRpcMessage::Request(_));
        if !status.is_success() {
            // Rate limits and failures that carry no JSON-RPC error go by their status.
            let status_error = match status_error(status, headers) {
                Some(error) if !is_json || status == StatusCode::TOO_MANY_REQUESTS => {
                    return Err(error.into());
                }
                other => other,
            };
            let auth_failure = matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN);
            let json_error = is_json && !auth_failure;
            let (limit, refuse) = if json_error {
                (limits.max_json_response_size, true)
            } else {
                (limits.max_error_response_size, false)
            };
            let body = match read_body(response.into_body(), limit, refuse).await {
                Ok(body) => String::from_utf8_lossy(&body).into_owned(),
                Err(error @ StreamableHttpError::ResponseBodyTooLarge { .. }) => {
                    return Err(status_error.map(Into::into).unwrap_or(error));
                }
                Err(_) => "<failed to read response body>".to_owned(),
            };
            if json_error
                && let Ok(error @ JsonRpcMessage::Error(_)) =
                    serde_json::from_str::<ServerJsonRpcMessage>(&body)
            {
                return Ok(
                    discover_refused(&message, session_was_attached, status, &body)
                        .unwrap_or(StreamableHttpPostResponse::Json(error, new_session)),
                );
            }
            if let Some(response) = discover_refused(&message, session_was_attached, status, &body)
            {
                return Ok(response);
            }
            if let Some(error) = status_error {
                return Err(error.into());
            }
            let shown: String = body.chars().take(limits.max_error_response_size).collect();
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {status}: {shown}"),
            )));
        }
        if empty && awaits_no_response {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if is_sse {
            let stream = events(response.into_body(), limits.max_sse_event_size);
            return Ok(StreamableHttpPostResponse::Sse(stream, new_session));
        }
        if is_json {
            let body = read_body(response.into_body(), limits.max_json_response_size, true).await?;
            if is_lane_request(&message) {
                return Ok(StreamableHttpPostResponse::Sse(
                    one_event(body),
                    new_session,
                ));
            }
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                Ok(parsed) => Ok(StreamableHttpPostResponse::Json(parsed, new_session)),
                Err(_) if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
                Err(error) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                    format!("not a JSON-RPC message: {error}"),
                ))),
            };
        }
        if awaits_no_response {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(StreamableHttpError::UnexpectedContentType(content_type))
    }

    async fn delete(&self, to: Target) -> Result<(), Error> {
        let request = request(Method::DELETE, to)?
            .body(Full::default())
            .map_err(|error| StreamableHttpError::Client(error.into()))?;
        let status = self.send(request).await?.status();
        if status.is_success() || status == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(());
        }
        Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
            format!("HTTP {status} to DELETE"),
        )))
    }

    async fn open_stream(
        &self,
        to: Target,
        last_event_id: Option<String>,
        max_event_size: usize,
    ) -> Result<Events, Error> {
        let mut builder = request(Method::GET, to)?;
        if let Some(last_event_id) = last_event_id {
            builder = builder.header(HEADER_LAST_EVENT_ID, last_event_id);
        }
        let request = builder
            .body(Full::default())
            .map_err(|error| StreamableHttpError::Client(error.into()))?;
        let response = self.send(request).await?;
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if let Some(error) = auth_error(status, response.headers()) {
            return Err(error);
        }
        if let Some(error) = status_error(status, response.headers()) {
            return Err(error.into());
        }
        if !status.is_success() {
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {status} to GET"),
            )));
        }
        let headers = response.headers();
        if !is(headers, EVENT_STREAM_MIME_TYPE) && !is(headers, JSON_MIME_TYPE) {
            return Err(StreamableHttpError::UnexpectedContentType(content_type(
                headers,
            )));
        }
        Ok(events(response.into_body(), max_event_size))
    }
}

/// A server of the 2025 lifecycle that refuses `server/discover` with a 4xx (often
/// middleware that cannot echo the id): answered as the JSON-RPC error the client's
/// lifecycle expects, so that it goes on with `initialize`.
fn discover_refused(
    message: &ClientJsonRpcMessage,
    session_was_attached: bool,
    status: StatusCode,
    body: &str,
) -> Option<StreamableHttpPostResponse> {
    if session_was_attached
        || !status.is_client_error()
        || matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
    {
        return None;
    }
    let ClientJsonRpcMessage::Request(request) = message else {
        return None;
    };
    if !matches!(request.request, ClientRequest::DiscoverRequest(_)) {
        return None;
    }
    let error = match serde_json::from_str::<ServerJsonRpcMessage>(body) {
        Ok(JsonRpcMessage::Error(error)) => error.error,
        _ => ErrorData::invalid_request(
            format!("server/discover refused with HTTP {status}: {body}"),
            None,
        ),
    };
    Some(StreamableHttpPostResponse::Json(
        ServerJsonRpcMessage::error(error, Some(request.id.clone())),
        None,
    ))
}

/// Plain TCP connections (TLS goes on top) that are [`QuickAck`].
#[derive(Clone)]
pub struct QuickAckConnector(HttpConnector);

impl tower::Service<http::Uri> for QuickAckConnector {
    type Response = QuickAck;
    type Error = <HttpConnector as tower::Service<http::Uri>>::Error;
    type Future = Pin<Box<dyn Future<Output = Result<QuickAck, Self::Error>> + Send + 'static>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connecting = self.0.call(uri);
        Box::pin(async move { connecting.await.map(QuickAck) })
    }
}

/// A TCP connection that acknowledges every read at once (see the module documentation).
pub struct QuickAck(TokioIo<TcpStream>);

impl QuickAck {
    fn acknowledge(&self) {
        // Best effort: where the option is missing, the kernel's own timing stays.
        let _ = socket2::SockRef::from(self.0.inner()).set_tcp_quickack(true);
    }
}

impl hyper::rt::Read for QuickAck {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.0).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) {
            self.acknowledge();
        }
        polled
    }
}

impl hyper::rt::Write for QuickAck {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl Connection for QuickAck {
    fn connected(&self) -> Connected {
        self.0.connected()
    }
}
