//! mcp-gateway: one MCP server in front of many.
//!
//! # Layout
//! - [`config`]: the typed configuration (`config.toml` or a client's JSON).
//! - [`upstream`]: connections to upstream servers, their supervisors and children.
//! - [`registry`]: the federated catalog (names, schemas) and profiles.
//! - [`pipeline`]: the stages every call goes through, and the error codes.
//! - [`policies`]: built-in plugins of those stages (rules, rate limit, timeout, retry,
//!   metrics, reminder, result cap, session log).
//! - [`server`]: the downstream MCP server over stdio, streamable HTTP and SSE.
//! - [`observe`]: metrics, the session log and OpenTelemetry traces.
//! - [`state`]: what replicas share (sessions, limits, event streams): memory or Redis.
//! - [`code`]: the run_code runtime (TypeScript in a fresh worker process);
//!   [`run_code`]: the reserved tool that bridges programs back to the pipeline.
//! - [`gateway`]: the assembled whole; [`cli`]: the command line.

pub mod cli;
pub mod code;
pub mod config;
pub mod gateway;
pub mod observe;
pub mod pipeline;
pub mod policies;
pub mod registry;
pub mod run_code;
pub mod server;
pub mod state;
pub mod upstream;
