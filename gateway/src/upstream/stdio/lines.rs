//! The transport over a stdio upstream's pipes: its lines sorted by
//! [`ServerMessages`] (the answers of the lane's calls to their callers, the rest to
//! rmcp), and its input shared by rmcp and the [`Lane`]. How long a line may be is the
//! reader's business (see `child::LimitedLines`).

use std::sync::Arc;

use rmcp::RoleClient;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::lines::{Decoded, LineDecoder, LineTransport, LineWriter};
use crate::upstream::lane::Lane;
use crate::upstream::server_messages::ServerMessages;

/// How a stdio upstream's lines are decoded.
pub type ServerLines<W> = ServerMessages<LineWriter<W>>;

/// The lane of a stdio upstream whose input is `W`.
pub type LineLane<W> = Lane<LineWriter<W>>;

/// The transport over an upstream's output (`reader`) and input (`writer`), and the lane
/// its tool calls take. The reader limits line lengths itself.
pub fn transport<R, W>(
    reader: R,
    writer: W,
) -> (LineTransport<ServerLines<W>, R, W>, Arc<LineLane<W>>)
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let writer = LineWriter::new(writer);
    let lane = Arc::new(Lane::new(writer.clone()));
    let lines = LineTransport::new(
        ServerMessages::new(Arc::clone(&lane)),
        reader,
        writer,
        usize::MAX,
    );
    (lines, lane)
}

impl<W: AsyncWrite + Send + Unpin + 'static> LineDecoder for ServerLines<W> {
    type Role = RoleClient;

    fn decode(&self, line: &[u8]) -> Decoded<RoleClient> {
        match self.sort(line) {
            Some(message) => Decoded::Message(message),
            None => Decoded::Skip,
        }
    }

    fn ended(&self) {
        ServerMessages::ended(self);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rmcp::model::{
        CallToolRequest, CallToolRequestParams, JsonRpcMessage, JsonRpcResponse, NumberOrString,
        ServerResult,
    };
    use rmcp::service::RxJsonRpcMessage;
    use rmcp::transport::Transport;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::task::JoinHandle;

    use super::*;
    use crate::upstream::lane::{Call, CallAnswer};

    type Pipe = tokio::io::DuplexStream;
    type Lines = LineTransport<ServerLines<Pipe>, Pipe, Pipe>;

    /// The transport and lane over pipes: the upstream's output, and its input by lines.
    fn transport() -> (Lines, Arc<LineLane<Pipe>>, Pipe, BufReader<Pipe>) {
        let (ours_in, theirs_out) = tokio::io::duplex(1 << 16);
        let (ours_out, theirs_in) = tokio::io::duplex(1 << 16);
        let (lines, lane) = super::transport(ours_in, ours_out);
        (lines, lane, theirs_out, BufReader::new(theirs_in))
    }

    fn get() -> CallToolRequest {
        CallToolRequest::new(CallToolRequestParams::new("get"))
    }

    fn number(id: &rmcp::model::RequestId) -> i64 {
        match id {
            NumberOrString::Number(id) => *id,
            other => panic!("a lane id is a number: {other:?}"),
        }
    }

    async fn read_line(input: &mut BufReader<Pipe>) -> serde_json::Value {
        let mut line = String::new();
        input.read_line(&mut line).await.unwrap();
        serde_json::from_str(&line).unwrap()
    }

    /// What a call ended with: the progress it was handed, in order, then its answer.
    type Ended = (Vec<f64>, Option<CallAnswer>);

    /// A `get` call on the lane, running until its answer, once its request is written.
    async fn call(
        lane: &Arc<LineLane<Pipe>>,
        input: &mut BufReader<Pipe>,
    ) -> (JoinHandle<Ended>, i64) {
        let mut call = Call::start(lane).unwrap();
        let id = number(call.id());
        let running = tokio::spawn(async move {
            let mut progress = Vec::new();
            let answer = call
                .exchange(get(), |reported| {
                    progress.push(reported.progress);
                    async {}
                })
                .await;
            (progress, answer)
        });
        let sent = read_line(input).await;
        assert_eq!(
            (&sent["method"], &sent["params"]["name"], &sent["id"]),
            (&"tools/call".into(), &"get".into(), &id.into())
        );
        (running, id)
    }

    async fn receive_after(
        transport: &mut Lines,
        upstream: &mut Pipe,
        lines: &str,
    ) -> Option<RxJsonRpcMessage<RoleClient>> {
        upstream.write_all(lines.as_bytes()).await.unwrap();
        transport.receive().await
    }

    #[tokio::test]
    async fn calls_go_out_under_ids_rmcp_never_uses() {
        let (_transport, lane, _upstream, mut input) = transport();
        let (_first, first) = call(&lane, &mut input).await;
        let (_second, second) = call(&lane, &mut input).await;
        assert!(first > i64::from(u32::MAX) && second == first + 1);
    }

    #[tokio::test]
    async fn an_answer_goes_to_its_caller_and_everything_else_to_rmcp() {
        let (mut transport, lane, mut upstream, mut input) = transport();
        let (running, id) = call(&lane, &mut input).await;
        // Garbage, the call's answer, then a notification for rmcp.
        let lines = format!(
            "not json\n{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"hi\"}}],\"isError\":false}}}}\n{}\n",
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#
        );
        let message = receive_after(&mut transport, &mut upstream, &lines).await;
        assert!(
            matches!(message, Some(JsonRpcMessage::Notification(_))),
            "{message:?}"
        );
        match running.await.unwrap().1 {
            Some(CallAnswer::Result(result)) => {
                assert!(!result.is_error());
                assert_eq!(result.texts().collect::<Vec<_>>(), ["hi"]);
            }
            other => panic!("not the tool result: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_calls_progress_reaches_it_in_order_before_its_answer() {
        let (mut transport, lane, mut upstream, mut input) = transport();
        let (running, id) = call(&lane, &mut input).await;
        let progress = |token: i64, step: u32| {
            format!(
                "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":{token},\"progress\":{step}}}}}\n"
            )
        };
        // Three steps and the answer back to back, and a step of a token not the lane's.
        let lines = format!(
            "{}{}{}{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[]}}}}\n{}",
            progress(id, 1),
            progress(id, 2),
            progress(id, 3),
            progress(7, 1),
        );
        let message = receive_after(&mut transport, &mut upstream, &lines).await;
        assert!(
            matches!(message, Some(JsonRpcMessage::Notification(_))),
            "the other token's progress is rmcp's: {message:?}"
        );
        let (steps, answer) = running.await.unwrap();
        assert_eq!(steps, [1.0, 2.0, 3.0]);
        assert!(matches!(answer, Some(CallAnswer::Result(_))), "{answer:?}");
    }

    #[tokio::test]
    async fn error_and_malformed_answers_reach_their_callers_and_other_answers_go_to_rmcp() {
        let (mut transport, lane, mut upstream, mut input) = transport();
        let (refused, refused_id) = call(&lane, &mut input).await;
        let (odd, odd_id) = call(&lane, &mut input).await;
        let lines = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{refused_id},\"error\":{{\"code\":-32602,\"message\":\"bad\"}}}}\n\
             {{\"jsonrpc\":\"2.0\",\"id\":{odd_id},\"result\":{{\"content\":7}}}}\n\
             {}\n",
            r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}"#
        );
        let listed = receive_after(&mut transport, &mut upstream, &lines).await;
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
        match refused.await.unwrap().1 {
            Some(CallAnswer::Error(error)) => assert_eq!(error.message, "bad"),
            other => panic!("not the error: {other:?}"),
        }
        match odd.await.unwrap().1 {
            Some(CallAnswer::Malformed(reason)) => assert!(reason.contains("not a tool result")),
            other => panic!("not refused as malformed: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_cancelled_call_tells_the_upstream_and_its_late_answer_goes_to_rmcp() {
        let (mut transport, lane, mut upstream, mut input) = transport();
        let mut call = Call::start(&lane).unwrap();
        let id = number(call.id());
        let exchange = call.exchange(get(), |_| async {});
        let waited = tokio::time::timeout(Duration::from_millis(20), exchange);
        assert!(waited.await.is_err(), "no answer came");
        call.cancel("the client gave up");
        assert_eq!(read_line(&mut input).await["id"], id);
        let cancelled = read_line(&mut input).await;
        assert_eq!(cancelled["method"], "notifications/cancelled");
        assert_eq!(cancelled["params"]["requestId"], id);
        assert_eq!(cancelled["params"]["reason"], "the client gave up");
        // rmcp finds no responder for it and drops it.
        let late = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[]}}}}\n");
        let message = receive_after(&mut transport, &mut upstream, &late).await;
        assert!(
            matches!(message, Some(JsonRpcMessage::Response(_))),
            "{message:?}"
        );
    }

    #[tokio::test]
    async fn calls_in_flight_learn_at_once_that_the_connection_ended() {
        let (mut transport, lane, upstream, mut input) = transport();
        let (waiting, _) = call(&lane, &mut input).await;
        drop(upstream);
        assert!(transport.receive().await.is_none());
        assert!(waiting.await.unwrap().1.is_none());
        assert!(Call::start(&lane).is_err());
    }

    #[tokio::test]
    async fn closing_the_service_loop_ends_the_calls_in_flight() {
        let (transport, lane, _upstream, mut input) = transport();
        let (waiting, _) = call(&lane, &mut input).await;
        drop(transport);
        assert!(waiting.await.unwrap().1.is_none());
    }
}
