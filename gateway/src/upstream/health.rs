//! What `/healthz`, `mcp-gateway servers` and the console say of an upstream: its state
//! in the supervisor's lifecycle, its restarts, the last error, and what it runs as.

use serde::Serialize;

use crate::auth::status::SignInStatus;
use crate::sandbox::Confinement;

/// Lifecycle of an upstream, as `/healthz` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamState {
    Starting,
    Ready,
    Restarting,
    Failed,
    /// An OAuth server whose sign-in is missing or was revoked: `mcp-gateway auth login`.
    NeedsLogin,
    /// A per-user server: each caller identity connects with its own sign-in.
    PerUser,
    Stopped,
}

impl UpstreamState {
    /// The name `/healthz` and `status` show.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Ready => "ready",
            Self::Restarting => "restarting",
            Self::Failed => "failed",
            Self::NeedsLogin => "needs_login",
            Self::PerUser => "per_user",
            Self::Stopped => "stopped",
        }
    }
}

/// A snapshot of an upstream's health.
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    pub state: UpstreamState,
    pub restarts: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    /// The protocol revision agreed with the server, while it is connected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// An OAuth server's sign-in (`[servers.NAME.oauth]`), read when the snapshot is taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth: Option<SignInStatus>,
    /// A stdio server's confinement as of its last start, with what it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Confinement>,
}

impl Health {
    /// A connection's health before its first attempt.
    pub(super) fn starting() -> Self {
        Health {
            state: UpstreamState::Starting,
            restarts: 0,
            last_error: None,
            pid: None,
            protocol: None,
            oauth: None,
            sandbox: None,
        }
    }
}
