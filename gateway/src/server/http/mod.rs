//! The HTTP listener: the routes (`/mcp`, `/mcp/{profile}`, `/sse`, `/sse/{profile}`,
//! `/message`, `/healthz`, `/readyz`, `/metrics`, and the operator console at `/ui`), the
//! accept loop that bounds connections, and the guard every request passes first
//! ([`crate::listener_guard`]: Host/Origin checks, bearer tokens, static or an identity
//! provider's with `[listen.oauth]`, whose metadata is served here, and body limits).
//!
//! - [`connections`]: the accept loop (request-head timeout, connection cap, graceful
//!   close).
//! - [`dispatch`]: behind the guard, the drain's check, then the streamable HTTP paths
//!   matched first and the rest through the router.
//! - [`draining`]: during the shutdown drain, new sessions refused with 503, `/readyz`, and
//!   streamable HTTP answers counted until written.
//! - [`health`]: `/healthz` for people, `/readyz` for load balancers.

pub mod connections;
mod dispatch;
pub mod draining;
pub mod health;
mod sign_in;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::routing::{any, get};
use tokio_util::sync::CancellationToken;
use tower::Layer;

use self::dispatch::Dispatch;
use super::transport::sse;
use super::transport::streamable_http::StreamableHttp;
use super::{ServeError, unknown_profile};
use crate::auth::per_user::SIGN_IN_PATH;
use crate::auth::resource::{METADATA_PATH, ResourceServer};
use crate::gateway::Gateway;
use crate::listener_guard::{self, Security, SecurityLayer};
use crate::session::limits::Quotas;

/// The routes, all behind the security guard, then the drain's. A path naming no profile
/// gets 404.
fn routes(
    gateway: Arc<Gateway>,
    shutdown: CancellationToken,
) -> Result<Security<Dispatch>, ServeError> {
    let config = gateway.config();
    let guard = Arc::new(listener_guard::guard_for(&config)?);
    let quotas = Quotas::new(config.listen.limits.clone());
    let shutdown = streams_end(&gateway, shutdown);
    let default = StreamableHttp::new(&gateway, None, quotas.clone(), shutdown.clone());
    let mut router = Router::new();
    if let Some(oauth) = guard.resource_server() {
        router = metadata_routes(router, oauth);
    }
    gateway
        .downstream()
        .sign_ins
        .set_public_url(Some(&config.listen.public_base()));
    let signs_people_in = config
        .enabled_servers()
        .any(|(_, server)| server.oauth.as_ref().is_some_and(|o| o.per_identity()));
    if signs_people_in
        && config.listen.public_url.is_none()
        && config.listen.address.ip().is_unspecified()
    {
        tracing::warn!(
            "per-user sign-ins send people to {}/oauth/…, which no browser can reach: \
             set [listen] public_url",
            config.listen.public_base()
        );
    }
    let mut router = router
        .route("/mcp/{profile}", any(unrouted_profile))
        .route("/healthz", get(health::healthz))
        .route(listener_guard::READINESS_PATH, get(health::readyz))
        .route("/metrics", get(metrics))
        .with_state(gateway.clone())
        .merge(sign_in::routes(gateway.clone(), guard.clone()));
    let profiles: Vec<_> = config
        .profiles
        .keys()
        .map(|name| {
            let endpoint = StreamableHttp::new(
                &gateway,
                Some(name.clone()),
                quotas.clone(),
                shutdown.clone(),
            );
            (name.clone(), endpoint)
        })
        .collect();
    if config.listen.ui_enabled() {
        router = router.merge(crate::ui::router(gateway.clone(), guard.clone()));
    }
    let router = router
        .merge(sse::service(&gateway, quotas, shutdown))
        // The guard bounds every body; axum's own 2 MB default must not undercut it.
        .layer(axum::extract::DefaultBodyLimit::max(
            config.listen.max_body_bytes,
        ));
    let dispatch = Dispatch::new(gateway.drain().clone(), default, profiles, router);
    Ok(SecurityLayer::new(guard).layer(dispatch))
}

/// What ends the sessions' open streams: `shutdown`, or, before it, the drain ending the
/// sessions left open after its linger (the listener then still answers for a moment).
fn streams_end(gateway: &Gateway, shutdown: CancellationToken) -> CancellationToken {
    let streams = CancellationToken::new();
    let over = gateway.drain().sessions_over_token();
    let ended = streams.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = over.cancelled() => {}
        }
        ended.cancel();
    });
    streams
}

/// `[listen.oauth]`'s protected resource metadata (RFC 9728), at the well-known path alone
/// and with the resource's path appended; the guard lets these through without a token.
fn metadata_routes<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    oauth: Arc<ResourceServer>,
) -> Router<S> {
    let metadata = axum::Json(oauth.metadata());
    let answer = move |uri: http::Uri| {
        let found = oauth.is_metadata_path(uri.path());
        let metadata = metadata.clone();
        async move {
            if found {
                metadata.into_response()
            } else {
                http::StatusCode::NOT_FOUND.into_response()
            }
        }
    };
    router
        .route(METADATA_PATH, get(answer.clone()))
        .route(&format!("{METADATA_PATH}/{{*resource}}"), get(answer))
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
    // A 2026-07-28 client's retry may reach this replica for a call another holds, and
    // the other way round.
    crate::server::core::handover::take_handed_over(&gateway);
    let routes = routes(gateway, shutdown.clone())?;
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| ServeError::Bind { address, source })?;
    tracing::info!(
        "listening on http://{} (streamable HTTP at /mcp, SSE at /sse)",
        listener.local_addr()?
    );
    connections::serve(listener, routes, (&listen).into(), shutdown).await;
    Ok(())
}

/// Over stdio the gateway has no listener for a browser to come back to: when a server
/// signs each caller in (`per_user`, token exchange), a loopback one serves the sign-in
/// pages alone (`/oauth/sign-in`, `/oauth/callback`), behind the same guard, on that server's `redirect_port` (else
/// any free port), until `shutdown`. It is bound when this returns (so a sign-in that
/// comes at once has its callback URL); the future it gives serves it.
pub async fn bind_sign_in_callbacks(
    gateway: Arc<Gateway>,
    shutdown: CancellationToken,
) -> Result<Option<impl Future<Output = ()>>, ServeError> {
    let config = gateway.config();
    let ports: Vec<u16> = config
        .enabled_servers()
        .filter_map(|(_, server)| server.oauth.as_ref())
        .filter(|oauth| oauth.per_identity())
        .map(|oauth| oauth.redirect_port.unwrap_or(0))
        .collect();
    if ports.is_empty() {
        return Ok(None);
    }
    let port = ports.into_iter().find(|port| *port != 0).unwrap_or(0);
    let guard = Arc::new(listener_guard::guard_for(&config)?);
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| ServeError::Bind { address, source })?;
    let local = listener.local_addr()?;
    gateway
        .downstream()
        .sign_ins
        .set_public_url(Some(&format!("http://{local}")));
    tracing::info!("per-user sign-ins begin at http://{local}{SIGN_IN_PATH}");
    let router = SecurityLayer::new(guard.clone()).layer(sign_in::routes(gateway, guard));
    let limits = (&config.listen).into();
    Ok(Some(connections::serve(listener, router, limits, shutdown)))
}

async fn metrics(State(gateway): State<Arc<Gateway>>) -> impl IntoResponse {
    (
        [(
            http::header::CONTENT_TYPE,
            crate::observe::metrics::CONTENT_TYPE,
        )],
        gateway.metrics().encode(),
    )
}
