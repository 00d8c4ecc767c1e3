//! The ways a client reaches the gateway. Each transport hands every new client to a
//! [`super::handler::GatewayServer`] of its own, with the profile that
//! [`super::handler::session_profile`] chooses.
//!
//! - [`stdio`]: one session over the gateway's stdin and stdout; [`client_lines`]: what
//!   its client sends, decoded (a `tools/call` as its own type).
//! - [`streamable_http`]: rmcp's streamable HTTP service, sessions bound to their opener;
//!   [`shared_sessions`]: those sessions kept so that any replica can serve them;
//!   [`plain_answers`]: their requests answered as plain JSON when no stream is needed.
//! - [`direct_calls`]: stdio and streamable HTTP tool calls served beside rmcp's service
//!   loop and session worker.
//! - [`sse`]: legacy SSE (MCP 2024-11-05), ours since rmcp has none.
//! - [`handshake`]: stdio and SSE sessions survive messages sent before `initialize`.
//! - [`delivered`]: stdio and SSE sessions tell the shutdown drain which requests still
//!   owe their client an answer.

pub mod client_lines;
pub mod delivered;
pub mod direct_calls;
pub mod handshake;
pub mod plain_answers;
pub mod shared_sessions;
pub mod sse;
pub mod stdio;
pub mod streamable_http;
