//! Tool calls to a streamable HTTP upstream, sent and answered by the calling task.
//!
//! Through rmcp's client, a call crosses four tasks: the service loop, the transport's
//! worker, the task that posts it, and the task that reads its SSE stream, with a channel
//! and a wake-up between each. A profile of forwarding at concurrency 32 put about half
//! of the gateway's CPU per call there. On the lane the calling task posts its
//! `tools/call` on a pooled connection of the connection's own HTTP client (so the
//! session's headers, static headers, OAuth tokens and trace headers are the ones rmcp's
//! requests carry) and reads the answer itself, whether the server sends it as JSON or
//! on an SSE stream.
//!
//! The call's progress comes on its stream, in order with its answer, and is forwarded
//! as it comes, so the last progress is never overtaken by the answer. A stream that ends
//! before the answer, after events with ids, is resumed as the spec says: after the
//! `retry` the server last set, a GET with `Last-Event-ID` (at most [`MAX_RESUMES`] times). Anything else on
//! the stream (the upstream's requests to the client, its log messages) is handed to
//! rmcp's service loop as if its transport had read it ([`Inbound`]), marked with the
//! call's id as the stream it came on: the relay finds the call's client by it, and the
//! client's answer goes back through rmcp. A server without a session (2026-07-28) may
//! still ask by request on a call's stream; rmcp, which did not post the call, would
//! refuse that as related to none of its requests, so the lane has such a request relayed
//! itself ([`StreamRequests`]), in a task of its own while it reads on, and posts the
//! answer back; unless the server withdraws the request first (`notifications/cancelled`,
//! on the call's stream or any other): then the client is told, and no answer is posted.
//! The call's client is looked up as the request is read, while the call is surely in
//! flight. A request still open when its call ends (answered, failed or cancelled) is
//! withdrawn the same way, as are all of them when the connection ends.
//!
//! Everything else stays rmcp's: `initialize`, the standalone GET stream, every other
//! request. The lane learns the session from rmcp's own `notifications/initialized`
//! (see [`SessionSlot`]), and serves only once there is one. When the upstream has
//! forgotten the session (404), the lane gives the call back; rmcp is asked to open a new
//! session ([`renew_session`]), and the call goes on the lane again, in the new one (see
//! `CallLane::in_session`): its answer is still read as the upstream wrote it. Only when
//! the lane has no session even then does rmcp send the call. An upstream of 2026-07-28
//! has no session: the connection tells the slot so once `server/discover` found it
//! ([`HttpLane::serve_stateless`]), and each call then carries its own routing headers
//! (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`) as well as its context in `_meta`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use futures::FutureExt;
use futures::stream::StreamExt;
use http::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequest, CancelledNotification, CancelledNotificationMethod,
    CancelledNotificationParam, ClientJsonRpcMessage, ClientNotification, ClientRequest,
    ConstString, GetExtensions, JsonObject, NumberOrString, PingRequest, ProgressNotificationParam,
    ProtocolVersion, RequestId, ServerJsonRpcMessage,
};
use rmcp::service::{InboundStreamOrigin, RxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits as Limits,
};
use rmcp::{Peer, RoleClient};
use tokio::sync::{Notify, mpsc};

use crate::http_client::{Events, Failed, HttpError, McpHttp, Target, with_causes};
use crate::upstream::asked::{self, Asked};
use crate::upstream::client::StreamRequests;
use crate::upstream::decorated::Decoration;
use crate::upstream::lane::{self, CallAnswer, FIRST_ID, Message, RawAnswer, Unanswered};

/// The session rmcp opened with the upstream, as its requests carry it.
pub struct UpstreamSession {
    /// `Mcp-Session-Id`, when the server gave one.
    id: Option<Arc<str>>,
    /// The configured headers and `MCP-Protocol-Version`.
    headers: HashMap<HeaderName, HeaderValue>,
    /// No session at all (2026-07-28): every request carries its routing headers.
    stateless: bool,
}

impl UpstreamSession {
    /// The headers of a request: this session's, and with no session the request's
    /// routing headers, which `routing` makes.
    fn headers_for(
        &self,
        routing: impl FnOnce() -> Vec<(HeaderName, HeaderValue)>,
    ) -> HashMap<HeaderName, HeaderValue> {
        let mut headers = self.headers.clone();
        if self.stateless {
            headers.extend(routing());
        }
        headers
    }
}

/// Where the connection's HTTP client notes the session each time rmcp opens one: its
/// `notifications/initialized` carries the session id and the negotiated headers, after
/// the first `initialize` and after each new one on a 404. A new one after the first is
/// a session renewed, which [`SessionSlot::renewed`] tells: what the upstream held in the
/// one it forgot (resource subscriptions) is gone.
#[derive(Clone, Default)]
pub struct SessionSlot(Arc<Mutex<Option<Arc<UpstreamSession>>>>, Arc<Notify>);

impl SessionSlot {
    /// Notes the session of `message` when it is `notifications/initialized`.
    pub fn note(
        &self,
        message: &ClientJsonRpcMessage,
        id: Option<&Arc<str>>,
        headers: &HashMap<HeaderName, HeaderValue>,
    ) {
        if let ClientJsonRpcMessage::Notification(notification) = message
            && let ClientNotification::InitializedNotification(_) = notification.notification
        {
            let session = UpstreamSession {
                id: id.cloned(),
                headers: headers.clone(),
                stateless: false,
            };
            if self.lock().replace(Arc::new(session)).is_some() {
                self.1.notify_one();
            }
        }
    }

    /// Resolves once rmcp has opened a new session in place of one the upstream forgot
    /// (at once when it has since this was last awaited).
    pub async fn renewed(&self) {
        self.1.notified().await;
    }

    fn get(&self) -> Option<Arc<UpstreamSession>> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<UpstreamSession>>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Has rmcp's client open a new session with the upstream, which forgot the one the lane
/// had (404): a `ping`, which rmcp's transport, answered 404 in the old session too, sends
/// again after an `initialize` whose `notifications/initialized` the [`SessionSlot`]
/// notes. What the ping gets back does not matter: the lane is in the newest session rmcp
/// could open.
pub async fn renew_session(peer: &Peer<RoleClient>) {
    let ping = ClientRequest::PingRequest(PingRequest::default());
    if let Err(error) = peer.send_request(ping).await {
        tracing::debug!("the ping that renews the session failed: {error}");
    }
}

/// What one message on a request's stream is to the request.
enum Heard<T> {
    /// Its answer.
    Answer(T),
    /// Its progress.
    Progress(ProgressNotificationParam),
    /// Anything else: the upstream's requests to the client, its log messages.
    Other,
}

/// How many times one call's stream is resumed before the call fails.
pub const MAX_RESUMES: usize = 5;

/// How long to wait before resuming a stream whose server set no `retry`.
const DEFAULT_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// The tool calls of one streamable HTTP connection.
pub struct HttpLane {
    client: Arc<dyn McpHttp>,
    uri: Arc<str>,
    /// The headers the connection is configured with.
    configured: HashMap<HeaderName, HeaderValue>,
    session: SessionSlot,
    /// What the upstream sends on a call's stream that is not the call's own.
    inbound: mpsc::UnboundedSender<ServerJsonRpcMessage>,
    /// Who relays the requests of a server without a session on a call's stream.
    requests: OnceLock<Arc<StreamRequests>>,
    /// Those requests while they are relayed, for the server to withdraw; shared with
    /// the [`Inbound`] decoration, which reads what comes on rmcp's own streams.
    asked: Arc<Asked>,
    next_id: AtomicI64,
}

impl HttpLane {
    /// A lane posting with `client` (the one rmcp's transport uses) as rmcp's transport
    /// configured by `config` does, in the session `session` holds, handing what is not a
    /// call's own to `inbound`'s transport.
    pub fn new(
        client: Arc<dyn McpHttp>,
        config: &StreamableHttpClientTransportConfig,
        session: SessionSlot,
        inbound: &InboundSender,
    ) -> Self {
        Self {
            client,
            uri: config.uri.clone(),
            configured: config.custom_headers.clone(),
            session,
            inbound: inbound.passed.clone(),
            requests: OnceLock::new(),
            asked: Arc::clone(&inbound.asked),
            next_id: AtomicI64::new(FIRST_ID),
        }
    }

    /// Serves an upstream of 2026-07-28 (`revision`), which has no session: every call
    /// carries the configured headers, `MCP-Protocol-Version` and its routing headers, and
    /// `requests` relays what the upstream asks on a call's stream.
    pub fn serve_stateless(&self, revision: &ProtocolVersion, requests: StreamRequests) {
        let _ = self.requests.set(Arc::new(requests));
        let mut headers = self.configured.clone();
        if let Ok(version) = HeaderValue::from_str(revision.as_str()) {
            headers.insert(HeaderName::from_static("mcp-protocol-version"), version);
        }
        let session = UpstreamSession {
            id: None,
            headers,
            stateless: true,
        };
        *self.session.lock() = Some(Arc::new(session));
    }

    /// Where a request in `session` with `headers` goes. No `Authorization` of the lane's
    /// own: a signed-in client puts its token on.
    fn target(
        &self,
        session: &UpstreamSession,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Target {
        Target {
            uri: self.uri.clone(),
            session_id: session.id.clone(),
            auth_token: None,
            headers,
        }
    }

    /// Resolves once the upstream's session has been renewed (see [`SessionSlot`]).
    pub async fn session_renewed(&self) {
        self.session.renewed().await;
    }

    /// A request id for the next call, unique on the connection; also its progress token.
    pub fn next_id(&self) -> RequestId {
        NumberOrString::Number(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Posts `request` under `id` and reads the upstream's answer, awaiting `progress`
    /// for each progress notification of the call that comes before it; `input_schema`
    /// is the called tool's, for the headers its arguments travel in. Dropping the future
    /// drops the connection's answer (see [`Self::cancel`]).
    pub async fn call<F>(
        &self,
        id: &RequestId,
        request: CallToolRequest,
        input_schema: Option<&JsonObject>,
        mut progress: impl FnMut(ProgressNotificationParam) -> F,
    ) -> Result<CallAnswer, Unanswered>
    where
        F: Future<Output = ()>,
    {
        let request = ClientRequest::CallToolRequest(request);
        let hear = |data: &str| match Message::read(data.as_bytes()) {
            Message::ToolResult(answered, result) if answered == *id => {
                Heard::Answer(CallAnswer::Result(result))
            }
            Message::Answer {
                id: answered,
                result,
                error,
            } if answered == *id => Heard::Answer(lane::decode_answer(result, error)),
            Message::Progress(params) => {
                match serde_json::from_str::<ProgressNotificationParam>(params.get()) {
                    Ok(params) if params.progress_token.0 == *id => Heard::Progress(params),
                    _ => Heard::Other,
                }
            }
            _ => Heard::Other,
        };
        self.exchange(id, request, input_schema, hear, &mut progress)
            .await
    }

    /// Posts `request` under `id` and reads the answer as the upstream wrote it. What
    /// else comes on its stream (progress among it) goes to rmcp, marked as the
    /// request's.
    pub async fn request(
        &self,
        id: &RequestId,
        request: ClientRequest,
    ) -> Result<RawAnswer, Unanswered> {
        let hear = |data: &str| match RawAnswer::read(data.as_bytes()) {
            Some((answered, answer)) if answered == *id => Heard::Answer(answer),
            _ => Heard::Other,
        };
        let mut no_progress = async |_| {};
        self.exchange(id, request, None, hear, &mut no_progress)
            .await
    }

    /// Posts `request` under `id` and reads, from its response, what `hear` takes for its
    /// answer, handing the request's progress to `progress` on the way and everything
    /// else the upstream sends there to rmcp.
    async fn exchange<T, F>(
        &self,
        id: &RequestId,
        request: ClientRequest,
        input_schema: Option<&JsonObject>,
        hear: impl Fn(&str) -> Heard<T>,
        progress: &mut impl FnMut(ProgressNotificationParam) -> F,
    ) -> Result<T, Unanswered>
    where
        F: Future<Output = ()>,
    {
        let session = self.session.get().ok_or(Unanswered::NoSession)?;
        // However the exchange ends, what the server asked on its stream is withdrawn.
        let _asked = self.requests.get().map(|_| WithdrawOnEnd {
            asked: &self.asked,
            call: id,
        });
        let headers = session.headers_for(|| wire::routing::headers(&request, input_schema));
        let message = ClientJsonRpcMessage::request(request, id.clone());
        let posted = self
            .client
            .post(self.target(&session, headers), message, Limits::default());
        let response = match posted.await {
            Ok(response) => response,
            Err(StreamableHttpError::SessionExpired) => return Err(Unanswered::NoSession),
            Err(error) => return Err(failed(&error)),
        };
        match response {
            // An error the server answered with an error status (a success comes as one
            // event, unparsed: see `crate::http_client`).
            StreamableHttpPostResponse::Json(message, _) => {
                let data = serde_json::to_string(&message)
                    .map_err(|error| Unanswered::Failed(error.to_string()))?;
                match hear(&data) {
                    Heard::Answer(answer) => Ok(answer),
                    _ => {
                        self.pass_on(id, message);
                        Err(Unanswered::Failed(
                            "its response carried no answer to the call".into(),
                        ))
                    }
                }
            }
            StreamableHttpPostResponse::Sse(stream, _) => {
                self.stream_answer(id, &session, stream, hear, progress)
                    .await
            }
            _ => Err(Unanswered::Failed(
                "it accepted the call without answering it".into(),
            )),
        }
    }

    /// The answer on the request's SSE stream, with its progress before it; the stream is
    /// resumed where it ended early.
    async fn stream_answer<T, F>(
        &self,
        id: &RequestId,
        session: &UpstreamSession,
        mut stream: Events,
        hear: impl Fn(&str) -> Heard<T>,
        progress: &mut impl FnMut(ProgressNotificationParam) -> F,
    ) -> Result<T, Unanswered>
    where
        F: Future<Output = ()>,
    {
        let mut last_event_id = None;
        let mut retry = DEFAULT_RETRY;
        let mut resumed = 0;
        loop {
            let Some(event) = stream.next().await else {
                let Some(after) = last_event_id.clone().filter(|_| resumed < MAX_RESUMES) else {
                    return Err(Unanswered::Failed(
                        "its response stream ended before the answer".into(),
                    ));
                };
                resumed += 1;
                tokio::time::sleep(retry).await;
                let headers = session.headers_for(Vec::new);
                let max_event_size = Limits::default().max_sse_event_size;
                stream = self
                    .client
                    .get_stream(self.target(session, headers), Some(after), max_event_size)
                    .await
                    .map_err(|error| failed(&error))?;
                continue;
            };
            let event = event.map_err(|error| {
                Unanswered::Failed(format!("its response stream broke: {error}"))
            })?;
            if let Some(event_id) = &event.id {
                last_event_id = Some(event_id.clone());
            }
            if let Some(millis) = event.retry {
                retry = std::time::Duration::from_millis(millis);
            }
            // As rmcp reads them: other events are the stream's own (priming, pings).
            if !matches!(event.event.as_deref(), None | Some("" | "message")) {
                continue;
            }
            let Some(data) = event.data.filter(|data| !data.is_empty()) else {
                continue;
            };
            match hear(&data) {
                Heard::Answer(answer) => {
                    finish(stream);
                    return Ok(answer);
                }
                Heard::Progress(params) => progress(params).await,
                Heard::Other => self.hand_on(id, session, &data),
            }
        }
    }

    /// Hands on what the upstream sent on the stream of call `id` that is not the call's
    /// own: a request of a server without a session to [`StreamRequests`], whose answer
    /// is posted back (the upstream waits for it before it goes on) from a task of its
    /// own, so that the stream is read on meanwhile (the call's client is looked up
    /// before: by the time the task runs, the call may be over); that server's
    /// cancellation of such a request to the relaying it cancels; anything else to rmcp.
    fn hand_on(&self, id: &RequestId, session: &UpstreamSession, data: &str) {
        let message = match serde_json::from_str::<ServerJsonRpcMessage>(data) {
            Ok(message) => message,
            Err(error) => {
                tracing::debug!("not a JSON-RPC message on a call's stream: {error}");
                return;
            }
        };
        match (message, self.requests.get()) {
            (ServerJsonRpcMessage::Request(request), Some(requests)) if session.stateless => {
                let asking = self.asked.enter(Some(id.clone()), request.id.clone());
                let during = requests.during(id);
                let requests = Arc::clone(requests);
                let client = Arc::clone(&self.client);
                let to = self.target(session, session.headers_for(Vec::new));
                tokio::spawn(async move {
                    let withdrawn = asking.cancellation();
                    // Withdrawn: the server expects no answer.
                    let Some(answer) = requests.answer(Some(during), request, withdrawn).await
                    else {
                        return;
                    };
                    let posted = client.post(to, answer, Limits::default());
                    if let Err(error) = posted.await {
                        tracing::debug!("could not answer the upstream's request: {error}");
                    }
                });
            }
            (message, _)
                if asked::withdrawn(&message)
                    .is_some_and(|asked| self.asked.withdraw(Some(id), asked)) => {}
            (message, _) => self.pass_on(id, message),
        }
    }

    /// Hands rmcp what the upstream sent on the stream of call `id`, marked as such.
    fn pass_on(&self, id: &RequestId, mut message: ServerJsonRpcMessage) {
        if let ServerJsonRpcMessage::Request(request) = &mut message {
            let origin = InboundStreamOrigin::OutboundRequest(id.clone());
            request.request.extensions_mut().insert(origin);
        }
        // Closed only when the connection is gone, and its calls with it.
        let _ = self.inbound.send(message);
    }

    /// Tells the upstream call `id` is cancelled (`notifications/cancelled`), without
    /// waiting for the post (the upstream may not be answering).
    pub fn cancel(self: &Arc<Self>, id: RequestId, reason: &str) {
        let Some(session) = self.session.get() else {
            return;
        };
        let cancelled = CancelledNotification::new(CancelledNotificationParam::new(
            Some(id),
            Some(reason.to_owned()),
        ));
        let method = HeaderValue::from_static(CancelledNotificationMethod::VALUE);
        let headers = session
            .headers_for(|| vec![(HeaderName::from_static(wire::routing::MCP_METHOD), method)]);
        let notification = ClientJsonRpcMessage::notification(
            ClientNotification::CancelledNotification(cancelled),
        );
        let lane = Arc::clone(self);
        tokio::spawn(async move {
            let to = lane.target(&session, headers);
            let posted = lane.client.post(to, notification, Limits::default()).await;
            if let Err(error) = posted {
                tracing::debug!("could not cancel a tool call upstream: {error}");
            }
        });
    }
}

/// Withdraws the requests the server asked on the stream of the call `call` when the
/// call's exchange ends, however it ends: nobody is left to read their answers.
struct WithdrawOnEnd<'a> {
    asked: &'a Asked,
    call: &'a RequestId,
}

impl Drop for WithdrawOnEnd<'_> {
    fn drop(&mut self) {
        self.asked.withdraw_call(self.call);
    }
}

fn failed(error: &Failed) -> Unanswered {
    match why_unreachable(error) {
        Some(why) => Unanswered::Unreachable(why),
        None => Unanswered::Failed(crate::redact::urls(&error.to_string())),
    }
}

/// Why no connection to the server could be made, when that is what `error` says:
/// the connector's words and their cause ("tcp connect error: Connection refused"),
/// without the layers of rmcp's and ours above them.
pub fn why_unreachable(error: &Failed) -> Option<String> {
    match error {
        StreamableHttpError::Client(HttpError::Connect(cause)) => {
            Some(crate::redact::urls(&with_causes(cause.as_ref())))
        }
        _ => None,
    }
}

/// Reads what is left of an answered call's stream, so that its connection goes back to
/// the pool: servers end the stream after the answer, most often in the same read.
fn finish(mut stream: Events) {
    if let Some(None) = stream.next().now_or_never() {
        return;
    }
    tokio::spawn(async move {
        let rest = async { while stream.next().await.is_some() {} };
        // A server that keeps the stream open loses the connection, not a task of ours.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), rest).await;
    });
}

/// The sending side of an [`Inbound`] decoration's extra messages, and the requests its
/// lane relays.
pub struct InboundSender {
    passed: mpsc::UnboundedSender<ServerJsonRpcMessage>,
    asked: Arc<Asked>,
}

/// Yields, besides what its transport reads, what an [`HttpLane`] passed on, as if the
/// transport had read it; but a cancellation of a request the lane relays, read on
/// rmcp's own streams, goes to that request's relaying instead.
pub struct Inbound {
    passed: mpsc::UnboundedReceiver<ServerJsonRpcMessage>,
    asked: Arc<Asked>,
}

impl Inbound {
    pub fn new() -> (Self, InboundSender) {
        let (sender, passed) = mpsc::unbounded_channel();
        let asked = Arc::<Asked>::default();
        let sender = InboundSender {
            passed: sender,
            asked: Arc::clone(&asked),
        };
        (Self { passed, asked }, sender)
    }
}

/// rmcp's service loop ended, and the connection with it: the requests still being
/// relayed are withdrawn.
impl Drop for Inbound {
    fn drop(&mut self) {
        self.asked.withdraw_all();
    }
}

impl Decoration for Inbound {
    async fn receive<T: Transport<RoleClient>>(
        &mut self,
        inner: &mut T,
    ) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            tokio::select! {
                Some(message) = self.passed.recv() => return Some(message),
                message = inner.receive() => {
                    let withdrawn = message.as_ref().and_then(asked::withdrawn);
                    if withdrawn.is_some_and(|id| self.asked.withdraw(None, id)) {
                        continue;
                    }
                    return message;
                }
            }
        }
    }
}
