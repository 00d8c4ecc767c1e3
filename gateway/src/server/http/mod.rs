//! The HTTP listener: the routes (`/mcp`, `/mcp/{profile}`, `/sse`, `/sse/{profile}`,
//! `/message`, `/healthz`, `/readyz`, `/metrics`, and the operator console at `/ui`), the
//! accept loop that bounds connections, and the security guard every request passes first.
//!
//! - [`connections`]: the accept loop (request-head timeout, connection cap, graceful
//!   close).
//! - [`security`]: Host/Origin checks, bearer tokens and body limits.
//! - [`draining`]: during the shutdown drain, new sessions refused with 503, `/readyz`, and
//!   streamable HTTP answers counted until written.

pub mod connections;
pub mod draining;
pub mod security;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::routing::{any, get};
use tokio_util::sync::CancellationToken;

use super::transport::{sse, streamable_http};
use super::{ServeError, unknown_profile};
use crate::gateway::Gateway;
use security::{SecurityGuard, SecurityLayer};

/// The routes, all behind the security guard, then the drain's. A path naming no profile
/// gets 404.
pub fn router(gateway: Arc<Gateway>, shutdown: CancellationToken) -> Result<Router, ServeError> {
    let config = gateway.config();
    let guard = Arc::new(SecurityGuard::new(&config.listen)?);
    let default = streamable_http::service(&gateway, None, &shutdown);
    let mut router = Router::new()
        .route_service("/mcp", default.clone())
        .route_service("/mcp/", default)
        .route("/mcp/{profile}", any(unrouted_profile))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route(
            "/readyz",
            get(draining::readyz).with_state(gateway.drain().clone()),
        )
        .with_state(gateway.clone());
    for name in config.profiles.keys() {
        let service = streamable_http::service(&gateway, Some(name.clone()), &shutdown);
        router = router
            .route_service(&format!("/mcp/{name}"), service.clone())
            .route_service(&format!("/mcp/{name}/"), service);
    }
    if config.listen.ui_enabled() {
        router = router.merge(crate::ui::router(gateway.clone(), guard.clone()));
    }
    let router = router
        .merge(sse::service(&gateway, shutdown))
        // The guard bounds every body; axum's own 2 MB default must not undercut it.
        .layer(axum::extract::DefaultBodyLimit::max(
            config.listen.max_body_bytes,
        ))
        .layer(axum::middleware::from_fn_with_state(
            gateway.drain().clone(),
            draining::guard,
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

/// Serves HTTP on the configured address until `shutdown`.
pub async fn serve(gateway: Arc<Gateway>, shutdown: CancellationToken) -> Result<(), ServeError> {
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
    let status = if gateway.drain().is_draining() {
        "draining"
    } else if ready == upstreams.len() {
        "ok"
    } else {
        "degraded"
    };
    axum::Json(serde_json::json!({
        "status": status,
        "upstreams": upstreams,
        "code_confinement": crate::code::confinement_support(),
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
