//! The gateway's own tasks that run in this process: what stops each, where its
//! questions wait, and its record, which only one writer changes at a time.
//!
//! A task's record lives in the shared state; the work lives here, on the replica that
//! took the call. `tasks/update` and `tasks/cancel` that reach another replica are left
//! for this one as [`Message`]s in the shared state, which it takes while the task runs
//! (every `[tasks] poll_interval_ms`); the other replica writes what they change in the
//! record at once. Once this replica's lease lapsed, any other marks its tasks failed
//! (see `server::core::tasks`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::model::InputResponses;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::TaskRecord;
use crate::relay::inputs::Inputs;

/// What another replica asks of the one running a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Message {
    /// `tasks/update`: the client's answers to the task's questions.
    Answer(InputResponses),
    /// `tasks/cancel`.
    Cancel,
}

/// One task running here.
pub struct RunningTask {
    /// Cancels the task's call.
    pub cancel: CancellationToken,
    /// The call's open questions, which `tasks/update` answers.
    pub inputs: Arc<Inputs>,
    /// The task's record as last written: changed under this lock, then written.
    pub record: tokio::sync::Mutex<TaskRecord>,
    /// Set by `tasks/cancel`: however the call ends now, the task is cancelled.
    cancelled: AtomicBool,
}

impl RunningTask {
    pub fn new(cancel: CancellationToken, inputs: Arc<Inputs>, record: TaskRecord) -> Self {
        Self {
            cancel,
            inputs,
            record: tokio::sync::Mutex::new(record),
            cancelled: AtomicBool::new(false),
        }
    }

    /// Stops the task (`tasks/cancel`, or its TTL passed): it ends cancelled, however
    /// its call ends ([`Self::stop_call`]).
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
        self.stop_call();
    }

    /// Cancels the task's call and gives up its open questions (whatever waits for an
    /// answer, such as an upstream's request, is answered with an error); the task ends as
    /// whoever stopped it says.
    pub fn stop_call(&self) {
        self.cancel.cancel();
        self.inputs.close();
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }
}

/// The tasks running in this process, by id.
#[derive(Default)]
pub struct Running {
    tasks: Mutex<HashMap<String, Arc<RunningTask>>>,
}

impl Running {
    pub fn insert(&self, id: String, task: Arc<RunningTask>) {
        self.lock().insert(id, task);
    }

    pub fn get(&self, id: &str) -> Option<Arc<RunningTask>> {
        self.lock().get(id).cloned()
    }

    /// The task has settled: nothing here runs for it any more.
    pub fn remove(&self, id: &str) {
        self.lock().remove(id);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<RunningTask>>> {
        self.tasks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
