//! The trace of one call: what each stage decided, told to result observers as it happens
//! (`ResultObserver::step`). The console shows it as the "pipeline trace" of a call; an
//! observer that does not care ignores it (the default does nothing, and nothing here
//! allocates unless an observer turns a step into JSON).

use std::time::Duration;

use serde_json::{Value, json};

use super::error::ToolError;
use super::stages::{GateDecision, PostDecision};

/// One stage's decision about one call, in pipeline order.
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

impl Step<'_> {
    /// The step as a JSON object with a `stage` field.
    pub fn to_json(&self) -> Value {
        let error = |e: Option<&ToolError>| {
            e.map_or(
                Value::Null,
                |e| json!({"code": e.code.as_str(), "message": e.message}),
            )
        };
        match self {
            Step::Gate(decision) => {
                let (name, reason) = gate_parts(decision);
                json!({"stage": "gate", "decision": name, "reason": reason})
            }
            Step::Asked(outcome) => json!({
                "stage": "ask",
                "approved": outcome.is_none(),
                "error": error(*outcome),
            }),
            Step::Guards(refused) => json!({"stage": "guards", "refused": refused}),
            Step::Validated(outcome) => json!({"stage": "validate", "error": error(*outcome)}),
            Step::Dispatched { elapsed, error: e } => json!({
                "stage": "dispatch",
                "elapsed_ms": elapsed.as_secs_f64() * 1000.0,
                "error": error(*e),
            }),
            Step::Post(decision) => json!({"stage": "post", "decision": post_name(decision)}),
        }
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

fn post_name(decision: &PostDecision) -> Value {
    match decision {
        PostDecision::Pass => json!("pass"),
        PostDecision::ReplaceContent(_) => json!("replace content"),
        PostDecision::ReplaceValue(_) => json!("replace value"),
        PostDecision::Block { reason } => json!({"block": reason}),
        PostDecision::Attach(contexts) => json!({
            "attach": contexts.iter().map(|c| &c.source).collect::<Vec<_>>()
        }),
    }
}
