//! `echo`: one `echo` tool over streamable HTTP at `http://ADDRESS/mcp`, served exactly the
//! way rmcp's own examples serve it: `StreamableHttpService` on `axum::serve` with every
//! default (sessions, SSE answers with a priming event, Nagle's algorithm left on).
//!
//! It exists because most remote MCP servers are written like this, not like `kv`, whose
//! listener turns Nagle off. A client that does not answer each of the server's writes at
//! once (a delayed ACK) waits for the server's next write; the gateway must not, and the
//! benchmark and the tests measure it against this server.

use std::process::ExitCode;

use mcp_gateway_examples::init_logging;
use rmcp::{
    ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{ServerCapabilities, ServerConfig},
    tool, tool_handler, tool_router,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use schemars::JsonSchema;
use serde::Deserialize;

/// Arguments of `echo`.
#[derive(Debug, Deserialize, JsonSchema)]
struct EchoArgs {
    /// The text to send back.
    text: String,
}

#[derive(Clone)]
struct Echo {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Echo {
    fn new() -> Self {
        Self {
            tool_router: Self::tool_router(),
        }
    }

    /// Returns its argument unchanged.
    #[tool(annotations(read_only_hint = true))]
    fn echo(&self, Parameters(args): Parameters<EchoArgs>) -> String {
        args.text
    }
}

#[tool_handler(router = self.tool_router, name = "echo")]
impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    init_logging();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [flag, address] = args.as_slice() else {
        eprintln!("usage: echo --http ADDRESS");
        return ExitCode::FAILURE;
    };
    if flag != "--http" {
        eprintln!("usage: echo --http ADDRESS");
        return ExitCode::FAILURE;
    }
    let service = StreamableHttpService::new(
        || Ok(Echo::new()),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = match tokio::net::TcpListener::bind(address).await {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, address, "cannot listen");
            return ExitCode::FAILURE;
        }
    };
    match axum::serve(listener, router).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "HTTP server failed");
            ExitCode::FAILURE
        }
    }
}
