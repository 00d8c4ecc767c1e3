//! The operator console at `/ui`: a browser page to see and steer a running gateway —
//! its servers, catalog, live calls, sessions, metrics, configuration, the `ask`
//! questions waiting for a person, and the tool definitions held for approval.
//!
//! ```toml
//! [listen]
//! ui = true            # default: on when the listener is loopback, off otherwise
//! [gate]
//! ask_fallback = "console"   # questions a client cannot be asked wait here
//! ```
//!
//! - [`auth`]: the token entered once, the login cookie and the CSRF token.
//! - [`api`]: what the pages read (JSON); [`actions`]: what they change.
//! - [`history`]: past calls read back from the session logs.
//! - [`metrics_history`]: the last hour of the gateway's own counters, for the charts.
//! - [`assets`]: the page itself (HTML, CSS, JavaScript), compiled into the binary: no
//!   CDN, nothing fetched at run time, no build step.
//!
//! The routes sit behind the listener's guard like every other route (Host, Origin and
//! body size); the guard leaves the token check to [`auth`] for `/ui` only, since a
//! browser cannot attach a bearer header to a page load. Pages stay live by short
//! polling of the JSON API.

pub mod actions;
pub mod api;
mod assets;
pub mod auth;
pub mod error;
mod history;
pub mod metrics_history;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

use crate::gateway::Gateway;
use crate::listener_guard::SecurityGuard;
use auth::Logins;
use metrics_history::MetricsHistory;

/// What every console handler shares.
#[derive(Clone)]
pub struct UiState {
    pub gateway: Arc<Gateway>,
    /// The listener's guard, which checks the token at login.
    pub guard: Arc<SecurityGuard>,
    pub logins: Arc<Logins>,
    pub history: Arc<MetricsHistory>,
}

/// The console's routes, to merge into the listener's router (inside its guard). Starts
/// the metrics sampler, which ends with the gateway, and the recording of calls for the
/// Activity page.
pub fn router(gateway: Arc<Gateway>, guard: Arc<SecurityGuard>) -> Router {
    gateway.activity().start_recording();
    let history = MetricsHistory::start(&gateway);
    let state = UiState {
        gateway,
        guard,
        logins: Arc::default(),
        history,
    };
    Router::new()
        .route("/ui", get(assets::index))
        .route("/ui/", get(assets::index))
        .route("/ui/assets/{file}", get(assets::file))
        .route("/ui/api/login", get(auth::login_info).post(auth::login))
        .route("/ui/api/me", get(auth::me))
        .route("/ui/api/logout", post(auth::logout))
        .route("/ui/api/servers", get(api::servers))
        .route("/ui/api/servers/{name}/{action}", post(actions::server))
        .route("/ui/api/sign-ins", get(api::sign_ins))
        .route(
            "/ui/api/sign-ins/{name}/revoke",
            post(actions::revoke_sign_in),
        )
        .route("/ui/api/catalog", get(api::catalog))
        .route("/ui/api/call", post(actions::call))
        .route("/ui/api/activity", get(api::activity))
        .route("/ui/api/activity/{seq}", get(api::call_trace))
        .route("/ui/api/history", get(api::history))
        .route("/ui/api/sessions", get(api::sessions))
        .route("/ui/api/metrics", get(api::metrics))
        .route("/ui/api/config", get(api::config))
        .route("/ui/api/asks", get(api::asks))
        .route("/ui/api/asks/{id}", post(actions::answer))
        .route("/ui/api/pins", get(api::pins))
        .route("/ui/api/pins/approve", post(actions::approve_definition))
        .with_state(state)
}
