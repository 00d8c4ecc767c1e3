//! What the console's pages read: JSON views of the gateway's state, each behind the
//! login cookie. The page polls these to stay live.

use axum::Json;
use axum::extract::{Path, Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::UiState;
use super::auth::Operator;
use super::error::UiError;
use super::history;
use crate::config::{Config, Endpoint, RemoteTransport};
use crate::pipeline::trace::gate_parts;
use crate::policies::activity::CallRecord;
use crate::policies::rules::RuleGate;
use crate::registry::profile::{DEFAULT_PROFILE, Profiles};

/// The profile names a console user can pick: `default` first.
pub fn profile_names(config: &Config) -> Vec<String> {
    std::iter::once(DEFAULT_PROFILE.to_owned())
        .chain(
            config
                .profiles
                .keys()
                .filter(|name| *name != DEFAULT_PROFILE)
                .cloned(),
        )
        .collect()
}

/// `GET /ui/api/servers`: every configured server, enabled or not, with its health and
/// what it offers.
pub async fn servers(State(state): State<UiState>, _: Operator) -> Json<Value> {
    let gateway = &state.gateway;
    let config = gateway.config();
    let health = gateway.registry().health();
    let catalog = gateway.catalog();
    let held = gateway.registry().pins().counts();
    let servers: Vec<Value> = config
        .servers
        .iter()
        .map(|(name, server)| {
            let owned = |owner: &str| owner == name.as_str();
            let tools = catalog.tools.values().filter(|t| owned(&t.server)).count();
            let prompts = catalog
                .prompts
                .values()
                .filter(|p| owned(&p.server))
                .count();
            let resources = catalog.resources.iter().filter(|(s, _)| owned(s)).count()
                + catalog
                    .resource_templates
                    .iter()
                    .filter(|(s, _)| owned(s))
                    .count();
            let (kind, target) = match server.endpoint() {
                Endpoint::Stdio { command, .. } => ("stdio", command),
                Endpoint::Remote { url, transport, .. } => (
                    match transport {
                        RemoteTransport::StreamableHttp => "streamable-http",
                        RemoteTransport::Sse => "sse",
                    },
                    crate::redact::urls(&url),
                ),
            };
            let health = health.get(name);
            // The sign-in state is whatever the server's status says of OAuth, when it says
            // anything (only servers that sign in with OAuth do): shown as the status has it.
            let sign_in = health
                .and_then(|h| serde_json::to_value(h).ok())
                .and_then(|h| h.get("oauth").cloned())
                .unwrap_or(Value::Null);
            // A stdio server's confinement: as of its last start, else as it would start.
            let sandbox = health
                .and_then(|h| h.sandbox.clone())
                .or_else(|| crate::sandbox::describe(name, server).and_then(Result::ok));
            json!({
                "name": name,
                "enabled": server.enabled,
                "kind": kind,
                "target": target,
                "state": health.map_or(json!("disabled"), |h| json!(h.state)),
                "pid": health.and_then(|h| h.pid),
                "restarts": health.map_or(0, |h| h.restarts),
                "held_definitions": held.get(name).map_or(0, |(_, held)| *held),
                "last_error": health.and_then(|h| h.last_error.clone()),
                "tools": tools,
                "prompts": prompts,
                "resources": resources,
                "sign_in": sign_in,
                "sandbox": sandbox,
            })
        })
        .collect();
    Json(json!({ "servers": servers }))
}

/// `GET /ui/api/sign-ins`: each per-user server's sign-ins, one per person (identity,
/// state, expiry, scopes; never a token), or why they cannot be read.
pub async fn sign_ins(State(state): State<UiState>, _: Operator) -> Json<Value> {
    let mut servers = Vec::new();
    for upstream in state.gateway.registry().upstreams() {
        let Some(people) = upstream.people() else {
            continue;
        };
        servers.push(match people {
            Ok(people) => json!({"server": upstream.name, "people": people.list().await}),
            Err(why) => json!({"server": upstream.name, "error": why}),
        });
    }
    Json(json!({ "servers": servers }))
}

/// `GET /ui/api/catalog`: every federated tool (with schema, annotations, the profiles
/// that see it and the gate's decision), prompt and resource.
pub async fn catalog(State(state): State<UiState>, _: Operator) -> Json<Value> {
    let gateway = &state.gateway;
    let config = gateway.config();
    let catalog = gateway.catalog();
    let names = profile_names(&config);
    let profiles = Profiles::new(&config);
    let seen_by = |name: &str| -> Vec<&String> {
        names
            .iter()
            .filter(|p| {
                let key = (p.as_str() != DEFAULT_PROFILE).then_some(p.as_str());
                profiles.get(key).is_some_and(|profile| profile.sees(name))
            })
            .collect()
    };
    let gate = RuleGate::new(&config.policy);
    let tools: Vec<Value> = catalog
        .tools
        .values()
        .map(|tool| {
            let decision = gate.decision_for(&tool.name);
            let (decision, reason) = gate_parts(&decision);
            json!({
                "name": tool.name,
                "server": tool.server,
                "original": tool.original,
                "title": tool.definition.title,
                "description": tool.definition.description,
                "input_schema": tool.definition.input_schema,
                "output_schema": tool.definition.output_schema,
                "annotations": tool.definition.annotations,
                "timeout_ms": tool.timeout.map(|t| t.as_millis() as u64),
                "concurrency_safe": tool.concurrency_safe,
                "profiles": seen_by(&tool.name),
                "decision": decision,
                "reason": reason,
            })
        })
        .collect();
    let prompts: Vec<Value> = catalog
        .prompts
        .values()
        .map(|prompt| {
            json!({
                "name": prompt.definition.name,
                "server": prompt.server,
                "description": prompt.definition.description,
                "arguments": prompt.definition.arguments,
                "profiles": seen_by(&prompt.definition.name),
            })
        })
        .collect();
    let resources: Vec<Value> = catalog
        .resources
        .iter()
        .map(|(server, r)| {
            json!({"uri": r.uri, "name": r.name, "server": server,
                   "description": r.description, "mime_type": r.mime_type, "template": false})
        })
        .chain(catalog.resource_templates.iter().map(|(server, t)| {
            json!({"uri": t.uri_template, "name": t.name, "server": server,
                   "description": t.description, "mime_type": t.mime_type, "template": true})
        }))
        .collect();
    Json(json!({
        "tools": tools,
        "prompts": prompts,
        "resources": resources,
        "profiles": names,
        "ask_fallback": config.gate.ask_fallback,
    }))
}

#[derive(Deserialize)]
pub struct ActivityQuery {
    #[serde(default)]
    after: u64,
    #[serde(default = "default_limit")]
    limit: usize,
}

fn default_limit() -> usize {
    200
}

/// One call as the feed lists it (the trace has the rest).
fn summary(call: &CallRecord) -> Value {
    json!({
        "seq": call.seq,
        "at_ms": call.at_ms,
        "session": call.session,
        "profile": call.profile,
        "tool": call.tool,
        "origin": call.origin,
        "gate": call.gate,
        "approved": call.approved,
        "duration_ms": call.duration_ms,
        "result_bytes": call.result_bytes,
        "is_error": call.is_error,
        "error_code": call.error_code,
    })
}

/// `GET /ui/api/activity?after=SEQ&limit=N`: calls finished after `after`, oldest first.
pub async fn activity(
    State(state): State<UiState>,
    _: Operator,
    Query(query): Query<ActivityQuery>,
) -> Json<Value> {
    let calls = state
        .gateway
        .activity()
        .since(query.after, query.limit.min(1000));
    let latest = calls.last().map_or(query.after, |c| c.seq);
    Json(json!({
        "calls": calls.iter().map(|c| summary(c)).collect::<Vec<_>>(),
        "latest": latest,
    }))
}

/// `GET /ui/api/activity/{seq}`: one call in full, with its pipeline trace.
pub async fn call_trace(
    State(state): State<UiState>,
    _: Operator,
    Path(seq): Path<u64>,
) -> Result<Json<Value>, UiError> {
    let call = state
        .gateway
        .activity()
        .get(seq)
        .ok_or(UiError::UnknownCall(seq))?;
    Ok(Json(json!(*call)))
}

/// `GET /ui/api/history`: calls from the session logs on disk (before this process, or
/// beyond what is kept in memory).
pub async fn history(State(state): State<UiState>, _: Operator) -> Json<Value> {
    let policy = state.gateway.policy();
    let dir = policy.sessions_dir().map(std::path::Path::to_owned);
    let calls = match dir {
        Some(dir) => tokio::task::spawn_blocking(move || history::recent_calls(&dir))
            .await
            .unwrap_or_default(),
        None => Vec::new(),
    };
    Json(json!({"calls": calls, "enabled": policy.sessions_dir().is_some()}))
}

/// `GET /ui/api/sessions`: the sessions open now.
pub async fn sessions(State(state): State<UiState>, _: Operator) -> Json<Value> {
    Json(json!({"sessions": state.gateway.sessions().list()}))
}

#[derive(Deserialize)]
pub struct MetricsQuery {
    #[serde(default)]
    scope: Option<String>,
}

/// `GET /ui/api/metrics?scope=all|server:NAME|tool:NAME`: the last hour of calls/s,
/// latency percentiles and errors by code.
pub async fn metrics(
    State(state): State<UiState>,
    _: Operator,
    Query(query): Query<MetricsQuery>,
) -> Json<Value> {
    let catalog = state.gateway.catalog();
    let server_of = |tool: &str| -> String {
        catalog.tools.get(tool).map_or_else(
            || {
                if tool == crate::code::tool::RUN_CODE {
                    "gateway".to_owned()
                } else {
                    "unknown".to_owned()
                }
            },
            |t| t.server.to_string(),
        )
    };
    Json(state.history.report(query.scope.as_deref(), &server_of))
}

/// `GET /ui/api/config`: the effective configuration with secrets masked (as `config
/// dump` prints it) and how the last reload went.
pub async fn config(State(state): State<UiState>, _: Operator) -> Json<Value> {
    let config = state.gateway.config();
    Json(json!({
        "source": config.source,
        "toml": config.dump_masked(),
        "last_reload": state.gateway.last_reload(),
    }))
}

/// `GET /ui/api/asks`: the questions waiting for a person.
pub async fn asks(State(state): State<UiState>, _: Operator) -> Json<Value> {
    let config = state.gateway.config();
    Json(json!({
        "pending": state.gateway.console_asks().pending(),
        "ask_fallback": config.gate.ask_fallback,
        "timeout_ms": config.gate.ask_timeout_ms,
    }))
}

/// `GET /ui/api/pins`: the tool definitions held for an operator's approval, each with
/// the reasons and a diff from the approved definition (see `registry::pins`), and where
/// approvals are kept.
pub async fn pins(State(state): State<UiState>, _: Operator) -> Json<Value> {
    let pins = state.gateway.registry().pins();
    let (held, error) = match pins.held() {
        Ok(held) => (held, None),
        Err(error) => (Vec::new(), Some(error)),
    };
    Json(json!({"place": pins.place(), "held": held, "error": error}))
}
