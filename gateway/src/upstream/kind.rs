//! What a kind of upstream is: the [`Kind`] each transport implements in its own module
//! (a stdio child in `stdio/`, a streamable HTTP server in `streamable_http/`, a legacy
//! SSE server in `sse/`), what it is given to open a connection ([`Opening`]) and what it
//! brings back ([`Opened`]: rmcp's client, initialized, with a [`CallLane`] for tool calls
//! and a child's [`ProcessGroup`] where the kind has one), and why opening failed
//! ([`ConnectError`]). What is the same for every kind once opened is `connect`'s.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::Transport;
use tokio_util::sync::CancellationToken;

use super::call_lane::CallLane;
use super::client::UpstreamClient;
use super::decorated::Decorated;
use super::notifications_in_flight::InFlightBound;
use super::per_user::SignsInAs;
use super::progress_in_order::ProgressInOrder;
use super::rmcp_errors::worded;
use super::stdio::child::{ProcessGroup, SpawnError, Violation};
use crate::config::ServerConfig;
use crate::relay::CallRoutes;
use crate::sandbox;

/// How long one connection attempt (spawn, initialize, list) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a connection attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot start `{command}`: {source}")]
    Spawn { command: String, source: SpawnError },
    #[error("bad header: {0}")]
    Header(String),
    #[error("cannot connect: {0}")]
    Transport(String),
    /// Nothing answered at the server's address (connection refused, no such host).
    #[error("cannot reach {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("initialize failed: {0}")]
    Initialize(String),
    #[error("listing failed: {0}")]
    List(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// An OAuth server with no usable sign-in: a person must sign in again.
    #[error("sign-in needed: run `mcp-gateway auth login {server}`")]
    NeedsLogin { server: String },
    #[error("OAuth: {0}")]
    OAuth(String),
}

/// One kind of upstream: how a connection of its kind is opened.
pub(super) trait Kind {
    /// Opens the transport and begins the conversation (`initialize`, or
    /// `server/discover` under `opening.lifecycle`), with `opening.handler` answering what
    /// the server sends the gateway.
    async fn open(&self, opening: Opening<'_>) -> Result<Opened, ConnectError>;
}

/// What every kind is given to open a connection with.
pub(super) struct Opening<'a> {
    pub name: &'a Arc<str>,
    pub config: &'a ServerConfig,
    /// For an identity connection of a per-user server: whose sign-in it uses.
    pub user: Option<&'a SignsInAs>,
    pub handler: UpstreamClient,
    pub lifecycle: ClientLifecycleMode,
    pub calls: &'a CallRoutes,
    pub sandbox: &'a sandbox::Status,
    pub violation: &'a Violation,
    /// Cancelled when the connection's sign-in dies (OAuth servers).
    pub signed_out: &'a CancellationToken,
}

impl Opening<'_> {
    /// Begins the conversation over `transport`, for a kind whose transport rmcp reads
    /// as it comes (a child's pipes, an SSE stream).
    pub async fn serve<T>(
        self,
        transport: T,
    ) -> Result<RunningService<RoleClient, UpstreamClient>, ConnectError>
    where
        T: Transport<RoleClient> + 'static,
    {
        self.handler
            .serve_with_lifecycle(guarded(transport, self.calls), self.lifecycle)
            .await
            .map_err(|e| ConnectError::Initialize(worded(&e)))
    }
}

/// A connection a kind opened: rmcp's client, initialized, and what the kind has besides.
pub(super) struct Opened {
    pub service: RunningService<RoleClient, UpstreamClient>,
    /// The way its calls and requests take beside rmcp's client.
    pub lane: CallLane,
    /// The child's process group, for a kind that starts one.
    pub group: Option<ProcessGroup>,
}

/// What rmcp's service loop reads from an upstream: its progress kept in order with the
/// answers ([`ProgressInOrder`]), and its notifications handled a bounded number at a time
/// ([`InFlightBound`]).
pub(super) fn guarded<T: Transport<RoleClient>>(
    transport: T,
    calls: &CallRoutes,
) -> Decorated<Decorated<T, ProgressInOrder>, InFlightBound> {
    let in_order = Decorated::new(transport, ProgressInOrder::new(calls.clone()));
    Decorated::new(in_order, InFlightBound::new())
}

pub(super) fn header_map(
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<HashMap<http::HeaderName, http::HeaderValue>, ConnectError> {
    headers
        .iter()
        .map(|(name, value)| {
            let name = http::HeaderName::try_from(name.as_str())
                .map_err(|e| ConnectError::Header(format!("{name}: {e}")))?;
            let value = http::HeaderValue::try_from(value.as_str())
                .map_err(|e| ConnectError::Header(format!("{name}: {e}")))?;
            Ok((name, value))
        })
        .collect()
}
