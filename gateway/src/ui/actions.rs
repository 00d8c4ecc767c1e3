//! What the console changes: restart, disable or enable a server; run one call from
//! "try it"; answer a question waiting in the console; approve a held tool definition. Every action needs the login
//! cookie and the CSRF token ([`OperatorAction`]).
//!
//! None of them loses a call in flight, and none is taken once the gateway is stopping. Restart is the registry's own
//! ([`Registry::restart`](crate::registry::Registry::restart)): a new instance starts beside
//! the running one and takes over once its first connection attempt is over; the old one
//! finishes its calls (up to `shutdown_grace_ms`) and stops. Disable and enable apply the
//! running configuration with that server's `enabled` changed, through the path a reload
//! takes: a disabled server is retired the same way, an enabled one starts and joins the
//! catalog as it comes up. A later reload of the file applies the file again.

use axum::Json;
use axum::extract::{Path, State};
use rmcp::model::JsonObject;
use serde::Deserialize;
use serde_json::{Value, json};

use super::UiState;
use super::auth::OperatorAction;
use super::error::UiError;
use crate::pipeline::CallRequest;
use crate::registry::profile::DEFAULT_PROFILE;

/// What revoking a sign-in names: whose.
#[derive(Deserialize)]
pub struct Revoke {
    identity: String,
}

/// `POST /ui/api/sign-ins/{name}/revoke` with `{"identity"}`: revokes that person's
/// sign-in to the per-user server `name` (at the authorization server too, where it
/// offers revocation) and closes their connection; their next call asks them again.
pub async fn revoke_sign_in(
    State(state): State<UiState>,
    _: OperatorAction,
    Path(name): Path<String>,
    Json(revoke): Json<Revoke>,
) -> Result<Json<Value>, UiError> {
    let upstream = state
        .gateway
        .registry()
        .upstream(&name)
        .ok_or_else(|| UiError::UnknownServer(name.clone()))?;
    tracing::info!(server = %name, identity = %revoke.identity, "console: revoking a sign-in");
    match upstream.revoke(&revoke.identity).await {
        Ok(Some(revoked)) => Ok(Json(json!({
            "ok": true, "server": name, "identity": revoke.identity, "revoked_upstream": revoked,
        }))),
        Ok(None) => Err(UiError::BadRequest(format!(
            "{} has no sign-in to `{name}`",
            revoke.identity
        ))),
        Err(why) => Err(UiError::BadRequest(why)),
    }
}

/// `POST /ui/api/servers/{name}/{restart|disable|enable}`.
pub async fn server(
    State(state): State<UiState>,
    _: OperatorAction,
    Path((name, action)): Path<(String, String)>,
) -> Result<Json<Value>, UiError> {
    let gateway = &state.gateway;
    // A stopping gateway starts nothing new: its upstreams are about to be stopped.
    if gateway.drain().is_draining() {
        return Err(UiError::Draining);
    }
    let config = gateway.config();
    if !config.servers.contains_key(&name) {
        return Err(UiError::UnknownServer(name));
    }
    let with_enabled = |enabled: bool| {
        let mut changed = config.clone();
        for servers in [&mut changed.servers, &mut changed.servers_as_written] {
            if let Some(server) = servers.get_mut(&name) {
                server.enabled = enabled;
            }
        }
        changed
    };
    match action.as_str() {
        "restart" => {
            tracing::info!(server = %name, "console: restarting");
            gateway.registry().restart(&name).await?;
        }
        "disable" => {
            tracing::info!(server = %name, "console: disabling");
            gateway.apply(with_enabled(false)).await;
        }
        "enable" => {
            tracing::info!(server = %name, "console: enabling");
            gateway.apply(with_enabled(true)).await;
        }
        other => {
            return Err(UiError::BadRequest(format!(
                "unknown action `{other}` (restart, disable or enable)"
            )));
        }
    }
    Ok(Json(json!({"ok": true, "server": name, "action": action})))
}

#[derive(Deserialize)]
pub struct CallForm {
    tool: String,
    #[serde(default)]
    arguments: Option<JsonObject>,
    #[serde(default)]
    profile: Option<String>,
}

/// `POST /ui/api/call {tool, arguments, profile}`: one call through the whole pipeline
/// (gate, guards, validation, timeout, session log), in this login's console session
/// with that profile. The answer is the tool result and the call's place in the feed.
pub async fn call(
    State(state): State<UiState>,
    OperatorAction(login): OperatorAction,
    Json(form): Json<CallForm>,
) -> Result<Json<Value>, UiError> {
    let gateway = &state.gateway;
    let profile = form.profile.as_deref().unwrap_or(DEFAULT_PROFILE);
    let session = login.session(gateway, profile)?;
    let before = *gateway.activity().watch().borrow();
    let result = gateway
        .call(&session, CallRequest::operator(form.tool, form.arguments))
        .await;
    // The call's own record: the newest of this session's calls since it began.
    let seq = gateway
        .activity()
        .since(before, 1000)
        .iter()
        .rev()
        .find(|c| c.session == session.id)
        .map(|c| c.seq);
    Ok(Json(
        json!({"result": result, "seq": seq, "session": session.id}),
    ))
}

/// A person's decision on a question waiting in the console.
#[derive(Deserialize)]
pub struct AskDecision {
    approve: bool,
}

/// `POST /ui/api/asks/{id} {approve}`: lets the waiting call run, or denies it.
pub async fn answer(
    State(state): State<UiState>,
    _: OperatorAction,
    Path(id): Path<u64>,
    Json(decision): Json<AskDecision>,
) -> Result<Json<Value>, UiError> {
    state.gateway.console_asks().answer(id, decision.approve)?;
    tracing::info!(
        question = id,
        approved = decision.approve,
        "console: answered a question"
    );
    Ok(Json(json!({"ok": true})))
}

#[derive(Deserialize)]
pub struct Approval {
    /// The name clients know the tool by.
    name: String,
    /// The fingerprint of the held definition the operator was shown.
    sha256: String,
}

/// `POST /ui/api/pins/approve {name, sha256}`: approves the definition held for the tool
/// `name`, if it is still the one shown (`sha256`): clients see it and its calls run from
/// then on, on every replica.
pub async fn approve_definition(
    State(state): State<UiState>,
    _: OperatorAction,
    Json(approval): Json<Approval>,
) -> Result<Json<Value>, UiError> {
    let approved = state
        .gateway
        .registry()
        .pins()
        .approve(&approval.name, Some(&approval.sha256))
        .await?;
    Ok(Json(json!({"ok": true, "approved": approved})))
}
