//! The HTTP listener's part of the drain (see [`crate::gateway::drain`]): while the gateway stops,
//! new sessions are refused with `503` and `Retry-After` while open sessions carry on;
//! once the gateway ended the sessions left open after the drain, a request that names
//! one is told `404` that its session is over; and
//! a response body that carries an answer holds the answer's [`Delivery`] until hyper is
//! done with it ([`Held`]), so the drain waits for it to be written.
//!
//! A new session is a `GET /sse[/{profile}]`, or a `POST /mcp[/{profile}]` that names no
//! `Mcp-Session-Id` (an `initialize`, or a request of protocol 2026-07-28, which has no
//! session).

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::{Method, StatusCode, header};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use rmcp::transport::common::http_header::HEADER_SESSION_ID;

use crate::gateway::drain::{Delivery, Drain, RETRY_AFTER_SECS};

/// The answer to `request` while the gateway stops, when it is refused: a new session
/// during the drain, or a session the gateway already ended.
pub fn refused(drain: &Drain, request: &Request) -> Option<Response> {
    if drain.is_draining() && opens_session(request) {
        return Some(refusal());
    }
    if drain.sessions_over() && names_session(request) {
        return Some(over());
    }
    None
}

/// Whether `request` belongs to a session: a streamable HTTP request with
/// `Mcp-Session-Id`, a legacy SSE `/message?sessionId=`.
fn names_session(request: &Request) -> bool {
    let path = request.uri().path();
    let under = |root: &str| path == root || path.starts_with(&format!("{root}/"));
    (under("/mcp") && request.headers().contains_key(HEADER_SESSION_ID))
        || (path == "/message"
            && request
                .uri()
                .query()
                .is_some_and(|query| query.split('&').any(|pair| pair.starts_with("sessionId="))))
}

/// `404 Not Found`: the session is over, the gateway ended it as it stopped.
fn over() -> Response {
    (
        StatusCode::NOT_FOUND,
        "Not Found: the session is over: the gateway is stopping and ended it; open a new \
         session on another instance or after it has restarted",
    )
        .into_response()
}

/// Whether `request` would open a new MCP session.
fn opens_session(request: &Request) -> bool {
    let path = request.uri().path();
    let under = |root: &str| path == root || path.starts_with(&format!("{root}/"));
    match *request.method() {
        Method::GET => under("/sse"),
        Method::POST => under("/mcp") && !request.headers().contains_key(HEADER_SESSION_ID),
        _ => false,
    }
}

/// `503 Service Unavailable` with `Retry-After`, saying why.
fn refusal() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, RETRY_AFTER_SECS.to_string())],
        "Service Unavailable: the gateway is stopping and opens no new sessions; \
         retry on another instance or after it has restarted",
    )
        .into_response()
}

/// A response body that holds its answer's [`Delivery`] until hyper is done with it.
pub struct Held {
    inner: Body,
    _delivery: Delivery,
}

impl Held {
    /// `body`, counted as undelivered until it is written or dropped.
    pub fn body(inner: Body, delivery: Delivery) -> Body {
        Body::new(Held {
            inner,
            _delivery: delivery,
        })
    }
}

impl HttpBody for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: Method, path: &str, session: Option<&str>) -> Request {
        let mut builder = http::Request::builder().method(method).uri(path);
        if let Some(session) = session {
            builder = builder.header(HEADER_SESSION_ID, session);
        }
        builder.body(Body::empty()).unwrap()
    }

    #[test]
    fn requests_that_name_a_session_are_told_it_is_over() {
        for (request, named) in [
            (request(Method::GET, "/mcp", Some("abc")), true),
            (request(Method::POST, "/mcp/ci", Some("abc")), true),
            (
                request(Method::POST, "/message?x=1&sessionId=abc", None),
                true,
            ),
            (request(Method::POST, "/mcp", None), false),
            (request(Method::GET, "/sse", None), false),
            (request(Method::POST, "/message", None), false),
            (request(Method::GET, "/healthz", Some("abc")), false),
        ] {
            assert_eq!(names_session(&request), named, "{}", request.uri());
        }
    }

    #[test]
    fn only_requests_that_open_a_session_are_new_sessions() {
        let opening = [
            request(Method::GET, "/sse", None),
            request(Method::GET, "/sse/ci", None),
            request(Method::POST, "/mcp", None),
            request(Method::POST, "/mcp/ci", None),
        ];
        for request in &opening {
            assert!(
                opens_session(request),
                "{} {}",
                request.method(),
                request.uri()
            );
        }
        let continuing = [
            request(Method::POST, "/mcp", Some("abc")),
            request(Method::GET, "/mcp", Some("abc")),
            request(Method::DELETE, "/mcp", Some("abc")),
            request(Method::POST, "/message?sessionId=abc", None),
            request(Method::GET, "/healthz", None),
            request(Method::GET, "/ssexyz", None),
        ];
        for request in &continuing {
            assert!(
                !opens_session(request),
                "{} {}",
                request.method(),
                request.uri()
            );
        }
    }
}
