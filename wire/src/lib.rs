//! What MCP clients send the gateway, decoded, with nothing of the gateway around it:
//! JSON-RPC messages ([`message`]), the ids of resumable stream events and the
//! `Last-Event-ID` that names one ([`event_id`]), the HTTP headers a streamable HTTP
//! request is judged by ([`headers`], [`routing`]), and the input responses of a multi
//! round-trip request ([`round_trip`]).
//!
//! Every function here is pure and takes whatever a client sent, so that each can be
//! fuzzed (`fuzz/` at the repository's root) without instrumenting the gateway's many
//! dependencies; the gateway's transports call them and nothing else to read that input.
//!
//! # Layout
//! - [`message`]: a stdio line, a streamable HTTP body, a legacy SSE body (or batch).
//! - [`event_id`]: `<replica>:<session>:<stream part>/<sequence>[#<hex request id>]`.
//! - [`headers`]: protocol revision, session id, `Accept`, stateless context.
//! - [`round_trip`]: what each of `inputResponses` must be.
//! - [`routing`]: the routing headers of a 2026-07-28 request against its body.

// Whatever a client sends reaches this code: no panics on it.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

pub mod event_id;
pub mod headers;
pub mod message;
pub mod round_trip;
pub mod routing;
