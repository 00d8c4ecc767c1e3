//! Who the gateway says it is at `initialize`: itself, or the one server it stands in for.
//!
//! Normally the gateway answers as `mcp-gateway`, with its own instructions (and, under
//! each server's name, the instructions of the servers the session sees:
//! `registry::instructions`) and the capabilities of everything it federates. With exactly one enabled upstream exposed
//! unchanged (`prefix = ""` and `rewrite_uris = false`) it is a transparent proxy, and a
//! client must not be able to tell it from the server: the `initialize` result carries the
//! upstream's `serverInfo`, `instructions` and capabilities (tools, prompts, resources,
//! completions and logging as the upstream declared them; `experimental` and the upstream's
//! extensions are left out: `server/discover` names the one the gateway serves itself,
//! tasks, see `crate::tasks`). A session whose profile lists the
//! gateway's own tools (`run_code`, `search_tools`) is told about tools in any case.
//!
//! A client may arrive before the upstream is up. `initialize` then waits for the
//! upstream's first connection attempt, for at most [`FIRST_ATTEMPT_WAIT`]; if the attempt
//! fails or takes longer, the client gets the gateway's own answer, and the upstream's
//! tools reach it by `list_changed` once it connects.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{Implementation, ServerConfig};

use crate::config::{CatalogMode, Mode};
use crate::gateway::Gateway;
use crate::registry::instructions;
use crate::session::Session;
use crate::upstream::Upstream;

/// How long a client's `initialize` waits for the stood-in upstream's first connection.
pub const FIRST_ATTEMPT_WAIT: Duration = Duration::from_secs(10);

const INSTRUCTIONS: &str = "mcp-gateway federates several MCP servers: tools are named \
     mcp__<server>__<tool> unless a server's configured prefix says otherwise.";

/// The one upstream the gateway stands in for, if the configuration makes it transparent.
pub fn stood_in_for(gateway: &Gateway) -> Option<Arc<Upstream>> {
    match gateway.registry().upstreams().as_slice() {
        [only] if only.config.prefix.as_deref() == Some("") && !only.config.rewrite_uris => {
            Some(only.clone())
        }
        _ => None,
    }
}

/// Waits (bounded) until the stood-in upstream, if any, has made its first attempt.
pub async fn settle(gateway: &Gateway) {
    if let Some(upstream) = stood_in_for(gateway)
        && !upstream.has_offered()
        && tokio::time::timeout(FIRST_ATTEMPT_WAIT, upstream.first_attempt())
            .await
            .is_err()
    {
        tracing::warn!(
            server = %upstream.name,
            "a client initialized before the upstream came up; it sees the gateway's own identity"
        );
    }
}

/// What `initialize` answers (before protocol negotiation) for `session`, if known.
pub fn info(gateway: &Gateway, session: Option<&Session>) -> ServerConfig {
    let own_tools = session.is_some_and(|session| {
        session.mode() != Mode::Native || session.profile.catalog == CatalogMode::Search
    });
    if let Some(offer) = stood_in_for(gateway).and_then(|upstream| upstream.last_offer()) {
        let mut capabilities = offer.capabilities.clone();
        capabilities.experimental = None;
        capabilities.extensions = None;
        if own_tools && capabilities.tools.is_none() {
            capabilities.tools = gateway.capabilities().tools;
        }
        let mut info = ServerConfig::new(capabilities);
        info.server_info = offer.server_info.clone().unwrap_or_else(own_implementation);
        info.instructions = offer.instructions.clone();
        return info;
    }
    let servers_say = session.and_then(|session| instructions::for_session(&gateway.view(session)));
    let instructions = match servers_say {
        Some(said) => format!("{INSTRUCTIONS}\n\n{said}"),
        None => INSTRUCTIONS.to_owned(),
    };
    ServerConfig::new(gateway.capabilities())
        .with_server_info(own_implementation())
        .with_instructions(instructions)
}

fn own_implementation() -> Implementation {
    Implementation::new("mcp-gateway", env!("CARGO_PKG_VERSION"))
}
