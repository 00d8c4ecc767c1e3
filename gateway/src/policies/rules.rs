//! The `[[policy]]` gate: glob rules over federated tool names, first match wins.
//!
//! ```toml
//! [[policy]]
//! tool = "mcp__fs__write_*"
//! decision = "ask"                 # allow | deny | ask
//! reason = "writes need a person"
//! ```

use crate::config::{PolicyRule, RuleDecision};
use crate::pipeline::{BoxFuture, Gate, GateDecision, Invocation};

pub struct RuleGate {
    rules: Vec<(globset::GlobMatcher, RuleDecision, String)>,
}

impl RuleGate {
    pub fn new(rules: &[PolicyRule]) -> Self {
        let rules = rules
            .iter()
            .filter_map(|rule| {
                let matcher = globset::Glob::new(&rule.tool).ok()?.compile_matcher();
                let reason = rule
                    .reason
                    .clone()
                    .unwrap_or_else(|| format!("policy rule `{}`", rule.tool));
                Some((matcher, rule.decision, reason))
            })
            .collect();
        Self { rules }
    }

    /// The decision of the first rule matching `tool`, or `Pass` when none does.
    pub fn decision_for(&self, tool: &str) -> GateDecision {
        let Some((_, decision, reason)) = self.rules.iter().find(|(m, _, _)| m.is_match(tool))
        else {
            return GateDecision::Pass;
        };
        match decision {
            RuleDecision::Allow => GateDecision::Allow,
            RuleDecision::Deny => GateDecision::Deny {
                reason: reason.clone(),
            },
            RuleDecision::Ask => GateDecision::Ask {
                reason: reason.clone(),
            },
        }
    }
}

impl Gate for RuleGate {
    fn decide<'a>(&'a self, invocation: &'a Invocation) -> BoxFuture<'a, GateDecision> {
        let decision = self.decision_for(&invocation.tool);
        Box::pin(std::future::ready(decision))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_matching_rule_wins() {
        let rule = |tool: &str, decision| PolicyRule {
            tool: tool.into(),
            decision,
            reason: None,
        };
        let gate = RuleGate::new(&[
            rule("mcp__fs__read_*", RuleDecision::Allow),
            rule("mcp__fs__*", RuleDecision::Deny),
        ]);
        assert_eq!(gate.decision_for("mcp__fs__read_file"), GateDecision::Allow);
        assert!(matches!(
            gate.decision_for("mcp__fs__write_file"),
            GateDecision::Deny { .. }
        ));
        assert_eq!(gate.decision_for("mcp__kv__get"), GateDecision::Pass);
    }
}
