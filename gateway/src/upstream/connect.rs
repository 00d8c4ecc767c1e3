//! Opening one upstream connection, whatever its [`Kind`], and closing it again: the kind
//! the configuration names opens it; what follows is the same for every kind: learning
//! the revision the server speaks, the context a server of 2026-07-28 is sent with every
//! request, and reading what it offers. A new transport is one module with its `Kind`
//! and one configuration variant, matched in [`connect`].

use std::sync::Arc;
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::RoleClient;
use rmcp::model::{ProtocolVersion, RequestMetaObject};
use rmcp::service::{
    ClientCacheConfig, ClientLifecycleMode, RunningService, RunningServiceCancellationToken,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::client::{self, StreamRequests, UpstreamClient, UpstreamEvent};
use super::kind::{CONNECT_TIMEOUT, ConnectError, Kind, Opened, Opening};
use super::offer::{Lister, Offer};
use super::per_user::SignsInAs;
use super::stdio::child::{ProcessGroup, Violation};
use super::{Live, sse, stdio, streamable_http};
use crate::config::{Endpoint, RemoteTransport, ServerConfig, UpstreamProtocol};
use crate::relay::{CallRoutes, Downstream};
use crate::sandbox;

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
    let handler = UpstreamClient::new(
        name.clone(),
        events.clone(),
        calls.clone(),
        downstream.clone(),
    );
    // Its twin relays what a server without a session asks on the lane's calls' streams.
    let twin = UpstreamClient::new(name.clone(), events.clone(), calls.clone(), downstream);
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
    if let Some(revision) = &stateless {
        lane.serve_stateless(revision, StreamRequests::new(twin, service.peer().clone()));
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
        lane: &lane,
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
        listens: Default::default(),
    });
    Ok(Connection::new(live, service, group, signed_out))
}
