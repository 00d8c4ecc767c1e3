//! The repeat-tool reminder (spec section Four): an advisory loop-breaker.
//!
//! Per downstream session it counts consecutive calls of the same tool with identical
//! normalized arguments (keys sorted at every level). At each configured threshold
//! (default 3, 5, 8) it attaches a reminder after the tool's own content — the first one
//! short, later ones detailed, quoting the arguments cut to `arguments_preview_chars`.
//! It never blocks or rewrites a call. Calls outside include/exclude are transparent:
//! they neither extend nor reset the chain. Rejected calls count too. The chains live in
//! the shared state (`crate::state`), so a session's chain is one across replicas; when
//! the state cannot be reached no reminder is attached (it is advice, never a reason to
//! fail a call). The chain is extended as the call starts (the stage's `prepare`), so
//! that with Redis the round trip overlaps the call instead of delaying its answer.
//!
//! ```toml
//! [reminder]
//! thresholds = [3, 5, 8]
//! include = []                 # globs; empty = every tool
//! exclude = ["mcp__todo__*"]
//! arguments_preview_chars = 500
//! ```

use std::sync::Arc;

use rmcp::model::JsonObject;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::config::ReminderSettings;
use crate::config::globs::glob_set;
use crate::pipeline::{
    AdditionalContext, BoxFuture, ContextSource, Invocation, PostDecision, PostExecute, Prepared,
    ToolOutcome,
};
use crate::state::SharedState;

const SOURCE: ContextSource = ContextSource {
    kind: "plugin",
    plugin: "repeat-tool-reminder",
};

pub struct RepeatReminder {
    thresholds: Vec<u32>,
    include: globset::GlobSet,
    exclude: globset::GlobSet,
    preview_chars: usize,
    /// Where each session's chain is kept: the last tracked call's key, and how many
    /// times in a row it was made.
    state: Arc<dyn SharedState>,
}

impl RepeatReminder {
    pub fn new(settings: &ReminderSettings, state: Arc<dyn SharedState>) -> Self {
        let mut thresholds = settings.thresholds.clone();
        thresholds.sort_unstable();
        thresholds.dedup();
        Self {
            thresholds,
            include: glob_set(&settings.include),
            exclude: glob_set(&settings.exclude),
            preview_chars: settings.arguments_preview_chars,
            state,
        }
    }

    fn tracks(&self, tool: &str) -> bool {
        (self.include.is_empty() || self.include.is_match(tool)) && !self.exclude.is_match(tool)
    }

    fn reminder(&self, tool: &str, count: u32, arguments: &str) -> String {
        if self.thresholds.first() == Some(&count) {
            return format!(
                "Reminder: you have called `{tool}` {count} times in a row with the same \
                 arguments. Re-read the last result before calling it again."
            );
        }
        format!(
            "Reminder: `{tool}` has now been called {count} consecutive times with identical \
             arguments: {}. Repeating it will not change the result. Re-read the last result, \
             then either change your approach or wrap up.",
            preview(arguments, self.preview_chars)
        )
    }
}

/// A call's place in its session's chain, extended as the call starts (the outcome does
/// not matter: rejected calls count too).
struct Extended {
    count: u32,
    arguments: String,
}

impl PostExecute for RepeatReminder {
    fn prepare<'a>(&'a self, invocation: &'a Invocation) -> BoxFuture<'a, Prepared> {
        Box::pin(async move {
            if !self.tracks(&invocation.tool) {
                return None;
            }
            let arguments = normalize(invocation.arguments_or_empty());
            let key = format!("{}\u{0}{arguments}", invocation.tool);
            match self.state.extend_chain(&invocation.session.id, &key).await {
                Ok(count) => Some(Box::new(Extended { count, arguments }) as _),
                Err(e) => {
                    tracing::warn!("repeat reminder skipped: {e}");
                    None
                }
            }
        })
    }

    fn post<'a>(
        &'a self,
        invocation: &'a Invocation,
        _outcome: &'a ToolOutcome,
        prepared: Prepared,
    ) -> BoxFuture<'a, PostDecision> {
        let decision = match prepared.and_then(|p| p.downcast::<Extended>().ok()) {
            Some(extended) if self.thresholds.contains(&extended.count) => {
                PostDecision::Attach(vec![AdditionalContext {
                    source: SOURCE,
                    text: self.reminder(&invocation.tool, extended.count, &extended.arguments),
                }])
            }
            _ => PostDecision::Pass,
        };
        Box::pin(std::future::ready(decision))
    }
}

/// JSON with object keys sorted at every level, so key order never matters.
fn normalize(arguments: &JsonObject) -> String {
    serde_json::to_string(&SortedMap(arguments)).unwrap_or_default()
}

/// Serializes a value with the keys of its objects sorted, at every level, without
/// copying it.
struct Sorted<'a>(&'a Value);

/// An object with its keys sorted, at every level.
struct SortedMap<'a>(&'a JsonObject);

impl Serialize for Sorted<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(map) => SortedMap(map).serialize(serializer),
            Value::Array(items) => serializer.collect_seq(items.iter().map(Sorted)),
            scalar => scalar.serialize(serializer),
        }
    }
}

impl Serialize for SortedMap<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut entries: Vec<_> = self.0.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        serializer.collect_map(entries.into_iter().map(|(k, v)| (k, Sorted(v))))
    }
}

/// The head of `text`, cut to `max` characters with a marker saying how many were left out.
fn preview(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_owned();
    }
    let head: String = text.chars().take(max).collect();
    format!("{head}… [{} more chars]", total - max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization_ignores_key_order() {
        let a = serde_json::json!({"b": 1, "a": {"y": 2, "x": [ {"q": 1, "p": 2} ]}});
        let b = serde_json::json!({"a": {"x": [ {"p": 2, "q": 1} ], "y": 2}, "b": 1});
        let object = |value: serde_json::Value| value.as_object().cloned().unwrap();
        assert_eq!(normalize(&object(a)), normalize(&object(b)));
        assert_eq!(
            normalize(&object(
                serde_json::json!({"b": [{"d": 1, "c": null}], "a": "x"})
            )),
            r#"{"a":"x","b":[{"c":null,"d":1}]}"#
        );
    }

    #[test]
    fn previews_are_head_cut_with_a_count() {
        assert_eq!(preview("abcdef", 3), "abc… [3 more chars]");
        assert_eq!(preview("abc", 3), "abc");
    }
}
