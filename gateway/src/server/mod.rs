//! The downstream side: one MCP server, reached over stdio, streamable HTTP (`/mcp`) or
//! legacy SSE (`/sse`).
//!
//! The protocol apart from the ways to reach it:
//! - [`core`]: the one message path: every message of every client, whatever the
//!   transport and protocol revision, decoded once and served by its session.
//! - [`identity`]: who the gateway says it is at `initialize` and `server/discover`
//!   (itself, or the one server it stands in for).
//! - [`transport`]: stdio, streamable HTTP and legacy SSE, each wired the same way (a
//!   session per client, its profile chosen by [`session_profile`]).
//! - [`http`]: the HTTP listener: routes, connections and the drain.
//!
//! Everything here handles what clients send, so nothing here may panic on it: no
//! `unwrap`, `expect` or indexing (the lints below deny them; tests may).

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

pub mod core;
pub mod http;
pub mod identity;
pub mod transport;

use crate::listener_guard::Credentials;

/// The profile a session gets, on every transport: a token bound to a profile wins over
/// the profile the transport chose (the HTTP path, or `--profile` on stdio); `None` is the
/// default profile.
pub fn session_profile(chosen: Option<&str>, credentials: Option<&Credentials>) -> Option<String> {
    credentials
        .and_then(|credentials| credentials.profile.clone())
        .or_else(|| chosen.map(str::to_owned))
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A value of the configuration the listener refuses (see
    /// [`crate::listener_guard::guard_for`]).
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
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
