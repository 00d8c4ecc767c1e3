//! The downstream side: one MCP server over stdio, streamable HTTP (`/mcp`) and legacy
//! SSE (`/sse`), plus `/healthz` and `/metrics`, all behind the listener's guard.

pub mod handler;
pub mod security;
pub mod sse;
mod stdio;
pub mod subscriptions;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::get;
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::gateway::Gateway;
use handler::GatewayServer;
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
    let running = server
        .serve_with_ct(stdio::streams(), shutdown.child_token())
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let _ = running.waiting().await;
    Ok(())
}

/// The HTTP routes: `/mcp`, `/mcp/{profile}`, `/sse`, `/sse/{profile}`, `/message`,
/// `/healthz`, `/metrics`, all behind the security guard.
pub fn router(gateway: Arc<Gateway>, shutdown: CancellationToken) -> Result<Router, ServeError> {
    let config = gateway.config();
    let guard = SecurityGuard::new(&config.listen)?;
    let mut router = Router::new()
        .nest_service("/mcp", streamable_http(&gateway, None, &shutdown))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .with_state(gateway.clone());
    for name in config.profiles.keys() {
        router = router.nest_service(
            &format!("/mcp/{name}"),
            streamable_http(&gateway, Some(name.clone()), &shutdown),
        );
    }
    let sessions = gateway.clone();
    let on_session: sse::SessionHandler = Arc::new(move |transport, request| {
        let bound = request
            .parts
            .extensions
            .get::<security::AuthenticatedProfile>()
            .and_then(|p| p.0.clone());
        let profile = bound.or(request.profile);
        if !sessions.has_profile(profile.as_deref()) {
            return Err(sse::SseRejection {
                status: http::StatusCode::NOT_FOUND,
                message: format!("unknown profile `{}`", profile.unwrap_or_default()),
            });
        }
        let server = GatewayServer::new(sessions.clone(), profile);
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

fn streamable_http(
    gateway: &Arc<Gateway>,
    profile: Option<String>,
    shutdown: &CancellationToken,
) -> StreamableHttpService<GatewayServer, LocalSessionManager> {
    let gateway = gateway.clone();
    // Host, Origin and body size are checked by the security layer in front.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_max_request_body_bytes(gateway.config().listen.max_body_bytes)
        .with_cancellation_token(shutdown.child_token());
    StreamableHttpService::new(
        move || Ok(GatewayServer::new(gateway.clone(), profile.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    )
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
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await?;
    Ok(())
}

async fn healthz(State(gateway): State<Arc<Gateway>>) -> impl IntoResponse {
    let upstreams = gateway.registry.health();
    let ready = upstreams
        .values()
        .filter(|h| h.state == crate::upstream::UpstreamState::Ready)
        .count();
    axum::Json(serde_json::json!({
        "status": if ready == upstreams.len() { "ok" } else { "degraded" },
        "upstreams": upstreams,
    }))
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
