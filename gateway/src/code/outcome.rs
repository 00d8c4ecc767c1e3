//! What a run gives back: the logs it printed, its JSON result, and, when it did not
//! finish normally, one failure with a kind from a small, stable taxonomy.
//!
//! The kinds are orthogonal: exactly one describes why a run stopped. The gateway maps a
//! failure to `CODE_RUN_FAILED` with `kind` = [`FailureKind::as_str`].

use serde_json::Value;

/// Why a run did not complete with a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// The program is not valid TypeScript, or uses syntax that cannot simply be erased.
    Parse,
    /// The program threw, rejected, or completed with a value that is not lossless JSON.
    Exception,
    /// The worker used more CPU time than `compute_ms`.
    Compute,
    /// The run took longer than `max_wall_ms`.
    Wall,
    /// Logs plus result exceeded `max_output_bytes`.
    Output,
    /// The program exceeded the engine's heap limit (`heap_mb`).
    Heap,
    /// The caller cancelled the run, or the runtime shut down.
    Aborted,
    /// `max_concurrent_runs` programs were running already: the run never started.
    Busy,
    /// The worker process died or broke the bridge protocol.
    Died,
}

impl FailureKind {
    /// The stable name of this kind, as it appears in `CODE_RUN_FAILED` results.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Parse => "parse",
            FailureKind::Exception => "exception",
            FailureKind::Compute => "compute",
            FailureKind::Wall => "wall",
            FailureKind::Output => "output",
            FailureKind::Heap => "heap",
            FailureKind::Aborted => "aborted",
            FailureKind::Busy => "busy",
            FailureKind::Died => "died",
        }
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One failed run: its kind and a message for the model (with `line:column` in the
/// model's own code where a position is known).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct CodeRunFailure {
    pub kind: FailureKind,
    pub message: String,
}

impl CodeRunFailure {
    pub(crate) fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

/// The outcome of one run. `failure` is `None` when the program completed; `result` is
/// `None` when it completed with `undefined` (or did not complete).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunOutcome {
    /// Console output, one entry per `console.*` call, in the order it was printed.
    pub logs: Vec<String>,
    /// The program's completion value.
    pub result: Option<Value>,
    /// Why the run stopped early, if it did.
    pub failure: Option<CodeRunFailure>,
    /// Image contents taken out of sub-call results, in call order.
    pub attachments: Vec<Value>,
}

impl RunOutcome {
    pub(crate) fn failed(failure: CodeRunFailure) -> Self {
        Self {
            failure: Some(failure),
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_have_stable_names() {
        let names: Vec<&str> = [
            FailureKind::Parse,
            FailureKind::Exception,
            FailureKind::Compute,
            FailureKind::Wall,
            FailureKind::Output,
            FailureKind::Heap,
            FailureKind::Aborted,
            FailureKind::Busy,
            FailureKind::Died,
        ]
        .into_iter()
        .map(FailureKind::as_str)
        .collect();
        assert_eq!(
            names,
            [
                "parse",
                "exception",
                "compute",
                "wall",
                "output",
                "heap",
                "aborted",
                "busy",
                "died"
            ]
        );
    }

    #[test]
    fn failure_displays_kind_and_message() {
        let failure = CodeRunFailure::new(FailureKind::Parse, "1:1: nope");
        assert_eq!(failure.to_string(), "parse: 1:1: nope");
    }
}
