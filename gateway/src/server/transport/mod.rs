//! The ways a client reaches the gateway. Each reads the client's messages, hands them to
//! the session core ([`super::core`]) and carries what it answers back; none serves a
//! method itself.
//!
//! - [`stdio`]: one session over the gateway's stdin and stdout.
//! - [`streamable_http`]: `POST`/`GET`/`DELETE` on `/mcp`, sessions bound to their opener
//!   and shared by replicas, and the stateless requests of protocol 2026-07-28;
//!   [`http_events`]: its event streams, resumable on any replica.
//! - [`sse`]: legacy SSE (MCP 2024-11-05), ours since rmcp has none.

pub mod http_events;
pub mod sse;
pub mod stdio;
pub mod streamable_http;
