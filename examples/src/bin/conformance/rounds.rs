//! The multi round-trip tools and prompt of 2026-07-28 (`InputRequiredResult`, SEP-2322).
//!
//! On 2026-07-28 a server may not send the client requests of its own mid-call; instead it
//! answers with `resultType: "input_required"`, the requests it needs answered
//! (`inputRequests`, keyed) and optionally a `requestState`, and the client retries the same
//! call with `inputResponses` under the same keys and the state echoed. Each tool here is one
//! function from what the retry brought ([`Round`]) to what it comes to ([`Outcome`]): the
//! names, keys, messages and texts are those of the suite's `input-required-result-*`
//! scenarios and its reference server. Every state is sealed ([`Sealer`]): a retry whose
//! state does not open is refused with `-32602` before any tool sees it. A request for
//! input the client did not declare a capability for is refused with `-32021`, since a
//! server must not rely on capabilities the client has not declared.

use rmcp::ErrorData;
use rmcp::model::{
    ClientCapabilities, CreateMessageResult, ElicitResult, ElicitationAction, InputRequests,
    InputRequiredResult, InputResponses, ListRootsResult,
};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::fixtures::decode;
use crate::request_state::Sealer;

/// What a retry brought: the client's answers, the state it echoed (opened), and the
/// capabilities it declared on this request.
pub struct Round<'a> {
    responses: InputResponses,
    state: Option<Value>,
    capabilities: ClientCapabilities,
    sealer: &'a Sealer,
}

/// What one round of a multi round-trip call comes to.
pub enum Outcome {
    /// The client must answer these requests and retry.
    NeedsInput(Ask),
    /// The call is complete; its text.
    Complete(String),
}

/// The requests a round needs answered, keyed, and the state the retry must bring back.
pub struct Ask {
    requests: Map<String, Value>,
    state: Option<Value>,
}

/// What a round of a round-trip tool comes to.
pub type Tool = fn(&Round) -> Result<Outcome, ErrorData>;

/// The multi round-trip tools, and the probe of a capability the client may not have
/// declared: name, description (as `tools/list` shows it), what a round comes to.
const TOOLS: &[(&str, &str, Tool)] = &[
    (
        "test_missing_capability",
        "Test tool requiring sampling",
        needs_sampling,
    ),
    (
        "test_input_required_result_elicitation",
        "MRTR: returns InputRequiredResult with elicitation request",
        greet,
    ),
    (
        "test_input_required_result_sampling",
        "MRTR: returns InputRequiredResult with sampling request",
        ask_the_capital,
    ),
    (
        "test_input_required_result_list_roots",
        "MRTR: returns InputRequiredResult with roots/list request",
        count_roots,
    ),
    (
        "test_input_required_result_request_state",
        "MRTR: returns InputRequiredResult with requestState",
        |round| confirm(round, "request-state", "state-ok: requestState validated"),
    ),
    (
        "test_input_required_result_multiple_inputs",
        "MRTR: returns InputRequiredResult with multiple input requests",
        ask_three_ways,
    ),
    (
        "test_input_required_result_multi_round",
        "MRTR: multi-round InputRequiredResult workflow",
        two_steps,
    ),
    (
        "test_input_required_result_tampered_state",
        "MRTR: HMAC-signed requestState integrity test",
        |round| confirm(round, "tamper-test", "integrity-ok: state verified"),
    ),
    (
        "test_input_required_result_capabilities",
        "MRTR: respects client capabilities in inputRequests",
        ask_what_is_declared,
    ),
];

/// The multi round-trip prompt.
pub const PROMPT: &str = "test_input_required_result_prompt";

/// The round-trip tool called `name`, if there is one.
pub fn tool(name: &str) -> Option<Tool> {
    TOOLS
        .iter()
        .find(|(tool, _, _)| *tool == name)
        .map(|(_, _, run)| *run)
}

/// Every round-trip tool's name and description.
pub fn listed() -> impl Iterator<Item = (&'static str, &'static str)> {
    TOOLS
        .iter()
        .map(|(name, description, _)| (*name, *description))
}

impl<'a> Round<'a> {
    /// Opens a retry; a state that does not open is the client's error (`-32602`).
    pub fn open(
        responses: Option<InputResponses>,
        state: Option<&str>,
        capabilities: ClientCapabilities,
        sealer: &'a Sealer,
    ) -> Result<Self, ErrorData> {
        let refused = || ErrorData::invalid_params("requestState failed its integrity check", None);
        let state = state
            .map(|sealed| sealer.open(sealed).ok_or_else(refused))
            .transpose()?;
        Ok(Self {
            responses: responses.unwrap_or_default(),
            state,
            capabilities,
            sealer,
        })
    }

    /// The response `outcome` comes to: `complete` makes the complete one from its text.
    pub fn settle<R: From<InputRequiredResult>>(
        &self,
        outcome: Outcome,
        complete: impl FnOnce(String) -> Result<R, ErrorData>,
    ) -> Result<R, ErrorData> {
        match outcome {
            Outcome::Complete(text) => complete(text),
            Outcome::NeedsInput(ask) => self.input_required(ask).map(R::from),
        }
    }

    fn input_required(&self, ask: Ask) -> Result<InputRequiredResult, ErrorData> {
        let missing: Map<String, Value> = ask
            .requests
            .values()
            .filter_map(Capability::needed_by)
            .filter(|capability| !capability.declared_in(&self.capabilities))
            .map(|capability| (capability.key().to_owned(), json!({})))
            .collect();
        if !missing.is_empty() {
            return Err(ErrorData::missing_required_client_capability(decode(
                Value::Object(missing),
            )?));
        }
        let requests: InputRequests = decode(Value::Object(ask.requests))?;
        let state = ask.state.map(|state| self.sealer.seal(&state));
        Ok(InputRequiredResult::new(Some(requests), state))
    }

    /// The client's answer under `key`, if it is a well-formed `T`.
    pub fn answer<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        serde_json::from_value(self.responses.get(key)?.clone()).ok()
    }

    /// The accepted form under `key`.
    fn form(&self, key: &str) -> Option<Map<String, Value>> {
        let answer: ElicitResult = self.answer(key)?;
        match (answer.action, answer.content) {
            (ElicitationAction::Accept, Some(Value::Object(content))) => Some(content),
            _ => None,
        }
    }

    fn form_text(&self, key: &str, field: &str) -> Option<String> {
        self.form(key)?.get(field)?.as_str().map(str::to_owned)
    }

    fn sampled(&self, key: &str) -> Option<String> {
        sampled_text(&self.answer(key)?)
    }

    fn root_count(&self, key: &str) -> Option<usize> {
        self.answer::<ListRootsResult>(key)
            .map(|roots| roots.roots.len())
    }

    fn state_field(&self, name: &str) -> Option<&Value> {
        self.state.as_ref()?.get(name)
    }
}

impl Ask {
    fn new<const N: usize>(requests: [(&str, Value); N]) -> Self {
        Self {
            requests: requests
                .into_iter()
                .map(|(key, request)| (key.to_owned(), request))
                .collect(),
            state: None,
        }
    }

    fn with_state(mut self, state: Value) -> Self {
        self.state = Some(state);
        self
    }
}

/// A round that needs `request` answered under `key`.
pub fn ask(key: &str, request: Value) -> Outcome {
    Ask::new([(key, request)]).into()
}

impl From<Ask> for Outcome {
    fn from(ask: Ask) -> Self {
        Self::NeedsInput(ask)
    }
}

/// The text of a sampling answer, if it is text.
pub fn sampled_text(answer: &CreateMessageResult) -> Option<String> {
    let content = serde_json::to_value(&answer.message.content).ok()?;
    content.get("text")?.as_str().map(str::to_owned)
}

/// A client capability an input request needs.
#[derive(Clone, Copy)]
enum Capability {
    Elicitation,
    Sampling,
    Roots,
}

impl Capability {
    fn needed_by(request: &Value) -> Option<Self> {
        match request.get("method")?.as_str()? {
            "elicitation/create" => Some(Self::Elicitation),
            "sampling/createMessage" => Some(Self::Sampling),
            "roots/list" => Some(Self::Roots),
            _ => None,
        }
    }

    fn declared_in(self, capabilities: &ClientCapabilities) -> bool {
        match self {
            Self::Elicitation => capabilities.elicitation.is_some(),
            Self::Sampling => capabilities.sampling.is_some(),
            Self::Roots => capabilities.roots.is_some(),
        }
    }

    /// Its key in `ClientCapabilities`.
    fn key(self) -> &'static str {
        match self {
            Self::Elicitation => "elicitation",
            Self::Sampling => "sampling",
            Self::Roots => "roots",
        }
    }
}

/// An `elicitation/create` request for one required field.
fn elicit(message: &str, field: &str, kind: &str) -> Value {
    json!({"method": "elicitation/create", "params": {
        "message": message,
        "requestedSchema": {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    }})
}

/// A `sampling/createMessage` request for one user message.
fn sample(text: &str, max_tokens: u32) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "maxTokens": max_tokens
    }})
}

fn list_roots() -> Value {
    json!({"method": "roots/list", "params": {}})
}

/// `test_input_required_result_elicitation`: asks for a name (`user_name`), then greets it.
pub fn greet(round: &Round) -> Result<Outcome, ErrorData> {
    Ok(match round.form_text("user_name", "name") {
        Some(name) => Outcome::Complete(format!("Hello, {name}!")),
        None => Ask::new([("user_name", elicit("What is your name?", "name", "string"))]).into(),
    })
}

fn ask_the_capital(round: &Round) -> Result<Outcome, ErrorData> {
    Ok(match round.sampled("sample_request") {
        Some(text) => Outcome::Complete(format!("Sampling result: {text}")),
        None => Ask::new([(
            "sample_request",
            sample("What is the capital of France?", 100),
        )])
        .into(),
    })
}

fn count_roots(round: &Round) -> Result<Outcome, ErrorData> {
    Ok(match round.root_count("roots_request") {
        Some(count) => Outcome::Complete(format!("Found {count} root(s)")),
        None => Ask::new([("roots_request", list_roots())]).into(),
    })
}

/// Asks for a confirmation with a state of `kind`; complete once both come back.
fn confirm(round: &Round, kind: &str, done: &str) -> Result<Outcome, ErrorData> {
    let confirmed = round
        .form("confirm")
        .is_some_and(|form| form.get("ok") == Some(&Value::Bool(true)));
    Ok(
        if confirmed && round.state_field("kind") == Some(&json!(kind)) {
            Outcome::Complete(done.to_owned())
        } else {
            Ask::new([("confirm", elicit("Please confirm", "ok", "boolean"))])
                .with_state(json!({"kind": kind}))
                .into()
        },
    )
}

fn ask_three_ways(round: &Round) -> Result<Outcome, ErrorData> {
    let answers = (
        round.form_text("user_name", "name"),
        round.sampled("greeting"),
        round.root_count("client_roots"),
    );
    Ok(match answers {
        (Some(name), Some(greeting), Some(roots))
            if round.state_field("kind") == Some(&json!("multiple-inputs")) =>
        {
            Outcome::Complete(format!(
                "Name: {name}; Greeting: {greeting}; Roots: {roots}"
            ))
        }
        _ => Ask::new([
            ("user_name", elicit("What is your name?", "name", "string")),
            ("greeting", sample("Generate a greeting", 50)),
            ("client_roots", list_roots()),
        ])
        .with_state(json!({"kind": "multiple-inputs"}))
        .into(),
    })
}

/// Name first, then colour; the name travels in the state between the rounds.
fn two_steps(round: &Round) -> Result<Outcome, ErrorData> {
    let step = round.state_field("round").and_then(Value::as_u64);
    if step == Some(2)
        && let Some(name) = round.state_field("name").and_then(Value::as_str)
        && let Some(color) = round.form_text("step2", "color")
    {
        return Ok(Outcome::Complete(format!(
            "Multi-round complete for {name} who likes {color}"
        )));
    }
    if step == Some(1)
        && let Some(name) = round.form_text("step1", "name")
    {
        let color = elicit("Step 2: What is your favorite color?", "color", "string");
        return Ok(Ask::new([("step2", color)])
            .with_state(json!({"round": 2, "name": name}))
            .into());
    }
    let name = elicit("Step 1: What is your name?", "name", "string");
    Ok(Ask::new([("step1", name)])
        .with_state(json!({"round": 1}))
        .into())
}

/// The prompt's round: complete with the context once the client said which to use.
pub fn ask_context(round: &Round) -> Outcome {
    match round.form_text("user_context", "context") {
        Some(context) => Outcome::Complete(context),
        None => Ask::new([(
            "user_context",
            elicit("What context should the prompt use?", "context", "string"),
        )])
        .into(),
    }
}

/// Asks only for what the client declared it can answer.
fn ask_what_is_declared(round: &Round) -> Result<Outcome, ErrorData> {
    if !round.responses.is_empty() {
        let keys: Vec<&str> = round.responses.keys().map(String::as_str).collect();
        return Ok(Outcome::Complete(format!(
            "capabilities-ok: received {}",
            keys.join(",")
        )));
    }
    let mut ask = Ask::new([
        (
            "elicit_input",
            elicit("Elicitation input", "value", "string"),
        ),
        ("sample_input", sample("Sample request", 50)),
    ]);
    ask.requests.retain(|_, request| {
        Capability::needed_by(request).is_some_and(|needed| needed.declared_in(&round.capabilities))
    });
    Ok(if ask.requests.is_empty() {
        Outcome::Complete("No supported capabilities declared".into())
    } else {
        ask.with_state(json!({"kind": "capabilities-test"})).into()
    })
}

/// Answers only a client that declared sampling (`-32021` otherwise).
fn needs_sampling(round: &Round) -> Result<Outcome, ErrorData> {
    if Capability::Sampling.declared_in(&round.capabilities) {
        Ok(Outcome::Complete("Success".into()))
    } else {
        Err(ErrorData::missing_required_client_capability(decode(
            json!({"sampling": {}}),
        )?))
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, ErrorCode};

    use super::*;

    fn round<'a>(sealer: &'a Sealer, responses: Value, state: Option<&str>) -> Round<'a> {
        let capabilities =
            decode(json!({"sampling": {}, "elicitation": {}, "roots": {}})).expect("capabilities");
        let responses = decode(responses).expect("responses");
        Round::open(Some(responses), state, capabilities, sealer).expect("round")
    }

    /// What `tool` comes to in `round`: the text of a complete call, or the state to echo.
    fn run(round: &Round, tool: Tool) -> Result<String, Option<String>> {
        let outcome = tool(round).expect("outcome");
        let complete = |text: String| Ok(CallToolResult::success(vec![ContentBlock::text(text)]));
        match round.settle(outcome, |text| complete(text).map(CallToolResponse::from)) {
            Ok(CallToolResponse::InputRequired(asked)) => Err(asked.request_state),
            other => Ok(format!("{other:?}")),
        }
    }

    /// Every tool but the capability probe asks first, in requests rmcp's types hold.
    #[test]
    fn every_tool_asks_first() {
        let sealer = Sealer::new();
        for (name, _, tool) in TOOLS {
            let outcome = run(&round(&sealer, json!({}), None), *tool);
            assert_eq!(
                outcome.is_err(),
                *name != "test_missing_capability",
                "{name}"
            );
        }
    }

    #[test]
    fn two_steps_carry_the_name_in_the_state() {
        let sealer = Sealer::new();
        let accept = |content: Value| json!({"action": "accept", "content": content});
        let state = run(&round(&sealer, json!({}), None), two_steps).expect_err("step 1");
        let answer = json!({"step1": accept(json!({"name": "Alice"}))});
        let state = run(&round(&sealer, answer, state.as_deref()), two_steps).expect_err("step 2");
        let answer = json!({"step2": accept(json!({"color": "blue"}))});
        let done = run(&round(&sealer, answer, state.as_deref()), two_steps).expect("done");
        assert!(
            done.contains("Multi-round complete for Alice who likes blue"),
            "{done}"
        );
    }

    #[test]
    fn a_malformed_answer_is_asked_again() {
        let sealer = Sealer::new();
        let round = round(&sealer, json!({"user_name": 12345}), None);
        assert!(matches!(greet(&round), Ok(Outcome::NeedsInput(_))));
    }

    #[test]
    fn an_altered_state_is_refused() {
        let sealer = Sealer::new();
        let state = run(&round(&sealer, json!({}), None), two_steps).expect_err("step 1");
        let altered = format!("{}-TAMPERED", state.expect("state"));
        let refused = Round::open(None, Some(&altered), ClientCapabilities::default(), &sealer);
        assert_eq!(
            refused.err().map(|e| e.code),
            Some(ErrorCode::INVALID_PARAMS)
        );
    }
}
