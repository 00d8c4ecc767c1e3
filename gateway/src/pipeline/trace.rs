//! The trace of one call: what each stage decided, told to result observers as it happens
//! (`ResultObserver::step`). The console shows it as the "pipeline trace" of a call; an
//! observer that does not care ignores it (the default does nothing, and nothing here
//! allocates unless an observer serializes a step).

use std::time::Duration;

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::error::ToolError;
use super::outcome::{ContextSource, GateDecision, PostDecision};

/// One stage's decision about one call, in pipeline order. It serializes as a JSON object
/// with a `stage` field, written straight from the borrowed parts: every call makes a few.
#[derive(Debug)]
pub enum Step<'a> {
    /// The gate waterfall's result: the first decision other than `Pass`, or `Pass`.
    Gate(&'a GateDecision),
    /// How an `ask` ended: `None` approved, else why not.
    Asked(Option<&'a ToolError>),
    /// The guards: `None` when all passed, else the refusal.
    Guards(Option<&'a str>),
    /// Argument validation: `None` when the arguments fit the input schema.
    Validated(Option<&'a ToolError>),
    /// One dispatch to the executor (retries dispatch again) and how it went.
    Dispatched {
        elapsed: Duration,
        error: Option<&'a ToolError>,
    },
    /// A post-execute decision other than `Pass`.
    Post(&'a PostDecision),
}

impl Serialize for Step<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self {
            Step::Gate(decision) => {
                let (name, reason) = gate_parts(decision);
                map.serialize_entry("stage", "gate")?;
                map.serialize_entry("decision", name)?;
                map.serialize_entry("reason", &reason)?;
            }
            Step::Asked(outcome) => {
                map.serialize_entry("stage", "ask")?;
                map.serialize_entry("approved", &outcome.is_none())?;
                map.serialize_entry("error", &outcome.map(StepError))?;
            }
            Step::Guards(refused) => {
                map.serialize_entry("stage", "guards")?;
                map.serialize_entry("refused", refused)?;
            }
            Step::Validated(outcome) => {
                map.serialize_entry("stage", "validate")?;
                map.serialize_entry("error", &outcome.map(StepError))?;
            }
            Step::Dispatched { elapsed, error } => {
                map.serialize_entry("stage", "dispatch")?;
                map.serialize_entry("elapsed_ms", &(elapsed.as_secs_f64() * 1000.0))?;
                map.serialize_entry("error", &error.map(StepError))?;
            }
            Step::Post(decision) => {
                map.serialize_entry("stage", "post")?;
                map.serialize_entry("decision", &PostShown::from(*decision))?;
            }
        }
        map.end()
    }
}

/// A step's failure: `{"code", "message"}`.
struct StepError<'a>(&'a ToolError);

impl Serialize for StepError<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("code", self.0.code.as_str())?;
        map.serialize_entry("message", &self.0.message)?;
        map.end()
    }
}

/// `allow`, `deny`, `ask` or `pass` (no gate decided), and the reason when there is one.
pub fn gate_parts(decision: &GateDecision) -> (&'static str, Option<&str>) {
    match decision {
        GateDecision::Pass => ("pass", None),
        GateDecision::Allow => ("allow", None),
        GateDecision::Deny { reason } => ("deny", Some(reason)),
        GateDecision::Ask { reason } => ("ask", Some(reason)),
    }
}

/// What a post-execute stage decided, as shown: a name, or `{"block": reason}` and
/// `{"attach": [source, ...]}`.
#[derive(serde::Serialize)]
enum PostShown<'a> {
    #[serde(rename = "pass")]
    Pass,
    #[serde(rename = "replace content")]
    ReplaceContent,
    #[serde(rename = "replace value")]
    ReplaceValue,
    #[serde(rename = "block")]
    Block(&'a str),
    #[serde(rename = "attach")]
    Attach(Vec<&'a ContextSource>),
}

impl<'a> From<&'a PostDecision> for PostShown<'a> {
    fn from(decision: &'a PostDecision) -> Self {
        match decision {
            PostDecision::Pass => PostShown::Pass,
            PostDecision::ReplaceContent(_) => PostShown::ReplaceContent,
            PostDecision::ReplaceValue(_) => PostShown::ReplaceValue,
            PostDecision::Block { reason } => PostShown::Block(reason),
            PostDecision::Attach(contexts) => {
                PostShown::Attach(contexts.iter().map(|c| &c.source).collect())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::pipeline::error::ErrorCode;
    use crate::pipeline::outcome::AdditionalContext;

    fn shown(step: Step<'_>) -> serde_json::Value {
        serde_json::to_value(step).unwrap()
    }

    /// The console's trace view (`describeStep` in `ui/assets/app.js`) reads these shapes.
    #[test]
    fn steps_serialize_as_the_console_reads_them() {
        let denied = GateDecision::Deny {
            reason: "no deletes".into(),
        };
        let error = ToolError::new(ErrorCode::InvalidArgs, "key is required");
        let attach = PostDecision::Attach(vec![AdditionalContext {
            source: ContextSource {
                kind: "reminder",
                plugin: "repeat",
            },
            text: "again?".into(),
        }]);
        let block = PostDecision::Block {
            reason: "leaks".into(),
        };
        let cases = [
            (
                Step::Gate(&denied),
                json!({"stage": "gate", "decision": "deny", "reason": "no deletes"}),
            ),
            (
                Step::Gate(&GateDecision::Pass),
                json!({"stage": "gate", "decision": "pass", "reason": null}),
            ),
            (
                Step::Asked(None),
                json!({"stage": "ask", "approved": true, "error": null}),
            ),
            (
                Step::Guards(Some("too many")),
                json!({"stage": "guards", "refused": "too many"}),
            ),
            (
                Step::Validated(Some(&error)),
                json!({"stage": "validate",
                       "error": {"code": "INVALID_ARGS", "message": "key is required"}}),
            ),
            (
                Step::Dispatched {
                    elapsed: Duration::from_micros(1500),
                    error: None,
                },
                json!({"stage": "dispatch", "elapsed_ms": 1.5, "error": null}),
            ),
            (
                Step::Post(&PostDecision::ReplaceContent(Vec::new())),
                json!({"stage": "post", "decision": "replace content"}),
            ),
            (
                Step::Post(&block),
                json!({"stage": "post", "decision": {"block": "leaks"}}),
            ),
            (
                Step::Post(&attach),
                json!({"stage": "post", "decision":
                       {"attach": [{"kind": "reminder", "plugin": "repeat"}]}}),
            ),
        ];
        for (step, expected) in cases {
            assert_eq!(shown(step), expected);
        }
    }
}
