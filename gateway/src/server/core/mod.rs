//! The one message path: every message a client sends, over stdio, legacy SSE or
//! streamable HTTP, at protocol 2025-11-25 (or earlier) or 2026-07-28, is served here.
//!
//! A transport reads a message, decodes it once ([`decode`]) and hands it to the
//! [`Session`] it belongs to, with a [`Scope`]: the request's own response stream
//! when the transport has one, its HTTP head when there was one, and its cancellation.
//! The session decodes the request's method ([`methods::Method`]), decides its protocol
//! revision ([`revision`]), serves it ([`methods`]: each method declared once with the
//! revisions that serve it, `tools/call` among them, whatever the transport), and hands
//! back the answer ([`Served`]) for the transport to deliver. The session
//! (`crate::session`) keeps what runs for it, and the core uses it the same way for every
//! transport:
//! - the calls in flight, each with its cancellation (`notifications/cancelled`, the
//!   client leaving, the session ending);
//! - the drain's count of answers not yet delivered: a [`Served`] counts until the
//!   transport drops it, after writing it;
//! - the requests sent to the client (`crate::relay::ClientRequests`), whose answers come
//!   back here;
//! - for a client on 2026-07-28, which takes no requests, the calls parked while it
//!   answers the input it was asked for (`crate::session::parked`; a retry reaching
//!   another replica is handed over to the one holding its call, [`handover`]), and the
//!   gateway's own tasks ([`own_tasks`]);
//! - the catalog watch that tells an initialized client what changed ([`watch`]).

pub mod decode;
pub mod handover;
mod methods;
mod own_tasks;
pub mod revision;
mod watch;

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::ErrorData;
use rmcp::model::{
    ClientConfig, ClientJsonRpcMessage, ClientNotification, ClientRequest, GetMeta,
    InputRequiredResult, JsonRpcMessage, JsonRpcRequest, RequestId, RequestMetaObject,
    ServerJsonRpcMessage, ServerResult,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use self::methods::Method;
use self::revision::Revision;
use crate::gateway::Gateway;
use crate::gateway::drain::Delivery;
use crate::relay::ClientLink;
use crate::relay::inputs::Inputs;
use crate::session::limits::Owner;
use crate::session::parked::{ParkedCall, Retry};
use crate::session::{Opening, Session, Transport};

/// How many messages to a client may wait on one of its streams.
pub const STREAM_CAPACITY: usize = 64;

/// What the transport knows of one request beyond the message.
#[derive(Default)]
pub struct Scope {
    /// The request's own response stream (streamable HTTP); without one, what the gateway
    /// sends the client during the request goes to the session's outbox.
    pub stream: Option<mpsc::Sender<ServerJsonRpcMessage>>,
    /// The HTTP request's head, when there was one: its credentials and trace headers.
    pub http: Option<Arc<http::request::Parts>>,
    /// Cancelled when the client stops waiting for the answer (its connection closed);
    /// without it, the client cancels by id with `notifications/cancelled`.
    pub cancel: Option<CancellationToken>,
}

/// A request's answer on its way to the client; the drain counts it as owed until the
/// transport drops it, having written it.
pub struct Served {
    pub message: ServerJsonRpcMessage,
    /// Whether the request spoke 2026-07-28 or later (its HTTP status follows its error).
    pub stateless: bool,
    _delivery: Delivery,
}

impl Served {
    /// The answer, and what counts it as undelivered until dropped.
    pub fn into_parts(self) -> (ServerJsonRpcMessage, Delivery) {
        (self.message, self._delivery)
    }
}

/// Opens a session and enters it in the gateway's registry, where it stays until it
/// ends. `None` when the profile does not exist.
pub fn open(gateway: &Arc<Gateway>, opening: Opening) -> Option<Arc<Session>> {
    let session = Arc::new(gateway.make_session(opening)?);
    gateway.sessions().enter(&session);
    Some(session)
}

/// The session serving the stateless requests (2026-07-28) of `owner` with `profile`,
/// opened when there is none yet; `None` when the profile does not exist.
pub fn serving_stateless(
    gateway: &Arc<Gateway>,
    profile: Option<&str>,
    owner: Owner,
) -> Option<Arc<Session>> {
    let id = stateless_id(owner.identity.as_deref(), profile);
    let key = (owner.identity.clone(), profile.map(str::to_owned));
    let bound = owner.quotas.limits().stateless_sessions.get();
    gateway.sessions().stateless(key, bound, || {
        // Nothing is sent outside a request's own stream: the outbox leads nowhere.
        let (outbox, _) = mpsc::channel(1);
        let opening = Opening {
            profile,
            transport: Transport::StreamableHttp,
            id: Some(&id),
            outbox,
            owner,
            attachment: Box::new(()),
        };
        open(gateway, opening)
    })
}

/// The session core's serving of a session: each takes the gateway that serves it.
impl Session {
    /// Takes the next message of a connection whose answers the transport delivers itself
    /// (stdio, legacy SSE), in the order the client sent it: a notification or an answer is
    /// handled before this returns, and so is `initialize`, so that what the client sends
    /// after it finds the session open; any other request is entered at once (it can be
    /// cancelled by id) and served in `requests`, beside the ones that follow. `deliver`
    /// gets each answer.
    pub async fn take<D, F>(
        self: &Arc<Self>,
        gateway: &Arc<Gateway>,
        message: ClientJsonRpcMessage,
        requests: &TaskTracker,
        deliver: D,
    ) where
        D: FnOnce(Served) -> F + Send + 'static,
        F: Future<Output = ()> + Send + 'static,
    {
        let request = match Unasked::of(message) {
            Ok(unasked) => return self.receive(gateway, unasked).await,
            Err(request) => request,
        };
        let in_order = matches!(request.request, ClientRequest::InitializeRequest(_));
        let served = self.serve(gateway, request.id, request.request, Scope::default());
        let answered = async move {
            if let Some(served) = served.await {
                deliver(served).await;
            }
        };
        if in_order {
            answered.await;
        } else {
            requests.spawn(answered);
        }
    }

    /// Handles a message that asks nothing of the gateway.
    pub async fn receive(self: &Arc<Self>, gateway: &Arc<Gateway>, message: Unasked) {
        match message {
            Unasked::Notification(notification) => self.notified(gateway, notification).await,
            Unasked::Answer(answer) => {
                if !self.running.requests.answer(*answer) {
                    tracing::debug!(session = %self.id, "an answer to no request of ours");
                }
            }
        }
    }

    /// Takes one request: the returned future serves it, to its answer, or `None` when
    /// the client cancelled it. The request is entered (and can be cancelled) as soon as
    /// it is taken, so a transport can take requests in order and serve them side by side.
    /// The future is boxed: transports move it (into a task, into the future of their
    /// connection), and each move of a future this large would copy all of it.
    pub fn serve(
        self: &Arc<Self>,
        gateway: &Arc<Gateway>,
        id: RequestId,
        mut request: ClientRequest,
        scope: Scope,
    ) -> Pin<Box<impl Future<Output = Option<Served>> + Send + 'static>> {
        let delivery = gateway.drain().delivery();
        let serving = Serving::enter(&self.running.serving);
        let meta = std::mem::take(request.get_meta_mut());
        let method = Method::decode(request);
        let revision = Revision::of(method.asked(), &meta, self.client());
        let cancel = self.running.closed.child_token();
        // A client that can cancel by id has its call entered under it.
        let by_id = scope.cancel.is_none() && revision.is_ok();
        if by_id {
            self.running.calls().insert(id.clone(), cancel.clone());
        }
        let this = self.clone();
        let gateway = gateway.clone();
        Box::pin(async move {
            let _serving = serving;
            let revision = match revision {
                Ok(revision) => revision,
                Err(error) => {
                    return Some(Served {
                        message: JsonRpcMessage::error(error, Some(id)),
                        stateless: true,
                        _delivery: delivery,
                    });
                }
            };
            if let Some(client) = &scope.cancel {
                let (call, client) = (cancel.clone(), client.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        () = client.cancelled() => call.cancel(),
                        () = call.cancelled() => {}
                    }
                });
            }
            let stateless = revision.is_stateless();
            let answer = this
                .answer(
                    &gateway,
                    id.clone(),
                    method,
                    meta,
                    &revision,
                    scope,
                    cancel.clone(),
                )
                .await;
            if by_id && this.running.calls().remove(&id).is_none() {
                tracing::debug!(%id, "dropping the answer to a request the client cancelled");
                return None;
            }
            // The request is over: anything still running for it stops.
            cancel.cancel();
            let message = match answer {
                Ok(result) => JsonRpcMessage::response(revision.shape(result), id),
                Err(error) => JsonRpcMessage::error(revision.shape_error(error), Some(id)),
            };
            Some(Served {
                message,
                stateless,
                _delivery: delivery,
            })
        })
    }

    /// The result of a request of `method`. A stateless request runs in a task of its own,
    /// so that it can wait, parked, while its client answers what it was asked.
    #[allow(
        clippy::too_many_arguments,
        reason = "one request with all it came with"
    )]
    async fn answer(
        self: &Arc<Self>,
        gateway: &Arc<Gateway>,
        id: RequestId,
        method: Method,
        meta: RequestMetaObject,
        revision: &Revision,
        scope: Scope,
        cancel: CancellationToken,
    ) -> Result<ServerResult, ErrorData> {
        let stream = scope
            .stream
            .clone()
            .unwrap_or_else(|| self.running.outbox.clone());
        let progress_token = meta.get_progress_token();
        let client = revision.client().cloned().unwrap_or_default();
        let link = ClientLink::new(
            stream.clone(),
            self.running.requests.clone(),
            client,
            self.running.closed.clone(),
        );
        let call = methods::Call {
            gateway: gateway.clone(),
            session: self.clone(),
            id,
            meta,
            revision: revision.clone(),
            link,
            cancel: cancel.clone(),
            http: scope.http,
        };
        if !revision.is_stateless() {
            return method.serve(call).await;
        }
        let key = method.request_key(self.owner());
        if let Some((state, responses)) = method.retrying() {
            let retry = Retry {
                state: state.to_owned(),
                request: key,
                responses: responses.cloned(),
                progress_token,
            };
            // Boxed, as the rarer ways below are: held inline, they would make every
            // request's future (copied as it moves into its task) as large as theirs.
            return match handover::holder_elsewhere(gateway, &retry.state) {
                Some(replica) => {
                    let replica = replica.to_owned();
                    Box::pin(handover::forward(
                        gateway, self, &replica, retry, stream, &cancel,
                    ))
                    .await
                }
                None => Box::pin(self.resume(gateway, retry, stream, &cancel)).await,
            };
        }
        let may_become_task = match method.tool_call() {
            Some(call) => self.may_become_task(gateway, call, revision)?,
            None => None,
        };
        let inputs = Arc::new(Inputs::default());
        let mut call = call;
        call.link = call.link.with_inputs(inputs.clone(), progress_token);
        // The call outlives this request when it waits for input: it is cancelled by the
        // request only while the request waits for it. One that may become a task
        // outlives the session too (its client may come back any time).
        call.cancel = match may_become_task {
            Some(_) => gateway.shutdown_token().child_token(),
            None => self.running.closed.child_token(),
        };
        let call_cancel = call.cancel.clone();
        let parked = ParkedCall {
            inputs,
            link: call.link.clone(),
            task: tokio::spawn(method.serve(call)),
            cancel: call_cancel,
            request: key,
            becomes_task: None,
        };
        if let Some(becomes) = may_become_task {
            return Box::pin(self.await_or_promote(gateway, parked, &cancel, becomes)).await;
        }
        self.await_or_park(gateway, parked, &cancel).await
    }

    /// Takes up the call parked here that `retry` continues, with the client's answers:
    /// its messages go to `stream` from now on, and its answer is this round's (the next
    /// round's questions, when it asks again, or the handle of the task it becomes).
    /// `request` is cancelled when the client stops waiting for this round.
    async fn resume(
        self: &Arc<Self>,
        gateway: &Arc<Gateway>,
        retry: Retry,
        stream: mpsc::Sender<ServerJsonRpcMessage>,
        request: &CancellationToken,
    ) -> Result<ServerResult, ErrorData> {
        let mut parked = self
            .running
            .parked
            .take(&retry.state, &retry.request)
            .map_err(|untaken| untaken.to_error())?;
        parked.link.next_round(stream, retry.progress_token);
        if let Some(responses) = retry.responses {
            parked.inputs.answer(responses);
        }
        if let Some(becomes) = parked.becomes_task.take() {
            return self
                .await_or_promote(gateway, parked, request, becomes)
                .await;
        }
        self.await_or_park(gateway, parked, request).await
    }

    /// Waits for a stateless call's answer; when it asks its client for input first,
    /// parks it and answers with the questions.
    async fn await_or_park(
        &self,
        gateway: &Gateway,
        mut call: ParkedCall,
        request: &CancellationToken,
    ) -> Result<ServerResult, ErrorData> {
        tokio::select! {
            biased;
            answer = &mut call.task => return joined(answer),
            () = call.inputs.asked() => {}
            () = request.cancelled() => {
                call.abandon();
                return joined(call.task.await);
            }
        }
        call.inputs.settled().await;
        let questions = call.inputs.questions();
        let replica = gateway.shared_state().replica();
        let state = match self
            .running
            .parked
            .park(call, self.owner_and_quotas(), replica)
        {
            Ok(state) => state,
            Err((refused, call)) => {
                tracing::warn!(session = %self.id, code = refused.code(), "{refused}");
                // The refusal waits for the call to end, so that a client sending call
                // after call cannot leave their ends piling up behind it.
                let _ = call.task.await;
                return Err(refused.to_error());
            }
        };
        Ok(ServerResult::InputRequiredResult(InputRequiredResult::new(
            Some(questions),
            Some(state),
        )))
    }

    /// A notification from the client.
    async fn notified(self: &Arc<Self>, gateway: &Arc<Gateway>, notification: ClientNotification) {
        match notification {
            ClientNotification::CancelledNotification(cancelled) => {
                if let Some(id) = cancelled.params.request_id
                    && let Some(call) = self.running.calls().remove(&id)
                {
                    call.cancel();
                }
            }
            ClientNotification::InitializedNotification(_) => {
                if let Some(client) = self.client() {
                    self.start(gateway, client.clone()).await;
                }
            }
            ClientNotification::ProgressNotification(progress) => {
                let relayed = &gateway.downstream().relayed_progress;
                relayed.report(&self.id, progress.params).await;
            }
            ClientNotification::RootsListChangedNotification(_) => {
                methods::roots_changed(gateway, &self.id).await;
            }
            _ => {}
        }
    }

    /// Takes over a session that another replica opened, whose client initialized as
    /// `client` there.
    pub async fn restore(self: &Arc<Self>, gateway: &Arc<Gateway>, client: ClientConfig) {
        let client = Arc::new(client);
        if self.set_client(client.clone()) {
            self.start(gateway, client).await;
        }
    }

    /// The client's session has begun: the relay reaches it, and it is told of catalog
    /// changes from now on, at the log level it set (on any replica).
    async fn start(self: &Arc<Self>, gateway: &Arc<Gateway>, client: Arc<ClientConfig>) {
        let link = self.link(client);
        let listeners = &gateway.downstream().listeners;
        listeners.join(self.id.as_str().into(), self.reach(), link.clone());
        watch::catalog(gateway, self, link);
        methods::resume_log_level(gateway, self).await;
        // A server asks for the roots when it starts, when no client may be there to
        // answer (server-filesystem, say, then allows no directory at all). Once this
        // client is the one that can answer, the servers are told the roots changed, so
        // they ask again and learn this client's, as they would without the gateway.
        let answers_roots = |link: &ClientLink| link.capabilities().roots.is_some();
        if listeners
            .sole(answers_roots)
            .is_some_and(|(sole, _)| *sole == *self.id)
        {
            let (gateway, session) = (gateway.clone(), self.id.clone());
            tokio::spawn(async move { methods::roots_changed(&gateway, &session).await });
        }
    }

    /// The way to the client outside any request.
    fn link(&self, client: Arc<ClientConfig>) -> ClientLink {
        ClientLink::new(
            self.running.outbox.clone(),
            self.running.requests.clone(),
            client,
            self.running.closed.clone(),
        )
    }
}

/// A message of the client's that asks nothing of the gateway: a notification, or the
/// answer (or error) to one of the gateway's requests to the client.
pub enum Unasked {
    Notification(ClientNotification),
    Answer(Box<ClientJsonRpcMessage>),
}

impl Unasked {
    /// `message` as one that asks nothing, or the request it is.
    #[allow(
        clippy::result_large_err,
        reason = "the request is served at once; boxing it would cost an allocation a request"
    )]
    pub fn of(message: ClientJsonRpcMessage) -> Result<Unasked, JsonRpcRequest<ClientRequest>> {
        match message {
            JsonRpcMessage::Request(request) => Err(request),
            JsonRpcMessage::Notification(notification) => {
                Ok(Unasked::Notification(notification.notification))
            }
            answer => Ok(Unasked::Answer(Box::new(answer))),
        }
    }
}

/// Counts one request as being served until dropped.
struct Serving(Arc<AtomicUsize>);

impl Serving {
    fn enter(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Self(count.clone())
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The id of the session serving the stateless requests of `identity` with `profile`: the same on every replica,
/// so that what is shared per session (the rate limiter's window, the reminder's chain)
/// is shared by them, and telling nothing of the credentials.
fn stateless_id(identity: Option<&str>, profile: Option<&str>) -> String {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    for part in [identity, profile] {
        hash.update(part.unwrap_or("").as_bytes());
        hash.update([0]);
    }
    let digest = hash.finalize();
    let hex: String = digest
        .iter()
        .take(12)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("stateless-{hex}")
}

/// The error for an upstream's answer of a kind the request does not have.
fn unexpected(got: &ServerResult) -> ErrorData {
    ErrorData::internal_error(
        format!("unexpected upstream response: {got:?}")
            .chars()
            .take(200)
            .collect::<String>(),
        None,
    )
}

fn joined(
    answer: Result<Result<ServerResult, ErrorData>, tokio::task::JoinError>,
) -> Result<ServerResult, ErrorData> {
    answer.unwrap_or_else(|e| Err(ErrorData::internal_error(e.to_string(), None)))
}

#[cfg(test)]
mod tests;
