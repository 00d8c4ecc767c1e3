//! Message decoding (`wire::message`): any bytes as a stdio line, a streamable HTTP body
//! and a legacy SSE body. Besides never panicking, the gateway's one-pass decoding of a
//! `tools/call` must read a line exactly as rmcp's general decoding does, and what it
//! decodes must encode again.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rmcp::model::ClientJsonRpcMessage;
use wire::message::{ClientLine, decode_batch, decode_line, decode_message};

fuzz_target!(|data: &[u8]| {
    let ours = decode_line(data);
    if let Ok(theirs) = serde_json::from_slice::<ClientJsonRpcMessage>(data) {
        let ClientLine::Message(ours) = &ours else {
            panic!("rmcp decodes a line the gateway does not: {ours:?}");
        };
        assert_eq!(
            serde_json::to_value(ours).ok(),
            serde_json::to_value(&theirs).ok(),
            "the gateway reads a message otherwise than rmcp"
        );
    }
    match ours {
        ClientLine::Message(message) => {
            serde_json::to_vec(&message).expect("a decoded message encodes");
        }
        ClientLine::Answer(answer) => {
            serde_json::to_vec(&answer).expect("an answer encodes");
        }
        ClientLine::Skip => {}
    }
    if let Err(error) = decode_message(data) {
        serde_json::to_vec(&error).expect("an error encodes");
    }
    match decode_batch(data) {
        Ok(messages) => assert!(!messages.is_empty(), "an empty batch is refused"),
        Err(refused) => {
            if let Some(answer) = refused.answer {
                serde_json::to_vec(&answer).expect("an answer encodes");
            }
        }
    }
});
