//! Opening one upstream connection over the transport its configuration names, and
//! closing it again.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::RoleClient;
use rmcp::model::{ProtocolVersion, RequestMetaObject};
use rmcp::service::{
    ClientCacheConfig, ClientInitializeError, ClientLifecycleMode, ClientServiceExt,
    RunningService, RunningServiceCancellationToken,
};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
};
use rmcp::transport::{StreamableHttpClientTransport, Transport};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::child::{self, ProcessGroup, Violation};
use super::client::{self, UpstreamClient, UpstreamEvent};
use super::http_lane::{self, HttpLane, Inbound, SessionSlot};
use super::notifications_in_flight::InFlightBound;
use super::offer::Offer;
use super::per_user::SignsInAs;
use super::progress_in_order::ProgressInOrder;
use super::traced_http::TracedHttp;
use super::{CallLane, Live, sse_client};
use crate::auth::{
    self,
    signed_in::{AuthorizedClientError, SignedInClient},
    upstream::OAuthUpstream,
};
use crate::config::{Endpoint, RemoteTransport, ServerConfig, UpstreamProtocol};
use crate::http_client::{HttpError, UpstreamHttp};
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
        source: child::SpawnError,
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

/// Why a streamable HTTP server's opening exchange failed. One that never reached the
/// server says so plainly, and the same whichever way the gateway opened
/// (`server/discover` or `initialize`): rmcp's wording names the transport and the
/// request, which tells an operator nothing more.
fn http_start_failed(error: ClientInitializeError, url: &str) -> ConnectError {
    if let ClientInitializeError::TransportError { error: sent, .. } = &error
        && let Some(http) = sent.error.downcast_ref::<StreamableHttpError<HttpError>>()
        && let Some(reason) = http_lane::why_unreachable(http)
    {
        return ConnectError::Unreachable {
            url: crate::redact::urls(url),
            reason,
        };
    }
    ConnectError::Initialize(worded(&error))
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
    let init_error = |e: rmcp::service::ClientInitializeError| ConnectError::Initialize(worded(&e));
    let endpoint = config.endpoint();
    let lifecycle = lifecycle(config.protocol);
    let signed_out = CancellationToken::new();
    let (service, group, lane) = match &endpoint {
        Endpoint::Stdio { command, .. } => {
            let confine = child::Confine {
                rules: config.sandbox.rules(),
                context: &config.sandbox_context,
                status: &sandbox,
            };
            let (transport, lane, group) = child::spawn(
                name,
                &endpoint,
                confine,
                child::MAX_UPSTREAM_MESSAGE,
                violation.clone(),
            )
            .map_err(|source| ConnectError::Spawn {
                command: command.clone(),
                source,
            })?;
            (
                handler
                    .serve_with_lifecycle(guarded(transport, &calls), lifecycle.clone())
                    .await
                    .map_err(init_error)?,
                Some(group),
                Some(CallLane::Stdio(lane)),
            )
        }
        Endpoint::Remote {
            url,
            transport: RemoteTransport::StreamableHttp,
            headers,
        } => {
            let transport_config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(header_map(headers)?);
            let http = UpstreamHttp::new().map_err(|e| ConnectError::Transport(e.to_string()))?;
            let (service, lane) = match &config.oauth {
                Some(settings) => {
                    let dir = auth::store::default_dir()
                        .map_err(|error| ConnectError::OAuth(error.to_string()))?;
                    let upstream = match user {
                        Some(user) => OAuthUpstream::for_identity(
                            name,
                            url,
                            settings,
                            &dir,
                            user.shared.as_ref(),
                            &user.identity,
                            user.sealer.clone(),
                        ),
                        None => OAuthUpstream::new(name, url, settings, &dir),
                    };
                    let client = SignedInClient::open(&upstream, http, signed_out.clone())
                        .await
                        .map_err(|error| match error {
                            AuthorizedClientError::NeedsLogin => ConnectError::NeedsLogin {
                                server: name.to_string(),
                            },
                            AuthorizedClientError::OAuth(error) => {
                                ConnectError::OAuth(error.to_string())
                            }
                        })?;
                    serve_http(handler, client, transport_config, lifecycle.clone(), &calls).await
                }
                None => {
                    serve_http(handler, http, transport_config, lifecycle.clone(), &calls).await
                }
            };
            if signed_out.is_cancelled() {
                return Err(ConnectError::NeedsLogin {
                    server: name.to_string(),
                });
            }
            (
                service.map_err(|error| http_start_failed(error, url.as_str()))?,
                None,
                Some(CallLane::Http(Arc::new(lane))),
            )
        }
        Endpoint::Remote {
            url,
            transport: RemoteTransport::Sse,
            headers,
        } => {
            let headers: http::HeaderMap = header_map(headers)?.into_iter().collect();
            let transport = sse_client::connect(url, headers)
                .await
                .map_err(|e| ConnectError::Transport(e.to_string()))?;
            (
                handler
                    .serve_with_lifecycle(guarded(transport, &calls), lifecycle.clone())
                    .await
                    .map_err(init_error)?,
                None,
                None,
            )
        }
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
    if let (Some(revision), Some(CallLane::Http(lane))) = (&stateless, &lane) {
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
    let offer = Offer::read(service.peer(), initialized)
        .await
        .map_err(|e| ConnectError::List(worded(&e)))?;
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

/// Serves `handler` over streamable HTTP with `client`, and the [`HttpLane`] beside it.
async fn serve_http<C>(
    handler: UpstreamClient,
    client: C,
    config: StreamableHttpClientTransportConfig,
    lifecycle: ClientLifecycleMode,
    calls: &CallRoutes,
) -> (
    Result<RunningService<RoleClient, UpstreamClient>, ClientInitializeError>,
    HttpLane,
)
where
    C: StreamableHttpClient<Error = HttpError> + Sync,
{
    let session = SessionSlot::default();
    let client = TracedHttp::new(client, session.clone());
    let lane_config = config.clone();
    let transport = StreamableHttpClientTransport::with_client(client.clone(), config);
    let (transport, inbound) = Inbound::new(transport);
    let lane = HttpLane::new(client, &lane_config, session, &inbound);
    let service = handler
        .serve_with_lifecycle(guarded(transport, calls), lifecycle)
        .await;
    (service, lane)
}

/// What rmcp's service loop reads from an upstream: its progress kept in order with the
/// answers ([`ProgressInOrder`]), and its notifications handled a bounded number at a time
/// ([`InFlightBound`]).
fn guarded<T: Transport<RoleClient>>(
    transport: T,
    calls: &CallRoutes,
) -> InFlightBound<ProgressInOrder<T>> {
    InFlightBound::new(ProgressInOrder::new(transport, calls.clone()))
}

fn header_map(
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
