//! The downstream side: one MCP server, reached over stdio, streamable HTTP (`/mcp`) or
//! legacy SSE (`/sse`).
//!
//! Laid out as rmcp lays out its own: the protocol handler apart from the ways to reach it.
//! - [`handler`]: the MCP server of one session, whatever the transport.
//! - [`identity`]: who the gateway says it is at `initialize` (itself, or the one server
//!   it stands in for).
//! - [`transport`]: stdio, streamable HTTP and legacy SSE, each wired the same way (a
//!   session per client, its profile chosen by [`handler::session_profile`]), plus the
//!   handshake that lets stdio and SSE survive early messages.
//! - [`http`]: the HTTP listener: routes, connections and the security guard.

pub mod handler;
pub mod http;
pub mod identity;
pub mod transport;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Security(#[from] http::security::SecurityError),
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("unknown profile `{0}`")]
    UnknownProfile(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The message a request for a profile that does not exist gets (with 404 over HTTP).
pub fn unknown_profile(name: &str) -> String {
    format!("Not Found: unknown profile `{name}` (no [profiles.{name}] in the configuration)")
}
