//! How the replica is doing, asked two ways: `/healthz` for people and dashboards (every
//! upstream, the shared state, the drain), `/readyz` for load balancers (one answer: send
//! new clients here or not).
//!
//! The two must agree on what "ready" means, so both read one [`Readiness`].

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};

use crate::gateway::Gateway;
use crate::gateway::drain::RETRY_AFTER_SECS;

/// Whether this replica takes new sessions, and if not, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// The shutdown drain has begun: open sessions finish, new ones go elsewhere.
    Draining,
    /// `[cluster]` state lives in Redis and Redis does not answer: no session can be
    /// opened or resumed until it does (the replica recovers on its own).
    SharedStateUnavailable,
}

impl Readiness {
    /// The replica's readiness now. A drain wins: it does not end when Redis returns.
    pub fn of(gateway: &Gateway) -> Self {
        if gateway.drain().is_draining() {
            Self::Draining
        } else if !gateway.shared_state().is_ready() {
            Self::SharedStateUnavailable
        } else {
            Self::Ready
        }
    }

    /// The word `/readyz` and `/healthz` report.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::Draining => "draining",
            Self::SharedStateUnavailable => "shared_state_unavailable",
        }
    }
}

/// `GET /healthz`: every upstream's state (a stdio server's with its confinement), the
/// shared state's, the drain's, run_code's, and what the kernel offers stdio servers'
/// sandbox.
pub async fn healthz(State(gateway): State<Arc<Gateway>>) -> impl IntoResponse {
    let upstreams = gateway.registry().health();
    let ready = upstreams
        .values()
        .filter(|h| h.state == crate::upstream::UpstreamState::Ready)
        .count();
    let readiness = Readiness::of(&gateway);
    let status = match readiness {
        Readiness::Draining => "draining",
        Readiness::SharedStateUnavailable => "degraded",
        Readiness::Ready if ready == upstreams.len() => "ok",
        Readiness::Ready => "degraded",
    };
    axum::Json(serde_json::json!({
        "status": status,
        "readiness": readiness.as_str(),
        "shared_state": if gateway.shared_state().is_ready() { "ready" } else { "unavailable" },
        "upstreams": upstreams,
        "code_confinement": crate::code::confinement_support(),
        "sandbox": crate::sandbox::kernel_report(),
        "code_runner": gateway.run_code().map(|tool| tool.next_runner()),
    }))
}

/// `GET /readyz`: `200` while the replica takes new sessions; `503` with `Retry-After`
/// from the moment it starts to stop or while its shared state (Redis) is unavailable, so
/// a load balancer sends no more clients. Needs no token and no allowed Host (see
/// [`crate::listener_guard::READINESS_PATH`]): it says only whether, and why not.
pub async fn readyz(State(gateway): State<Arc<Gateway>>) -> Response {
    let readiness = Readiness::of(&gateway);
    let body = axum::Json(serde_json::json!({"status": readiness.as_str()}));
    if readiness == Readiness::Ready {
        body.into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, RETRY_AFTER_SECS.to_string())],
            body,
        )
            .into_response()
    }
}
