//! `logging/setLevel` (2025-11-25 and earlier): the session's log level, and the lowest
//! level any session wants, which every upstream is told. A client of 2026-07-28 names
//! its level in each request instead.

#![allow(deprecated, reason = "logging/setLevel is what pre-2026 clients use")]

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{LoggingLevel, ServerResult, SetLevelRequest, SetLevelRequestParams};

use super::{Call, Key, Route, Serves};
use crate::gateway::Gateway;
use crate::relay::ClientLink;
use crate::session::Session;

/// How long `logging/setLevel` waits for the upstreams to take a new level.
const SET_LEVEL_WAIT: Duration = Duration::from_secs(5);

impl Route for SetLevelRequest {
    const SERVES: Serves = Serves::SESSION;

    fn key(&self) -> Option<Key<'_>> {
        None
    }

    async fn serve(self, call: Call) -> Result<ServerResult, ErrorData> {
        call.set_level(self.params).await
    }
}

impl Call {
    /// This session's level; upstreams are told the lowest level any session wants.
    async fn set_level(&self, request: SetLevelRequestParams) -> Result<ServerResult, ErrorData> {
        let link = self.session.link(self.link.client().clone());
        adopt_level(self.gateway(), &self.session, link, request.level).await;
        // Kept with the session's shared record, for a replica that takes it over.
        let state = self.gateway().shared_state();
        if let Some(level) = self.session.record().log_level
            && let Err(e) = state.set_log_level(&self.session.id, &level).await
        {
            tracing::warn!(session = %self.session.id, "log level not shared: {e}");
        }
        Ok(ServerResult::empty(()))
    }
}

/// Makes `level` the session's log level; when that changes the lowest level any session
/// wants, every upstream is told before this returns (or was given time).
async fn adopt_level(gateway: &Gateway, session: &Session, link: ClientLink, level: LoggingLevel) {
    let listeners = &gateway.downstream().listeners;
    let before = listeners.lowest();
    let lowest = listeners.set_level(&session.id.as_str().into(), session.reach(), link, level);
    if before != Some(lowest) {
        // Answered once the upstreams have the level (or were given time to take it), so
        // the client's next call already logs at it.
        let told = gateway
            .registry()
            .upstreams()
            .into_iter()
            .map(|upstream| async move {
                upstream.set_log_level(lowest).await;
            });
        let _ = tokio::time::timeout(SET_LEVEL_WAIT, futures::future::join_all(told)).await;
    }
}

/// A session another replica opened (streamable HTTP, restored here) keeps the log level
/// its client set there.
pub(in crate::server::core) async fn resume_log_level(gateway: &Gateway, session: &Session) {
    let Some(client) = session.client() else {
        return;
    };
    let level = match gateway.shared_state().touch_session(&session.id).await {
        Ok(Some(record)) => record.log_level,
        Ok(None) => None,
        Err(e) => {
            tracing::warn!(session = %session.id, "shared log level not read: {e}");
            None
        }
    };
    let level = level.and_then(|level| serde_json::from_value(level.into()).ok());
    if let Some(level) = level {
        adopt_level(gateway, session, session.link(client.clone()), level).await;
    }
}
