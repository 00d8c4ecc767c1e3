//! Each task tool's `execution.taskSupport`, put back into the `tools/list` answers on the
//! wire.
//!
//! The task tools declare what they support ([`jobs::listed`]): `greet` never runs as a
//! task (`forbidden`), `failing_job` and `test_tool_with_task` only as one (`required`),
//! the others when the client asks (`optional`). rmcp's `Tool` has no `execution` field,
//! so the declarations are lost when the handler's definitions become rmcp's types; this
//! layer, around the streamable HTTP service, writes them back into every `tools/list`
//! result it sends (a JSON body, or an event of an event stream, as it goes). A client of
//! either revision sees them; a gateway that speaks 2025-11-25 to this server makes its own
//! tasks by them, as it would in front of a server of 2025-11-25 that declares them.

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use http::{StatusCode, header};
use serde_json::Value;

use crate::jobs;

/// The most a JSON response body is read to declare its tools in (rmcp's bound on a
/// request body; a `tools/list` result is far smaller).
const MAX_JSON_BODY: usize = 4 * 1024 * 1024;

/// Serves `request`, declaring the task tools' `execution` in the response.
pub async fn declare(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    if content_type.starts_with("text/event-stream") {
        let (parts, body) = response.into_parts();
        let events = in_events(body.into_data_stream());
        return Response::from_parts(parts, Body::from_stream(events));
    }
    if !content_type.starts_with("application/json") {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_JSON_BODY).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let listing = serde_json::from_slice(&bytes).ok().and_then(in_message);
    let bytes = match listing {
        Some(message) => {
            parts.headers.remove(header::CONTENT_LENGTH);
            Bytes::from(message.to_string())
        }
        None => bytes,
    };
    Response::from_parts(parts, Body::from(bytes))
}

/// `body`, an event stream, with the tools declared in each `data:` line that holds a
/// `tools/list` result: complete lines go on as they come, a line cut between chunks
/// once its end came.
fn in_events<S>(body: S) -> impl Stream<Item = Result<Bytes, axum::Error>> + Send
where
    S: Stream<Item = Result<Bytes, axum::Error>> + Send + Unpin + 'static,
{
    futures::stream::unfold(
        (body, Vec::new(), false),
        |(mut body, mut pending, ended)| async move {
            if ended {
                return None;
            }
            match body.next().await {
                Some(Ok(chunk)) => {
                    pending.extend_from_slice(&chunk);
                    let complete = pending
                        .iter()
                        .rposition(|&byte| byte == b'\n')
                        .map_or(0, |at| at + 1);
                    let rest = pending.split_off(complete);
                    Some((Ok(in_lines(&pending)), (body, rest, false)))
                }
                Some(Err(error)) => Some((Err(error), (body, pending, true))),
                None if pending.is_empty() => None,
                None => Some((Ok(in_lines(&pending)), (body, Vec::new(), true))),
            }
        },
    )
}

/// `text`, lines of an event stream, with the tools declared in each `data:` line that
/// holds a `tools/list` result.
fn in_lines(text: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(text.len());
    for line in text.split_inclusive(|&byte| byte == b'\n') {
        let data = line
            .strip_prefix(b"data:")
            .filter(|data| data.windows(7).any(|window| window == b"\"tools\""));
        let listing = data
            .and_then(|data| serde_json::from_slice(data).ok())
            .and_then(in_message);
        match listing {
            Some(message) => {
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(message.to_string().as_bytes());
                out.push(b'\n');
            }
            None => out.extend_from_slice(line),
        }
    }
    Bytes::from(out)
}

/// `message` with the task tools' `execution` declared, when it is a `tools/list` result.
fn in_message(mut message: Value) -> Option<Value> {
    let tools = message
        .pointer_mut("/result/tools")
        .and_then(Value::as_array_mut)?;
    let declared = jobs::listed();
    for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
        let execution = declared
            .as_array()
            .into_iter()
            .flatten()
            .find(|job| job.get("name") == tool.get("name"))
            .and_then(|job| job.get("execution"));
        if let Some(execution) = execution {
            tool.insert("execution".into(), execution.clone());
        }
    }
    Some(message)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn listing() -> String {
        json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [
            {"name": "failing_job", "inputSchema": {"type": "object"}},
            {"name": "test_simple_text", "inputSchema": {"type": "object"}},
        ]}})
        .to_string()
    }

    fn declared(message: &Value) -> Vec<Option<&str>> {
        message["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| {
                tool.pointer("/execution/taskSupport")
                    .and_then(Value::as_str)
            })
            .collect()
    }

    #[tokio::test]
    async fn a_listing_cut_between_chunks_of_an_event_stream_gets_its_declarations() {
        let event = format!("id: 0\ndata: {}\n\n", listing());
        let (first, second) = event.split_at(event.len() / 2);
        let chunks = vec![
            Ok(Bytes::from("data:\n\n")),
            Ok(Bytes::from(first.to_owned())),
            Ok(Bytes::from(second.to_owned())),
        ];
        let out: Vec<u8> = in_events(futures::stream::iter(chunks))
            .map(|chunk| chunk.unwrap().to_vec())
            .concat()
            .await;
        let out = String::from_utf8(out).unwrap();
        assert!(out.starts_with("data:\n\nid: 0\ndata: "), "{out}");
        let data = out.lines().find(|line| line.contains("tools")).unwrap();
        let message: Value = serde_json::from_str(&data["data: ".len()..]).unwrap();
        assert_eq!(declared(&message), [Some("required"), None]);
    }

    #[test]
    fn only_a_tools_list_result_is_changed() {
        let message = in_message(serde_json::from_str(&listing()).unwrap()).unwrap();
        assert_eq!(declared(&message), [Some("required"), None]);
        let other = json!({"jsonrpc": "2.0", "id": 2, "result": {"content": []}});
        assert!(in_message(other).is_none());
        let line = b"data: {\"result\":{\"tools\":7}}\n";
        assert_eq!(in_lines(line).as_ref(), line);
    }
}
