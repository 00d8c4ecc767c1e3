//! A legacy SSE `POST /message` body: one message or a batch (protocol 2024-11-05). A body
//! is taken whole or refused whole, and a refused request that names an id gets an answer
//! under that id.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rmcp::model::JsonRpcMessage;
use wire::message::decode_batch;

fuzz_target!(|data: &[u8]| match decode_batch(data) {
    Ok(messages) => {
        assert!(!messages.is_empty(), "an empty batch is refused");
        for message in messages {
            serde_json::to_vec(&message).expect("a decoded message encodes");
        }
    }
    Err(refused) => {
        if let Some(answer) = refused.answer {
            assert!(
                matches!(&*answer, JsonRpcMessage::Error(error) if error.id.is_some()),
                "an answer goes to a request: {answer:?}"
            );
        }
    }
});
