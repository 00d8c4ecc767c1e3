//! Questions waiting for a person in the operator console (`/ui`).
//!
//! With `[gate] ask_fallback = "console"`, a gated call whose client cannot elicit is held
//! here until someone answers it in the console or `[gate] ask_timeout_ms` passes (then it
//! is DENIED, saying nobody answered). The call's own cancellation withdraws the question.
//!
//! ```toml
//! [gate]
//! ask_fallback = "console"
//! ask_timeout_ms = 120000
//! ```
//!
//! [`ConsoleAsks`] outlives configuration reloads (the gateway owns one), so a question
//! asked under the old pipeline can still be answered after a reload.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::Value;
use tokio::sync::{oneshot, watch};

use super::error::{ErrorCode, ToolError};
use super::invocation::Invocation;
use crate::redact::Masked;

/// A question as the console shows it. Arguments are shown with secrets masked.
#[derive(Debug, Clone, Serialize)]
pub struct PendingAsk {
    pub id: u64,
    pub tool: String,
    pub session: String,
    pub profile: String,
    pub reason: String,
    pub arguments: Value,
    /// Unix milliseconds.
    pub asked_at_ms: u64,
    pub deadline_ms: u64,
}

/// Why an answer was not taken.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AnswerError {
    #[error("no question {0} is waiting (answered, timed out or withdrawn)")]
    NotPending(u64),
}

impl AnswerError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotPending(_) => "ASK_NOT_PENDING",
        }
    }
}

struct Waiting {
    question: PendingAsk,
    answer: oneshot::Sender<bool>,
}

/// The questions waiting in the console. Shared with `Arc`.
#[derive(Default)]
pub struct ConsoleAsks {
    next_id: AtomicU64,
    waiting: Mutex<BTreeMap<u64, Waiting>>,
    /// Bumped whenever a question arrives or leaves, so the console can wait for changes.
    version: watch::Sender<u64>,
}

impl std::fmt::Debug for ConsoleAsks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleAsks")
            .field("waiting", &self.lock().len())
            .finish()
    }
}

/// Removes its question when the asking call ends, however it ends.
struct Withdraw<'a> {
    asks: &'a ConsoleAsks,
    id: u64,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if self.asks.lock().remove(&self.id).is_some() {
            self.asks.version.send_modify(|v| *v += 1);
        }
    }
}

impl ConsoleAsks {
    /// Holds `invocation` until the console answers, `timeout` passes or the call is
    /// cancelled. `Ok` when approved.
    pub async fn ask(
        &self,
        invocation: &Invocation,
        reason: &str,
        timeout: Duration,
    ) -> Result<(), ToolError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let now = unix_ms(SystemTime::now());
        let arguments =
            serde_json::to_value(Masked(&invocation.arguments_value())).unwrap_or_default();
        let question = PendingAsk {
            id,
            tool: invocation.tool.clone(),
            session: invocation.session.id.clone(),
            profile: invocation.session.profile.name.clone(),
            reason: reason.to_owned(),
            arguments,
            asked_at_ms: now,
            deadline_ms: now + u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX / 2),
        };
        let (answer, answered) = oneshot::channel();
        self.lock().insert(id, Waiting { question, answer });
        self.version.send_modify(|v| *v += 1);
        let _withdraw = Withdraw { asks: self, id };
        let denied = |message: String| Err(ToolError::new(ErrorCode::Denied, message));
        tokio::select! {
            answer = answered => match answer {
                Ok(true) => Ok(()),
                Ok(false) => denied(format!(
                    "`{}` was declined in the operator console: {reason}",
                    invocation.tool
                )),
                Err(_) => denied(format!("`{}`: the console question was dropped", invocation.tool)),
            },
            () = tokio::time::sleep(timeout) => denied(format!(
                "`{}` needs a person's approval ({reason}); nobody answered in the operator \
                 console within {} ms ([gate] ask_timeout_ms)",
                invocation.tool,
                timeout.as_millis()
            )),
            () = invocation.cancel.cancelled() => Err(ToolError::new(
                ErrorCode::AbortedBeforeDispatch,
                "cancelled while waiting for approval in the console",
            )),
        }
    }

    /// The questions waiting now, oldest first.
    pub fn pending(&self) -> Vec<PendingAsk> {
        self.lock().values().map(|w| w.question.clone()).collect()
    }

    /// Answers question `id`: `approve` lets the call run, otherwise it is DENIED.
    pub fn answer(&self, id: u64, approve: bool) -> Result<(), AnswerError> {
        let waiting = self.lock().remove(&id).ok_or(AnswerError::NotPending(id))?;
        self.version.send_modify(|v| *v += 1);
        // The call may have ended in the meantime; then nobody is listening.
        waiting
            .answer
            .send(approve)
            .map_err(|_| AnswerError::NotPending(id))
    }

    /// A receiver that changes whenever a question arrives or leaves.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Waiting>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Milliseconds since the Unix epoch (0 before it).
pub fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::config::Config;
    use crate::pipeline::{Origin, Session};
    use crate::registry::profile::Profiles;

    fn invocation(arguments: Value) -> Invocation {
        let profile = Profiles::new(&Config::default()).get(None).unwrap();
        Invocation {
            session: Arc::new(Session::new("s1".into(), profile, None)),
            tool: "mcp__kv__delete".into(),
            arguments: arguments.as_object().cloned(),
            target: None,
            cancel: CancellationToken::new(),
            progress: None,
            peer: None,
            origin: Origin::Client,
            started: std::time::Instant::now(),
        }
    }

    /// Waits until one question is pending and returns it.
    async fn pending(asks: &ConsoleAsks) -> PendingAsk {
        let mut changes = asks.watch();
        loop {
            if let Some(question) = asks.pending().pop() {
                return question;
            }
            changes.changed().await.unwrap();
        }
    }

    #[tokio::test]
    async fn an_approved_question_lets_the_call_run_and_leaves() {
        let asks = Arc::new(ConsoleAsks::default());
        let call = invocation(json!({"key": "k", "api_key": "s3cret"}));
        let asking = asks.ask(&call, "deleting", Duration::from_secs(30));
        let answering = async {
            let question = pending(&asks).await;
            assert_eq!(question.tool, "mcp__kv__delete");
            assert_eq!(question.arguments, json!({"key": "k", "api_key": "***"}));
            asks.answer(question.id, true).unwrap();
            question.id
        };
        let (asked, id) = tokio::join!(asking, answering);
        assert!(asked.is_ok());
        assert!(asks.pending().is_empty());
        assert_eq!(asks.answer(id, true), Err(AnswerError::NotPending(id)));
    }

    #[tokio::test]
    async fn a_declined_question_is_denied() {
        let asks = ConsoleAsks::default();
        let call = invocation(json!({}));
        let answering = async {
            let question = pending(&asks).await;
            asks.answer(question.id, false).unwrap();
        };
        let (asked, ()) = tokio::join!(asks.ask(&call, "r", Duration::from_secs(30)), answering);
        let error = asked.unwrap_err();
        assert_eq!(error.code, ErrorCode::Denied);
        assert!(error.message.contains("declined"), "{}", error.message);
    }

    #[tokio::test]
    async fn an_unanswered_question_times_out_as_denied() {
        let asks = ConsoleAsks::default();
        let call = invocation(json!({}));
        let error = asks
            .ask(&call, "r", Duration::from_millis(50))
            .await
            .unwrap_err();
        assert_eq!(error.code, ErrorCode::Denied);
        assert!(
            error.message.contains("nobody answered"),
            "{}",
            error.message
        );
        assert!(asks.pending().is_empty(), "the question is withdrawn");
    }

    #[tokio::test]
    async fn a_cancelled_call_withdraws_its_question() {
        let asks = ConsoleAsks::default();
        let call = invocation(json!({}));
        let cancelling = async {
            pending(&asks).await;
            call.cancel.cancel();
        };
        let (asked, ()) = tokio::join!(asks.ask(&call, "r", Duration::from_secs(30)), cancelling);
        assert_eq!(asked.unwrap_err().code, ErrorCode::AbortedBeforeDispatch);
        assert!(asks.pending().is_empty());
    }
}
