//! What a client sends, decoded once, whatever the transport: a `tools/call` request as
//! its own type.
//!
//! rmcp decodes each incoming message as the untagged union of every client request,
//! notification and result, and a `tools/call` is the fourteenth request it tries, each
//! attempt through serde's buffered `Content`: 7% of the gateway's CPU forwarding calls
//! at concurrency 32 (measured with perf). [`decode_line`] decodes a line
//! that is a plain `tools/call` request in one pass, into what rmcp's decoding ends with
//! for it; a line with more members than that takes a second pass as a `CallToolRequest`,
//! and every other line, and any `tools/call` that decoding refuses, rmcp's general
//! decoding. stdio lines are decoded by [`decode_line`], streamable HTTP bodies by
//! [`decode_message`], legacy SSE bodies (a message or a batch) by [`decode_batch`].
//!
//! Lines rmcp cannot decode are treated as the official SDKs treat them: text that is not
//! JSON is skipped (answering it could start an error storm with a peer that echoes);
//! well-formed JSON that is no message it knows gets an Invalid Request error, under the
//! request's id when it has one (so that request does not hang), and a notification
//! nothing (notifications get no answers).

use rmcp::model::{
    CallToolRequest, CallToolRequestMethod, CallToolRequestParams, ClientJsonRpcMessage,
    ClientRequest, ErrorData, JsonRpcMessage, JsonRpcRequest, JsonRpcVersion2_0, RequestId,
    ServerJsonRpcMessage,
};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

/// The longest line a client may send (rmcp's limit): longer ones are dropped.
pub const MAX_CLIENT_LINE: usize = 16 * 1024 * 1024;

/// What a client's line (or body) turned out to be.
#[derive(Debug)]
pub enum ClientLine {
    Message(ClientJsonRpcMessage),
    /// Nothing to act on (not JSON, say).
    Skip,
    /// A line that needs an answer of the transport's own (an invalid request).
    Answer(ServerJsonRpcMessage),
}

/// The members that tell a message's kind, borrowed from the line.
#[derive(Deserialize)]
struct Envelope<'a> {
    jsonrpc: Option<JsonRpcVersion2_0>,
    id: Option<RequestId>,
    #[serde(borrow)]
    method: Option<&'a str>,
    result: Option<IgnoredAny>,
    error: Option<IgnoredAny>,
}

/// Who to answer for a line that is no message: its id, and whether it names a method.
#[derive(Deserialize)]
struct Caller {
    id: Option<RequestId>,
    method: Option<IgnoredAny>,
}

/// The message an HTTP body holds; an error to answer with when it holds none (a parse
/// error for what is not JSON, an invalid request for JSON that is no message, a batch
/// among them: batches are gone since protocol 2025-06-18).
pub fn decode_message(body: &[u8]) -> Result<ClientJsonRpcMessage, ErrorData> {
    match decode_line(body) {
        ClientLine::Message(message) => Ok(message),
        ClientLine::Skip => Err(ErrorData::new(
            rmcp::model::ErrorCode::PARSE_ERROR,
            "Parse error: the body is not a JSON-RPC message",
            None,
        )),
        ClientLine::Answer(_) => Err(ErrorData::invalid_request(
            "Invalid request: the body is JSON but no JSON-RPC message of MCP (one message \
             per POST; batches are not supported)",
            None,
        )),
    }
}

/// Why a legacy SSE body was refused: the reason, and the error answer for the request it
/// names, when it names one, so that the request's caller is not left waiting.
#[derive(Debug)]
pub struct MalformedBody {
    pub reason: String,
    pub answer: Option<Box<ServerJsonRpcMessage>>,
}

/// The messages of a legacy SSE body: one message, or a batch of them (protocol
/// 2024-11-05 allowed batches), each decoded as a stdio line is. A body with anything in
/// it that is no message is refused whole.
pub fn decode_batch(body: &[u8]) -> Result<Vec<ClientJsonRpcMessage>, MalformedBody> {
    Batch::split(body)?.decode()
}

/// A legacy SSE body cut into its messages, none decoded yet: a batch too long to take is
/// refused for its length before any work is spent on its messages.
#[derive(Debug)]
pub struct Batch<'a>(Vec<&'a [u8]>);

impl<'a> Batch<'a> {
    /// The messages of `body`: a JSON-RPC message, or a non-empty array of them.
    pub fn split(body: &'a [u8]) -> Result<Self, MalformedBody> {
        let is_batch = body.iter().find(|byte| !byte.is_ascii_whitespace()) == Some(&b'[');
        if !is_batch {
            return Ok(Batch(vec![body]));
        }
        let parts: Vec<&RawValue> =
            serde_json::from_slice(body).map_err(|error| MalformedBody {
                reason: format!("not a batch of JSON-RPC messages: {error}"),
                answer: None,
            })?;
        if parts.is_empty() {
            return Err(MalformedBody {
                reason: "empty batch".into(),
                answer: None,
            });
        }
        Ok(Batch(
            parts
                .into_iter()
                .map(|part| part.get().as_bytes())
                .collect(),
        ))
    }

    /// How many messages the body holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it holds none (never: [`Batch::split`] refuses an empty batch).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every message decoded, or the first that is not one.
    pub fn decode(self) -> Result<Vec<ClientJsonRpcMessage>, MalformedBody> {
        self.0.into_iter().map(decode_one).collect()
    }
}

fn decode_one(body: &[u8]) -> Result<ClientJsonRpcMessage, MalformedBody> {
    match decode_line(body) {
        ClientLine::Message(message) => Ok(message),
        ClientLine::Skip => Err(MalformedBody {
            reason: "not a JSON-RPC message".into(),
            answer: None,
        }),
        ClientLine::Answer(answer) => Err(MalformedBody {
            reason: "invalid request: JSON, but no JSON-RPC message of MCP".into(),
            answer: matches!(&answer, JsonRpcMessage::Error(error) if error.id.is_some())
                .then(|| Box::new(answer)),
        }),
    }
}

/// A `tools/call` request with the four members of one and no others, as clients send
/// them, decoded in one pass. rmcp's own decoding of a request reads its params through
/// serde's buffered `Content` to take out their `_meta`, which it keeps in the request's
/// extensions; this puts it there too.
fn plain_tool_call(message: &[u8]) -> Option<(RequestId, ClientRequest)> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct PlainToolCall {
        #[allow(dead_code, reason = "required, never read")]
        jsonrpc: JsonRpcVersion2_0,
        id: RequestId,
        #[allow(dead_code, reason = "required, never read")]
        method: CallToolRequestMethod,
        params: CallToolRequestParams,
    }
    let PlainToolCall { id, mut params, .. } = serde_json::from_slice(message).ok()?;
    let meta = params.meta.take();
    let mut request = CallToolRequest::new(params);
    if let Some(meta) = meta {
        request.extensions.insert(meta);
    }
    Some((id, ClientRequest::CallToolRequest(request)))
}

/// A `tools/call` request, decoded as its own type.
fn tool_call(envelope: &Envelope<'_>, message: &[u8]) -> Option<(RequestId, ClientRequest)> {
    let is_call = envelope.jsonrpc.is_some()
        && envelope.method == Some("tools/call")
        && envelope.result.is_none()
        && envelope.error.is_none();
    let id = envelope.id.clone().filter(|_| is_call)?;
    // `method` and `params` are read; `jsonrpc` and `id` were read above.
    let request: CallToolRequest = serde_json::from_slice(message).ok()?;
    Some((id, ClientRequest::CallToolRequest(request)))
}

/// What one line (without its newline, carriage return or byte order mark; never blank)
/// of a client holds.
pub fn decode_line(line: &[u8]) -> ClientLine {
    let call = plain_tool_call(line).or_else(|| {
        let envelope = serde_json::from_slice::<Envelope>(line).ok()?;
        tool_call(&envelope, line)
    });
    if let Some((id, request)) = call {
        return ClientLine::Message(JsonRpcMessage::Request(JsonRpcRequest {
            jsonrpc: JsonRpcVersion2_0,
            id,
            request,
        }));
    }
    match serde_json::from_slice(line) {
        Ok(message) => ClientLine::Message(message),
        Err(error) if error.is_syntax() || error.is_eof() => {
            tracing::debug!("skipping a client line that is not JSON: {error}");
            ClientLine::Skip
        }
        Err(error) => {
            tracing::debug!("a client line is no message we know: {error}");
            // Whatever else is wrong with it (a `jsonrpc` other than "2.0", say), a
            // request's id is answered and a notification is not.
            let is_object = line.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
            match is_object
                .then(|| serde_json::from_slice::<Caller>(line).ok())
                .flatten()
            {
                Some(Caller {
                    id: None,
                    method: Some(_),
                }) => ClientLine::Skip,
                caller => ClientLine::Answer(JsonRpcMessage::error(
                    ErrorData::invalid_request("Invalid request", None),
                    caller.and_then(|caller| caller.id),
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ClientJsonRpcMessage, RequestMetaObject};

    use super::*;

    fn decoded(line: &str) -> ClientLine {
        decode_line(line.as_bytes())
    }

    fn message(line: &str) -> ClientJsonRpcMessage {
        match decoded(line) {
            ClientLine::Message(message) => message,
            ClientLine::Skip => panic!("skipped: {line}"),
            ClientLine::Answer(answer) => panic!("answered {answer:?}: {line}"),
        }
    }

    /// What rmcp's own decoding makes of `line`, as JSON (the messages have no `PartialEq`).
    fn as_rmcp_decodes(line: &str) -> serde_json::Value {
        let message: ClientJsonRpcMessage = serde_json::from_str(line).unwrap();
        serde_json::to_value(message).unwrap()
    }

    #[test]
    fn tool_calls_decode_as_rmcp_decodes_them() {
        let lines = [
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mcp__kv__get","arguments":{"key":"k"}}}"#,
            r#"{"params":{"_meta":{"progressToken":"p1","traceparent":"00-x"},"name":"t"},"id":"a-1","method":"tools/call","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t","arguments":{},"requestState":"s"}}"#,
            // Members past the four of a request: the second pass.
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"_meta":{"progressToken":1},"name":"t"},"extra":true}"#,
        ];
        fn call_of(message: ClientJsonRpcMessage) -> CallToolRequest {
            match message {
                JsonRpcMessage::Request(JsonRpcRequest {
                    request: ClientRequest::CallToolRequest(call),
                    ..
                }) => call,
                other => panic!("not a tool call: {other:?}"),
            }
        }
        for line in lines {
            let ours = message(line);
            assert_eq!(serde_json::to_value(&ours).unwrap(), as_rmcp_decodes(line));
            // The handler reads `_meta` from the extensions, where rmcp puts it.
            let (ours, theirs) = (call_of(ours), call_of(serde_json::from_str(line).unwrap()));
            assert_eq!(ours.params, theirs.params, "{line}");
            let meta = |call: &CallToolRequest| call.extensions.get::<RequestMetaObject>().cloned();
            assert_eq!(meta(&ours), meta(&theirs), "{line}");
            let Ok(JsonRpcMessage::Request(JsonRpcRequest {
                request: ClientRequest::CallToolRequest(read),
                ..
            })) = decode_message(line.as_bytes())
            else {
                panic!("not read as a tool call: {line}");
            };
            assert_eq!(meta(&read), meta(&theirs), "{line}");
        }
    }

    #[test]
    fn other_messages_take_the_general_decoding() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#,
            r#"{"jsonrpc":"2.0","id":9,"result":{}}"#,
        ] {
            assert_eq!(
                serde_json::to_value(message(line)).unwrap(),
                as_rmcp_decodes(line)
            );
        }
    }

    #[test]
    fn garbage_is_skipped_and_invalid_requests_are_answered_under_their_id() {
        assert!(matches!(decoded("this is not json"), ClientLine::Skip));
        assert!(matches!(decoded(r#"{"jsonrpc":"2.0","#), ClientLine::Skip));
        // A notification gets no answer, even a broken one.
        let broken = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":7}"#;
        assert!(matches!(decoded(broken), ClientLine::Skip));
        for (line, id) in [
            (
                r#"{"jsonrpc":"2.0","id":7,"bogus":true}"#,
                serde_json::json!(7),
            ),
            (r#"[1,2]"#, serde_json::Value::Null),
        ] {
            let ClientLine::Answer(answer) = decoded(line) else {
                panic!("no answer to {line}");
            };
            let answer = serde_json::to_value(answer).unwrap();
            assert_eq!(answer["error"]["code"], -32600, "{answer}");
            assert_eq!(answer["id"], id, "{answer}");
        }
    }

    #[test]
    fn an_sse_body_is_one_message_or_a_batch() {
        let one = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert_eq!(decode_batch(one).unwrap().len(), 1);
        let two = br#" [{"jsonrpc":"2.0","id":1,"method":"ping"},
                        {"jsonrpc":"2.0","method":"notifications/initialized"}]"#;
        assert_eq!(decode_batch(two).unwrap().len(), 2);
    }

    #[test]
    fn a_malformed_sse_body_is_refused_with_a_reason_and_its_request_answered() {
        assert_eq!(decode_batch(b"[]").unwrap_err().reason, "empty batch");
        assert!(decode_batch(b"{not json").unwrap_err().answer.is_none());
        assert!(
            decode_batch(br#"{"jsonrpc":"2.0"}"#)
                .unwrap_err()
                .answer
                .is_none()
        );
        let bad = decode_batch(br#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#).unwrap_err();
        let Some(JsonRpcMessage::Error(error)) = bad.answer.as_deref() else {
            panic!("no answer for a request with an id: {}", bad.reason);
        };
        assert_eq!(error.id, Some(RequestId::String("a".into())));
        let in_batch = br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"result":"x","method":"y"}]"#;
        assert!(
            decode_batch(in_batch).is_err(),
            "one bad message refuses the batch"
        );
    }

    #[test]
    fn a_batch_is_counted_before_any_message_is_decoded() {
        let batch = Batch::split(br#"[{"no":1}, {"jsonrpc":"2.0","id":1,"method":"ping"}, 3]"#)
            .expect("an array is a batch");
        assert_eq!(batch.len(), 3);
        assert!(batch.decode().is_err());
        assert_eq!(Batch::split(b" {}").unwrap().len(), 1);
    }
}
