//! How the gateway reaches the client behind one request: the stream its messages to that
//! client ride, the requests it sent the client and awaits answers to, and what the
//! client said it can do.
//!
//! Every transport hands each request it reads a [`ClientLink`]: stdio and legacy SSE the
//! session's one stream, streamable HTTP the request's own response stream. What the link
//! does with a request to the client (an upstream's sampling, elicitation or roots, or the
//! gate's `ask`) depends on the protocol revision the request speaks:
//! - before 2026-07-28 the request is sent on the stream, and the client's answer comes
//!   back in a message of its own, which the transport hands to [`ClientRequests::answer`];
//! - from 2026-07-28 on a server sends no requests: the request goes to the request's
//!   [`Inputs`], which answers the client with an `InputRequiredResult` and brings the
//!   client's answer back when it retries (see [`super::inputs`]). Such a call outlives
//!   the request that started it, so its link follows the client's rounds: what the call
//!   sends (progress, log messages) rides the stream of the latest round, progress under
//!   that round's token ([`ClientLink::next_round`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::ErrorData;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientCapabilities, ClientConfig,
    ClientJsonRpcMessage, ClientResult, GetMeta, JsonRpcError, JsonRpcMessage, NumberOrString,
    ProgressToken, RequestId, RequestMetaObject, ServerJsonRpcMessage, ServerNotification,
    ServerRequest,
};
use rmcp::service::ServiceError;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::inputs::{ClientReply, Inputs};

/// The first id of the requests the gateway sends a client, far from any id a test or a
/// person would pick. A request's progress token is its id.
const FIRST_ID: i64 = 1 << 40;

/// The way to one client for the span of one request (or of a session, for what the
/// gateway sends outside any request).
#[derive(Clone)]
pub struct ClientLink {
    messages: Route,
    requests: Arc<ClientRequests>,
    client: Arc<ClientConfig>,
    /// Set for a request of protocol 2026-07-28 or later: requests to the client become
    /// input it is asked for in the result.
    inputs: Option<Arc<Inputs>>,
    /// Cancelled when the client's session (or, for a stateless request, its stream) ends.
    closed: CancellationToken,
}

impl ClientLink {
    /// A link whose messages go to `messages`, for a client that declared `client`, whose
    /// requests wait in `requests` until the client answers them.
    pub fn new(
        messages: mpsc::Sender<ServerJsonRpcMessage>,
        requests: Arc<ClientRequests>,
        client: Arc<ClientConfig>,
        closed: CancellationToken,
    ) -> Self {
        Self {
            messages: Route::Fixed(messages),
            requests,
            client,
            inputs: None,
            closed,
        }
    }

    /// Whether the client takes no requests (protocol 2026-07-28): what it is asked goes
    /// in its request's result.
    pub fn is_stateless(&self) -> bool {
        self.inputs.is_some()
    }

    /// The same link, asking the client for input in results instead of requests, and
    /// following the client's rounds from one request to the next, starting with the
    /// request that asked for progress under `progress_token`.
    pub fn with_inputs(
        mut self,
        inputs: Arc<Inputs>,
        progress_token: Option<ProgressToken>,
    ) -> Self {
        self.inputs = Some(inputs);
        let round = Round {
            messages: self.messages.current(),
            progress_token,
        };
        self.messages = Route::Latest(Arc::new(Mutex::new(round)));
        self
    }

    /// The client's next round (its retry with the input it was asked for) came with
    /// `messages` and asks for progress under `progress_token`: from now on the link's
    /// messages ride that stream.
    pub fn next_round(
        &self,
        messages: mpsc::Sender<ServerJsonRpcMessage>,
        progress_token: Option<ProgressToken>,
    ) {
        if let Route::Latest(latest) = &self.messages {
            *lock(latest) = Round {
                messages,
                progress_token,
            };
        }
    }

    /// The token the client expects progress under: `own`, the token of the request the
    /// link serves, or that of the client's latest round when the link follows rounds.
    pub fn progress_token(&self, own: Option<&ProgressToken>) -> Option<ProgressToken> {
        match &self.messages {
            Route::Fixed(_) => own.cloned(),
            Route::Latest(latest) => lock(latest).progress_token.clone(),
        }
    }

    /// What the client declared: its protocol version, capabilities and name.
    pub fn client(&self) -> &Arc<ClientConfig> {
        &self.client
    }

    /// The client's capabilities.
    pub fn capabilities(&self) -> &ClientCapabilities {
        &self.client.capabilities
    }

    /// Whether the client went away.
    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled() || self.messages.current().is_closed()
    }

    /// Sends `notification` to the client; false when its stream has gone.
    pub async fn notify(&self, notification: ServerNotification) -> bool {
        // The message is made once there is room for it: a future that held it while
        // waiting would be a few times its size, and every tool call's future carries
        // this one.
        let Ok(permit) = self.messages.current().reserve_owned().await else {
            return false;
        };
        permit.send(ServerJsonRpcMessage::notification(notification));
        true
    }

    /// Sends `request` to the client, with `meta` added to its own, and waits for the
    /// answer through the returned [`PendingRequest`].
    pub async fn request(
        &self,
        mut request: ServerRequest,
        meta: Option<RequestMetaObject>,
    ) -> Result<PendingRequest, ServiceError> {
        if let Some(meta) = meta {
            request.get_meta_mut().extend(meta);
        }
        let number = self.requests.next.fetch_add(1, Ordering::Relaxed);
        let id = RequestId::Number(number);
        let progress_token = ProgressToken(NumberOrString::Number(number));
        if let Some(inputs) = &self.inputs {
            let answer = inputs.ask(request).map_err(ServiceError::McpError)?;
            return Ok(PendingRequest {
                progress_token,
                answer,
                id,
                link: self.clone(),
            });
        }
        request
            .get_meta_mut()
            .set_progress_token(progress_token.clone());
        let (answer_sender, answer) = oneshot::channel();
        self.requests.lock().insert(id.clone(), answer_sender);
        let pending = PendingRequest {
            progress_token,
            answer,
            id: id.clone(),
            link: self.clone(),
        };
        if !self.send(JsonRpcMessage::request(request, id)).await {
            return Err(ServiceError::TransportClosed);
        }
        Ok(pending)
    }

    async fn send(&self, message: ServerJsonRpcMessage) -> bool {
        self.messages.current().send(message).await.is_ok()
    }
}

/// Where a link's messages go.
#[derive(Clone)]
enum Route {
    /// The stream of one request, or of a session.
    Fixed(mpsc::Sender<ServerJsonRpcMessage>),
    /// The latest round of a call that waits for input between rounds.
    Latest(Arc<Mutex<Round>>),
}

/// One request of the client's rounds of a call.
struct Round {
    messages: mpsc::Sender<ServerJsonRpcMessage>,
    progress_token: Option<ProgressToken>,
}

impl Route {
    fn current(&self) -> mpsc::Sender<ServerJsonRpcMessage> {
        match self {
            Route::Fixed(messages) => messages.clone(),
            Route::Latest(latest) => lock(latest).messages.clone(),
        }
    }
}

fn lock(round: &Mutex<Round>) -> MutexGuard<'_, Round> {
    round
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A request sent to the client; dropping it forgets the request.
pub struct PendingRequest {
    /// The token under which the client may report progress about it.
    pub progress_token: ProgressToken,
    answer: oneshot::Receiver<Result<ClientResult, ErrorData>>,
    id: RequestId,
    link: ClientLink,
}

impl PendingRequest {
    /// The client's answer; `TransportClosed` when its session ended first.
    pub async fn answer(&mut self) -> Result<ClientResult, ServiceError> {
        match (&mut self.answer).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(ServiceError::McpError(error)),
            Err(_) => Err(ServiceError::TransportClosed),
        }
    }

    /// Tells the client the request is cancelled, on its stream when it is still there
    /// (a request asked for as input is simply no longer waited for).
    pub async fn cancel(self, reason: &str) {
        if self.link.inputs.is_some() {
            return;
        }
        let notification = ServerNotification::CancelledNotification(CancelledNotification::new(
            CancelledNotificationParam::new(Some(self.id.clone()), Some(reason.to_owned())),
        ));
        self.link
            .send(ServerJsonRpcMessage::notification(notification))
            .await;
    }
}

impl Drop for PendingRequest {
    fn drop(&mut self) {
        self.link.requests.lock().remove(&self.id);
    }
}

/// The requests the gateway sent one client session, waiting for an answer.
pub struct ClientRequests {
    next: AtomicI64,
    waiting: Mutex<HashMap<RequestId, ClientReply>>,
}

impl Default for ClientRequests {
    fn default() -> Self {
        Self {
            next: AtomicI64::new(FIRST_ID),
            waiting: Mutex::default(),
        }
    }
}

impl ClientRequests {
    /// Hands `message` to the request it answers; false when it answers none of them.
    pub fn answer(&self, message: ClientJsonRpcMessage) -> bool {
        let (id, answer) = match message {
            JsonRpcMessage::Response(response) => (response.id, Ok(response.result)),
            JsonRpcMessage::Error(JsonRpcError {
                id: Some(id),
                error,
                ..
            }) => (id, Err(error)),
            _ => return false,
        };
        let Some(waiting) = self.lock().remove(&id) else {
            return false;
        };
        // The request may have stopped waiting (cancelled): then the answer is dropped.
        let _ = waiting.send(answer);
        true
    }

    /// The session ended: no request waits any more.
    pub fn end(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<RequestId, ClientReply>> {
        self.waiting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{
        Implementation, PingRequest, ProgressNotification, ProgressNotificationParam,
    };

    use super::*;

    fn link() -> (ClientLink, mpsc::Receiver<ServerJsonRpcMessage>) {
        let (messages, sent) = mpsc::channel(4);
        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("test", "1"),
        );
        let link = ClientLink::new(
            messages,
            Arc::default(),
            Arc::new(client),
            CancellationToken::new(),
        );
        (link, sent)
    }

    #[tokio::test]
    async fn a_request_rides_the_stream_and_gets_the_answer_posted_for_it() {
        let (link, mut sent) = link();
        let request = ServerRequest::PingRequest(PingRequest::default());
        let mut pending = link.request(request, None).await.unwrap();
        let Some(JsonRpcMessage::Request(request)) = sent.recv().await else {
            panic!("no request on the stream");
        };
        assert_eq!(
            request.request.get_meta().get_progress_token(),
            Some(pending.progress_token.clone())
        );
        let empty = |id| ClientJsonRpcMessage::response(ClientResult::empty(()), id);
        assert!(
            !link.requests.answer(empty(RequestId::Number(1))),
            "not ours"
        );
        assert!(link.requests.answer(empty(request.id.clone())));
        assert!(matches!(
            pending.answer().await,
            Ok(ClientResult::EmptyResult(_))
        ));
        assert!(!link.requests.answer(empty(request.id)), "answered once");
    }

    #[tokio::test]
    async fn a_link_that_follows_rounds_sends_on_the_latest_round_under_its_token() {
        let (link, mut first) = link();
        let token = |n| ProgressToken(NumberOrString::Number(n));
        let link = link.with_inputs(Arc::default(), Some(token(1)));
        let own = Some(token(7));
        assert_eq!(link.progress_token(own.as_ref()), Some(token(1)));
        let (messages, mut second) = mpsc::channel(4);
        link.next_round(messages, Some(token(2)));
        assert_eq!(link.progress_token(own.as_ref()), Some(token(2)));
        let progress = ServerNotification::ProgressNotification(ProgressNotification::new(
            ProgressNotificationParam::new(token(2), 0.5),
        ));
        assert!(link.notify(progress).await);
        assert!(second.try_recv().is_ok(), "on the latest round's stream");
        assert!(first.try_recv().is_err(), "not on the first round's");
        let (fixed, _sent) = self::link();
        assert_eq!(
            fixed.progress_token(own.as_ref()),
            own,
            "a fixed link keeps its own"
        );
    }

    #[tokio::test]
    async fn a_client_error_is_its_answer_and_a_session_end_leaves_none() {
        let (link, mut sent) = link();
        let ping = || ServerRequest::PingRequest(PingRequest::default());
        let mut refused = link.request(ping(), None).await.unwrap();
        let mut orphaned = link.request(ping(), None).await.unwrap();
        let Some(JsonRpcMessage::Request(first)) = sent.recv().await else {
            panic!("no request on the stream");
        };
        let error = ErrorData::invalid_request("no", None);
        let refusal = ClientJsonRpcMessage::error(error, Some(first.id));
        assert!(link.requests.answer(refusal));
        assert!(matches!(
            refused.answer().await,
            Err(ServiceError::McpError(error)) if error.message == "no"
        ));
        link.requests.end();
        assert!(matches!(
            orphaned.answer().await,
            Err(ServiceError::TransportClosed)
        ));
    }

    #[tokio::test]
    async fn a_cancelled_request_is_forgotten_and_its_client_told() {
        let (link, mut sent) = link();
        let ping = ServerRequest::PingRequest(PingRequest::default());
        let pending = link.request(ping, None).await.unwrap();
        sent.recv().await.unwrap();
        pending.cancel("enough").await;
        let Some(JsonRpcMessage::Notification(notification)) = sent.recv().await else {
            panic!("no cancellation on the stream");
        };
        assert!(matches!(
            notification.notification,
            ServerNotification::CancelledNotification(_)
        ));
        assert!(link.requests.lock().is_empty(), "still waiting");
    }
}
