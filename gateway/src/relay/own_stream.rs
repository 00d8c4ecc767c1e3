//! A call's own stream: the response stream of a call whose transport serves it beside
//! rmcp, a streamable HTTP `POST` (`server::transport::direct_calls::http`).
//!
//! What the gateway sends the client during such a call rides that stream, as the spec
//! has it for any request's stream: the call's progress, and the requests the gateway
//! sends the client on the call's behalf (an upstream's sampling, elicitation, roots or
//! ping, relayed; the gate's `ask`). The client answers a request in a `POST` of its own,
//! which the transport hands to [`ClientRequests::answer`] before rmcp sees it: rmcp's
//! session worker never heard of these requests.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::ErrorData;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientJsonRpcMessage, ClientResult, GetMeta,
    JsonRpcError, JsonRpcMessage, NumberOrString, ProgressNotification, ProgressNotificationParam,
    ProgressToken, RequestId, RequestMetaObject, ServerJsonRpcMessage, ServerNotification,
    ServerRequest,
};
use rmcp::service::ServiceError;
use tokio::sync::{mpsc, oneshot};

/// The first id of the requests sent on calls' own streams. rmcp numbers the requests it
/// sends the same client from 0 with a `u32` counter, so ids from here on never meet
/// them. A request's progress token is its id.
const FIRST_ID: i64 = 1 << 40;

/// The stream of one call, put into the call's extensions by its transport.
#[derive(Clone)]
pub struct OwnStream {
    messages: mpsc::Sender<ServerJsonRpcMessage>,
    requests: Arc<ClientRequests>,
}

impl OwnStream {
    /// The stream whose messages go to `messages`, for a call of the session whose
    /// requests to its client wait in `requests`.
    pub fn new(
        messages: mpsc::Sender<ServerJsonRpcMessage>,
        requests: Arc<ClientRequests>,
    ) -> Self {
        Self { messages, requests }
    }

    /// Sends `progress` to the client; false when the call's stream has gone.
    pub async fn notify_progress(&self, progress: ProgressNotificationParam) -> bool {
        // The message is made once there is room for it: a future that held it while
        // waiting would be a few times its size, and every tool call's future carries
        // this one.
        let Ok(permit) = self.messages.reserve().await else {
            return false;
        };
        let notification =
            ServerNotification::ProgressNotification(ProgressNotification::new(progress));
        permit.send(ServerJsonRpcMessage::notification(notification));
        true
    }

    /// Sends `request` to the client, with `meta` added to its own, and waits for the
    /// answer through the returned [`OwnRequest`].
    pub async fn request(
        &self,
        mut request: ServerRequest,
        meta: Option<RequestMetaObject>,
    ) -> Result<OwnRequest, ServiceError> {
        let number = self.requests.next.fetch_add(1, Ordering::Relaxed);
        let id = RequestId::Number(number);
        let progress_token = ProgressToken(NumberOrString::Number(number));
        if let Some(meta) = meta {
            request.get_meta_mut().extend(meta);
        }
        request
            .get_meta_mut()
            .set_progress_token(progress_token.clone());
        let (answer_sender, answer) = oneshot::channel();
        self.requests.lock().insert(id.clone(), answer_sender);
        let pending = OwnRequest {
            progress_token,
            answer,
            id: id.clone(),
            stream: self.clone(),
        };
        if !self.send(JsonRpcMessage::request(request, id)).await {
            return Err(ServiceError::TransportClosed);
        }
        Ok(pending)
    }

    async fn send(&self, message: ServerJsonRpcMessage) -> bool {
        self.messages.send(message).await.is_ok()
    }
}

/// A request sent to the client on a call's stream; dropping it forgets the request.
pub struct OwnRequest {
    /// The token under which the client may report progress about it.
    pub progress_token: ProgressToken,
    answer: oneshot::Receiver<Result<ClientResult, ErrorData>>,
    id: RequestId,
    stream: OwnStream,
}

impl OwnRequest {
    /// The client's answer; `TransportClosed` when its session ended first.
    pub async fn answer(&mut self) -> Result<ClientResult, ServiceError> {
        match (&mut self.answer).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(ServiceError::McpError(error)),
            Err(_) => Err(ServiceError::TransportClosed),
        }
    }

    /// Tells the client the request is cancelled, on the call's stream when it is still
    /// there.
    pub async fn cancel(self, reason: &str) {
        let notification = ServerNotification::CancelledNotification(CancelledNotification::new(
            CancelledNotificationParam::new(Some(self.id.clone()), Some(reason.to_owned())),
        ));
        self.stream
            .send(ServerJsonRpcMessage::notification(notification))
            .await;
    }
}

impl Drop for OwnRequest {
    fn drop(&mut self) {
        self.stream.requests.lock().remove(&self.id);
    }
}

/// The requests a session's calls sent its client on their own streams, waiting for an
/// answer.
pub struct ClientRequests {
    next: AtomicI64,
    waiting: Mutex<HashMap<RequestId, oneshot::Sender<Result<ClientResult, ErrorData>>>>,
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
    /// Whether any request waits for an answer.
    pub fn any_waiting(&self) -> bool {
        !self.lock().is_empty()
    }

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

    fn lock(
        &self,
    ) -> MutexGuard<'_, HashMap<RequestId, oneshot::Sender<Result<ClientResult, ErrorData>>>> {
        self.waiting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::PingRequest;

    use super::*;

    fn stream() -> (OwnStream, mpsc::Receiver<ServerJsonRpcMessage>) {
        let (messages, sent) = mpsc::channel(4);
        (OwnStream::new(messages, Arc::default()), sent)
    }

    #[tokio::test]
    async fn a_request_rides_the_stream_and_gets_the_answer_posted_for_it() {
        let (stream, mut sent) = stream();
        let request = ServerRequest::PingRequest(PingRequest::default());
        let mut pending = stream.request(request, None).await.unwrap();
        let Some(JsonRpcMessage::Request(request)) = sent.recv().await else {
            panic!("no request on the stream");
        };
        assert_eq!(
            request.request.get_meta().get_progress_token(),
            Some(pending.progress_token.clone())
        );
        let empty = |id| ClientJsonRpcMessage::response(ClientResult::empty(()), id);
        assert!(
            !stream.requests.answer(empty(RequestId::Number(1))),
            "rmcp's id"
        );
        assert!(stream.requests.answer(empty(request.id.clone())));
        assert!(matches!(
            pending.answer().await,
            Ok(ClientResult::EmptyResult(_))
        ));
        assert!(!stream.requests.answer(empty(request.id)), "answered once");
    }

    #[tokio::test]
    async fn a_client_error_is_its_answer_and_a_session_end_leaves_none() {
        let (stream, mut sent) = stream();
        let ping = || ServerRequest::PingRequest(PingRequest::default());
        let mut refused = stream.request(ping(), None).await.unwrap();
        let mut orphaned = stream.request(ping(), None).await.unwrap();
        let Some(JsonRpcMessage::Request(first)) = sent.recv().await else {
            panic!("no request on the stream");
        };
        let error = ErrorData::invalid_request("no", None);
        let refusal = ClientJsonRpcMessage::error(error, Some(first.id));
        assert!(stream.requests.answer(refusal));
        assert!(matches!(
            refused.answer().await,
            Err(ServiceError::McpError(error)) if error.message == "no"
        ));
        stream.requests.end();
        assert!(matches!(
            orphaned.answer().await,
            Err(ServiceError::TransportClosed)
        ));
    }

    #[tokio::test]
    async fn a_cancelled_request_is_forgotten_and_its_client_told() {
        let (stream, mut sent) = stream();
        let ping = ServerRequest::PingRequest(PingRequest::default());
        let pending = stream.request(ping, None).await.unwrap();
        sent.recv().await.unwrap();
        pending.cancel("enough").await;
        let Some(JsonRpcMessage::Notification(notification)) = sent.recv().await else {
            panic!("no cancellation on the stream");
        };
        assert!(matches!(
            notification.notification,
            ServerNotification::CancelledNotification(_)
        ));
        assert!(!stream.requests.any_waiting());
    }
}
