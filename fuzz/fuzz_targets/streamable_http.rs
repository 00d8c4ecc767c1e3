//! The streamable HTTP request handler's reading of a request, headers and body together,
//! in the order `server/transport/streamable_http.rs` reads them: the body's message, the
//! session it names, then, for a request with no session, whether it speaks 2026-07-28 and
//! carries the context that revision needs (else a 2025-11-25 client must initialize)
//! and routing headers that repeat its body (checked against a tool schema that
//! designates `Mcp-Param-*` headers); the `Accept` header; a `GET`'s `Last-Event-ID`.
//! Every refusal must encode as the JSON-RPC error the client gets.

#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

use rmcp::model::{ClientRequest, JsonObject, JsonRpcMessage};
use wire::event_id::LastEventId;
use wire::headers::{accepts, last_event_id, session_id, speaks_2026, stateless_context};
use wire::message::decode_message;

/// A tool schema with a header at the top and one nested, of each type a header may have.
static SCHEMA: LazyLock<JsonObject> = LazyLock::new(|| {
    serde_json::from_value(serde_json::json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "options": {"type": "object", "properties": {
            "verbose": {"type": "boolean", "x-mcp-header": "Verbose"}
        }}
    }}))
    .expect("a schema")
});

fuzz_target!(|data: &[u8]| {
    let (headers, body) = common::request(data);
    // POST
    match decode_message(body) {
        Ok(message) => {
            if session_id(&headers).is_none()
                && let JsonRpcMessage::Request(request) = &message
                && !matches!(request.request, ClientRequest::InitializeRequest(_))
                && speaks_2026(&headers, &request.request)
            {
                let checked = stateless_context(&headers, &request.request)
                    .and_then(|()| wire::routing::check(&headers, &request.request, Some(&SCHEMA)));
                if let Err(refused) = checked {
                    serde_json::to_vec(&refused).expect("a refusal encodes");
                }
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
