//! `ask`: putting a gated call in front of a person through MCP elicitation.
//!
//! The question goes to the client that made the call. Accept lets the call proceed;
//! decline or cancel is DENIED. A client that did not declare the elicitation capability
//! cannot be asked: the configured fallback applies (allow, deny, or a question in the
//! operator console, [`crate::relay::approvals`]), and a denial says why.

use std::collections::BTreeMap;

use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};

use super::PipelineSettings;
use super::error::{ErrorCode, ToolError};
use super::invocation::Invocation;
use crate::config::AskFallback;
use crate::relay::approvals::{Subject, Unanswered};
use crate::relay::requests::elicit;

/// How much of the arguments the question quotes.
const ARGUMENTS_SUMMARY_CHARS: usize = 300;

/// Asks the caller's person whether `invocation` may run.
pub async fn ask(
    invocation: &Invocation,
    reason: &str,
    settings: &PipelineSettings,
) -> Result<(), ToolError> {
    let denied = |message: String| Err(ToolError::new(ErrorCode::Denied, message));
    let caller = invocation
        .caller
        .as_ref()
        .filter(|caller| caller.link.capabilities().elicitation.is_some());
    let Some(caller) = caller else {
        return match settings.ask_fallback {
            AskFallback::Allow => Ok(()),
            AskFallback::Console => {
                let subject = Subject {
                    what: invocation.tool.clone(),
                    session: invocation.session.id.clone(),
                    profile: invocation.session.profile.name.clone(),
                    reason: reason.to_owned(),
                    arguments: invocation.arguments_value(),
                };
                let held = settings
                    .console_asks
                    .hold(subject, settings.ask_timeout, &invocation.cancel)
                    .await;
                held.map_err(|unanswered| {
                    let code = match unanswered {
                        Unanswered::Cancelled => ErrorCode::AbortedBeforeDispatch,
                        Unanswered::Declined | Unanswered::TimedOut(_) => ErrorCode::Denied,
                    };
                    ToolError::new(code, unanswered.explain(&invocation.tool, reason))
                })
            }
            AskFallback::Deny => denied(format!(
                "`{}` needs a person's approval ({reason}), but this client cannot be asked \
                 (it does not support elicitation); [gate] ask_fallback is deny",
                invocation.tool
            )),
        };
    };
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: question(invocation, reason),
        requested_schema: ElicitationSchema::new(BTreeMap::new()),
    };
    let answer = elicit(caller, params, &invocation.cancel).await;
    if invocation.cancel.is_cancelled() {
        return Err(ToolError::new(
            ErrorCode::AbortedBeforeDispatch,
            "cancelled while waiting for approval",
        ));
    }
    match answer {
        Ok(result) if result.action == ElicitationAction::Accept => Ok(()),
        Ok(result) => denied(format!(
            "`{}` was not approved ({:?}): {reason}",
            invocation.tool, result.action
        )),
        Err(why) => denied(format!(
            "`{}` needs approval ({reason}), but {why}",
            invocation.tool
        )),
    }
}

fn question(invocation: &Invocation, reason: &str) -> String {
    let arguments = invocation.arguments_value().to_string();
    let summary: String = arguments.chars().take(ARGUMENTS_SUMMARY_CHARS).collect();
    let cut = if summary.len() < arguments.len() {
        " …"
    } else {
        ""
    };
    format!(
        "Allow the tool call `{}`?\nReason: {reason}\nArguments: {summary}{cut}",
        invocation.tool
    )
}
