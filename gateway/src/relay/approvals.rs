//! Questions waiting for a person in the operator console (`/ui`).
//!
//! With `[gate] ask_fallback = "console"`, whatever needs a person's approval and cannot
//! ask the client (a gated tool call, an upstream's sampling or elicitation request) is
//! held here until someone answers it in the console or `[gate] ask_timeout_ms` passes.
//! The asker's own cancellation withdraws the question. What an unanswered question
//! becomes is the asker's business: [`Unanswered`] says why there is no approval.
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
use tokio_util::sync::CancellationToken;

use crate::redact::Masked;

/// What a question is about: who asks, for what, and why.
#[derive(Debug, Clone)]
pub struct Subject {
    /// The tool called, or what an upstream asks for (`sampling from `srv``).
    pub what: String,
    pub session: String,
    pub profile: String,
    pub reason: String,
    /// Shown with secrets masked.
    pub arguments: Value,
}

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

/// Why a held question brought no approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unanswered {
    /// Someone declined it in the console.
    Declined,
    /// Nobody answered within the timeout.
    TimedOut(Duration),
    /// The asker was cancelled while waiting.
    Cancelled,
}

impl Unanswered {
    /// The reason in words, for a denial's message; `what` names the subject.
    pub fn explain(self, what: &str, reason: &str) -> String {
        match self {
            Self::Declined => format!("`{what}` was declined in the operator console: {reason}"),
            Self::TimedOut(timeout) => format!(
                "`{what}` needs a person's approval ({reason}); nobody answered in the operator \
                 console within {} ms ([gate] ask_timeout_ms)",
                timeout.as_millis()
            ),
            Self::Cancelled => "cancelled while waiting for approval in the console".into(),
        }
    }
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

/// Removes its question when the asker stops waiting, however it stops.
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
    /// Holds `subject` until the console answers, `timeout` passes or `cancel` fires.
    /// `Ok` when approved.
    pub async fn hold(
        &self,
        subject: Subject,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<(), Unanswered> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let now = unix_ms(SystemTime::now());
        let question = PendingAsk {
            id,
            tool: subject.what,
            session: subject.session,
            profile: subject.profile,
            reason: subject.reason,
            arguments: serde_json::to_value(Masked(&subject.arguments)).unwrap_or_default(),
            asked_at_ms: now,
            deadline_ms: now + u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX / 2),
        };
        let (answer, answered) = oneshot::channel();
        self.lock().insert(id, Waiting { question, answer });
        self.version.send_modify(|v| *v += 1);
        let _withdraw = Withdraw { asks: self, id };
        tokio::select! {
            // A dropped sender means the question was removed unanswered: a refusal.
            answer = answered => match answer {
                Ok(true) => Ok(()),
                Ok(false) | Err(_) => Err(Unanswered::Declined),
            },
            () = tokio::time::sleep(timeout) => Err(Unanswered::TimedOut(timeout)),
            () = cancel.cancelled() => Err(Unanswered::Cancelled),
        }
    }

    /// The questions waiting now, oldest first.
    pub fn pending(&self) -> Vec<PendingAsk> {
        self.lock().values().map(|w| w.question.clone()).collect()
    }

    /// Answers question `id`: `approve` lets the asker go ahead, otherwise it is refused.
    pub fn answer(&self, id: u64, approve: bool) -> Result<(), AnswerError> {
        let waiting = self.lock().remove(&id).ok_or(AnswerError::NotPending(id))?;
        self.version.send_modify(|v| *v += 1);
        // The asker may have stopped waiting in the meantime; then nobody is listening.
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

    use super::*;

    fn subject(arguments: Value) -> Subject {
        Subject {
            what: "mcp__kv__delete".into(),
            session: "s1".into(),
            profile: "default".into(),
            reason: "deleting".into(),
            arguments,
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
    async fn an_approved_question_lets_the_asker_go_on_and_leaves() {
        let asks = Arc::new(ConsoleAsks::default());
        let cancel = CancellationToken::new();
        let asking = asks.hold(
            subject(json!({"key": "k", "api_key": "s3cret"})),
            Duration::from_secs(30),
            &cancel,
        );
        let answering = async {
            let question = pending(&asks).await;
            assert_eq!(question.tool, "mcp__kv__delete");
            assert_eq!(question.arguments, json!({"key": "k", "api_key": "***"}));
            asks.answer(question.id, true).unwrap();
            question.id
        };
        let (asked, id) = tokio::join!(asking, answering);
        assert_eq!(asked, Ok(()));
        assert!(asks.pending().is_empty());
        assert_eq!(asks.answer(id, true), Err(AnswerError::NotPending(id)));
    }

    #[tokio::test]
    async fn a_declined_question_is_refused() {
        let asks = ConsoleAsks::default();
        let cancel = CancellationToken::new();
        let answering = async {
            let question = pending(&asks).await;
            asks.answer(question.id, false).unwrap();
        };
        let (asked, ()) = tokio::join!(
            asks.hold(subject(json!({})), Duration::from_secs(30), &cancel),
            answering
        );
        assert_eq!(asked, Err(Unanswered::Declined));
    }

    #[tokio::test]
    async fn an_unanswered_question_times_out() {
        let asks = ConsoleAsks::default();
        let timeout = Duration::from_millis(50);
        let asked = asks
            .hold(subject(json!({})), timeout, &CancellationToken::new())
            .await;
        assert_eq!(asked, Err(Unanswered::TimedOut(timeout)));
        let said = Unanswered::TimedOut(timeout).explain("t", "r");
        assert!(said.contains("nobody answered"), "{said}");
        assert!(asks.pending().is_empty(), "the question is withdrawn");
    }

    #[tokio::test]
    async fn a_cancelled_asker_withdraws_its_question() {
        let asks = ConsoleAsks::default();
        let cancel = CancellationToken::new();
        let cancelling = async {
            pending(&asks).await;
            cancel.cancel();
        };
        let (asked, ()) = tokio::join!(
            asks.hold(subject(json!({})), Duration::from_secs(30), &cancel),
            cancelling
        );
        assert_eq!(asked, Err(Unanswered::Cancelled));
        assert!(asks.pending().is_empty());
    }
}
