//! The suite's 2025-11-25 tools that ask their client one question mid-call
//! (`test_sampling`, `test_elicitation` and its SEP-1034 and SEP-1330 forms), asked the way
//! the client's revision allows: on a session as a request of the server's own, on the
//! per-request lifecycle of 2026-07-28 in an `InputRequiredResult`, the tool completing
//! on the client's retry. Either way the tool answers the same text, so a client of
//! either revision (or a gateway bridging one to the other) sees one behaviour.

use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::{CallToolRequestParams, CreateMessageResult, ElicitResult};
use rmcp::service::RequestContext;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::fixtures::{argument, decode, defaults_form, enums_form, simple_form};
use crate::rounds::{self, Outcome, Round};

/// The key the question is asked under in an `InputRequiredResult`.
const KEY: &str = "question";

/// What a tool asks, and how its answer reads.
pub enum Question {
    /// `sampling/createMessage` with one user message.
    Sample { prompt: String },
    /// `elicitation/create` with a form; the answer is told under `label`.
    Elicit { form: Value, label: &'static str },
}

impl Question {
    /// The question the tool called in `request` asks, if it is one of these tools.
    pub fn of(request: &CallToolRequestParams) -> Option<Self> {
        Some(match request.name.as_ref() {
            "test_sampling" => Self::Sample {
                prompt: argument(request.arguments.as_ref(), "prompt").to_owned(),
            },
            "test_elicitation" => Self::Elicit {
                form: simple_form(argument(request.arguments.as_ref(), "message")),
                label: "User response",
            },
            "test_elicitation_sep1034_defaults" => Self::Elicit {
                form: defaults_form(),
                label: "Elicitation completed",
            },
            "test_elicitation_sep1330_enums" => Self::Elicit {
                form: enums_form(),
                label: "Elicitation completed",
            },
            _ => return None,
        })
    }

    /// Asks it on a session, as a request of the server's own; the tool's text.
    pub async fn ask(&self, context: &RequestContext<RoleServer>) -> Result<String, ErrorData> {
        Ok(match self {
            Self::Sample { .. } => {
                let answer = context.peer.create_message(decode(self.params())?).await;
                self.reply(answer.map_err(|e| e.to_string()))
            }
            Self::Elicit { .. } => {
                let answer = context
                    .peer
                    .create_elicitation(decode(self.params())?)
                    .await;
                self.reply(answer.map_err(|e| e.to_string()))
            }
        })
    }

    /// One round on the per-request lifecycle: the question, or the tool's text once the
    /// retry brought the answer.
    pub fn round(&self, round: &Round) -> Outcome {
        match self {
            Self::Sample { .. } => self.round_with::<CreateMessageResult>(round),
            Self::Elicit { .. } => self.round_with::<ElicitResult>(round),
        }
    }

    fn round_with<T: Answer>(&self, round: &Round) -> Outcome {
        match round.answer::<T>(KEY) {
            Some(answer) => Outcome::Complete(self.reply(Ok(answer))),
            None => rounds::ask(
                KEY,
                json!({"method": self.method(), "params": self.params()}),
            ),
        }
    }

    fn method(&self) -> &'static str {
        match self {
            Self::Sample { .. } => "sampling/createMessage",
            Self::Elicit { .. } => "elicitation/create",
        }
    }

    fn params(&self) -> Value {
        match self {
            Self::Sample { prompt } => json!({
                "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                "maxTokens": 100
            }),
            Self::Elicit { form, .. } => form.clone(),
        }
    }

    /// The tool's text for the client's answer, or for why there was none.
    fn reply<T: Answer>(&self, answer: Result<T, String>) -> String {
        match (self, answer) {
            (_, Ok(answer)) => answer.told(self),
            (Self::Sample { .. }, Err(e)) => format!("Sampling not supported or error: {e}"),
            (Self::Elicit { .. }, Err(e)) => format!("Elicitation not supported or error: {e}"),
        }
    }
}

/// A client's answer to a [`Question`].
trait Answer: DeserializeOwned {
    /// The tool's text for it.
    fn told(self, question: &Question) -> String;
}

impl Answer for CreateMessageResult {
    fn told(self, _: &Question) -> String {
        format!(
            "LLM response: {}",
            rounds::sampled_text(&self).unwrap_or_else(|| "No response".into())
        )
    }
}

impl Answer for ElicitResult {
    fn told(self, question: &Question) -> String {
        let label = match question {
            Question::Elicit { label, .. } => label,
            Question::Sample { .. } => "Answer",
        };
        format!(
            "{label}: action={}, content={}",
            serde_json::to_value(self.action)
                .ok()
                .and_then(|a| a.as_str().map(str::to_owned))
                .unwrap_or_default(),
            self.content.unwrap_or_else(|| json!({}))
        )
    }
}
