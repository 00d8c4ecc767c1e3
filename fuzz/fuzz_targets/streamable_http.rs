//! The streamable HTTP request handler's reading of a request, headers and body together,
//! in the order `server/transport/streamable_http.rs` reads them: the body's message, the
//! session it names, then, for a request with no session, whether it speaks 2026-07-28 and
//! carries the context that revision needs (else a 2025-11-25 client must initialize);
//! the `Accept` header; a `GET`'s `Last-Event-ID`. Every refusal must encode as the
//! JSON-RPC error the client gets.

#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use rmcp::model::{ClientRequest, JsonRpcMessage};
use wire::event_id::LastEventId;
use wire::headers::{accepts, last_event_id, session_id, speaks_2026, stateless_context};
use wire::message::decode_message;
use wire::round_trip::request_state;

fuzz_target!(|data: &[u8]| {
    let (headers, body) = common::request(data);
    // POST
    match decode_message(body) {
        Ok(message) => {
            if session_id(&headers).is_none()
                && let JsonRpcMessage::Request(request) = &message
                && !matches!(request.request, ClientRequest::InitializeRequest(_))
                && speaks_2026(&headers, &request.request)
                && let Err(refused) = stateless_context(&headers, &request.request)
            {
                serde_json::to_vec(&refused).expect("a refusal encodes");
            }
            if let JsonRpcMessage::Request(request) = &message {
                let _ = request_state(&request.request);
            }
            let _ = accepts(&headers, "application/json");
        }
        Err(error) => {
            serde_json::to_vec(&error).expect("an error encodes");
        }
    }
    // GET
    if let Some(last) = last_event_id(&headers) {
        let _ = LastEventId::parse(&last);
    }
});
