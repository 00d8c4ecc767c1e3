//! Calls that wait for input their client was asked for, between the client's rounds of
//! a multi round-trip request (protocol 2026-07-28), because the call is still running
//! when its request is answered with `InputRequiredResult`.
//!
//! A parked call is known by the `requestState` its client was given: a token naming the
//! replica that holds the call and a random part, which the client sends back unchanged
//! with its answers. A token names nothing once its call was taken up again, and takes up
//! only a retry of the same request: the same method, the same tool, prompt or resource,
//! and the same identity ([`RequestKey`]). Parked calls live in the process that runs
//! them (the call is a future, its upstream's request in flight); with replicas, a retry
//! that reaches another replica is handed over to this one (`crate::server::core::handover`).
//!
//! Each parked call costs memory (its task, its upstream's call), so what one client may
//! park is bounded (`[listen.limits]`): a session holds at most `max_parked_per_session`
//! and an identity `max_parked_per_identity` (a call that would pass either is cancelled
//! and its request refused); a timer cancels a call nobody took up within
//! `parked_ttl_secs`, or whose oldest question is older than `input_deadline_secs`, and
//! the client that comes back later with its token is told so (`INPUT_EXPIRED`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use rmcp::ErrorData;
use rmcp::model::{InputResponses, ProgressToken, ServerResult};
use serde::{Deserialize, Serialize};
use tokio::task::{AbortHandle, JoinHandle};
use tokio_util::sync::CancellationToken;

use super::limits::{Holding, LimitError, Owner, Permit};
use crate::relay::ClientLink;
use crate::relay::inputs::Inputs;
use crate::tasks::BecomesTask;

/// How many tokens of expired calls a session remembers, to tell their clients why.
const EXPIRED_KEPT: usize = 256;

/// A call that runs on while its client answers the questions it was asked.
pub struct ParkedCall {
    /// The questions of the call, open and answered.
    pub inputs: Arc<Inputs>,
    /// The call's way to its client, which follows the client's rounds.
    pub link: ClientLink,
    /// The call's own task; its output is the request's answer.
    pub task: JoinHandle<Result<ServerResult, ErrorData>>,
    /// Cancels the call.
    pub cancel: CancellationToken,
    /// The request that started the call: only its retry takes the call up.
    pub request: RequestKey,
    /// Set when the call becomes a task of the gateway's once its client has answered
    /// (its tool requires a task): the retry with the answers is answered with the task.
    pub becomes_task: Option<BecomesTask>,
}

/// What a retry must repeat of the request it continues: its method, what it names (the
/// tool, the prompt or the resource), and who sent it (the identity of its credentials).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestKey {
    pub method: String,
    pub name: String,
    pub identity: Option<String>,
}

/// A client's retry of a parked call: the `requestState` it brought back, the request it
/// repeats, its answers, and the token it asks for this round's progress under.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    pub state: String,
    pub request: RequestKey,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub responses: Option<InputResponses>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_token: Option<ProgressToken>,
}

/// The replica that holds the call `state` names (see [`Parked::park`]), if `state` is a
/// token of the gateway's.
pub fn holder(state: &str) -> Option<&str> {
    state.split_once('.').map(|(replica, _)| replica)
}

/// Why a `requestState` takes up no call.
pub enum Untaken {
    /// Its timer cancelled the call.
    Expired(LimitError),
    /// It names no call: taken up already, or not the gateway's.
    Unknown,
    /// It names a call of another request; that call stays parked.
    OtherRequest,
}

impl Untaken {
    pub fn to_error(&self) -> ErrorData {
        match self {
            Untaken::Expired(expired) => expired.to_error(),
            Untaken::Unknown => ErrorData::invalid_params(
                "requestState names no request waiting for input: it was answered already, \
                 waited too long, or was altered",
                None,
            ),
            Untaken::OtherRequest => ErrorData::invalid_params(
                "requestState belongs to another request: a retry must repeat the method and \
                 the name of the request that was answered with it",
                None,
            ),
        }
    }
}

impl ParkedCall {
    /// Gives the call up: it is cancelled, and its open questions answered with none (an
    /// upstream waiting for one is told).
    pub fn abandon(&self) {
        self.cancel.cancel();
        self.inputs.close();
    }
}

/// The parked calls of one client session.
#[derive(Default)]
pub struct Parked {
    waiting: Arc<Mutex<Waiting>>,
}

#[derive(Default)]
struct Waiting {
    calls: HashMap<String, Entry>,
    /// Tokens of calls the timer cancelled, newest last, with why.
    expired: VecDeque<(String, &'static str)>,
}

struct Entry {
    call: ParkedCall,
    /// The call's place in its identity's quota.
    _permit: Permit,
    /// The timer that cancels the call when it waits too long.
    timer: AbortHandle,
}

impl Parked {
    /// Parks `call` for `owner` on this process, `replica`; the `requestState` that takes
    /// it up again. A call past the session's or the identity's limit is abandoned and
    /// handed back with why.
    pub fn park(
        &self,
        call: ParkedCall,
        owner: &Owner,
        replica: &str,
    ) -> Result<String, (LimitError, Box<ParkedCall>)> {
        let limits = owner.quotas.limits();
        let mut waiting = self.lock();
        let limit = limits.max_parked_per_session.get();
        let permit = if waiting.calls.len() >= limit {
            Err(LimitError::ParkedPerSession { limit })
        } else {
            owner.acquire(Holding::Parked)
        };
        let permit = match permit {
            Ok(permit) => permit,
            Err(refused) => {
                call.abandon();
                return Err((refused, Box::new(call)));
            }
        };
        let state = format!("{replica}.{}", uuid::Uuid::new_v4().simple());
        let now = Instant::now();
        let idle = now + limits.parked_ttl();
        let unanswered = call
            .inputs
            .oldest()
            .map_or(idle, |asked| asked + limits.input_deadline());
        let (deadline, why) = if unanswered < idle {
            (
                unanswered,
                "its question went unanswered past [listen.limits] input_deadline_secs",
            )
        } else {
            (
                idle,
                "its client did not come back within [listen.limits] parked_ttl_secs",
            )
        };
        let timer = tokio::spawn(expire(
            Arc::downgrade(&self.waiting),
            state.clone(),
            tokio::time::Instant::from_std(deadline),
            why,
        ))
        .abort_handle();
        waiting.calls.insert(
            state.clone(),
            Entry {
                call,
                _permit: permit,
                timer,
            },
        );
        Ok(state)
    }

    /// The call `state` names, taken up again by a retry of `request`.
    pub fn take(&self, state: &str, request: &RequestKey) -> Result<ParkedCall, Untaken> {
        let mut waiting = self.lock();
        match waiting.calls.get(state) {
            Some(entry) if entry.call.request != *request => return Err(Untaken::OtherRequest),
            Some(_) => {
                if let Some(entry) = waiting.calls.remove(state) {
                    entry.timer.abort();
                    return Ok(entry.call);
                }
            }
            None => {}
        }
        let expired = waiting
            .expired
            .iter()
            .find(|(token, _)| token == state)
            .map(|(_, why)| LimitError::InputExpired { why });
        Err(expired.map_or(Untaken::Unknown, Untaken::Expired))
    }

    /// Cancels every parked call: the session ended.
    pub fn cancel_all(&self) {
        for (_, entry) in self.lock().calls.drain() {
            entry.timer.abort();
            entry.call.abandon();
        }
    }

    fn lock(&self) -> MutexGuard<'_, Waiting> {
        lock(&self.waiting)
    }
}

fn lock(waiting: &Mutex<Waiting>) -> MutexGuard<'_, Waiting> {
    waiting
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// At `deadline`, cancels the call parked under `state` if it is still parked, and
/// remembers why.
async fn expire(
    waiting: Weak<Mutex<Waiting>>,
    state: String,
    deadline: tokio::time::Instant,
    why: &'static str,
) {
    tokio::time::sleep_until(deadline).await;
    let Some(waiting) = waiting.upgrade() else {
        return;
    };
    let mut waiting = lock(&waiting);
    if let Some(entry) = waiting.calls.remove(&state) {
        tracing::info!("a call parked for input was cancelled: {why}");
        entry.call.abandon();
        if waiting.expired.len() == EXPIRED_KEPT {
            waiting.expired.pop_front();
        }
        waiting.expired.push_back((state, why));
    }
}
