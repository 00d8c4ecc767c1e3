//! Newline-delimited JSON-RPC to a stdio upstream, decoding each answer as the type of the
//! request it answers.
//!
//! rmcp's own line transport decodes every incoming message as its untagged
//! `ServerResult` union, which tries each result type in turn; a `tools/call` answer is
//! the sixteenth, so the gateway spent about a sixth of its CPU per forwarded call on
//! failed attempts (perf, `cargo bench -p mcp-gateway --bench gateway`). This transport
//! remembers which requests were `tools/call` and decodes their answers directly as
//! `CallToolResult`. Everything else, and any answer the direct decoding refuses, takes
//! rmcp's general decoding, so the hint can only make decoding faster, never different.
//!
//! A line that is not a JSON-RPC message is skipped, as rmcp and the other SDKs do
//! (replying to garbage can start an error storm); a read stopped half-way (it runs inside
//! the service loop's `select!`) resumes where it stopped. How long a line may be is the
//! reader's business (see `child::LimitedLines`).

use std::collections::HashSet;
use std::io;
use std::sync::{Arc, Mutex};

use rmcp::RoleClient;
use rmcp::model::{
    CallToolResult, ClientRequest, JsonRpcMessage, JsonRpcResponse, JsonRpcVersion2_0, RequestId,
    ServerResult,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// Requests awaiting an answer that are remembered at most; past this (an upstream that
/// never answers cancelled calls, say) the hints are dropped and decoding is general.
const MAX_REMEMBERED: usize = 4096;

/// The transport over an upstream's stdout (`R`) and stdin (`W`).
pub struct LineTransport<R, W> {
    reader: BufReader<R>,
    /// The line being read; kept across a cancelled read.
    line: Vec<u8>,
    writer: Arc<tokio::sync::Mutex<Option<W>>>,
    /// Ids of `tools/call` requests not answered yet.
    tool_calls: Arc<Mutex<HashSet<RequestId>>>,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub fn new(reader: R, writer: W) -> Self {
        Self {
            reader: BufReader::new(reader),
            line: Vec::new(),
            writer: Arc::new(tokio::sync::Mutex::new(Some(writer))),
            tool_calls: Arc::default(),
        }
    }

    /// The message on one line, or `None` for a line to skip.
    fn decode(&self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        if let Some(answer) = self.decode_tool_call_answer(line) {
            return Some(answer);
        }
        serde_json::from_slice(line)
            .inspect_err(|e| tracing::debug!("skipping an upstream line that is not JSON-RPC: {e}"))
            .ok()
    }

    /// The answer to a remembered `tools/call`, decoded as its result type.
    fn decode_tool_call_answer(&self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
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

    fn remembered(&self) -> std::sync::MutexGuard<'_, HashSet<RequestId>> {
        self.tool_calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<R, W> Transport<RoleClient> for LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(request) = &item
            && matches!(request.request, ClientRequest::CallToolRequest(_))
        {
            let mut remembered = self.remembered();
            if remembered.len() >= MAX_REMEMBERED {
                remembered.clear();
            }
            remembered.insert(request.id.clone());
        }
        let encoded = serde_json::to_vec(&item).map(|mut bytes| {
            bytes.push(b'\n');
            bytes
        });
        let writer = Arc::clone(&self.writer);
        async move {
            let bytes = encoded.map_err(io::Error::other)?;
            let mut writer = writer.lock().await;
            let writer = writer
                .as_mut()
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "transport closed"))?;
            writer.write_all(&bytes).await?;
            writer.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.reader.read_until(b'\n', &mut self.line).await {
                // End of input (a last line without a newline is incomplete), or the
                // reader refused the stream (see `LimitedLines`).
                Ok(0) => return None,
                Ok(_) if !self.line.ends_with(b"\n") => return None,
                Ok(_) => {}
                Err(error) => {
                    tracing::debug!("upstream stdout ended: {error}");
                    return None;
                }
            }
            let message = self.decode(&self.line);
            self.line.clear();
            // Lines already buffered are read without waiting, and rmcp spawns a task per
            // notification: counting each line against this task's budget makes a flood
            // yield to those tasks now and then instead of piling them up.
            tokio::task::consume_budget().await;
            if message.is_some() {
                return message;
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        if let Some(mut writer) = self.writer.lock().await.take() {
            writer.shutdown().await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolRequest, CallToolRequestParams, JsonRpcRequest, NumberOrString};

    type Pipe = tokio::io::DuplexStream;

    fn transport() -> (LineTransport<Pipe, Pipe>, Pipe, Pipe) {
        let (ours_in, theirs_out) = tokio::io::duplex(1 << 16);
        let (ours_out, theirs_in) = tokio::io::duplex(1 << 16);
        (LineTransport::new(ours_in, ours_out), theirs_out, theirs_in)
    }

    fn tool_call(id: i64) -> TxJsonRpcMessage<RoleClient> {
        JsonRpcMessage::Request(JsonRpcRequest::new(
            NumberOrString::Number(id),
            ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new("get"))),
        ))
    }

    async fn receive_after(
        transport: &mut LineTransport<Pipe, Pipe>,
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
        assert!(transport.remembered().is_empty());
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
        assert!(transport.remembered().is_empty());
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
