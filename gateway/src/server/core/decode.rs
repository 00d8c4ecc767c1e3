//! What a client sends, decoded once, whatever the transport. The decoding itself lives in
//! the `wire` crate (so that it can be fuzzed on its own): stdio lines through
//! [`ClientLines`], streamable HTTP bodies with [`decode_message`], legacy SSE bodies (a
//! message or a batch) with [`Batch`].

use rmcp::RoleServer;
pub use wire::message::{Batch, MAX_CLIENT_LINE, MalformedBody, decode_message};

use crate::lines::{Decoded, LineDecoder};

/// The decoder of a stdio client's lines.
pub struct ClientLines;

impl LineDecoder for ClientLines {
    type Role = RoleServer;

    fn decode(&self, line: &[u8]) -> Decoded<RoleServer> {
        match wire::message::decode_line(line) {
            wire::message::ClientLine::Message(message) => Decoded::Message(message),
            wire::message::ClientLine::Skip => Decoded::Skip,
            wire::message::ClientLine::Answer(answer) => Decoded::Answer(answer),
        }
    }
}
