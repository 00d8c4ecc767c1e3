//! Opening one upstream connection, whatever its kind, and closing it again.
//!
//! Each kind of upstream (a stdio child, a streamable HTTP server, a legacy SSE server)
//! is one [`Kind`] in its own module: it opens its transport and begins the conversation,
//! and brings what it has besides rmcp's client (a [`CallLane`] for tool calls, the
//! child's [`ProcessGroup`]). What follows is the same for every kind and lives here:
//! learning the revision the server speaks, the context a server of 2026-07-28 is sent
//! with every request, and reading what it offers. A new transport is one module with
//! its `Kind` and one configuration variant, matched in [`connect`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::RoleClient;
use rmcp::model::{ProtocolVersion, RequestMetaObject};
use rmcp::service::{
    ClientCacheConfig, ClientLifecycleMode, RunningService, RunningServiceCancellationToken,
};
use rmcp::transport::Transport;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::call_lane::CallLane;
use super::client::{self, UpstreamClient, UpstreamEvent};
use super::notifications_in_flight::InFlightBound;
use super::offer::{Lister, Offer};
use super::per_user::SignsInAs;
use super::progress_in_order::ProgressInOrder;
use super::stdio::{self, ProcessGroup, Violation};
use super::{Live, sse, streamable_http};
use crate::config::{Endpoint, RemoteTransport, ServerConfig, UpstreamProtocol};
use crate::relay::{CallRoutes, Downstream};
use crate::sandbox;

/// How long one connection attempt (spawn, initialize, list) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a connection attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot start `{command}`: {source}")]
    Spawn {
        command: String,
        source: stdio::SpawnError,
    },
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

/// An rmcp error as a person reads it: without the Rust type rmcp's transport errors name
/// (`Send message error Transport [mcp_gateway::upstream::…<…>] error: …`), which tells
/// someone reading why an upstream failed nothing.
pub(super) fn worded(error: &impl std::fmt::Display) -> String {
    const OPEN: &str = " Transport [";
    const CLOSE: &str = "] error: ";
    let text = error.to_string();
    let Some(start) = text.find(OPEN) else {
        return text;
    };
    match text[start..].find(CLOSE) {
        Some(end) => format!("{}: {}", &text[..start], &text[start + end + CLOSE.len()..]),
        None => text,
    }
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

/// A connection a kind opened: rmcp's client, initialized, and what the kind has besides.
pub(super) struct Opened {
    pub service: RunningService<RoleClient, UpstreamClient>,
    /// The way its tool calls take beside rmcp's client, where the kind has one.
    pub lane: Option<CallLane>,
    /// The child's process group, for a kind that starts one.
    pub group: Option<ProcessGroup>,
}

/// An open connection: the running rmcp client service and, for stdio, the child group.
pub struct Connection {
    pub live: Arc<Live>,
    stop: Option<RunningServiceCancellationToken>,
    /// Cancelled when the service loop has ended, whatever the reason.
    ended: CancellationToken,
    /// Dropping it kills the child's process group.
    _group: Option<ProcessGroup>,
}

impl Connection {
    /// `signed_out` (OAuth servers) closes the connection when the sign-in dies.
    fn new(
        live: Arc<Live>,
        service: RunningService<RoleClient, UpstreamClient>,
        group: Option<ProcessGroup>,
        signed_out: CancellationToken,
    ) -> Self {
        let stop = service.cancellation_token();
        let ended = CancellationToken::new();
        let guard = ended.clone().drop_guard();
        let on_sign_out = service.cancellation_token();
        tokio::spawn(async move {
            let _guard = guard;
            tokio::select! {
                _ = service.waiting() => {}
                () = signed_out.cancelled() => on_sign_out.cancel(),
            }
        });
        Connection {
            live,
            stop: Some(stop),
            ended,
            _group: group,
        }
    }

    /// Resolves when the connection has closed (the peer went away or we closed it).
    pub async fn closed(&self) {
        self.ended.cancelled().await;
    }

    /// Closes the session and kills the child (if any).
    pub async fn close(mut self) {
        if let Some(stop) = self.stop.take() {
            stop.cancel();
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), self.ended.cancelled()).await;
    }
}

/// Where a connection's requests and events go, and what its confinement records.
pub struct Sides {
    pub events: mpsc::UnboundedSender<UpstreamEvent>,
    pub calls: CallRoutes,
    pub downstream: Arc<Downstream>,
    pub sandbox: sandbox::Status,
}

/// Connects to `config`'s endpoint, initializes, and reads the offer.
pub async fn connect(
    name: &Arc<str>,
    config: &ServerConfig,
    user: Option<&SignsInAs>,
    sides: Sides,
) -> Result<Connection, ConnectError> {
    tokio::time::timeout(CONNECT_TIMEOUT, connect_inner(name, config, user, sides))
        .await
        .map_err(|_| ConnectError::Timeout(CONNECT_TIMEOUT))?
}

/// How the gateway begins its conversation with a server that speaks `protocol`.
fn lifecycle(protocol: UpstreamProtocol) -> ClientLifecycleMode {
    match protocol {
        UpstreamProtocol::Session => ClientLifecycleMode::Initialize,
        UpstreamProtocol::Stateless => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
        UpstreamProtocol::Auto => ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        },
    }
}

async fn connect_inner(
    name: &Arc<str>,
    config: &ServerConfig,
    user: Option<&SignsInAs>,
    sides: Sides,
) -> Result<Connection, ConnectError> {
    let Sides {
        events,
        calls,
        downstream,
        sandbox,
    } = sides;
    let handler = UpstreamClient::new(name.clone(), events.clone(), calls.clone(), downstream);
    let gateway_side = handler.get_info();
    let violation = Violation::default();
    let signed_out = CancellationToken::new();
    let opening = Opening {
        name,
        config,
        user,
        handler,
        lifecycle: lifecycle(config.protocol),
        calls: &calls,
        sandbox: &sandbox,
        violation: &violation,
        signed_out: &signed_out,
    };
    let endpoint = config.endpoint();
    let Opened {
        service,
        lane,
        group,
    } = match &endpoint {
        Endpoint::Stdio { command, .. } => {
            let kind = stdio::Stdio {
                endpoint: &endpoint,
                command,
            };
            kind.open(opening).await?
        }
        Endpoint::Remote {
            url,
            transport: RemoteTransport::StreamableHttp,
            headers,
        } => {
            streamable_http::StreamableHttp { url, headers }
                .open(opening)
                .await?
        }
        Endpoint::Remote {
            url,
            transport: RemoteTransport::Sse,
            headers,
        } => sse::Sse { url, headers }.open(opening).await?,
    };
    let revision = service
        .peer()
        .peer_info()
        .map(|info| info.protocol_version.clone());
    let stateless = match config.protocol {
        UpstreamProtocol::Session => false,
        UpstreamProtocol::Stateless => true,
        // Whether `server/discover` found a server of 2026-07-28.
        UpstreamProtocol::Auto => revision.as_ref().is_some_and(|v| !v.has_initialize()),
    };
    let stateless = stateless.then(|| revision.unwrap_or(ProtocolVersion::V_2026_07_28));
    if let (Some(revision), Some(lane)) = (&stateless, &lane) {
        lane.serve_stateless(revision);
    }
    // What rmcp puts in each request to a stateless server, for the calls the lanes
    // write themselves.
    let stateless = stateless.map(|revision| {
        let mut context = RequestMetaObject::new();
        context.set_protocol_version(revision);
        context.set_client_info(gateway_side.client_info);
        context.set_client_capabilities(gateway_side.capabilities);
        context
    });
    if stateless.is_some() {
        // A server of 2026-07-28 tells of its changes only on a subscription.
        tokio::spawn(client::listen_for_changes(
            name.clone(),
            service.peer().clone(),
            events,
        ));
    }
    // The gateway keeps its own copy of each list, read again as its `ttlMs` says, and
    // passes every other request on: rmcp's cache of answers would have a list read again
    // just before its `ttlMs` ran out come back from the cache, with none left.
    let mut no_cache = ClientCacheConfig::default();
    no_cache.enabled = false;
    service.peer().set_response_cache_config(no_cache).await;
    let initialized = service.peer().peer_info().map(|info| (*info).clone());
    let lister = Lister {
        peer: service.peer(),
        lane: lane.as_ref(),
        context: stateless.as_ref(),
    };
    let offer = Offer::read(lister, initialized)
        .await
        .map_err(|e| ConnectError::List(e.to_string()))?;
    let live = Arc::new(Live {
        peer: service.peer().clone(),
        offer,
        pid: group.as_ref().map(ProcessGroup::pid),
        violation,
        unreachable: Default::default(),
        lane,
        stateless,
    });
    Ok(Connection::new(live, service, group, signed_out))
}

/// What rmcp's service loop reads from an upstream: its progress kept in order with the
/// answers ([`ProgressInOrder`]), and its notifications handled a bounded number at a time
/// ([`InFlightBound`]).
pub(super) fn guarded<T: Transport<RoleClient>>(
    transport: T,
    calls: &CallRoutes,
) -> InFlightBound<ProgressInOrder<T>> {
    InFlightBound::new(ProgressInOrder::new(transport, calls.clone()))
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

#[cfg(test)]
mod tests {
    use super::worded;

    #[test]
    fn why_an_upstream_failed_leaves_out_the_transports_rust_type() {
        let rmcp = "Send message error Transport [mcp_gateway::upstream::a::B<c::D<E>>] error: \
                    Client error: could not connect: tcp connect error: Connection refused \
                    (os error 111), when send initialize request";
        assert_eq!(
            worded(&rmcp),
            "Send message error: Client error: could not connect: tcp connect error: \
             Connection refused (os error 111), when send initialize request"
        );
        assert_eq!(worded(&"connection closed"), "connection closed");
    }
}
