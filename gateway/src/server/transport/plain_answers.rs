//! Plain JSON answers to streamable HTTP requests that need no stream, because rmcp answers
//! every request of a session with an SSE stream, even one whose only message is the
//! answer, and clients drop such a stream once the answer is in, connection and all: every
//! call then cost a new TCP connection on both sides, and SSE framing around one message.
//!
//! The spec lets a server answer a `POST` with either. [`plain_when_single`] reads rmcp's
//! stream up to its first message: when that message is the answer (a JSON-RPC response
//! or error), the client gets it as an `application/json` body, and its connection can
//! carry the next call. When the call sends anything first (progress, a log message, a
//! request of its own) or takes longer than [`WAIT`], the client gets the stream
//! unchanged, byte for byte: the events read so far, then the rest as rmcp writes it, so
//! long calls keep their priming event (for `Last-Event-ID`) and keep-alive comments.
//!
//! A `tools/call` that can need no stream does not reach rmcp at all on a gateway that
//! runs alone ([`super::direct_calls::http`]); this is for every other request.
//!
//! Replicas sharing state do without it: there a call's stream must start at once, so
//! that a client whose replica dies can resume it on another (see `BoundSessions`).
//!
//! The reading is done here on the raw bytes instead of with an SSE parser, because the
//! stream must pass through untouched when it is kept.

use std::time::Duration;

use axum::body::{Body, Bytes};
use futures::StreamExt;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use serde::Deserialize;
use serde::de::IgnoredAny;

/// How long a request's stream may stay without a message before it goes to the client as
/// a stream: no longer than rmcp lets a stream be silent before its keep-alive comment, so
/// an intermediary sees no longer silence than it would on the stream.
pub const WAIT: Duration = Duration::from_secs(15);

/// Whether a request's `Accept` header lets its answer be plain JSON.
pub fn accepts_json(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|media| media.split(';').next().unwrap_or("").trim())
        .any(|media| media.eq_ignore_ascii_case("application/json") || media == "*/*")
}

/// `response` with its body as plain JSON when it is an event stream whose first message
/// answers the request within `wait`; otherwise `response` as it was.
pub async fn plain_when_single(response: Response<Body>, wait: Duration) -> Response<Body> {
    if response.status() != StatusCode::OK || !is_event_stream(response.headers()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let mut stream = body.into_data_stream();
    let mut read = Vec::new();
    let answer = tokio::time::timeout(wait, async {
        // `read[..event]` is made of whole events; `read[event..searched]` holds no event
        // end, so a large answer arriving in many chunks is searched once, not per chunk.
        let (mut event, mut searched): (usize, usize) = (0, 0);
        while let Some(Ok(chunk)) = stream.next().await {
            read.extend_from_slice(&chunk);
            // An event end is up to three bytes long and may straddle chunks.
            let mut from = searched.saturating_sub(2).max(event);
            while let Some(end) = find_event_end(&read[from..]).map(|end| from + end) {
                if let Some(data) = event_data(&read[event..end]) {
                    return is_answer(&data).then_some(data);
                }
                (event, from) = (end, end);
            }
            searched = read.len();
        }
        None
    })
    .await;
    match answer {
        Ok(Some(data)) => {
            parts.headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            // What rmcp set for the stream only.
            parts.headers.remove(header::CACHE_CONTROL);
            parts.headers.remove("x-accel-buffering");
            Response::from_parts(parts, Body::from(data))
        }
        // The stream as it came: what was read, then the rest.
        _ => {
            let read = futures::stream::once(async { Ok(Bytes::from(read)) });
            Response::from_parts(parts, Body::from_stream(read.chain(stream)))
        }
    }
}

fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"))
}

/// The length of the first complete event in `bytes`, its blank line included.
fn find_event_end(bytes: &[u8]) -> Option<usize> {
    (0..bytes.len()).find_map(|i| match &bytes[i..] {
        [b'\n', b'\n', ..] => Some(i + 2),
        [b'\n', b'\r', b'\n', ..] => Some(i + 3),
        [b'\r', b'\r', ..] => Some(i + 2),
        _ => None,
    })
}

/// The data of one event (its `data` lines joined by newlines), or `None` for an event
/// that carries no message: a priming event (empty data), a keep-alive comment.
fn event_data(event: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(event).ok()?;
    let data = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|value| value.strip_prefix(' ').unwrap_or(value))
        .collect::<Vec<_>>()
        .join("\n");
    (!data.trim().is_empty()).then_some(data)
}

/// Whether `data` is a JSON-RPC response or error: the end of a request's stream.
fn is_answer(data: &str) -> bool {
    #[derive(Deserialize)]
    struct Envelope {
        method: Option<IgnoredAny>,
        result: Option<IgnoredAny>,
        error: Option<IgnoredAny>,
    }
    serde_json::from_str::<Envelope>(data).is_ok_and(|message| {
        message.method.is_none() && (message.result.is_some() || message.error.is_some())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream_of(chunks: &[&'static str]) -> Response<Body> {
        let chunks: Vec<Result<Bytes, std::io::Error>> =
            chunks.iter().map(|c| Ok(Bytes::from(*c))).collect();
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .header("mcp-session-id", "s1")
            .body(Body::from_stream(futures::stream::iter(chunks)))
            .unwrap()
    }

    async fn text_of(response: Response<Body>) -> String {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    const PRIMING: &str = "id: 0/1\nretry: 3000\ndata: \n\n";
    const ANSWER: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;

    #[tokio::test]
    async fn an_answer_alone_becomes_plain_json_with_the_other_headers_kept() {
        let answer = format!("id: 0/2\ndata: {ANSWER}\n\n");
        let response = stream_of(&[PRIMING, answer.leak()]);
        let plain = plain_when_single(response, WAIT).await;
        assert_eq!(plain.headers()[header::CONTENT_TYPE], "application/json");
        assert_eq!(plain.headers()["mcp-session-id"], "s1");
        assert!(plain.headers().get(header::CACHE_CONTROL).is_none());
        assert_eq!(text_of(plain).await, ANSWER);
    }

    #[tokio::test]
    async fn an_answer_split_across_chunks_is_still_found() {
        let response = stream_of(&[
            "id: 0/2\ndata: {\"jsonrpc\":\"2.0\",",
            "\"id\":1,\"error\":{\"code\":-1,\"message\":\"no\"}}\r\n\r\n",
        ]);
        let plain = plain_when_single(response, WAIT).await;
        assert_eq!(plain.headers()[header::CONTENT_TYPE], "application/json");
        let value: serde_json::Value = serde_json::from_str(&text_of(plain).await).unwrap();
        assert_eq!(value["error"]["message"], "no");
    }

    #[tokio::test]
    async fn events_cut_anywhere_into_small_chunks_are_read_whole() {
        for ending in ["\n", "\r\n"] {
            let text = format!(
                "id: 0/1{ending}data: {ending}{ending}id: 0/2{ending}data: {ANSWER}{ending}{ending}"
            );
            for size in [1, 2, 3, 5] {
                let chunks: Vec<&'static str> = text
                    .as_bytes()
                    .chunks(size)
                    .map(|c| &*String::from_utf8(c.to_vec()).unwrap().leak())
                    .collect();
                let plain = plain_when_single(stream_of(&chunks), WAIT).await;
                assert_eq!(
                    text_of(plain).await,
                    ANSWER,
                    "{ending:?} in chunks of {size}"
                );
            }
        }
    }

    #[tokio::test]
    async fn a_stream_that_sends_something_first_passes_unchanged() {
        let progress = "id: 0/2\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n";
        let rest =
            ": keep-alive\n\nid: 0/3\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
        let response = stream_of(&[PRIMING, progress, rest]);
        let kept = plain_when_single(response, WAIT).await;
        assert_eq!(kept.headers()[header::CONTENT_TYPE], "text/event-stream");
        assert_eq!(text_of(kept).await, format!("{PRIMING}{progress}{rest}"));
    }

    #[tokio::test]
    async fn a_silent_stream_passes_unchanged_after_the_wait() {
        let (sender, receiver) =
            futures::channel::mpsc::unbounded::<Result<Bytes, std::io::Error>>();
        let response = Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(Body::from_stream(receiver))
            .unwrap();
        sender.unbounded_send(Ok(Bytes::from(PRIMING))).unwrap();
        let kept = plain_when_single(response, Duration::from_millis(50)).await;
        assert_eq!(kept.headers()[header::CONTENT_TYPE], "text/event-stream");
        let answer = format!("data: {ANSWER}\n\n");
        sender
            .unbounded_send(Ok(Bytes::from(answer.clone())))
            .unwrap();
        drop(sender);
        assert_eq!(text_of(kept).await, format!("{PRIMING}{answer}"));
    }

    #[test]
    fn accept_headers_that_allow_json() {
        let accepts = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT, HeaderValue::from_str(value).unwrap());
            accepts_json(&headers)
        };
        assert!(accepts("application/json, text/event-stream"));
        assert!(accepts("text/event-stream;q=1, Application/JSON;q=0.5"));
        assert!(accepts("*/*"));
        assert!(!accepts("text/event-stream"));
        assert!(!accepts_json(&HeaderMap::new()));
    }
}
