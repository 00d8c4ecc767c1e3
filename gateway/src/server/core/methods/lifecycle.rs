//! The lifecycle: `initialize` opens a session (2025-11-25 and earlier), `server/discover`
//! tells a client of any revision what the gateway speaks and offers, `ping` answers
//! within a session; and the client's roots, which every upstream is told of when they
//! change.

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{
    DiscoverRequest, DiscoverResult, InitializeRequest, InitializeRequestParams, PingRequest,
    ServerResult, TASKS_EXTENSION_ID,
};

use super::{Call, Key, Route, Serves};
use crate::gateway::Gateway;
use crate::server::core::revision;
use crate::server::core::watch;
use crate::server::identity;

impl Route for InitializeRequest {
    const SERVES: Serves = Serves::LIFECYCLE;

    fn key(&self) -> Option<Key<'_>> {
        None
    }

    async fn serve(self, call: Call) -> Result<ServerResult, ErrorData> {
        call.initialize(self.params).await
    }
}

impl Route for DiscoverRequest {
    const SERVES: Serves = Serves::EVERY;

    fn key(&self) -> Option<Key<'_>> {
        None
    }

    async fn serve(self, call: Call) -> Result<ServerResult, ErrorData> {
        Ok(call.discover())
    }
}

impl Route for PingRequest {
    const SERVES: Serves = Serves::LIFECYCLE;

    fn key(&self) -> Option<Key<'_>> {
        None
    }

    async fn serve(self, _call: Call) -> Result<ServerResult, ErrorData> {
        Ok(ServerResult::empty(()))
    }
}

impl Call {
    async fn initialize(
        &self,
        request: InitializeRequestParams,
    ) -> Result<ServerResult, ErrorData> {
        let gateway = self.gateway();
        let session = &self.session;
        identity::settle(gateway).await;
        let mut client = request;
        client.protocol_version = revision::negotiate(&client.protocol_version);
        // Tasks are an extension of 2026-07-28: a session has none, whatever its client
        // declares, so no server is asked for one on its behalf.
        if let Some(extensions) = &mut client.capabilities.extensions {
            extensions.remove(TASKS_EXTENSION_ID);
        }
        // What the client can list from now on: the watcher tells it of any change since.
        watch::shown_at_initialize(gateway, session);
        let mut answer = identity::info(gateway, Some(session));
        answer.protocol_version = client.protocol_version.clone();
        session.set_client(Arc::new(client));
        Ok(ServerResult::InitializeResult(answer))
    }

    fn discover(&self) -> ServerResult {
        let mut info = identity::info(self.gateway(), Some(&self.session));
        // Tasks are the gateway's to keep, whoever does the work (see `crate::tasks`).
        info.capabilities
            .extensions
            .get_or_insert_default()
            .insert(TASKS_EXTENSION_ID.into(), Default::default());
        ServerResult::DiscoverResult(DiscoverResult::from_server_info(
            revision::supported().to_vec(),
            info,
        ))
    }
}

/// `session`'s roots changed: every upstream may have asked for them, so each is told.
pub(in crate::server::core) async fn roots_changed(gateway: &Gateway, session: &str) {
    for upstream in gateway.registry().upstreams() {
        upstream.tell_roots_changed(session).await;
    }
}
