//! The downstream side: one MCP server over stdio, streamable HTTP (`/mcp`) and legacy
//! SSE (`/sse`), plus `/healthz` and `/metrics`, all behind the listener's guard.
//!
//! - [`listen`]: the `[listen]` section; [`connections`]: the accept loop (request-head
//!   timeout, connection cap, graceful close); [`security`]: the guard every request passes.
//! - [`handler`]: the MCP server of one session, whatever the transport.
//! - [`bound_sessions`] (streamable HTTP) and [`sse`] (legacy SSE): sessions kept to the
//!   credentials that opened them; [`handshake`]: stdio and SSE survive early messages.
//! - [`shared_sessions`]: streamable HTTP sessions any replica can serve (`crate::state`).
//! - [`subscriptions`]: resource subscriptions across sessions.

pub mod bound_sessions;
pub mod connections;
pub mod handler;
pub mod handshake;
pub mod listen;
pub mod security;
pub mod shared_sessions;
pub mod sse;
mod stdio;
pub mod subscriptions;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::routing::{any, get};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServerHandler, ServiceExt};
use tokio_util::sync::CancellationToken;

use crate::gateway::Gateway;
use bound_sessions::BoundSessions;
use shared_sessions::SharedSessions;
use handler::GatewayServer;
use handshake::Handshake;
use security::{SecurityGuard, SecurityLayer};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Security(#[from] security::SecurityError),
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

/// Serves one session over stdin/stdout until the client closes stdin or `shutdown`.
pub async fn serve_stdio(
    gateway: Arc<Gateway>,
    profile: Option<String>,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    if !gateway.has_profile(profile.as_deref()) {
        return Err(ServeError::UnknownProfile(profile.unwrap_or_default()));
    }
    let server = GatewayServer::new(gateway, profile);
    let (stdin, stdout) = stdio::streams();
    let transport = Handshake::new(
        AsyncRwTransport::new_server(stdin, stdout),
        server.supported_protocol_versions(),
    );
    let running = server
        .serve_with_ct(transport, shutdown.child_token())
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let _ = running.waiting().await;
    Ok(())
}

/// The HTTP routes: `/mcp`, `/mcp/{profile}`, `/sse`, `/sse/{profile}`, `/message`,
/// `/healthz`, `/metrics`, all behind the security guard. A path naming no profile gets 404.
pub fn router(gateway: Arc<Gateway>, shutdown: CancellationToken) -> Result<Router, ServeError> {
    let config = gateway.config();
    let guard = SecurityGuard::new(&config.listen)?;
    let default = streamable_http(&gateway, None, &shutdown);
    let mut router = Router::new()
        .route_service("/mcp", default.clone())
        .route_service("/mcp/", default)
        .route("/mcp/{profile}", any(unrouted_profile))
        .route("/healthz", get(healthz))
        .route(security::READINESS_PATH, get(readyz))
        .route("/metrics", get(metrics))
        .with_state(gateway.clone());
    for name in config.profiles.keys() {
        let service = streamable_http(&gateway, Some(name.clone()), &shutdown);
        router = router
            .route_service(&format!("/mcp/{name}"), service.clone())
            .route_service(&format!("/mcp/{name}/"), service);
    }
    let sessions = gateway.clone();
    let on_session: sse::SessionHandler = Arc::new(move |transport, request| {
        // A path must name a profile that exists, even when a bound token overrides it.
        if let Some(named) = &request.profile
            && !sessions.has_profile(Some(named))
        {
            return Err(sse::SseRejection {
                status: http::StatusCode::NOT_FOUND,
                message: unknown_profile(named),
            });
        }
        let bound = request
            .parts
            .extensions
            .get::<security::Credentials>()
            .and_then(|credentials| credentials.profile.clone());
        let profile = bound.or(request.profile);
        if !sessions.has_profile(profile.as_deref()) {
            return Err(sse::SseRejection {
                status: http::StatusCode::NOT_FOUND,
                message: unknown_profile(profile.as_deref().unwrap_or_default()),
            });
        }
        let server = GatewayServer::new(sessions.clone(), profile);
        let transport = Handshake::new(transport, server.supported_protocol_versions());
        tokio::spawn(async move {
            if let Ok(running) = server.serve(transport).await {
                let _ = running.waiting().await;
            }
        });
        Ok(())
    });
    let router = router
        .merge(sse::router(
            sse::SseServerConfig::default(),
            on_session,
            shutdown.clone(),
        ))
        // The guard bounds every body; axum's own 2 MB default must not undercut it.
        .layer(axum::extract::DefaultBodyLimit::max(
            config.listen.max_body_bytes,
        ))
        .layer(SecurityLayer::new(guard));
    Ok(router)
}

/// `/mcp/{profile}` for a profile with no route of its own: unknown, or added by a reload
/// (its path is made at the next start).
async fn unrouted_profile(
    State(gateway): State<Arc<Gateway>>,
    Path(profile): Path<String>,
) -> impl IntoResponse {
    let message = if gateway.has_profile(Some(&profile)) {
        format!(
            "profile `{profile}` was added after the gateway started: /mcp/{profile} is served \
             from the next start (/sse/{profile} works now)"
        )
    } else {
        unknown_profile(&profile)
    };
    (http::StatusCode::NOT_FOUND, message)
}

fn unknown_profile(name: &str) -> String {
    format!("Not Found: unknown profile `{name}` (no [profiles.{name}] in the configuration)")
}

/// The streamable HTTP service for one path, its sessions bound to their openers.
fn streamable_http(
    gateway: &Arc<Gateway>,
    profile: Option<String>,
    shutdown: &CancellationToken,
) -> BoundSessions {
    let gateway = gateway.clone();
    // Host, Origin and body size are checked by the security layer in front.
    let state = gateway.state.clone();
    let sessions = Arc::new(SharedSessions::new(
        state.clone(),
        &uuid::Uuid::new_v4().simple().to_string(),
    ));
    let mut config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_max_request_body_bytes(gateway.config().listen.max_body_bytes)
        .with_cancellation_token(shutdown.child_token());
    config.session_store = Some(sessions.store());
    let service = StreamableHttpService::new(
        move || Ok(GatewayServer::new(gateway.clone(), profile.clone())),
        sessions.clone(),
        config,
    );
    BoundSessions::new(service, sessions, state)
}

/// Serves HTTP on the configured address until `shutdown`.
pub async fn serve_http(
    gateway: Arc<Gateway>,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let listen = gateway.config().listen;
    let address = listen.address;
    security::check_bind(address, !listen.tokens.is_empty())?;
    let router = router(gateway, shutdown.clone())?;
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| ServeError::Bind { address, source })?;
    tracing::info!(
        "listening on http://{} (streamable HTTP at /mcp, SSE at /sse)",
        listener.local_addr()?
    );
    connections::serve(listener, router, (&listen).into(), shutdown).await;
    Ok(())
}

async fn healthz(State(gateway): State<Arc<Gateway>>) -> impl IntoResponse {
    let upstreams = gateway.registry.health();
    let ready = upstreams
        .values()
        .filter(|h| h.state == crate::upstream::UpstreamState::Ready)
        .count();
    let shared = gateway.state.is_ready();
    axum::Json(serde_json::json!({
        "status": if ready == upstreams.len() && shared { "ok" } else { "degraded" },
        "shared_state": if shared { "ready" } else { "unavailable" },
        "upstreams": upstreams,
    }))
}

/// For load balancers: 200 while this replica can open and serve sessions (its shared
/// state answers), 503 otherwise. Needs no token and no allowed Host, so probes reach it.
async fn readyz(State(gateway): State<Arc<Gateway>>) -> impl IntoResponse {
    if gateway.state.is_ready() {
        (http::StatusCode::OK, "ready\n")
    } else {
        (
            http::StatusCode::SERVICE_UNAVAILABLE,
            "not ready: shared state (Redis) unavailable\n",
        )
    }
}

async fn metrics(State(gateway): State<Arc<Gateway>>) -> impl IntoResponse {
    (
        [(
            http::header::CONTENT_TYPE,
            crate::observe::metrics::CONTENT_TYPE,
        )],
        gateway.metrics.encode(),
    )
}
