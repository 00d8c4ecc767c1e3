//! Upstream legacy SSE transport (MCP 2024-11-05), because some servers still only speak
//! SSE and rmcp 3.11 has no SSE client.
//!
//! [`connect`] opens the event stream with a `GET`, waits for the `endpoint` event and
//! resolves its URL against the stream's URL (it must stay on the same origin, so the
//! custom headers, often credentials, never leave for another host). After that every
//! `message` event is a server message, offered to the connection's [`Lane`] before rmcp
//! (see [`ServerMessages`]), and every client message is `POST`ed to the endpoint as it
//! was encoded, one at a time and in the order rmcp and the lane sent them ([`Posts`]).
//! The custom headers go on the `GET` and on every `POST`.
//!
//! The transport closes when the stream ends or fails, when a `POST` fails, or when
//! rmcp closes it; it never reconnects (the gateway's supervisor does).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use http::HeaderMap;
use reqwest::{StatusCode, Url};
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use sse_stream::SseStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::upstream::lane::{Lane, Outlet};
use crate::upstream::server_messages::ServerMessages;

/// How long establishing a TCP (and TLS) connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one `POST` of a client message may take; legacy servers answer at once
/// (`202`) and send the reply on the stream.
const POST_TIMEOUT: Duration = Duration::from_secs(30);
/// TCP keep-alive probes, so a peer that vanished without closing the connection ends the
/// stream (legacy servers need not send anything while idle, so no read timeout).
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEPALIVE_RETRIES: u32 = 3;
/// Messages that may wait in each direction.
const QUEUE_CAPACITY: usize = 64;
/// How much of an error response body is kept in [`SseClientError::PostStatus`].
const ERROR_BODY_LIMIT: usize = 512;

/// Why an SSE upstream could not be reached or stopped working.
#[derive(Debug, thiserror::Error)]
pub enum SseClientError {
    #[error("invalid SSE URL: {reason}")]
    InvalidUrl { reason: String },
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    #[error("cannot open the SSE stream at {url}: {source}")]
    Connect {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("the SSE stream at {url} answered HTTP {status}")]
    ConnectStatus { url: String, status: StatusCode },
    #[error("the SSE stream at {url} ended before its `endpoint` event")]
    NoEndpoint { url: String },
    #[error("the SSE stream at {url} sent an unusable endpoint `{endpoint}`: {reason}")]
    InvalidEndpoint {
        url: String,
        endpoint: String,
        reason: String,
    },
    #[error("the SSE stream at {url} failed: {reason}")]
    Stream { url: String, reason: String },
    #[error("POST of a message to {endpoint} failed: {source}")]
    Post {
        endpoint: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("POST of a message to {endpoint} answered HTTP {status}: {body}")]
    PostStatus {
        endpoint: String,
        status: StatusCode,
        body: String,
    },
    #[error("cannot encode a message for the SSE endpoint: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("the SSE transport is closed")]
    Closed,
}

impl SseClientError {
    /// Stable code for logs and health reports.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidUrl { .. } => "SSE_INVALID_URL",
            Self::Client(_) => "SSE_CLIENT_SETUP",
            Self::Connect { .. } => "SSE_CONNECT_FAILED",
            Self::ConnectStatus { .. } => "SSE_CONNECT_STATUS",
            Self::NoEndpoint { .. } => "SSE_NO_ENDPOINT",
            Self::InvalidEndpoint { .. } => "SSE_INVALID_ENDPOINT",
            Self::Stream { .. } => "SSE_STREAM_FAILED",
            Self::Post { .. } => "SSE_POST_FAILED",
            Self::PostStatus { .. } => "SSE_POST_STATUS",
            Self::Encode(_) => "SSE_ENCODE_FAILED",
            Self::Closed => "SSE_CLOSED",
        }
    }
}

/// A connected legacy SSE upstream, as an rmcp `Transport<RoleClient>`.
pub struct SseClientTransport {
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    posts: Posts,
}

/// The queue of messages to `POST` to the endpoint, shared by rmcp's transport and the
/// connection's lane, so both are posted in one order.
#[derive(Clone)]
pub struct Posts {
    queue: mpsc::Sender<Outgoing>,
    closed: CancellationToken,
}

/// An encoded message for the poster, and where to report how its `POST` went.
struct Outgoing {
    body: Vec<u8>,
    done: oneshot::Sender<Result<(), SseClientError>>,
}

/// Opens the event stream at `url` with `headers` (sent on the `GET` and on every `POST`)
/// and waits for the `endpoint` event; gives rmcp's transport and the connection's lane.
/// Bound the wait with a timeout: a server that never sends `endpoint` keeps this pending.
pub async fn connect(
    url: &str,
    headers: HeaderMap,
) -> Result<(SseClientTransport, Arc<Lane<Posts>>), SseClientError> {
    let url = Url::parse(url).map_err(|error| SseClientError::InvalidUrl {
        reason: error.to_string(),
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(SseClientError::InvalidUrl {
            reason: format!("the scheme must be http or https, not {}", url.scheme()),
        });
    }
    let shown = crate::redact::urls(url.as_str());
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_keepalive(KEEPALIVE_IDLE)
        .tcp_keepalive_interval(KEEPALIVE_INTERVAL)
        .tcp_keepalive_retries(KEEPALIVE_RETRIES)
        .build()
        .map_err(SseClientError::Client)?;
    let response = client
        .get(url.clone())
        .header(http::header::ACCEPT, "text/event-stream")
        .send()
        .await
        .map_err(|source| SseClientError::Connect {
            url: shown.clone(),
            source,
        })?;
    if !response.status().is_success() {
        return Err(SseClientError::ConnectStatus {
            url: shown,
            status: response.status(),
        });
    }
    let mut events = SseStream::from_bytes_stream(response.bytes_stream());
    let endpoint = loop {
        let event = match events.next().await {
            None => return Err(SseClientError::NoEndpoint { url: shown }),
            Some(Err(error)) => {
                return Err(SseClientError::Stream {
                    url: shown,
                    reason: error.to_string(),
                });
            }
            Some(Ok(event)) => event,
        };
        if event.event.as_deref() == Some("endpoint") {
            break resolve_endpoint(&url, event.data.as_deref().unwrap_or_default())?;
        }
        tracing::warn!(url = %shown, event = ?event.event, "SSE event before `endpoint` ignored");
    };
    tracing::debug!(url = %shown, "SSE upstream connected");

    let closed = CancellationToken::new();
    let (incoming_tx, incoming) = mpsc::channel(QUEUE_CAPACITY);
    let (queue, outgoing) = mpsc::channel(QUEUE_CAPACITY);
    let posts = Posts {
        queue,
        closed: closed.clone(),
    };
    let lane = Arc::new(Lane::new(posts.clone()));
    let sorter = ServerMessages::new(Arc::clone(&lane));
    tokio::spawn(read_events(
        shown,
        events,
        sorter,
        incoming_tx,
        closed.clone(),
    ));
    tokio::spawn(post_messages(client, endpoint, outgoing, closed));
    Ok((SseClientTransport { incoming, posts }, lane))
}

/// The endpoint URL, relative to the stream's URL, on the stream's origin.
fn resolve_endpoint(url: &Url, data: &str) -> Result<Url, SseClientError> {
    let invalid = |reason: String| SseClientError::InvalidEndpoint {
        url: crate::redact::urls(url.as_str()),
        endpoint: data.to_owned(),
        reason,
    };
    let endpoint = url
        .join(data.trim())
        .map_err(|error| invalid(error.to_string()))?;
    if endpoint.origin() != url.origin() {
        return Err(invalid(format!(
            "it is not on the stream's origin {}",
            url.origin().ascii_serialization()
        )));
    }
    Ok(endpoint)
}

/// Hands each `message` event to `sorter` and passes on to rmcp what it leaves, until the
/// stream ends or fails or the transport closes; then closes the transport and the lane.
async fn read_events<S>(
    url: String,
    mut events: S,
    sorter: ServerMessages<Posts>,
    incoming: mpsc::Sender<ServerJsonRpcMessage>,
    closed: CancellationToken,
) where
    S: futures::Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Unpin,
{
    loop {
        let event = tokio::select! {
            biased;
            _ = closed.cancelled() => break,
            event = events.next() => event,
        };
        let event = match event {
            None => {
                tracing::info!(%url, "SSE upstream stream ended");
                break;
            }
            Some(Err(error)) => {
                tracing::warn!(%url, %error, "SSE upstream stream failed");
                break;
            }
            Some(Ok(event)) => event,
        };
        match event.event.as_deref() {
            None | Some("message") => {}
            Some(other) => {
                tracing::debug!(%url, event = other, "SSE event ignored");
                continue;
            }
        }
        let data = event.data.unwrap_or_default();
        if data.trim().is_empty() {
            continue;
        }
        let Some(message) = sorter.sort(data.as_bytes()) else {
            continue;
        };
        tokio::select! {
            biased;
            _ = closed.cancelled() => break,
            sent = incoming.send(message) => if sent.is_err() { break },
        }
    }
    sorter.ended();
    closed.cancel();
}

/// Posts client messages one at a time, in order; the first failure closes the transport.
async fn post_messages(
    client: reqwest::Client,
    endpoint: Url,
    mut outgoing: mpsc::Receiver<Outgoing>,
    closed: CancellationToken,
) {
    loop {
        let Outgoing { body, done } = tokio::select! {
            biased;
            _ = closed.cancelled() => break,
            next = outgoing.recv() => match next {
                Some(next) => next,
                None => break,
            },
        };
        let posted = tokio::select! {
            biased;
            _ = closed.cancelled() => Err(SseClientError::Closed),
            posted = post(&client, &endpoint, body) => posted,
        };
        let failed = posted.is_err();
        if let Err(error) = &posted {
            tracing::warn!(code = error.code(), "{error}; closing the SSE transport");
        }
        // The sender may have given up waiting; the outcome is logged above either way.
        let _ = done.send(posted);
        if failed {
            break;
        }
    }
    closed.cancel();
}

async fn post(
    client: &reqwest::Client,
    endpoint: &Url,
    body: Vec<u8>,
) -> Result<(), SseClientError> {
    let response = client
        .post(endpoint.clone())
        .timeout(POST_TIMEOUT)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .map_err(|source| SseClientError::Post {
            endpoint: crate::redact::urls(endpoint.as_str()),
            source,
        })?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let mut body = response.text().await.unwrap_or_default();
    if body.len() > ERROR_BODY_LIMIT {
        let cut = (0..=ERROR_BODY_LIMIT)
            .rev()
            .find(|index| body.is_char_boundary(*index))
            .unwrap_or(0);
        body.truncate(cut);
    }
    Err(SseClientError::PostStatus {
        endpoint: crate::redact::urls(endpoint.as_str()),
        status,
        body,
    })
}

impl Posts {
    /// Queues `body` (one encoded message) to be posted after everything queued before it,
    /// and gives how its `POST` went.
    fn post(
        &self,
        body: Vec<u8>,
    ) -> impl Future<Output = Result<(), SseClientError>> + Send + 'static {
        let (done, posted) = oneshot::channel();
        // Queue at once when there is room, so messages are posted in the order of the
        // calls rather than the order their futures are first polled.
        let waiting = match self.queue.try_send(Outgoing { body, done }) {
            Ok(()) => None,
            Err(mpsc::error::TrySendError::Full(outgoing)) => Some(outgoing),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                return futures::future::Either::Left(std::future::ready(Err(
                    SseClientError::Closed,
                )));
            }
        };
        let queue = self.queue.clone();
        let closed = self.closed.clone();
        futures::future::Either::Right(async move {
            if let Some(outgoing) = waiting {
                tokio::select! {
                    biased;
                    _ = closed.cancelled() => return Err(SseClientError::Closed),
                    sent = queue.send(outgoing) => sent.map_err(|_| SseClientError::Closed)?,
                }
            }
            posted.await.unwrap_or(Err(SseClientError::Closed))
        })
    }
}

/// The lane's messages, posted in order with rmcp's.
impl Outlet for Posts {
    fn send(&self, message: &[u8]) -> impl Future<Output = io::Result<()>> + Send {
        let posted = self.post(message.to_vec());
        async move { posted.await.map_err(io::Error::other) }
    }
}

impl Transport<RoleClient> for SseClientTransport {
    type Error = SseClientError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        match serde_json::to_vec(&item) {
            Ok(body) => futures::future::Either::Left(self.posts.post(body)),
            Err(error) => futures::future::Either::Right(std::future::ready(Err(
                SseClientError::Encode(error),
            ))),
        }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        self.incoming.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.posts.closed.cancel();
        Ok(())
    }
}

impl Drop for SseClientTransport {
    fn drop(&mut self) {
        self.posts.closed.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream_url() -> Url {
        Url::parse("http://127.0.0.1:3001/mcp/sse?token=1").unwrap()
    }

    #[test]
    fn the_endpoint_is_resolved_against_the_stream_url() {
        let resolve = |data| resolve_endpoint(&stream_url(), data).unwrap().to_string();
        assert_eq!(
            resolve("/message?sessionId=ab"),
            "http://127.0.0.1:3001/message?sessionId=ab"
        );
        assert_eq!(
            resolve("message?sessionId=ab"),
            "http://127.0.0.1:3001/mcp/message?sessionId=ab"
        );
        assert_eq!(
            resolve(" http://127.0.0.1:3001/m?sessionId=ab\n"),
            "http://127.0.0.1:3001/m?sessionId=ab"
        );
    }

    #[test]
    fn urls_in_errors_hide_credentials_and_queries() {
        let url = Url::parse("https://user:pw@host.example:8443/sse?token=t#f").unwrap();
        assert_eq!(
            crate::redact::urls(url.as_str()),
            "https://***@host.example:8443/sse?***"
        );
        let error = resolve_endpoint(&url, "http://elsewhere/").unwrap_err();
        let text = error.to_string();
        assert!(!text.contains("pw") && !text.contains("token"), "{text}");
    }

    #[test]
    fn an_endpoint_on_another_origin_is_refused() {
        for data in [
            "http://127.0.0.2:3001/message",
            "https://127.0.0.1:3001/message",
            "//evil.example/message",
        ] {
            let error = resolve_endpoint(&stream_url(), data).unwrap_err();
            assert_eq!(error.code(), "SSE_INVALID_ENDPOINT", "{data}: {error}");
        }
    }

    #[tokio::test]
    async fn urls_that_are_not_http_are_refused_before_connecting() {
        for url in ["not a url", "ftp://127.0.0.1/sse"] {
            let error = connect(url, HeaderMap::new()).await.err().unwrap();
            assert_eq!(error.code(), "SSE_INVALID_URL", "{url}: {error}");
        }
    }
}
