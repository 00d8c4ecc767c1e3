//! A retried request of a multi round-trip call (protocol 2026-07-28): its
//! `inputResponses`, each response read as the result of each kind of question the
//! gateway may have asked. A malformed response is an error for its question, never a
//! panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rmcp::model::{ClientRequest, InputRequest, JsonRpcMessage};
use std::sync::OnceLock;
use wire::message::decode_message;
use wire::round_trip::input_result;

/// One question of each kind.
fn questions() -> &'static [InputRequest] {
    static QUESTIONS: OnceLock<Vec<InputRequest>> = OnceLock::new();
    QUESTIONS.get_or_init(|| {
        [
            r#"{"method":"elicitation/create","params":{"message":"name?","requestedSchema":{"type":"object","properties":{}}}}"#,
            r#"{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}"#,
            r#"{"method":"roots/list"}"#,
        ]
        .iter()
        .map(|json| serde_json::from_str(json).expect("a question of the spec"))
        .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(JsonRpcMessage::Request(request)) = decode_message(data) else {
        return;
    };
    // The requests a retry can be, each with its answers.
    let responses = match request.request {
        ClientRequest::CallToolRequest(call) => call.params.input_responses,
        ClientRequest::GetPromptRequest(get) => get.params.input_responses,
        ClientRequest::ReadResourceRequest(read) => read.params.input_responses,
        _ => None,
    };
    for (_, response) in responses.unwrap_or_default() {
        for question in questions() {
            if let Err(error) = input_result(question, response.clone()) {
                serde_json::to_vec(&error).expect("an error encodes");
            }
        }
    }
});
