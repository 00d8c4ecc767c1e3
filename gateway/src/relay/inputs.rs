//! The input a request of protocol 2026-07-28 or later needs from its client, asked for in
//! its result (SEP-2322, multi round-trip requests) because such a server sends its client
//! no requests of its own.
//!
//! Something behind a call may need the client while the call runs: an upstream on an
//! older protocol sends `elicitation/create`, `sampling/createMessage` or `roots/list`; an
//! upstream on 2026-07-28 answers `InputRequiredResult`, whose questions the gateway asks
//! for it; the gate asks the person. For a client on 2026-07-28 each such question waits
//! in the call's [`Inputs`] under a key, and the transport answers the client's request
//! with an `InputRequiredResult` that carries every question still open, while the call
//! itself waits (see `session::parked`). The client's retry brings the answers
//! under the same keys ([`Inputs::answer`]); each goes to the question that waits for it,
//! and the call goes on from where it was.

#![allow(
    deprecated,
    reason = "sampling and roots are what upstreams on older protocols ask for"
)]

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use rmcp::ErrorData;
use rmcp::model::{
    ClientResult, GetExtensions, InputRequest, InputRequests, InputResponses, ServerRequest,
};
use tokio::sync::{Notify, oneshot};
use wire::round_trip::input_result;

/// Where the client's answer to one request goes: its result or its error.
pub(super) type ClientReply = oneshot::Sender<Result<ClientResult, ErrorData>>;

/// The key a question had where it came from (an upstream's `InputRequiredResult`), kept
/// in the request's extensions so the client sees the upstream's own keys.
#[derive(Debug, Clone)]
pub struct InputKey(pub String);

/// The open questions of one call.
#[derive(Default)]
pub struct Inputs {
    open: Mutex<Open>,
    asked: Notify,
}

#[derive(Default)]
struct Open {
    next_key: u64,
    questions: BTreeMap<String, (InputRequest, ClientReply, Instant)>,
}

impl Inputs {
    /// Opens a question for the client; its answer arrives on the returned receiver once
    /// the client retries with it. A ping is answered at once: the gateway answers for
    /// its client that it is there. Other requests cannot be asked as input.
    pub fn ask(
        &self,
        request: ServerRequest,
    ) -> Result<oneshot::Receiver<Result<ClientResult, ErrorData>>, ErrorData> {
        let (answer, receiver) = oneshot::channel();
        let asked_as = request
            .extensions()
            .get::<InputKey>()
            .map(|key| key.0.clone());
        let question = match request {
            ServerRequest::CreateMessageRequest(request) => InputRequest::CreateMessage(request),
            ServerRequest::ElicitRequest(request) => InputRequest::Elicitation(request),
            ServerRequest::ListRootsRequest(request) => InputRequest::ListRoots(request),
            ServerRequest::PingRequest(_) => {
                let _ = answer.send(Ok(ClientResult::empty(())));
                return Ok(receiver);
            }
            _ => {
                return Err(ErrorData::invalid_request(
                    "only sampling, elicitation and roots can be asked of a client on \
                     protocol 2026-07-28 or later",
                    None,
                ));
            }
        };
        let mut open = self.lock();
        open.next_key += 1;
        let key = match asked_as {
            Some(key) if !open.questions.contains_key(&key) => key,
            _ => format!("input-{}", open.next_key),
        };
        open.questions
            .insert(key, (question, answer, Instant::now()));
        drop(open);
        self.asked.notify_waiters();
        self.asked.notify_one();
        Ok(receiver)
    }

    /// Resolves once some question is open.
    pub async fn asked(&self) {
        loop {
            let notified = self.asked.notified();
            if !self.lock().questions.is_empty() {
                return;
            }
            notified.await;
        }
    }

    /// How many questions have been asked so far (a ping is none).
    pub fn asked_count(&self) -> u64 {
        self.lock().next_key
    }

    /// Resolves once more than `count` questions have been asked
    /// ([`Inputs::asked_count`]): a question came since the count was taken.
    pub async fn asked_after(&self, count: u64) {
        loop {
            let notified = self.asked.notified();
            if self.lock().next_key > count {
                return;
            }
            notified.await;
        }
    }

    /// Resolves once no new question has come for a moment: questions a call asks side
    /// by side go to the client together.
    pub async fn settled(&self) {
        const QUIET: std::time::Duration = std::time::Duration::from_millis(10);
        const AT_MOST: usize = 10;
        let mut open = self.lock().questions.len();
        for _ in 0..AT_MOST {
            tokio::time::sleep(QUIET).await;
            let now = self.lock().questions.len();
            if now == open {
                return;
            }
            open = now;
        }
    }

    /// Every open question, by key.
    pub fn questions(&self) -> InputRequests {
        self.lock()
            .questions
            .iter()
            .map(|(key, (question, _, _))| (key.clone(), question.clone()))
            .collect()
    }

    /// Gives up every open question: each gets no answer (the call that asked it was
    /// abandoned), so what waits for it, such as an upstream's request, is answered.
    pub fn close(&self) {
        self.lock().questions.clear();
    }

    /// When the oldest question still open was asked.
    pub fn oldest(&self) -> Option<Instant> {
        self.lock().questions.values().map(|(_, _, at)| *at).min()
    }

    /// Hands each of the client's `responses` to the open question of its key. A
    /// response to no open question is ignored; a question left without a response stays
    /// open. A response that is not a result of the question's kind reaches the question
    /// as an error.
    pub fn answer(&self, responses: InputResponses) {
        let mut open = self.lock();
        for (key, response) in responses {
            let Some((question, answer, _)) = open.questions.remove(&key) else {
                tracing::debug!(%key, "an input response answers no open question");
                continue;
            };
            let _ = answer.send(input_result(&question, response));
        }
    }

    fn lock(&self) -> MutexGuard<'_, Open> {
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ElicitRequest, ElicitRequestParams, ElicitationSchema, PingRequest};
    use serde_json::json;

    use super::*;

    fn elicitation() -> ServerRequest {
        ServerRequest::ElicitRequest(ElicitRequest::new(
            ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: "name?".into(),
                requested_schema: ElicitationSchema::new(BTreeMap::new()),
            },
        ))
    }

    #[tokio::test]
    async fn a_question_stays_open_until_its_answer_comes() {
        let inputs = Inputs::default();
        let mut answer = inputs.ask(elicitation()).unwrap();
        inputs.asked().await;
        let questions = inputs.questions();
        let key = questions.keys().next().unwrap().clone();
        inputs.answer(BTreeMap::from([("other".into(), json!({}))]));
        assert!(answer.try_recv().is_err(), "not answered by another key");
        inputs.answer(BTreeMap::from([(key, json!({"action": "accept"}))]));
        assert!(matches!(
            answer.await,
            Ok(Ok(ClientResult::ElicitResult(_)))
        ));
        assert!(inputs.questions().is_empty());
    }

    #[tokio::test]
    async fn a_ping_is_answered_at_once_and_opens_nothing() {
        let inputs = Inputs::default();
        let answer = inputs
            .ask(ServerRequest::PingRequest(PingRequest::default()))
            .unwrap();
        assert!(matches!(answer.await, Ok(Ok(ClientResult::EmptyResult(_)))));
        assert!(inputs.questions().is_empty());
    }

    #[tokio::test]
    async fn a_malformed_answer_reaches_the_question_as_an_error() {
        let inputs = Inputs::default();
        let answer = inputs.ask(elicitation()).unwrap();
        let key = inputs.questions().into_keys().next().unwrap();
        inputs.answer(BTreeMap::from([(key, json!({"action": 7}))]));
        assert!(matches!(answer.await, Ok(Err(_))));
    }
}
