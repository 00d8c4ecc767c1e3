//! The answers a client's retry of a multi round-trip request (protocol 2026-07-28)
//! brings in its `inputResponses`: each the answer to one question the call asked, which
//! must read as the result that kind of question has.

#![allow(
    deprecated,
    reason = "sampling and roots are what upstreams on older protocols ask for"
)]

use rmcp::ErrorData;
use rmcp::model::{ClientResult, CreateMessageResult, ElicitResult, InputRequest, ListRootsResult};
use serde_json::Value;

/// The client's `response` to `question`, read as the result that kind of request has.
pub fn input_result(question: &InputRequest, response: Value) -> Result<ClientResult, ErrorData> {
    let invalid = |e: serde_json::Error| {
        ErrorData::invalid_params(
            format!("the client's input response is malformed: {e}"),
            None,
        )
    };
    match question {
        InputRequest::CreateMessage(_) => serde_json::from_value::<CreateMessageResult>(response)
            .map(|r| ClientResult::CreateMessageResult(Box::new(r)))
            .map_err(invalid),
        InputRequest::Elicitation(_) => serde_json::from_value::<ElicitResult>(response)
            .map(ClientResult::ElicitResult)
            .map_err(invalid),
        InputRequest::ListRoots(_) => serde_json::from_value::<ListRootsResult>(response)
            .map(ClientResult::ListRootsResult)
            .map_err(invalid),
        _ => Err(ErrorData::invalid_params("unknown kind of input", None)),
    }
}
