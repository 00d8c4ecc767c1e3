//! Retries that reach a replica other than the one holding their call (protocol
//! 2026-07-28, replicas sharing state through `[cluster]`).
//!
//! A call parked for input (`crate::session::parked`) is a future running on the replica that
//! took its request, its upstream's request in flight: it cannot move. Its `requestState`
//! names that replica, the holder, so the retry goes to the call instead. The replica the
//! retry reaches leaves it in the holder's mailbox in the shared state (`replica:<id>`;
//! the mailboxes are those that carry `tasks/update` to the replica running a task) and
//! waits in a mailbox of its own for what comes back: that the holder took the retry, the
//! messages of the round (progress, log messages), which go on to its client's stream, and
//! the round's answer, which it gives its client as its own: the call's result, the next
//! `InputRequiredResult` (whose new `requestState` names the holder again, so each round
//! may reach any replica), or an error.
//!
//! The holder takes a retry up as it would one of its own: in the session serving the
//! stateless requests of the retry's identity and profile (its id is the same on every
//! replica), for the method, the name and the identity the call was parked for, or not
//! at all (the same refusals); the call stays under the holder's `[listen.limits]` timers
//! and quotas. The wait is bounded by the holder's life: a holder whose lease has lapsed
//! (it died), or that took nothing within [`TAKE_WITHIN`], ends it with
//! `PARKED_REPLICA_GONE`. A client that stops waiting has the holder's round cancelled,
//! as on the holder.
//!
//! Without shared state (one process) every token names this process, and nothing here
//! runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    CreateTaskResult, GetPromptResult, InputRequiredResult, ReadResourceResult,
    ServerJsonRpcMessage, ServerResult,
};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::own_tasks::state_error;
use super::{STREAM_CAPACITY, Serving, unexpected};
use crate::gateway::Gateway;
use crate::session::Session;
use crate::session::parked::{self, Retry, Untaken};
use crate::state::SharedState;
use crate::tool_result::ToolResult;

/// How often a mailbox is looked in with no news of it (news can be lost while Redis's
/// subscription is made again), and how often a waiting replica checks that the holder
/// still runs.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// How long a holder that runs has to take a retry.
const TAKE_WITHIN: Duration = Duration::from_secs(10);

/// How long a message waits in a mailbox whose reader never comes (it died).
const MAIL_TTL: Duration = Duration::from_secs(300);

/// The stable code of a retry whose call was held by a replica that is gone.
pub const REPLICA_GONE: &str = "PARKED_REPLICA_GONE";

/// What a replica leaves in the holder's mailbox.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
enum ToHolder {
    /// A client's retry, which reached the session `session` there; what comes of it
    /// goes to the mailbox `reply`.
    Retry {
        reply: String,
        session: String,
        retry: Retry,
    },
    /// The retry's client stopped waiting.
    Cancel { reply: String },
}

/// What the holder leaves in the mailbox of the replica that handed it a retry.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind", content = "body")]
enum FromHolder {
    /// The retry is being taken up.
    Taken,
    /// A message of the round to the client.
    Message(Box<ServerJsonRpcMessage>),
    /// The round's answer; nothing follows.
    Answer(Box<RoundAnswer>),
}

/// A round's answer, by its kind (a `ServerResult` does not say its own).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind", content = "body")]
enum RoundAnswer {
    CallTool(ToolResult),
    GetPrompt(GetPromptResult),
    ReadResource(ReadResourceResult),
    CreateTask(CreateTaskResult),
    InputRequired(InputRequiredResult),
    Error(ErrorData),
}

impl From<Result<ServerResult, ErrorData>> for RoundAnswer {
    fn from(answer: Result<ServerResult, ErrorData>) -> Self {
        match answer {
            Ok(ServerResult::GetPromptResult(result)) => RoundAnswer::GetPrompt(result),
            Ok(ServerResult::ReadResourceResult(result)) => RoundAnswer::ReadResource(result),
            Ok(ServerResult::CreateTaskResult(result)) => RoundAnswer::CreateTask(result),
            Ok(ServerResult::InputRequiredResult(result)) => RoundAnswer::InputRequired(result),
            Ok(result) => match ToolResult::from_server_result(result) {
                Ok(result) => RoundAnswer::CallTool(result),
                Err(other) => RoundAnswer::Error(unexpected(&other)),
            },
            Err(error) => RoundAnswer::Error(error),
        }
    }
}

impl From<RoundAnswer> for Result<ServerResult, ErrorData> {
    fn from(answer: RoundAnswer) -> Self {
        match answer {
            RoundAnswer::CallTool(result) => Ok(result.into_server_result()),
            RoundAnswer::GetPrompt(result) => Ok(ServerResult::GetPromptResult(result)),
            RoundAnswer::ReadResource(result) => Ok(ServerResult::ReadResourceResult(result)),
            RoundAnswer::CreateTask(result) => Ok(ServerResult::CreateTaskResult(result)),
            RoundAnswer::InputRequired(result) => Ok(ServerResult::InputRequiredResult(result)),
            RoundAnswer::Error(error) => Err(error),
        }
    }
}

/// The replica holding the call `state` names, when that is another one than this
/// (replicas share state, and the token names one).
pub(super) fn holder_elsewhere<'a>(gateway: &Gateway, state: &'a str) -> Option<&'a str> {
    let shared = gateway.shared_state().as_ref();
    parked::holder(state).filter(|holder| shared.is_shared() && *holder != shared.replica())
}

/// Hands `retry`, which reached `session` here, to `holder`, which holds its call: the
/// round's messages go to `stream`, and its answer is returned. `request` is cancelled
/// when the client stops waiting.
pub(super) async fn forward(
    gateway: &Gateway,
    session: &Session,
    holder: &str,
    retry: Retry,
    stream: mpsc::Sender<ServerJsonRpcMessage>,
    request: &CancellationToken,
) -> Result<ServerResult, ErrorData> {
    let state = gateway.shared_state().as_ref();
    if !state.replica_alive(holder).await.map_err(state_error)? {
        return Err(gone(holder, "is not running"));
    }
    let reply = format!("round:{}", uuid::Uuid::new_v4().simple());
    // Listening before the retry goes: the news of the first answer cannot be missed.
    let mut news = state.new_messages();
    let handed = ToHolder::Retry {
        reply: reply.clone(),
        session: session.id.clone(),
        retry,
    };
    send(state, &inbox(holder), &handed).await?;
    tracing::info!(session = %session.id, %holder, "a retry handed to the replica holding its call");
    let take_by = Instant::now() + TAKE_WITHIN;
    let mut taken = false;
    let mut look = tokio::time::interval(LOOK_EVERY);
    let mut listening = true;
    loop {
        tokio::select! {
            biased;
            () = request.cancelled() => {
                let cancel = ToHolder::Cancel { reply };
                if let Err(e) = send(state, &inbox(holder), &cancel).await {
                    tracing::debug!(%holder, "the end of a round not handed over: {e:?}");
                }
                return Err(ErrorData::internal_error("the client stopped waiting", None));
            }
            heard = news.recv(), if listening => match heard {
                Ok(mailbox) if mailbox != reply => continue,
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => listening = false,
            },
            _ = look.tick() => {
                if !state.replica_alive(holder).await.map_err(state_error)? {
                    return Err(gone(holder, "stopped before it answered"));
                }
                if !taken && Instant::now() >= take_by {
                    return Err(gone(holder, "did not take the retry up"));
                }
            }
        }
        for message in state.take_messages(&reply).await.map_err(state_error)? {
            match serde_json::from_str(&message) {
                Ok(FromHolder::Taken) => taken = true,
                Ok(FromHolder::Message(message)) => {
                    // A client that left misses it; its round is cancelled above.
                    let _ = stream.send(*message).await;
                }
                Ok(FromHolder::Answer(answer)) => return (*answer).into(),
                Err(e) => tracing::warn!(%holder, "an unreadable message from the holder: {e}"),
            }
        }
    }
}

/// Takes up, until the gateway stops, the retries other replicas hand this one (with
/// shared state; without it, none come).
pub fn take_handed_over(gateway: &Arc<Gateway>) {
    if !gateway.shared_state().is_shared() {
        return;
    }
    let state = gateway.shared_state().clone();
    let shutdown = gateway.shutdown_token().clone();
    let gateway = Arc::downgrade(gateway);
    tokio::spawn(async move {
        let inbox = inbox(state.replica());
        let rounds = Rounds::default();
        let mut news = state.new_messages();
        let mut look = tokio::time::interval(LOOK_EVERY);
        let mut listening = true;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                heard = news.recv(), if listening => match heard {
                    Ok(mailbox) if mailbox != inbox => continue,
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => listening = false,
                },
                _ = look.tick() => {}
            }
            let messages = match state.take_messages(&inbox).await {
                Ok(messages) => messages,
                Err(e) => {
                    tracing::debug!("retries handed over not read: {e}");
                    continue;
                }
            };
            let Some(gateway) = gateway.upgrade() else {
                return;
            };
            for message in messages {
                match serde_json::from_str(&message) {
                    Ok(ToHolder::Retry {
                        reply,
                        session,
                        retry,
                    }) => {
                        let cancel = CancellationToken::new();
                        rounds.lock().insert(reply.clone(), cancel.clone());
                        let rounds = rounds.clone();
                        let gateway = gateway.clone();
                        tokio::spawn(async move {
                            take_up(&gateway, &reply, &session, retry, &cancel).await;
                            rounds.lock().remove(&reply);
                        });
                    }
                    Ok(ToHolder::Cancel { reply }) => {
                        if let Some(round) = rounds.lock().remove(&reply) {
                            round.cancel();
                        }
                    }
                    Err(e) => tracing::warn!("an unreadable retry handed over: {e}"),
                }
            }
        }
    });
}

/// The rounds handed over that run here, by their reply mailbox, each with what cancels
/// it.
#[derive(Clone, Default)]
struct Rounds(Arc<Mutex<HashMap<String, CancellationToken>>>);

impl Rounds {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Takes up `retry`, handed over for `session`, and leaves what comes of it in `reply`.
async fn take_up(
    gateway: &Arc<Gateway>,
    reply: &str,
    session: &str,
    retry: Retry,
    cancel: &CancellationToken,
) {
    // A stopping replica's drain waits for the round, as for a request of its own.
    let _delivery = gateway.drain().delivery();
    let state = gateway.shared_state().as_ref();
    if let Err(e) = send(state, reply, &FromHolder::Taken).await {
        tracing::warn!("a retry handed over is not taken up: {e:?}");
        return;
    }
    let identity = retry.request.identity.clone();
    let answer = match gateway.sessions().find(session, identity.as_deref()) {
        // The session ended (and its parked calls with it), or is another identity's.
        Err(_) => Err(Untaken::Unknown.to_error()),
        Ok(session) => {
            let _serving = Serving::enter(&session.running.serving);
            let (stream, mut messages) = mpsc::channel(STREAM_CAPACITY);
            let round = session.resume(gateway, retry, stream, cancel);
            tokio::pin!(round);
            loop {
                tokio::select! {
                    biased;
                    Some(message) = messages.recv() => {
                        relay(state, reply, FromHolder::Message(Box::new(message))).await;
                    }
                    answer = &mut round => {
                        while let Ok(message) = messages.try_recv() {
                            relay(state, reply, FromHolder::Message(Box::new(message))).await;
                        }
                        break answer;
                    }
                }
            }
        }
    };
    relay(state, reply, FromHolder::Answer(Box::new(answer.into()))).await;
}

/// Leaves `message` in `reply`, or says why not.
async fn relay(state: &dyn SharedState, reply: &str, message: FromHolder) {
    if let Err(e) = send(state, reply, &message).await {
        tracing::warn!("a round handed over is not answered: {e:?}");
    }
}

/// Leaves `message` in `mailbox`.
async fn send(
    state: &dyn SharedState,
    mailbox: &str,
    message: &impl Serialize,
) -> Result<(), ErrorData> {
    let message = serde_json::to_string(message)
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    state
        .send_message(mailbox, message, MAIL_TTL)
        .await
        .map_err(state_error)
}

/// The mailbox of replica `replica`, where others hand it retries of the calls it holds.
fn inbox(replica: &str) -> String {
    format!("replica:{replica}")
}

/// The error of a retry whose call `holder` held, which `why`.
fn gone(holder: &str, why: &str) -> ErrorData {
    ErrorData::internal_error(
        format!(
            "{REPLICA_GONE}: the gateway replica holding the call this requestState \
             continues ({holder}) {why}; the call is lost: send the request again without \
             requestState"
        ),
        Some(serde_json::json!({ "code": REPLICA_GONE })),
    )
}

#[cfg(test)]
mod tests {
    use rmcp::model::InputRequests;

    use super::*;
    use crate::tool_result::Block;

    /// What the holder answers reads back, on the other replica, as the answer it was.
    fn relayed(answer: Result<ServerResult, ErrorData>) -> Result<ServerResult, ErrorData> {
        let json = serde_json::to_string(&FromHolder::Answer(Box::new(answer.into()))).unwrap();
        match serde_json::from_str(&json).unwrap() {
            FromHolder::Answer(answer) => (*answer).into(),
            _ => panic!("not an answer: {json}"),
        }
    }

    #[test]
    fn an_answer_keeps_its_kind_between_replicas() {
        let result = ToolResult::success(vec![Block::text("done")]).into_server_result();
        let asked = InputRequiredResult::new(Some(InputRequests::new()), Some("r.1".into()));
        let error = ErrorData::invalid_params("no", None);
        for answer in [
            Ok(result),
            Ok(ServerResult::InputRequiredResult(asked)),
            Err(error),
        ] {
            let json = |answer: &Result<ServerResult, ErrorData>| match answer {
                Ok(result) => serde_json::to_value(result).unwrap(),
                Err(error) => serde_json::json!({ "error": error }),
            };
            assert_eq!(json(&relayed(answer.clone())), json(&answer));
            let kind = |answer: Result<ServerResult, ErrorData>| {
                answer.ok().map(|result| std::mem::discriminant(&result))
            };
            assert_eq!(kind(relayed(answer.clone())), kind(answer));
        }
    }

    #[test]
    fn a_token_names_its_holder_when_replicas_share_state() {
        assert_eq!(parked::holder("r1.0a1b"), Some("r1"));
        assert_eq!(parked::holder("0a1b"), None);
    }
}
