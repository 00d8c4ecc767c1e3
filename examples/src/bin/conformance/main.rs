//! `conformance PORT`: the server that the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, server scenarios) expects, over streamable HTTP at
//! `http://127.0.0.1:PORT/mcp`.
//!
//! It exists so `scripts/conformance` can run the suite's server requirements of each
//! protocol revision (2025-11-25 and 2026-07-28) against this server directly and through
//! the gateway (`prefix = ""`, `rewrite_uris = false`), and show that the gateway passes the
//! whole protocol through: every scenario that passes directly must pass through it. One
//! process serves both revisions, as a server in the transition would: 2025-11-25 clients
//! open `initialize` sessions, 2026-07-28 clients send self-contained requests
//! ([`lifecycle`]).
//!
//! # Layout
//! - [`handler`]: the MCP handler, every tool, resource and prompt of the scenarios;
//! - [`fixtures`]: the fixed definitions, as the suite spells them;
//! - [`rounds`]: the 2026-07-28 multi round-trip tools (`InputRequiredResult`), whose
//!   `requestState` is sealed by [`request_state`];
//! - [`questions`]: the 2025-11-25 tools that ask their client mid-call, asking in an
//!   `InputRequiredResult` on 2026-07-28;
//! - [`list_changes`]: list changes fanned out to `subscriptions/listen` streams;
//! - [`jobs`]: the tools of the tasks extension, and the tasks they become;
//! - [`executions`]: their `execution.taskSupport`, which rmcp's types do not carry, put
//!   back into `tools/list` answers on the wire.
//!
//! Everything the 2026-07-28 scenarios check at the HTTP level (statuses, `Mcp-Method`
//! and `MCP-Protocol-Version` headers, `-32020`/`-32021`/`-32022`) is rmcp's
//! `StreamableHttpService`; only [`executions`] sits in front of it, and changes nothing
//! but the `tools/list` results it sends.

#![allow(
    deprecated,
    reason = "logging, sampling and resources/subscribe are what 2025 clients use"
)]

mod executions;
mod fixtures;
mod handler;
mod jobs;
mod lifecycle;
mod list_changes;
mod questions;
mod request_state;
mod rounds;

use std::process::ExitCode;
use std::sync::Arc;

use mcp_gateway_examples::{init_logging, mcp_router, serve_router};

use crate::handler::{Conformance, Shared};

#[tokio::main]
async fn main() -> ExitCode {
    init_logging();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [port] if port.parse::<u16>().is_ok() => {
            let shared = Arc::new(Shared::new());
            let router = mcp_router(move || Conformance::new(shared.clone()))
                .layer(axum::middleware::from_fn(executions::declare));
            serve_router("conformance", &format!("127.0.0.1:{port}"), router).await
        }
        _ => {
            eprintln!("usage: conformance PORT   (serves http://127.0.0.1:PORT/mcp)");
            ExitCode::FAILURE
        }
    }
}
