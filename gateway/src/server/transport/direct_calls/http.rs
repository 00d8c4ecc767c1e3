//! Streamable HTTP `POST`s of one `tools/call`, served by the task that answers them.
//! Through rmcp, such a call is read as the union of every client message, handed to the
//! session's worker, then to its service loop, its answer handed back the same way and
//! written as an SSE stream, which [`crate::server::transport::plain_answers`] then reads
//! back into plain JSON.
//!
//! The answer goes out as a plain JSON body when nothing comes before it within
//! [`WAIT`]; otherwise the `POST` is answered with an event stream: what the gateway
//! sends the client during the call (through its [`OwnStream`]: progress steps, and
//! requests relayed from upstreams or the gate's `ask`), keep-alive comments while the
//! call is silent, then the answer. The client's answers to those requests come in
//! `POST`s of their own, taken here too. A call is served here only when its session and
//! its request leave nothing to rmcp:
//! - the session did not open on protocol 2026-07-28 or later, where a server sends its
//!   client no requests;
//! - the request names no protocol version of its own: no `_meta` version, and no
//!   `MCP-Protocol-Version` header of 2026-07-28 or later (whose standard headers rmcp
//!   checks against the body), nor one rmcp does not know (which it refuses);
//! - its headers are the plain ones rmcp accepts: a JSON body, and an `Accept` naming
//!   both JSON and event streams without parameters;
//! - the gateway runs alone: replicas stream every call from its first byte, resumable
//!   on another replica (see `BoundSessions`), so only sessions opened on a gateway
//!   without shared state are registered here.
//!
//! Everything else reaches rmcp unchanged, body and all. These streams carry no event
//! ids: a client that loses one mid-call cannot resume it (rmcp's can be, within a
//! minute, from the same process). A `notifications/cancelled` naming one of these calls
//! cancels it (and reaches rmcp too, as any notification does); the `POST` then ends
//! without an answer. A call runs in a task of its own, so a client that leaves does not
//! cut it short (as it does not under rmcp); the drain counts its answer until the
//! response body is written, as for every `POST` (`server::http::draining`).
//!
//! rmcp's session worker ends a session after five minutes without an event, and calls
//! served here are none; [`DirectSessions::get`] says when the worker is due to be told
//! the session is in use, at most once a minute.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use rmcp::model::{
    CancelledNotificationParam, ClientJsonRpcMessage, GetExtensions, GetMeta, ProtocolVersion,
    ServerJsonRpcMessage,
};
use rmcp::transport::common::http_header::HEADER_MCP_PROTOCOL_VERSION;
use rmcp::transport::streamable_http_server::session::SessionId;
use rmcp::{Peer, RoleServer};
use serde::Deserialize;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use super::Session;
use crate::relay::own_stream::{ClientRequests, OwnStream};
use crate::server::handler::GatewayServer;
use crate::server::transport::client_lines::decode_tool_call;
use crate::server::transport::plain_answers::WAIT;

/// How often, at most, rmcp's worker hears that a session is in use.
const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(60);

/// How many messages (or events) may wait for the client before the call waits.
const MESSAGE_QUEUE: usize = 16;

/// The sessions of this process whose calls may be served here.
#[derive(Default)]
pub struct DirectSessions {
    sessions: Mutex<HashMap<SessionId, Registered>>,
}

struct Registered {
    session: Arc<HttpSession>,
    kept_alive: Instant,
}

/// A session served here: its calls, and the requests they sent its client.
pub struct HttpSession {
    calls: Arc<Session>,
    requests: Arc<ClientRequests>,
}

impl DirectSessions {
    /// Registers session `id` at its `initialize`, unless it opened on a protocol
    /// `version` whose calls rmcp alone serves (the version negotiated, not the one the
    /// client asked for: rmcp's client asks for its latest).
    pub fn open(
        &self,
        id: SessionId,
        peer: &Peer<RoleServer>,
        server: &GatewayServer,
        version: &ProtocolVersion,
    ) {
        if *version >= ProtocolVersion::V_2026_07_28 {
            return;
        }
        let calls = Session::new(peer.clone(), server.clone(), CancellationToken::new());
        let session = HttpSession {
            calls: Arc::new(calls),
            requests: Arc::default(),
        };
        self.lock().insert(
            id,
            Registered {
                session: Arc::new(session),
                kept_alive: Instant::now(),
            },
        );
    }

    /// Session `id`, and whether rmcp's worker is due to hear it is in use.
    pub fn get(&self, id: &str) -> Option<(Arc<HttpSession>, bool)> {
        let mut sessions = self.lock();
        let registered = sessions.get_mut(id)?;
        let now = Instant::now();
        let due = now.duration_since(registered.kept_alive) >= KEEP_ALIVE_EVERY;
        if due {
            registered.kept_alive = now;
        }
        Some((Arc::clone(&registered.session), due))
    }

    /// Forgets session `id`, cancels its calls and their requests: it has ended.
    pub fn end(&self, id: &SessionId) {
        if let Some(registered) = self.lock().remove(id) {
            registered.session.calls.end();
            registered.session.requests.end();
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<SessionId, Registered>> {
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The response to `request`, a `POST` to `session`, when it is a call served here or an
/// answer to a request one of them sent; otherwise `request` for rmcp, as it came.
pub async fn serve(
    session: &HttpSession,
    request: Request<Body>,
) -> Result<Response<Body>, Request<Body>> {
    if !plain_headers(request.headers()) {
        return Err(request);
    }
    let (parts, body) = request.into_parts();
    // The security layer has bounded the body already.
    let body = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(body) => body,
        Err(error) => {
            tracing::debug!("could not read a request body: {error}");
            return Ok(status(
                StatusCode::BAD_REQUEST,
                "Bad Request: unreadable body",
            ));
        }
    };
    match decode_tool_call(&body) {
        Some((id, mut call)) if call.get_meta().protocol_version().is_none() => {
            // As rmcp does: the handler reads credentials and trace headers from them.
            call.extensions_mut().insert(parts);
            let (stream, messages) = mpsc::channel(MESSAGE_QUEUE);
            let stream = OwnStream::new(stream, Arc::clone(&session.requests));
            call.extensions_mut().insert(stream);
            let answer = tokio::spawn(session.calls.call(id, call));
            return Ok(respond(answer, messages).await);
        }
        _ if session.requests.any_waiting() => {
            if let Ok(message) = serde_json::from_slice::<ClientJsonRpcMessage>(&body)
                && session.requests.answer(message)
            {
                return Ok(status(StatusCode::ACCEPTED, ""));
            }
        }
        _ => {}
    }
    if let Some(id) = cancelled_call(&body) {
        session.calls.cancel(&id);
    }
    Err(Request::from_parts(parts, Body::from(body)))
}

/// What a call has to say next.
enum Next {
    /// A message for the client during the call.
    Message(Box<ServerJsonRpcMessage>),
    /// Its answer, `None` when the client cancelled it.
    Answer(Option<Box<ServerJsonRpcMessage>>),
    /// Nothing for a while.
    Silence,
}

/// The response to a call: its answer as plain JSON when nothing comes before it within
/// [`WAIT`], otherwise an event stream.
async fn respond(mut answer: Answering, mut messages: Messages) -> Response<Body> {
    let first = next(&mut answer, &mut messages, tokio::time::sleep(WAIT)).await;
    if let Next::Answer(Some(message)) = &first
        && messages.is_empty()
    {
        return match serde_json::to_vec(message) {
            Ok(json) => with_type(Body::from(json), "application/json"),
            Err(error) => {
                tracing::error!("could not encode a tool call's answer: {error}");
                status(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error")
            }
        };
    }
    let (events, body) = mpsc::channel(MESSAGE_QUEUE);
    tokio::spawn(write_events(first, answer, messages, events));
    let mut response = with_type(
        Body::from_stream(ReceiverStream::new(body)),
        "text/event-stream",
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

type Answering = JoinHandle<Option<ServerJsonRpcMessage>>;
type Messages = mpsc::Receiver<ServerJsonRpcMessage>;

/// Waits for the call's next message, its answer, or `silence` to pass. Messages queued
/// before the answer come first.
async fn next(answer: &mut Answering, messages: &mut Messages, silence: impl Future) -> Next {
    tokio::select! {
        biased;
        Some(message) = messages.recv() => Next::Message(Box::new(message)),
        done = answer => Next::Answer(done.unwrap_or_else(|error| {
            tracing::error!("a tool call's task failed: {error}");
            None
        }).map(Box::new)),
        _ = silence => Next::Silence,
    }
}

/// Writes the call's events from `first` on to `events`: its messages, keep-alive
/// comments, then the answer, if there is one. Stops early when the client has gone (the
/// call runs on in its own task).
async fn write_events(
    first: Next,
    mut answer: Answering,
    mut messages: Messages,
    events: mpsc::Sender<Result<Bytes, Infallible>>,
) {
    let mut step = first;
    loop {
        let (event, last) = match step {
            Next::Message(message) => (sse_event(&message), false),
            Next::Silence => (Bytes::from_static(b": keep-alive\n\n"), false),
            Next::Answer(message) => {
                // Messages still queued were sent before the answer.
                while let Ok(message) = messages.try_recv() {
                    if events.send(Ok(sse_event(&message))).await.is_err() {
                        return;
                    }
                }
                match message {
                    Some(message) => (sse_event(&message), true),
                    None => return,
                }
            }
        };
        if events.send(Ok(event)).await.is_err() || last {
            return;
        }
        step = next(&mut answer, &mut messages, tokio::time::sleep(WAIT)).await;
    }
}

/// `message` as one server-sent event.
fn sse_event(message: &ServerJsonRpcMessage) -> Bytes {
    let json = serde_json::to_string(message).unwrap_or_else(|error| {
        tracing::error!("could not encode a message for the client: {error}");
        String::new()
    });
    Bytes::from(format!("event: message\ndata: {json}\n\n"))
}

fn with_type(body: Body, content_type: &'static str) -> Response<Body> {
    let mut response = Response::new(body);
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// Whether a request with `headers` is one rmcp would accept as it is, and whose protocol
/// version asks for no check of its own.
fn plain_headers(headers: &HeaderMap) -> bool {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            let essence = value.split(';').next().unwrap_or_default();
            essence.trim().eq_ignore_ascii_case("application/json")
        });
    let accepted: Vec<&str> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .collect();
    let accepts = |media: &str| accepted.iter().any(|a| a.eq_ignore_ascii_case(media));
    let version_is_plain = match headers.get(HEADER_MCP_PROTOCOL_VERSION) {
        None => true,
        Some(version) => version.to_str().is_ok_and(|version| {
            version < ProtocolVersion::STANDARD_HEADERS.as_str()
                && ProtocolVersion::KNOWN_VERSIONS
                    .iter()
                    .any(|known| known.as_str() == version)
        }),
    };
    is_json && accepts("application/json") && accepts("text/event-stream") && version_is_plain
}

/// The request a `notifications/cancelled` in `body` cancels.
fn cancelled_call(body: &[u8]) -> Option<rmcp::model::RequestId> {
    #[derive(Deserialize)]
    struct Cancelled {
        method: String,
        params: CancelledNotificationParam,
    }
    let cancelled: Cancelled = serde_json::from_slice(body).ok()?;
    (cancelled.method == "notifications/cancelled")
        .then_some(cancelled.params.request_id)
        .flatten()
}

fn status(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    const JSON: (&str, &str) = ("content-type", "application/json");
    const BOTH: (&str, &str) = ("accept", "application/json, text/event-stream");

    #[test]
    fn only_plain_requests_of_versions_before_standard_headers_are_served_here() {
        for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
            let plain = headers(&[JSON, BOTH, ("mcp-protocol-version", version)]);
            assert!(plain_headers(&plain), "{version}");
        }
        assert!(plain_headers(&headers(&[
            ("content-type", "application/json; charset=utf-8"),
            ("accept", "text/event-stream"),
            ("accept", "application/json"),
        ])));
        for (what, refused) in [
            (
                "2026-07-28",
                headers(&[JSON, BOTH, ("mcp-protocol-version", "2026-07-28")]),
            ),
            (
                "unknown version",
                headers(&[JSON, BOTH, ("mcp-protocol-version", "1999-01-01")]),
            ),
            ("no content type", headers(&[BOTH])),
            (
                "text body",
                headers(&[("content-type", "text/plain"), BOTH]),
            ),
            (
                "JSON only",
                headers(&[JSON, ("accept", "application/json")]),
            ),
            (
                "weighted",
                headers(&[JSON, ("accept", "application/json;q=0, text/event-stream")]),
            ),
        ] {
            assert!(!plain_headers(&refused), "{what}");
        }
    }

    #[test]
    fn a_cancellation_names_its_request() {
        let cancel =
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#;
        assert_eq!(
            cancelled_call(cancel),
            Some(rmcp::model::RequestId::Number(7))
        );
        let other =
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"requestId":7}}"#;
        assert_eq!(cancelled_call(other), None);
        let call = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t"}}"#;
        assert_eq!(cancelled_call(call), None);
    }
}
