//! Calls that wait for input their client was asked for, between the client's rounds of
//! a multi round-trip request (protocol 2026-07-28), because the call is still running
//! when its request is answered with `InputRequiredResult`.
//!
//! A parked call is known by the `requestState` its client was given: a random token,
//! which the client sends back unchanged with its answers. A token names nothing once
//! its call was taken up again, and a call nobody takes up within [`PARKED_FOR`] is
//! cancelled (its upstream is told) and forgotten. Parked calls live in the process that
//! runs them: with replicas, the client's next round must reach the same replica.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rmcp::ErrorData;
use rmcp::model::ServerResult;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::relay::ClientLink;
use crate::relay::inputs::Inputs;

/// How long a call waits for its client's next round before it is cancelled.
pub const PARKED_FOR: Duration = Duration::from_secs(300);

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
}

/// The parked calls of one client session.
#[derive(Default)]
pub struct Parked {
    calls: Mutex<HashMap<String, (ParkedCall, Instant)>>,
}

impl Parked {
    /// Parks `call`; the `requestState` that takes it up again.
    pub fn park(&self, call: ParkedCall) -> String {
        let state = uuid::Uuid::new_v4().simple().to_string();
        let mut calls = self.lock();
        calls.retain(|_, (call, parked)| {
            let waiting = parked.elapsed() < PARKED_FOR;
            if !waiting {
                call.cancel.cancel();
            }
            waiting
        });
        calls.insert(state.clone(), (call, Instant::now()));
        state
    }

    /// The call `state` names, taken up again; `None` when it names none (expired, taken
    /// up already, or not the gateway's).
    pub fn take(&self, state: &str) -> Option<ParkedCall> {
        self.lock().remove(state).map(|(call, _)| call)
    }

    /// Cancels every parked call: the session ended.
    pub fn cancel_all(&self) {
        for (_, (call, _)) in self.lock().drain() {
            call.cancel.cancel();
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, (ParkedCall, Instant)>> {
        self.calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
