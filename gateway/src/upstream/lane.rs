//! Tool calls to a stdio or legacy SSE upstream, written and answered beside rmcp's
//! service loop. The lane writes to the connection's [`Outlet`] (a child's input, or the
//! queue of `POST`s to an SSE server's endpoint), in order with rmcp's own messages, and
//! is handed what the upstream sends before rmcp is (see [`super::server_messages`]).
//!
//! Through rmcp's client, a call goes over a channel to the connection's service loop,
//! which spawns a task to write it and is woken again when that task ends; the loop then
//! reads the answer, looks up its responder and hands it over a oneshot. A profile of
//! forwarding at concurrency 32 put rmcp's loops at a quarter of the gateway's CPU
//! (`serve_inner`). On the lane the calling task writes its `tools/call` itself, and the
//! transport's reader hands the answer straight to it.
//!
//! The call's progress comes the same way, in order with its answer: the calling task
//! forwards each progress notification to its client before it takes the answer, so the
//! last progress is never overtaken by the answer (clients drop progress for a request
//! that has been answered).
//!
//! The other requests of clients (`prompts/get`, `resources/read`, ...) and the
//! gateway's own (the lists it reads) take the lane too ([`Lane::request`]), and get their
//! answer as the upstream wrote it, unparsed.
//!
//! Everything else still goes through rmcp: `initialize`, the upstream's log messages and
//! requests to the client (routed by [`crate::relay::CallRoutes`], which the caller
//! enters under the lane's request id and progress token), and the progress of requests
//! other than tool calls. A request to a server of 2026-07-28 carries the context rmcp
//! would give it (revision, the gateway's name and capabilities), which the caller puts
//! in its `_meta`.
//!
//! A server of 2026-07-28 may still ask its client by request during a call. rmcp, which
//! has none of the lane's calls in flight, would refuse such a request as related to no
//! request of its client; while the lane has calls or requests in flight, it has the
//! request relayed itself ([`Lane::ask_client`]) and writes the answer back, unless the
//! server withdraws the request first ([`Lane::withdraw`]: the client is told, and no
//! answer is written). Nothing on a stdio stream says which call a request is for: the
//! relay finds its client as for a server of 2025 (see [`crate::relay::calls`]), and
//! the requests still open when the lane has no calls or requests in flight any more,
//! or when the connection ends, are withdrawn the same way: nothing is left to want
//! their answers.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequest, CallToolRequestMethod, CallToolRequestParams, CancelledNotification,
    CancelledNotificationParam, ClientNotification, ClientRequest, CreateTaskResult, ErrorData,
    InputRequiredResult, JsonRpcMessage, JsonRpcRequest, JsonRpcVersion2_0, NumberOrString,
    ProgressNotificationParam, RequestId, RequestMetaObject, ServerRequest,
};
use rmcp::service::TxJsonRpcMessage;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::io::AsyncWrite;
use tokio::process::ChildStdin;
use tokio::sync::{mpsc, oneshot};

use super::asked::Asked;
use super::client::StreamRequests;
use crate::lines::{LineWriter, encode};
use crate::relay::calls::{MAX_QUEUED_PROGRESS, answer_after_progress};
use crate::tool_result::ToolResult;

/// The lanes' first request id (rmcp's own are below it).
pub(super) use crate::http_client::FIRST_LANE_ID as FIRST_ID;

/// Where a lane's messages go, one whole message at a time, after everything sent
/// before them on the connection (rmcp's messages included).
pub trait Outlet: Clone + Send + Sync + 'static {
    /// Sends `message` (one JSON-RPC message, ending in a newline) whole; fails once the
    /// connection has closed. Cancel-safe: a message goes whole or not at all.
    fn send(&self, message: &[u8]) -> impl Future<Output = io::Result<()>> + Send;
}

/// A stdio child's input.
impl<W: AsyncWrite + Send + Unpin + 'static> Outlet for LineWriter<W> {
    fn send(&self, message: &[u8]) -> impl Future<Output = io::Result<()>> + Send {
        self.write(message)
    }
}

/// The tool calls in flight on one connection, and where the upstream's input goes.
pub struct Lane<W = LineWriter<ChildStdin>> {
    writer: W,
    pending: Mutex<Pending>,
    next_id: AtomicI64,
    /// Who relays the requests of a server without a session (2026-07-28), which rmcp
    /// refuses when none of its own requests is in flight.
    requests: OnceLock<Arc<StreamRequests>>,
    /// Those requests while they are relayed, for the server to withdraw.
    asked: Arc<Asked>,
}

#[derive(Default)]
struct Pending {
    calls: HashMap<RequestId, Waiting>,
    /// The requests waiting for their answer as the upstream wrote it ([`Lane::request`]).
    requests: HashMap<RequestId, oneshot::Sender<RawAnswer>>,
    /// Set when the connection ended: no call waits for an answer any more.
    closed: bool,
}

/// Where a call's progress and answer go.
struct Waiting {
    progress: mpsc::Sender<ProgressNotificationParam>,
    answer: oneshot::Sender<CallAnswer>,
}

/// What the upstream answered a tool call.
#[derive(Debug)]
pub enum CallAnswer {
    /// The tool's result, as the upstream wrote it.
    Result(ToolResult),
    /// The server needs input from the client first (protocol 2026-07-28).
    InputRequired(InputRequiredResult),
    /// The server made a task of the call (the tasks extension of 2026-07-28).
    Task(CreateTaskResult),
    Error(ErrorData),
    /// Neither a tool result nor an error.
    Malformed(String),
}

impl<W> Lane<W> {
    pub fn new(writer: W) -> Self {
        Self {
            writer,
            pending: Mutex::default(),
            next_id: AtomicI64::new(FIRST_ID),
            requests: OnceLock::new(),
            asked: Arc::default(),
        }
    }

    /// Serves an upstream of 2026-07-28, whose requests during the lane's calls
    /// `requests` relays.
    pub fn serve_stateless(&self, requests: StreamRequests) {
        let _ = self.requests.set(Arc::new(requests));
    }

    /// A request id for the next request, unique on the connection; also its progress
    /// token.
    pub fn next_id(&self) -> RequestId {
        NumberOrString::Number(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Hands `line` to its caller when it answers one of the lane's calls or requests or
    /// reports a call's progress; false for any other line, which is rmcp's to decode.
    pub fn deliver(&self, line: &[u8]) -> bool {
        let (calls, requests) = {
            let pending = self.lock();
            (!pending.calls.is_empty(), !pending.requests.is_empty())
        };
        if requests
            && let Some((id, answer)) = RawAnswer::read(line)
            && let Some(waiting) = self.settle(|pending| pending.requests.remove(&id))
        {
            let _ = waiting.send(answer);
            return true;
        }
        if !calls {
            return false;
        }
        match Message::read(line) {
            Message::ToolResult(id, result) => self.answer(&id, || CallAnswer::Result(result)),
            Message::Answer { id, result, error } => {
                self.answer(&id, || decode_answer(result, error))
            }
            Message::Progress(params) => self.progress(params),
            Message::Other => false,
        }
    }

    fn progress(&self, params: &RawValue) -> bool {
        let Ok(progress) = serde_json::from_str::<ProgressNotificationParam>(params.get()) else {
            return false;
        };
        let pending = self.lock();
        let Some(waiting) = pending.calls.get(&progress.progress_token.0) else {
            return false;
        };
        if waiting.progress.try_send(progress).is_err() {
            tracing::debug!("dropping progress of a tool call that is behind on it");
        }
        true
    }

    /// Hands the call `id` its answer, decoded only when the call is one of the lane's.
    fn answer(&self, id: &RequestId, answer: impl FnOnce() -> CallAnswer) -> bool {
        let Some(waiting) = self.settle(|pending| pending.calls.remove(id)) else {
            return false;
        };
        // The caller may have stopped waiting (cancelled, say): then the answer is dropped.
        let _ = waiting.answer.send(answer());
        true
    }

    /// Cancels the relaying of the request `id` the server withdrew
    /// (`notifications/cancelled`); false when the lane relays no request of that id.
    pub fn withdraw(&self, id: &RequestId) -> bool {
        self.asked.withdraw(None, id)
    }

    /// The connection ended: calls still waiting learn it at once, new ones fail, and
    /// the server's requests still being relayed are withdrawn.
    pub fn close(&self) {
        let mut pending = self.lock();
        pending.closed = true;
        pending.calls.clear();
        pending.requests.clear();
        self.asked.withdraw_all();
    }

    /// Takes a call or request out of those in flight with `change`; when none is left,
    /// the server's requests still being relayed are withdrawn, since they belonged to
    /// those calls ([`Self::ask_client`]). Under the same lock as `ask_client`'s check, so
    /// a request entered for a call that starts meanwhile is not withdrawn with them.
    fn settle<T>(&self, change: impl FnOnce(&mut Pending) -> T) -> T {
        let mut pending = self.lock();
        let changed = change(&mut pending);
        let idle = pending.calls.is_empty() && pending.requests.is_empty();
        if idle && self.requests.get().is_some() {
            self.asked.withdraw_all();
        }
        changed
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Why a lane did not answer a call.
#[derive(Debug)]
pub enum Unanswered {
    /// The connection ended before the answer.
    Closed,
    /// No session yet, or the upstream forgot it (404): rmcp can open a new one (see
    /// `CallLane::in_session`), and the request was never seen.
    NoSession,
    /// The request or its answer was lost on the way (the reason, for the caller).
    Failed(String),
    /// No connection to the server could be made: it is down, or gone from its address.
    Unreachable(String),
}

/// What an upstream answered a request of the gateway's own (a list, say), as it wrote it.
#[derive(Debug)]
pub enum RawAnswer {
    Result(Box<RawValue>),
    Error(ErrorData),
}

impl RawAnswer {
    /// The request id `message` answers, and its answer, when it is an answer.
    pub(super) fn read(message: &[u8]) -> Option<(RequestId, RawAnswer)> {
        #[derive(Deserialize)]
        struct Envelope {
            id: RequestId,
            result: Option<Box<RawValue>>,
            error: Option<ErrorData>,
            method: Option<serde::de::IgnoredAny>,
        }
        let envelope: Envelope = serde_json::from_slice(message).ok()?;
        let answer = match (envelope.method, envelope.result, envelope.error) {
            (None, Some(result), None) => RawAnswer::Result(result),
            (None, None, Some(error)) => RawAnswer::Error(error),
            _ => return None,
        };
        Some((envelope.id, answer))
    }
}

impl<W: Outlet> Lane<W> {
    /// Sends `request` under `id` and waits for the answer as the upstream wrote it;
    /// `None` when the connection ended first. Dropping the future forgets the request.
    pub async fn request(&self, id: RequestId, request: ClientRequest) -> Option<RawAnswer> {
        let (sender, answer) = oneshot::channel();
        {
            let mut pending = self.lock();
            if pending.closed {
                return None;
            }
            pending.requests.insert(id.clone(), sender);
        }
        let _forget = Forget {
            lane: self,
            id: &id,
        };
        let message: TxJsonRpcMessage<RoleClient> = JsonRpcMessage::request(request, id.clone());
        let written = match encode(&message) {
            Ok(line) => self.writer.send(&line).await,
            Err(error) => Err(error),
        };
        if let Err(error) = written {
            tracing::debug!("could not write a request upstream: {error}");
            return None;
        }
        answer.await.ok()
    }

    /// Has `request` of a server of 2026-07-28 relayed to its client, and the answer
    /// written back, when the lane has calls or requests in flight: the request belongs
    /// to one of them. Gives it back otherwise (rmcp refuses or serves it as it would
    /// any request outside a call), and for a server spoken to in a session.
    pub fn ask_client(
        &self,
        request: JsonRpcRequest<ServerRequest>,
    ) -> Option<JsonRpcRequest<ServerRequest>> {
        let Some(requests) = self.requests.get() else {
            return Some(request);
        };
        let asking = {
            let pending = self.lock();
            if pending.calls.is_empty() && pending.requests.is_empty() {
                return Some(request);
            }
            // Entered under the lock, so that the last call's end withdraws it.
            self.asked.enter(None, request.id.clone())
        };
        let requests = Arc::clone(requests);
        let writer = self.writer.clone();
        // The relay waits for the client; the upstream's output is read on meanwhile.
        tokio::spawn(async move {
            let withdrawn = asking.cancellation();
            // Withdrawn: the server expects no answer.
            let Some(answer) = requests.answer(None, request, withdrawn).await else {
                return;
            };
            let written = match encode(&answer) {
                Ok(line) => writer.send(&line).await,
                Err(error) => Err(error),
            };
            if let Err(error) = written {
                tracing::debug!("could not answer the upstream's request: {error}");
            }
        });
        None
    }

    /// Tells the upstream the request `id` is cancelled (`notifications/cancelled`)
    /// without waiting for the write (the upstream may not be reading).
    pub fn cancel(&self, id: RequestId, reason: &str) {
        let notification: TxJsonRpcMessage<RoleClient> = JsonRpcMessage::notification(
            ClientNotification::CancelledNotification(CancelledNotification::new(
                CancelledNotificationParam::new(Some(id), Some(reason.to_owned())),
            )),
        );
        let writer = self.writer.clone();
        tokio::spawn(async move {
            let written = match encode(&notification) {
                Ok(line) => writer.send(&line).await,
                Err(error) => Err(error),
            };
            if let Err(error) = written {
                tracing::debug!("could not cancel a request upstream: {error}");
            }
        });
    }
}

/// Forgets a request of [`Lane::request`] when it is dropped, answered or not.
struct Forget<'a, W> {
    lane: &'a Lane<W>,
    id: &'a RequestId,
}

impl<W> Drop for Forget<'_, W> {
    fn drop(&mut self) {
        self.lane.settle(|pending| pending.requests.remove(self.id));
    }
}

/// What one message from an upstream is to a lane, read no further than telling that takes.
pub(super) enum Message<'a> {
    /// A tool result and nothing else, as most messages are while calls are in flight:
    /// decoded in the same pass.
    ToolResult(RequestId, ToolResult),
    /// Any other answer, whose members [`decode_answer`] reads.
    Answer {
        id: RequestId,
        result: Option<&'a RawValue>,
        error: Option<&'a RawValue>,
    },
    /// `notifications/progress`, with its params.
    Progress(&'a RawValue),
    /// A request, another notification, or not JSON-RPC.
    Other,
}

impl<'a> Message<'a> {
    pub(super) fn read(message: &'a [u8]) -> Self {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct ToolAnswer {
            #[allow(dead_code, reason = "required, never read")]
            jsonrpc: JsonRpcVersion2_0,
            id: RequestId,
            result: ToolResult,
        }
        /// The members that tell an answer from a request or a notification.
        #[derive(Deserialize)]
        struct Envelope<'a> {
            id: Option<RequestId>,
            #[serde(borrow)]
            result: Option<&'a RawValue>,
            #[serde(borrow)]
            error: Option<&'a RawValue>,
            #[serde(borrow)]
            method: Option<&'a str>,
            #[serde(borrow)]
            params: Option<&'a RawValue>,
        }
        if let Ok(ToolAnswer { id, result, .. }) = serde_json::from_slice(message) {
            return Message::ToolResult(id, result);
        }
        match serde_json::from_slice::<Envelope>(message) {
            Ok(Envelope {
                id: None,
                method: Some("notifications/progress"),
                params: Some(params),
                ..
            }) => Message::Progress(params),
            Ok(Envelope {
                id: Some(id),
                method: None,
                result,
                error,
                ..
            }) => Message::Answer { id, result, error },
            _ => Message::Other,
        }
    }
}

/// What an answer's `result` or `error` member holds.
pub(super) fn decode_answer(result: Option<&RawValue>, error: Option<&RawValue>) -> CallAnswer {
    match (result, error) {
        (Some(result), None) => match serde_json::from_str(result.get()) {
            Ok(result) => CallAnswer::Result(result),
            Err(e) => match serde_json::from_str(result.get()) {
                Ok(asked) => CallAnswer::InputRequired(asked),
                Err(_) => match serde_json::from_str(result.get()) {
                    Ok(task) => CallAnswer::Task(task),
                    Err(_) => CallAnswer::Malformed(format!("not a tool result: {e}")),
                },
            },
        },
        (None, Some(error)) => match serde_json::from_str(error.get()) {
            Ok(error) => CallAnswer::Error(error),
            Err(e) => CallAnswer::Malformed(format!("not a JSON-RPC error: {e}")),
        },
        _ => CallAnswer::Malformed("an answer with neither a result nor an error".into()),
    }
}

/// `request` under `id`, as one line. rmcp writes a request's `_meta` (which it keeps in
/// the request's extensions) by turning the params into a `serde_json::Value` to merge it
/// in, arguments and all; here the `_meta` moves into the params, which are written as
/// they are. A test holds the two equal.
fn tool_call_line(id: &RequestId, mut request: CallToolRequest) -> io::Result<Vec<u8>> {
    #[derive(Serialize)]
    struct Line<'a> {
        jsonrpc: JsonRpcVersion2_0,
        id: &'a RequestId,
        method: CallToolRequestMethod,
        params: &'a CallToolRequestParams,
    }
    if let Some(meta) = request.extensions.remove::<RequestMetaObject>() {
        match &mut request.params.meta {
            // As rmcp merges them: the extensions' entries win.
            Some(own) => own.extend(meta),
            None => request.params.meta = Some(meta),
        }
    }
    encode(&Line {
        jsonrpc: JsonRpcVersion2_0,
        id,
        method: CallToolRequestMethod,
        params: &request.params,
    })
}

/// One call in flight on the lane; dropping it forgets the call.
pub struct Call<W = LineWriter<ChildStdin>> {
    lane: Arc<Lane<W>>,
    id: RequestId,
    progress: mpsc::Receiver<ProgressNotificationParam>,
    answer: oneshot::Receiver<CallAnswer>,
}

impl<W> Call<W> {
    /// Starts a call on `lane`, entered before its request is written so that the answer
    /// cannot come first; fails once the connection has ended.
    pub fn start(lane: &Arc<Lane<W>>) -> io::Result<Self> {
        let id = lane.next_id();
        let (progress_sender, progress) = mpsc::channel(MAX_QUEUED_PROGRESS);
        let (answer_sender, answer) = oneshot::channel();
        let mut pending = lane.lock();
        if pending.closed {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the connection closed",
            ));
        }
        let waiting = Waiting {
            progress: progress_sender,
            answer: answer_sender,
        };
        pending.calls.insert(id.clone(), waiting);
        drop(pending);
        Ok(Call {
            lane: Arc::clone(lane),
            id,
            progress,
            answer,
        })
    }

    /// The call's request id, unique on the connection; also its progress token.
    pub fn id(&self) -> &RequestId {
        &self.id
    }
}

impl<W: Outlet> Call<W> {
    /// Writes `request` under this call's id and waits for the upstream's answer, handing
    /// each progress notification that comes before it to `progress` (and awaiting it)
    /// first; `None` when the connection ended first. Cancel-safe: the request goes whole or
    /// not at all (see [`Outlet::send`]).
    pub async fn exchange<F>(
        &mut self,
        request: CallToolRequest,
        progress: impl FnMut(ProgressNotificationParam) -> F,
    ) -> Option<CallAnswer>
    where
        F: Future<Output = ()>,
    {
        let written = match tool_call_line(&self.id, request) {
            Ok(line) => self.lane.writer.send(&line).await,
            Err(error) => Err(error),
        };
        if let Err(error) = written {
            tracing::debug!("could not write a tool call upstream: {error}");
            return None;
        }
        answer_after_progress(&mut self.answer, &mut self.progress, progress)
            .await
            .ok()
    }

    /// Tells the upstream the call is cancelled (`notifications/cancelled`) without
    /// waiting for the write (the upstream may not be reading); an answer that comes
    /// anyway is dropped.
    pub fn cancel(self, reason: &str) {
        self.lane.cancel(self.id.clone(), reason);
    }
}

impl<W> Drop for Call<W> {
    fn drop(&mut self) {
        self.lane.settle(|pending| pending.calls.remove(&self.id));
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ClientRequest, ProgressToken};
    use serde_json::{Value, json};

    use super::*;

    /// The line rmcp would write for `request` under `id`.
    fn rmcp_line(id: &RequestId, request: CallToolRequest) -> Value {
        let message: TxJsonRpcMessage<RoleClient> =
            JsonRpcMessage::request(ClientRequest::CallToolRequest(request), id.clone());
        serde_json::to_value(message).unwrap()
    }

    fn lane_line(id: &RequestId, request: CallToolRequest) -> Value {
        let line = tool_call_line(id, request).unwrap();
        assert_eq!(line.last(), Some(&b'\n'));
        serde_json::from_slice(&line).unwrap()
    }

    fn request(arguments: Value) -> CallToolRequest {
        let mut params = CallToolRequestParams::new("get");
        params.arguments = arguments.as_object().cloned();
        CallToolRequest::new(params)
    }

    #[test]
    fn an_answer_is_told_a_result_a_question_or_a_task() {
        let answer = |line: Value| {
            let line = line.to_string();
            match Message::read(line.as_bytes()) {
                Message::ToolResult(_, result) => CallAnswer::Result(result),
                Message::Answer { result, error, .. } => decode_answer(result, error),
                _ => CallAnswer::Malformed("not an answer".into()),
            }
        };
        let result = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "hi"}], "resultType": "complete"}});
        assert!(matches!(answer(result), CallAnswer::Result(_)));
        let asked = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "resultType": "input_required", "inputRequests": {}}});
        assert!(matches!(answer(asked), CallAnswer::InputRequired(_)));
        let task = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "resultType": "task", "taskId": "t1", "status": "working",
            "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z",
            "ttlMs": 60000}});
        match answer(task) {
            CallAnswer::Task(task) => assert_eq!(task.task.task_id, "t1"),
            other => panic!("not a task: {other:?}"),
        }
    }

    #[test]
    fn a_tool_call_line_is_what_rmcp_writes() {
        let id = RequestId::Number(FIRST_ID + 7);
        let arguments = json!({"key": "k", "nested": {"list": [1, "two", null]}});

        let bare = request(arguments.clone());
        assert_eq!(lane_line(&id, bare.clone()), rmcp_line(&id, bare));

        let mut with_meta = request(arguments.clone());
        let meta = with_meta
            .extensions
            .get_or_insert_default::<RequestMetaObject>();
        meta.set_progress_token(ProgressToken(id.clone()));
        meta.insert("traceparent".into(), json!("00-abc-def-01"));
        let line = lane_line(&id, with_meta.clone());
        assert_eq!(
            line["params"]["_meta"]["progressToken"],
            json!(FIRST_ID + 7)
        );
        assert_eq!(line, rmcp_line(&id, with_meta.clone()));

        // `_meta` in both places: one `_meta`, the extensions' entries winning.
        let mut both = with_meta;
        let mut own = RequestMetaObject::default();
        own.insert("traceparent".into(), json!("00-own-01"));
        own.insert("mine".into(), json!(true));
        both.params.meta = Some(own);
        let line = lane_line(&id, both.clone());
        assert_eq!(
            line["params"]["_meta"]["traceparent"],
            json!("00-abc-def-01")
        );
        assert_eq!(line["params"]["_meta"]["mine"], json!(true));
        assert_eq!(line, rmcp_line(&id, both));
    }
}
