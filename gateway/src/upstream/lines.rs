//! What a stdio upstream sends, decoded: the answer to a `tools/call` as the type of the
//! request it answers.
//!
//! rmcp decodes every incoming message as its untagged `ServerResult` union, which tries
//! each result type in turn; a `tools/call` answer is the sixteenth, so the gateway spent
//! about a sixth of its CPU per forwarded call on failed attempts (perf, `cargo bench -p
//! mcp-gateway --bench gateway`). [`ServerLines`] remembers which requests were
//! `tools/call` and decodes their answers directly as `CallToolResult`. Everything else,
//! and any answer the direct decoding refuses, takes rmcp's general decoding.
//!
//! A line that is not a JSON-RPC message is skipped, as rmcp and the other SDKs do
//! (replying to garbage can start an error storm). How long a line may be is the
//! reader's business (see `child::LimitedLines`).

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard};

use rmcp::RoleClient;
use rmcp::model::{
    CallToolResult, ClientRequest, JsonRpcMessage, JsonRpcResponse, JsonRpcVersion2_0, RequestId,
    ServerResult,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

use crate::lines::{Decoded, LineDecoder};

/// Requests awaiting an answer that are remembered at most; past this (an upstream that
/// never answers cancelled calls, say) the hints are dropped and decoding is general.
const MAX_REMEMBERED: usize = 4096;

/// The decoder of an upstream's lines.
#[derive(Default)]
pub struct ServerLines {
    /// Ids of `tools/call` requests not answered yet.
    tool_calls: Mutex<HashSet<RequestId>>,
}

impl ServerLines {
    /// The answer to a remembered `tools/call`, decoded as its result type.
    fn tool_call_answer(&self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
        /// The members that tell an answer from a request, a notification or an error.
        #[derive(Deserialize)]
        struct Envelope<'a> {
            id: Option<RequestId>,
            #[serde(borrow)]
            result: Option<&'a RawValue>,
            method: Option<IgnoredAny>,
            error: Option<IgnoredAny>,
        }
        let envelope: Envelope = serde_json::from_slice(line).ok()?;
        let id = envelope.id?;
        let was_tool_call = self.remembered().remove(&id);
        if !was_tool_call || envelope.method.is_some() || envelope.error.is_some() {
            return None;
        }
        let result: CallToolResult = serde_json::from_str(envelope.result?.get()).ok()?;
        Some(JsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: JsonRpcVersion2_0,
            id,
            result: ServerResult::CallToolResult(result),
        }))
    }

    fn remembered(&self) -> MutexGuard<'_, HashSet<RequestId>> {
        self.tool_calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl LineDecoder for ServerLines {
    type Role = RoleClient;

    fn sending(&self, message: &TxJsonRpcMessage<RoleClient>) {
        if let JsonRpcMessage::Request(request) = message
            && matches!(request.request, ClientRequest::CallToolRequest(_))
        {
            let mut remembered = self.remembered();
            if remembered.len() >= MAX_REMEMBERED {
                remembered.clear();
            }
            remembered.insert(request.id.clone());
        }
    }

    fn decode(&self, line: &[u8]) -> Decoded<RoleClient> {
        if let Some(answer) = self.tool_call_answer(line) {
            return Decoded::Message(answer);
        }
        match serde_json::from_slice(line) {
            Ok(message) => Decoded::Message(message),
            Err(error) => {
                tracing::debug!("skipping an upstream line that is not JSON-RPC: {error}");
                Decoded::Skip
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lines::LineTransport;
    use rmcp::model::{CallToolRequest, CallToolRequestParams, JsonRpcRequest, NumberOrString};
    use rmcp::transport::Transport;
    use tokio::io::AsyncWriteExt;

    type Pipe = tokio::io::DuplexStream;
    type Lines = LineTransport<ServerLines, Pipe, Pipe>;

    fn transport() -> (Lines, Pipe, Pipe) {
        let (ours_in, theirs_out) = tokio::io::duplex(1 << 16);
        let (ours_out, theirs_in) = tokio::io::duplex(1 << 16);
        let lines = LineTransport::new(ServerLines::default(), ours_in, ours_out, usize::MAX);
        (lines, theirs_out, theirs_in)
    }

    fn tool_call(id: i64) -> TxJsonRpcMessage<RoleClient> {
        JsonRpcMessage::Request(JsonRpcRequest::new(
            NumberOrString::Number(id),
            ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new("get"))),
        ))
    }

    async fn receive_after(
        transport: &mut Lines,
        upstream: &mut Pipe,
        lines: &str,
    ) -> Option<RxJsonRpcMessage<RoleClient>> {
        upstream.write_all(lines.as_bytes()).await.unwrap();
        transport.receive().await
    }

    fn call_result(message: Option<RxJsonRpcMessage<RoleClient>>) -> CallToolResult {
        match message {
            Some(JsonRpcMessage::Response(JsonRpcResponse {
                result: ServerResult::CallToolResult(result),
                ..
            })) => result,
            other => panic!("not a tool result: {other:?}"),
        }
    }

    #[tokio::test]
    async fn tool_call_answers_decode_as_tool_results_and_skip_garbage() {
        let (mut transport, mut upstream, _requests) = transport();
        transport.send(tool_call(7)).await.unwrap();
        let answer = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}}"#;
        let message = receive_after(
            &mut transport,
            &mut upstream,
            &format!("not json\n\n{answer}\n"),
        )
        .await;
        let result = call_result(message);
        assert_eq!(result.is_error, Some(false));
        assert_eq!(result.content.len(), 1);
        assert!(transport.decoder().remembered().is_empty());
    }

    #[tokio::test]
    async fn other_messages_take_the_general_decoding() {
        let (mut transport, mut upstream, _requests) = transport();
        transport.send(tool_call(1)).await.unwrap();
        // An error answer to the tool call, then a notification, then an unrelated result.
        let lines = concat!(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}"#,
            "\n",
        );
        let error = receive_after(&mut transport, &mut upstream, lines).await;
        assert!(matches!(error, Some(JsonRpcMessage::Error(_))), "{error:?}");
        let notification = transport.receive().await;
        assert!(matches!(
            notification,
            Some(JsonRpcMessage::Notification(_))
        ));
        let listed = transport.receive().await;
        assert!(
            matches!(
                listed,
                Some(JsonRpcMessage::Response(JsonRpcResponse {
                    result: ServerResult::ListToolsResult(_),
                    ..
                }))
            ),
            "{listed:?}"
        );
        assert!(transport.decoder().remembered().is_empty());
    }

    #[tokio::test]
    async fn an_answer_that_is_no_tool_result_is_decoded_as_it_is() {
        let (mut transport, mut upstream, _requests) = transport();
        transport.send(tool_call(3)).await.unwrap();
        let answer = r#"{"jsonrpc":"2.0","id":3,"result":{}}"#;
        let message = receive_after(&mut transport, &mut upstream, &format!("{answer}\n")).await;
        assert!(
            matches!(
                message,
                Some(JsonRpcMessage::Response(JsonRpcResponse {
                    result: ServerResult::EmptyResult(_),
                    ..
                }))
            ),
            "{message:?}"
        );
    }

    #[tokio::test]
    async fn requests_go_out_one_per_line_and_the_end_of_input_ends_receiving() {
        let (mut transport, upstream, mut requests) = transport();
        transport.send(tool_call(1)).await.unwrap();
        transport.send(tool_call(2)).await.unwrap();
        transport.close().await.unwrap();
        let mut sent = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut requests, &mut sent)
            .await
            .unwrap();
        let ids: Vec<i64> = sent
            .lines()
            .map(|line| {
                serde_json::from_str::<serde_json::Value>(line).unwrap()["id"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        assert_eq!(ids, [1, 2]);
        drop(upstream);
        assert!(transport.receive().await.is_none());
    }
}
