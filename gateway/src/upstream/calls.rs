//! Calling an upstream: tool calls and the other requests of clients (`prompts/get`,
//! `resources/read`, ...) on the connection's [`CallLane`] (in a renewed session when an
//! HTTP upstream forgot its own), their results kept as the upstream wrote them (through
//! rmcp's client only when even then an HTTP lane has no session); the rounds of input a
//! server of 2026-07-28 asks for; and what a failed call means for the caller
//! ([`UpstreamError`]).

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, GetMeta, InputRequiredResult,
    InputResponses, JsonObject, ProgressToken, RequestMetaObject, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpError;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use super::call_lane::{CallLane, Unanswered};
use super::lane::{CallAnswer, RawAnswer};
use super::rmcp_errors::worded;
use super::streamable_http::lane::{renew_session, why_unreachable};
use super::{Live, Upstream};
use crate::http_client::HttpError;
use crate::observe::telemetry;
use crate::relay::calls::answer_after_progress;
use crate::relay::{self, Caller, Listeners};
use crate::tasks;
use crate::tool_result::ToolResult;

/// The `_meta` key under which a server of protocol 2026-07-28 names itself on results.
const SERVER_INFO_META_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// How many times one call may ask its client for input before the gateway gives up on it.
pub const MAX_INPUT_ROUNDS: usize = rmcp::model::DEFAULT_MRTR_MAX_ROUNDS;

/// Why a call to an upstream did not produce a result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    /// Not connected, or the connection dropped before the answer.
    #[error("upstream `{server}` is unavailable: {reason}")]
    Unavailable { server: String, reason: String },
    /// The upstream answered with a JSON-RPC error.
    #[error("upstream `{server}` answered with an error: {error}")]
    Rejected {
        server: String,
        error: Box<ErrorData>,
    },
    /// The upstream answered something that is not a valid response.
    #[error("upstream `{server}` broke the protocol: {reason}")]
    Protocol { server: String, reason: String },
    /// The call was cancelled here; the upstream was sent `notifications/cancelled`.
    #[error("the call to `{server}` was cancelled")]
    Cancelled { server: String },
    /// A per-user server, and the caller has not signed in to it; its client cannot be
    /// asked to open the URL (no URL elicitation), so the person must open it.
    #[error("sign in to `{server}` first: open {url} in a browser, then call again")]
    SignInRequired { server: String, url: String },
    /// A per-user server's sign-in did not come about; `reason` is a stable code.
    #[error("signing in to `{server}` did not work: {message}")]
    SignInFailed {
        server: String,
        reason: &'static str,
        message: String,
    },
}

/// What an upstream answered a request other than a tool call.
enum Reply {
    /// The result, as the upstream wrote it.
    Result(JsonObject),
    /// The server needs input from the client first (protocol 2026-07-28).
    InputRequired(InputRequiredResult),
}

impl Reply {
    /// The answer `raw` holds: a question for the client when its `resultType` says so,
    /// else the result itself, which must be an object.
    fn read(raw: &RawValue) -> Result<Reply, String> {
        let result: JsonObject = serde_json::from_str(raw.get())
            .map_err(|error| format!("a result that is not an object: {error}"))?;
        if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
            return Ok(Reply::Result(result));
        }
        serde_json::from_value(Value::Object(result))
            .map(Reply::InputRequired)
            .map_err(|error| format!("an unreadable request for input: {error}"))
    }
}

impl Upstream {
    /// Calls `tool` (the upstream's own name). Cancelling `cancel` sends
    /// `notifications/cancelled` for this request to this upstream only. An upstream on
    /// protocol 2026-07-28 may answer that it needs input first (`InputRequiredResult`):
    /// the caller's client is asked ([`relay::requests::fulfil`]) and the call retried
    /// with the answers, up to [`MAX_INPUT_ROUNDS`] times.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        cancel: &CancellationToken,
        caller: Option<Caller>,
        trace: &opentelemetry::Context,
    ) -> Result<ToolResult, UpstreamError> {
        if self.per_user.is_some() {
            return Box::pin(self.call_as_caller(tool, arguments, cancel, caller, trace)).await;
        }
        // A tool known to ask its client waits for its turn (see `relay::turns`).
        let _turn = match &caller {
            Some(caller) => tokio::select! {
                turn = self.calls.turns().start(tool, &caller.session) => Some(turn),
                () = cancel.cancelled() => return Err(UpstreamError::Cancelled {
                    server: self.name.to_string(),
                }),
            },
            None => None,
        };
        let live = self
            .live()
            .ok_or_else(|| self.unavailable(self.down_reason()))?;
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        params.input_responses = caller.as_ref().and_then(|c| c.given_input.clone());
        for _round in 0..=MAX_INPUT_ROUNDS {
            let mut request = CallToolRequest::new(params.clone());
            // This call's span as the trace context (`TracedHttp` also puts it in the
            // header), in place of the client's, so the upstream's spans are children of
            // ours.
            let meta = request
                .extensions
                .get_or_insert_default::<RequestMetaObject>();
            for (key, value) in telemetry::inject(trace) {
                meta.insert(key.into(), value.into());
            }
            let lane = &live.lane;
            let on_lane =
                |request| self.call_on_lane(lane, &live, request, cancel, caller.clone(), tool);
            let renew = self.renew_session_of(&live, cancel);
            let answer = match lane.in_session(request, on_lane, renew).await? {
                Ok(answer) => answer,
                // Boxed: rmcp's request future is large, and every call on a lane would
                // carry its size too.
                Err(Some(request)) => {
                    Box::pin(self.call_on_rmcp(&live, request, cancel, caller.clone(), tool))
                        .await?
                }
                Err(None) => return Err(self.closed_before_answering(&live)),
            };
            match answer {
                CallAnswer::Result(mut result) => {
                    // An older upstream leaves `resultType` out, which means "complete";
                    // say so, as the gateway's own results do.
                    result.mark_complete();
                    forwarded(&mut result);
                    return Ok(result);
                }
                // The call became the upstream's task: its handle goes to the client (see
                // `tasks::handle`), which polls the task for the result.
                CallAnswer::Task(task) => return Ok(tasks::handle::carry(&self.name, &task)),
                CallAnswer::InputRequired(asked) => {
                    let answers = self.input_for(caller.as_ref(), &asked, cancel).await?;
                    params.input_responses = Some(answers);
                    params.request_state = asked.request_state;
                }
                CallAnswer::Error(error) => {
                    return Err(UpstreamError::Rejected {
                        server: self.name.to_string(),
                        error: Box::new(error),
                    });
                }
                CallAnswer::Malformed(reason) => {
                    return Err(UpstreamError::Protocol {
                        server: self.name.to_string(),
                        reason,
                    });
                }
            }
        }
        Err(self.too_many_rounds())
    }

    /// The answers of the caller's client to the questions of `asked`.
    async fn input_for(
        &self,
        caller: Option<&Caller>,
        asked: &InputRequiredResult,
        cancel: &CancellationToken,
    ) -> Result<InputResponses, UpstreamError> {
        let Some(caller) = caller else {
            return Err(UpstreamError::Protocol {
                server: self.name.to_string(),
                reason: "it asked for input, and this call has no client to ask".into(),
            });
        };
        let questions = asked.input_requests.clone().unwrap_or_default();
        relay::requests::fulfil(&self.name, &self.downstream, caller, questions, cancel)
            .await
            .map_err(|error| UpstreamError::Rejected {
                server: self.name.to_string(),
                error: Box::new(error),
            })
    }

    fn too_many_rounds(&self) -> UpstreamError {
        UpstreamError::Protocol {
            server: self.name.to_string(),
            reason: format!("it asked for input more than {MAX_INPUT_ROUNDS} times in one call"),
        }
    }

    /// [`Self::send`] for a tool call, on the connection's lane; `None` when the lane has
    /// no session for it (a streamable HTTP upstream forgot it: see
    /// [`CallLane::in_session`]).
    async fn call_on_lane(
        &self,
        lane: &CallLane,
        live: &Live,
        mut request: CallToolRequest,
        cancel: &CancellationToken,
        caller: Option<Caller>,
        tool: &str,
    ) -> Result<Option<CallAnswer>, UpstreamError> {
        let _in_flight = self.requests.token();
        let mut call = lane
            .start()
            .map_err(|_| self.closed_before_answering(live))?;
        let token = ProgressToken(call.id().clone());
        let meta = request
            .extensions
            .get_or_insert_default::<RequestMetaObject>();
        self.add_lane_meta(live, caller.as_ref(), meta);
        meta.set_progress_token(token.clone());
        // A call to a server of 2026-07-28 repeats the arguments its tool's schema
        // designates in headers.
        let schema = live
            .offer
            .tools
            .iter()
            .filter(|_| live.is_stateless())
            .find(|listed| listed.name == tool)
            .map(|listed| listed.input_schema.clone());
        let _route = caller.clone().map(|caller| {
            self.calls
                .enter(call.id().clone(), token, caller, Some(tool))
        });
        // The call's progress goes to the client, when it asked for progress.
        let forward = async |progress| {
            if let Some(caller) = &caller {
                caller.notify_progress(progress).await;
            }
        };
        let answer = tokio::select! {
            answer = call.exchange(request, schema.as_deref(), forward) => Some(answer),
            () = cancel.cancelled() => None,
        };
        let Some(answer) = answer else {
            call.cancel("cancelled by the gateway");
            return Err(UpstreamError::Cancelled {
                server: self.name.to_string(),
            });
        };
        match answer {
            Ok(answer) => Ok(Some(answer)),
            Err(unanswered) => self.unanswered(live, unanswered),
        }
    }

    /// What a lane's failing to answer means for the caller: `None` when the lane has no
    /// session (rmcp can open one, see [`CallLane::in_session`]); one that says the server
    /// cannot be reached is also raised on `live`.
    fn unanswered<T>(
        &self,
        live: &Live,
        unanswered: Unanswered,
    ) -> Result<Option<T>, UpstreamError> {
        match unanswered {
            Unanswered::NoSession => Ok(None),
            Unanswered::Closed => Err(self.closed_before_answering(live)),
            Unanswered::Failed(reason) => Err(self.unavailable(reason)),
            Unanswered::Unreachable(reason) => {
                live.unreachable.raise(&reason);
                Err(self.unavailable(reason))
            }
        }
    }

    /// What a request the gateway writes itself on a lane carries in its `_meta`, besides
    /// its progress token: the client's own `_meta` and, to a server of 2026-07-28, the
    /// request's context (what rmcp adds to its own requests, and the client's side).
    fn add_lane_meta(&self, live: &Live, caller: Option<&Caller>, meta: &mut RequestMetaObject) {
        add_client_meta(caller, meta);
        if let Some(context) = &live.stateless {
            meta.extend(context.clone());
            if let Some(caller) = caller {
                meta.extend(client_context(caller, &self.downstream.listeners));
            }
        }
    }

    /// [`Self::send`] for a tool call an HTTP lane gave back, as a lane's answer.
    async fn call_on_rmcp(
        &self,
        live: &Live,
        request: CallToolRequest,
        cancel: &CancellationToken,
        caller: Option<Caller>,
        tool: &str,
    ) -> Result<CallAnswer, UpstreamError> {
        let request = ClientRequest::CallToolRequest(request);
        match self.send(live, request, cancel, caller, Some(tool)).await? {
            ServerResult::InputRequiredResult(asked) => Ok(CallAnswer::InputRequired(asked)),
            ServerResult::CreateTaskResult(task) => Ok(CallAnswer::Task(task)),
            // As rmcp read it: lossy (see `ToolResult::from_rmcp`).
            result => ToolResult::from_server_result(result)
                .map(CallAnswer::Result)
                .map_err(|other| self.protocol_error(&other)),
        }
    }

    /// Sends a request other than a tool call to this upstream, cancellable, and gives
    /// its result as the upstream wrote it; while it is in flight, what the upstream sends
    /// back (progress, requests, log messages) goes to `caller`. Input the upstream asks
    /// for (`InputRequiredResult`, on `prompts/get` and `resources/read`) is asked of the
    /// caller's client and the request retried, as for tool calls.
    pub async fn request(
        &self,
        live: &Live,
        mut request: ClientRequest,
        cancel: &CancellationToken,
        caller: Option<Caller>,
    ) -> Result<JsonObject, UpstreamError> {
        for _round in 0..=MAX_INPUT_ROUNDS {
            let asked = match self
                .ask(live, request.clone(), cancel, caller.clone())
                .await?
            {
                Reply::Result(mut result) => {
                    if let Some(Value::Object(meta)) = result.get_mut("_meta") {
                        meta.retain(|key, _| passed_on_meta(key));
                        if meta.is_empty() {
                            result.remove("_meta");
                        }
                    }
                    return Ok(result);
                }
                Reply::InputRequired(asked) => asked,
            };
            let answers = self.input_for(caller.as_ref(), &asked, cancel).await?;
            match &mut request {
                ClientRequest::GetPromptRequest(get) => {
                    get.params.input_responses = Some(answers);
                    get.params.request_state = asked.request_state;
                }
                ClientRequest::ReadResourceRequest(read) => {
                    read.params.input_responses = Some(answers);
                    read.params.request_state = asked.request_state;
                }
                _ => return Err(self.protocol_error(&ServerResult::InputRequiredResult(asked))),
            }
        }
        Err(self.too_many_rounds())
    }

    /// One round of [`Self::request`]: on the connection's lane (in a renewed session when
    /// an HTTP upstream forgot its own: see [`CallLane::in_session`]), else (when even then
    /// the lane has no session) through rmcp's client, whose typed reading of the result
    /// is all that is left of it then.
    async fn ask(
        &self,
        live: &Live,
        request: ClientRequest,
        cancel: &CancellationToken,
        caller: Option<Caller>,
    ) -> Result<Reply, UpstreamError> {
        let lane = &live.lane;
        let on_lane = |request| self.ask_on_lane(lane, live, request, cancel, caller.clone());
        let renew = self.renew_session_of(live, cancel);
        let request = match lane.in_session(request, on_lane, renew).await? {
            Ok(reply) => return Ok(reply),
            Err(Some(request)) => request,
            Err(None) => return Err(self.closed_before_answering(live)),
        };
        match self.send(live, request, cancel, caller, None).await? {
            ServerResult::InputRequiredResult(asked) => Ok(Reply::InputRequired(asked)),
            result => match serde_json::to_value(&result) {
                Ok(Value::Object(result)) => Ok(Reply::Result(result)),
                _ => Err(self.protocol_error(&result)),
            },
        }
    }

    /// [`Self::ask`] on the connection's lane; `None` when the lane has no session for it
    /// (a streamable HTTP upstream forgot it: see [`CallLane::in_session`]).
    async fn ask_on_lane(
        &self,
        lane: &CallLane,
        live: &Live,
        mut request: ClientRequest,
        cancel: &CancellationToken,
        caller: Option<Caller>,
    ) -> Result<Option<Reply>, UpstreamError> {
        let _in_flight = self.requests.token();
        let id = lane.next_id();
        let token = ProgressToken(id.clone());
        let meta = request.get_meta_mut();
        self.add_lane_meta(live, caller.as_ref(), meta);
        meta.set_progress_token(token.clone());
        let _route = caller.map(|caller| self.calls.enter(id.clone(), token, caller, None));
        let answer = tokio::select! {
            answer = lane.request(&id, request) => answer,
            () = cancel.cancelled() => {
                lane.cancel(id, "cancelled by the gateway");
                return Err(UpstreamError::Cancelled {
                    server: self.name.to_string(),
                });
            }
        };
        match answer {
            Ok(RawAnswer::Result(raw)) => {
                Reply::read(&raw)
                    .map(Some)
                    .map_err(|reason| UpstreamError::Protocol {
                        server: self.name.to_string(),
                        reason,
                    })
            }
            Ok(RawAnswer::Error(error)) => Err(UpstreamError::Rejected {
                server: self.name.to_string(),
                error: Box::new(error),
            }),
            Err(unanswered) => self.unanswered(live, unanswered),
        }
    }

    /// [`Self::request`] on the current connection, or for a per-user server, on the
    /// caller's own (signing it in first when it has none).
    pub async fn request_for(
        &self,
        request: ClientRequest,
        cancel: &CancellationToken,
        caller: Option<Caller>,
    ) -> Result<JsonObject, UpstreamError> {
        if self.per_user.is_some() {
            let user = self.connection_of(caller.as_ref(), cancel).await?;
            return Box::pin(user.request_for(request, cancel, caller)).await;
        }
        let live = self.require_live()?;
        Box::pin(self.request(&live, request, cancel, caller)).await
    }

    /// [`Self::request`], for a call of `tool` when it is a tool call.
    async fn send(
        &self,
        live: &Live,
        request: ClientRequest,
        cancel: &CancellationToken,
        caller: Option<Caller>,
        tool: Option<&str>,
    ) -> Result<ServerResult, UpstreamError> {
        let _in_flight = self.requests.token();
        // rmcp adds the gateway's progress token.
        let mut request = request;
        add_client_meta(caller.as_ref(), request.get_meta_mut());
        let mut options = PeerRequestOptions::no_options();
        if live.is_stateless()
            && let Some(caller) = &caller
        {
            // rmcp adds the gateway's side of the context itself.
            options.meta = Some(client_context(caller, &self.downstream.listeners));
        }
        // rmcp's writer may be stuck on a server that stopped reading: the cancellation
        // is heard while the request waits for its turn too.
        let sent = tokio::select! {
            sent = live.peer.send_cancellable_request(request, options) => sent,
            () = cancel.cancelled() => return Err(UpstreamError::Cancelled {
                server: self.name.to_string(),
            }),
        };
        let mut handle = sent.map_err(|e| self.service_error(live, e))?;
        let answer = match caller {
            Some(caller) => {
                let (_route, mut progress) = self.calls.enter_in_order(
                    handle.id.clone(),
                    handle.progress_token.clone(),
                    caller.clone(),
                    tool,
                );
                let forward = |progress| caller.notify_progress(progress);
                let answer = answer_after_progress(&mut handle.rx, &mut progress, forward);
                tokio::select! {
                    answer = answer => Some(answer),
                    () = cancel.cancelled() => None,
                }
            }
            None => tokio::select! {
                answer = &mut handle.rx => Some(answer),
                () = cancel.cancelled() => None,
            },
        };
        match answer {
            Some(Ok(Ok(result))) => Ok(result),
            Some(Ok(Err(e))) => Err(self.service_error(live, e)),
            Some(Err(_closed)) => Err(self.closed_before_answering(live)),
            None => {
                // Told in the background: the notice waits behind whatever rmcp's writer
                // is stuck on, and the caller's answer must not.
                tokio::spawn(handle.cancel(Some("cancelled by the gateway".into())));
                Err(UpstreamError::Cancelled {
                    server: self.name.to_string(),
                })
            }
        }
    }

    /// Has rmcp's client open a new session with the upstream of `live`, which forgot the
    /// one its lane had (see [`renew_session`]); unless `cancel` is cancelled first.
    async fn renew_session_of(
        &self,
        live: &Live,
        cancel: &CancellationToken,
    ) -> Result<(), UpstreamError> {
        tokio::select! {
            () = renew_session(&live.peer) => Ok(()),
            () = cancel.cancelled() => Err(UpstreamError::Cancelled {
                server: self.name.to_string(),
            }),
        }
    }

    /// Why a request in flight on `live` got no answer: the protocol violation that made
    /// the gateway close it, the retirement of the server, or the connection's end.
    fn closed_before_answering(&self, live: &Live) -> UpstreamError {
        match live.violation.get() {
            Some(violation) => UpstreamError::Protocol {
                server: self.name.to_string(),
                reason: violation.to_owned(),
            },
            None => match self.retired.get() {
                Some(why) => {
                    self.unavailable(format!("{why}; the grace period ended before it answered"))
                }
                None => self.unavailable("the connection closed before it answered"),
            },
        }
    }

    /// The current connection, or UPSTREAM_UNAVAILABLE.
    pub fn require_live(&self) -> Result<Arc<Live>, UpstreamError> {
        self.live()
            .ok_or_else(|| self.unavailable(self.down_reason()))
    }

    pub fn protocol_error(&self, got: &ServerResult) -> UpstreamError {
        UpstreamError::Protocol {
            server: self.name.to_string(),
            reason: format!("unexpected response: {got:?}")
                .chars()
                .take(200)
                .collect(),
        }
    }

    /// Why this upstream is not connected, for error messages: its state (`starting`,
    /// `failed`, `restarting`, `stopped`) and the last error, if any.
    pub fn down_reason(&self) -> String {
        let health = self.health();
        let state = health.state.as_str();
        match health.last_error {
            Some(error) => format!("{state}: {error}"),
            None => state.to_string(),
        }
    }

    /// What `error` from rmcp's client means for the caller; one that says the server
    /// cannot be reached is also raised on `live`.
    fn service_error(&self, live: &Live, error: ServiceError) -> UpstreamError {
        if let ServiceError::TransportSend(sent) = &error
            && let Some(http) = sent.error.downcast_ref::<StreamableHttpError<HttpError>>()
            && let Some(reason) = why_unreachable(http)
        {
            live.unreachable.raise(&reason);
            return self.unavailable(reason);
        }
        match error {
            ServiceError::McpError(error) => UpstreamError::Rejected {
                server: self.name.to_string(),
                error: Box::new(error),
            },
            ServiceError::UnexpectedResponse => UpstreamError::Protocol {
                server: self.name.to_string(),
                reason: "unexpected response type".into(),
            },
            other => self.unavailable(crate::redact::urls(&worded(&other))),
        }
    }
}

/// An upstream's tool result as the gateway passes it on: its name for itself
/// (2026-07-28) does not name what the gateway's clients talk to, and no key of the
/// gateway's own may come from it (see [`tasks::handle`]).
pub fn forwarded(result: &mut ToolResult) {
    result.retain_meta(passed_on_meta);
}

/// Whether an upstream's result may carry `_meta` member `key` to the client (see
/// [`forwarded`]); the same holds for every result, a tool's or not.
fn passed_on_meta(key: &str) -> bool {
    key != SERVER_INFO_META_KEY && key != tasks::handle::HANDLE_META_KEY
}

/// What a server of 2026-07-28 is told of the client behind a request: the client's own
/// capabilities (so that it asks only for what the client can give) and the log level
/// the client wants, if any, in place of the gateway's: the one its request named, or the
/// one its session set with `logging/setLevel`, a method such a server does not have.
fn client_context(caller: &Caller, listeners: &Listeners) -> RequestMetaObject {
    let mut meta = RequestMetaObject::new();
    meta.set_client_capabilities(caller.link.capabilities().clone());
    if let Some(level) = caller
        .log_level
        .or_else(|| listeners.level(&caller.session))
    {
        meta.set_log_level(level);
    }
    meta
}

/// Puts the client's `_meta` in a request going upstream on its behalf, as the client sent
/// it, under what the request carries itself (a call's trace context).
fn add_client_meta(caller: Option<&Caller>, meta: &mut RequestMetaObject) {
    if let Some(client) = caller.and_then(|caller| caller.meta.as_ref()) {
        let own = std::mem::replace(meta, client.clone());
        meta.extend(own);
    }
}
