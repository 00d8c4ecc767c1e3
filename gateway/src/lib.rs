//! mcp-gateway: one MCP server in front of many.
//!
//! # Layout
//! - [`config`]: the typed configuration (`config.toml` or a client's JSON), every
//!   section's type with its defaults; it imports no other module of the gateway's but
//!   [`redact`], so every feature can read its section.
//! - [`upstream`]: connections to upstream servers, their supervisors and children, and
//!   the gateway's URIs for their resources.
//! - [`registry`]: the federated catalog (names, schemas), profiles, and the session view
//!   (catalog x profile) through which every handler sees it.
//! - [`session`]: one client session, what the gateway knows of it and what runs for it
//!   kept once (its calls parked for input among them, within the client limits), and the
//!   registry of the open ones.
//! - [`pipeline`]: the stages every call goes through, and the error codes.
//! - [`tool_result`]: a tool's result as its server sent it (JSON, not rmcp's type), which
//!   the stages read and change only where they must.
//! - [`policies`]: built-in plugins of those stages (rules, rate limit, timeout, retry,
//!   metrics, reminder, result cap, session log, the console's activity).
//! - [`server`]: the downstream MCP server: the session core every message goes through,
//!   whatever its transport and protocol revision; the transports (stdio, streamable
//!   HTTP, SSE) and the HTTP listener.
//! - [`listener_guard`]: what an HTTP request must pass before any handler (the MCP
//!   routes and the console) sees it: tokens, Host, Origin, body size.
//! - [`relay`]: an upstream's requests, progress and log messages during a call, carried
//!   to the client that made the call (as requests, or as input asked for in a result),
//!   and the questions that wait for a person in the console when the client cannot be
//!   asked.
//! - [`observe`]: the instruments: metrics, the session log and OpenTelemetry traces.
//! - [`http_client`]: the HTTP client of streamable HTTP upstreams.
//! - [`sandbox`]: the kernel's walls around stdio servers (Landlock, seccomp, limits).
//! - [`state`]: what replicas share (sessions, limits, event streams, per-user sign-ins,
//!   tasks): memory or Redis.
//! - [`tasks`]: tasks of the tasks extension (2026-07-28): an upstream's, passed through,
//!   and the gateway's own.
//! - [`code`]: the run_code tool and its runtime (TypeScript in a fresh worker process),
//!   which reaches the gateway through one narrow trait.
//! - [`redact`]: the one rule for what is secret and how it is hidden; [`private_file`]:
//!   files only this user may read, written whole.
//! - [`lines`]: newline-delimited JSON-RPC over stdio, for either side.
//! - [`startup_memory`]: memory held only for starting, given back.
//! - [`auth`]: OAuth at the edges: the listener as a protected resource, the gateway as
//!   the OAuth client of remote servers.
//! - [`ui`]: the operator console in the browser (`/ui`).
//! - [`gateway`]: the assembled whole, with its drain (stopping without losing an answer)
//!   and the reserved tool that finds tools in a `search` catalog; [`cli`]: the command
//!   line.

pub mod auth;
pub mod cli;
pub mod code;
pub mod config;
pub mod gateway;
pub mod http_client;
pub mod lines;
pub mod listener_guard;
pub mod observe;
pub mod pipeline;
pub mod policies;
pub mod private_file;
pub mod redact;
pub mod registry;
pub mod relay;
pub mod sandbox;
pub mod server;
pub mod session;
pub mod startup_memory;
pub mod state;
pub mod tasks;
pub mod tool_result;
pub mod ui;
pub mod upstream;
