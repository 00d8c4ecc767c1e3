//! What every method's handler may need: the request being served ([`Call`]), with the
//! session, the revision and the way to the client, and the helpers the families share
//! (forwarding to an upstream, the resource a URI names, the session's first list,
//! paging).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::ErrorData;
use rmcp::model::{
    CacheScope, ClientRequest, CustomResult, JsonObject, PaginatedRequestParams, RequestId,
    RequestMetaObject, ServerResult,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::auth::exchange::SubjectToken;
use crate::gateway::Gateway;
use crate::observe::session_log::EventKind;
use crate::observe::telemetry;
use crate::registry::view::SessionView;
use crate::relay::{Caller, ClientLink};
use crate::server::core::revision::Revision;
use crate::session::Session;
use crate::upstream::UpstreamError;

/// Whether the session has listed anything yet (see [`Call::first_list`]).
#[derive(Default, Clone)]
struct ListedOnce(bool);

/// Items per page of the gateway's own lists.
const PAGE_SIZE: usize = 500;

/// One request being served, with everything its method may need.
pub(in crate::server::core) struct Call {
    pub gateway: Arc<Gateway>,
    pub session: Arc<Session>,
    pub id: RequestId,
    pub meta: RequestMetaObject,
    pub revision: Revision,
    /// The way to the client during this request.
    pub link: ClientLink,
    pub cancel: CancellationToken,
    pub http: Option<Arc<http::request::Parts>>,
}

impl Call {
    pub(super) fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }

    pub(super) fn view(&self) -> SessionView {
        self.gateway().view(&self.session)
    }

    /// The caller of this request, for what the upstream sends back during it.
    pub(super) fn caller(&self) -> Caller {
        Caller::new(self.link.clone(), self.meta.clone(), &self.session.id).with_identity(
            self.session.owner(),
            self.http
                .as_ref()
                .and_then(|http| http.extensions.get::<SubjectToken>().cloned()),
        )
    }

    /// A session's first list waits, for at most `[gateway] first_list_wait_ms`, for the
    /// upstreams still in their first connection attempt, so that a client that lists once
    /// right after `initialize` (and ignores `list_changed`) sees what they offer. The log
    /// names the upstreams the list had to go without; a hung upstream holds only this one
    /// list, and only up to the bound. Later lists never wait.
    pub(super) async fn first_list(&self) {
        let session = &self.session;
        if session.with_state(|listed: &mut ListedOnce| std::mem::replace(&mut listed.0, true)) {
            return;
        }
        let gateway = self.gateway();
        let bound = Duration::from_millis(gateway.policy().config.gateway.first_list_wait_ms);
        tokio::select! {
            () = gateway.registry().first_attempts_of(|_| true, bound) => {}
            () = self.cancel.cancelled() => return,
        }
        let starting: Vec<_> = gateway
            .registry()
            .upstreams()
            .iter()
            .filter(|upstream| !upstream.attempted())
            .map(|upstream| upstream.name.clone())
            .collect();
        if !starting.is_empty() {
            tracing::info!(
                session = %session.id,
                waited_ms = bound.as_millis(),
                ?starting,
                "first list sent without upstreams still starting; the client is told when they join"
            );
        }
    }

    /// The visible server that owns a resource URI a client sent, and the URI as that
    /// server knows it.
    pub(super) fn owner_of(
        &self,
        view: &SessionView,
        uri: &str,
    ) -> Result<(Arc<str>, String), ErrorData> {
        let not_found = || ErrorData::resource_not_found(format!("no resource `{uri}`"), None);
        let (server, original) = self
            .gateway()
            .catalog()
            .resource_owner(uri)
            .ok_or_else(not_found)?;
        if !view.sees_server(&server) {
            return Err(not_found());
        }
        Ok((server, original))
    }

    /// Sends a request to the upstream `server`, cancelled with the client's request,
    /// and gives its result as the upstream wrote it; what the upstream sends back
    /// meanwhile goes to this client.
    pub(super) async fn forward(
        &self,
        server: &str,
        request: ClientRequest,
    ) -> Result<JsonObject, ErrorData> {
        let upstream = self.gateway().registry().upstream(server).ok_or_else(|| {
            ErrorData::internal_error(format!("upstream `{server}` was removed"), None)
        })?;
        let caller = Some(self.caller());
        match Box::pin(upstream.request_for(request, &self.cancel, caller)).await {
            Ok(result) => Ok(result),
            Err(UpstreamError::Rejected { error, .. }) => Err(*error),
            Err(e) => Err(ErrorData::internal_error(e.to_string(), None)),
        }
    }

    /// The trace context the client sent with this call: `_meta.traceparent` when present,
    /// else the HTTP request's `traceparent` header.
    pub(super) fn trace(&self) -> opentelemetry::Context {
        if let Some(traceparent) = self.meta.get_traceparent() {
            return telemetry::extract(Some(traceparent), self.meta.get_tracestate());
        }
        let header = |name: &str| {
            self.http
                .as_ref()
                .and_then(|parts| parts.headers.get(name))
                .and_then(|value| value.to_str().ok())
        };
        telemetry::extract(
            header(telemetry::TRACEPARENT),
            header(telemetry::TRACESTATE),
        )
    }
}

/// A page of a list as clients see it, under `key`: each definition as its upstream wrote
/// it (rmcp's types would drop every key they do not know), and for a client of
/// 2026-07-28 the list's cache hints (`fresh_until`: see [`composed_hint`]).
pub(super) fn listed<'a>(
    revision: &Revision,
    key: &str,
    page: impl Iterator<Item = &'a JsonObject>,
    next: Option<String>,
    fresh_until: Option<Instant>,
) -> ServerResult {
    let mut result = JsonObject::new();
    let page = page.map(|definition| Value::Object(definition.clone()));
    result.insert(key.into(), Value::Array(page.collect()));
    if let Some(next) = next {
        result.insert("nextCursor".into(), next.into());
    }
    if revision.is_stateless() {
        let (ttl_ms, cache_scope) = composed_hint(fresh_until);
        result.insert("ttlMs".into(), ttl_ms.unwrap_or(0).into());
        let cache_scope = serde_json::to_value(cache_scope).unwrap_or_default();
        result.insert("cacheScope".into(), cache_scope);
        result.insert("resultType".into(), "complete".into());
    }
    ServerResult::CustomResult(CustomResult(Value::Object(result)))
}

/// An upstream's result passed on as it wrote it. One of a server before 2026-07-28 has
/// no `resultType`, which means complete: a client of 2026-07-28 is told so (the shaping
/// of the revision takes it off again for an older client).
pub(super) fn passed_on(mut result: JsonObject) -> ServerResult {
    result
        .entry("resultType")
        .or_insert_with(|| "complete".into());
    ServerResult::CustomResult(CustomResult(Value::Object(result)))
}

/// The cache hint of a list the gateway composes for one session: fresh as long as the
/// upstream lists it merges (`None`: as the revision's default, immediately stale), and
/// private, since what a session sees depends on its profile.
pub(super) fn composed_hint(fresh_until: Option<Instant>) -> (Option<u64>, Option<CacheScope>) {
    let ttl_ms = fresh_until.map(|until| {
        let left = until.saturating_duration_since(Instant::now());
        u64::try_from(left.as_millis()).unwrap_or(u64::MAX)
    });
    (ttl_ms, Some(CacheScope::Private))
}

/// One page of `items` after `cursor` (an index), and the next cursor.
pub(super) fn page<T: Clone>(
    items: &[T],
    cursor: Option<&str>,
) -> Result<(Vec<T>, Option<String>), ErrorData> {
    let start = match cursor {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .map_err(|_| ErrorData::invalid_params(format!("bad cursor `{c}`"), None))?,
    };
    let end = (start + PAGE_SIZE).min(items.len());
    let next = (end < items.len()).then(|| end.to_string());
    Ok((items.get(start..end).unwrap_or_default().to_vec(), next))
}

pub(super) fn cursor(request: &Option<PaginatedRequestParams>) -> Option<&str> {
    request.as_ref().and_then(|r| r.cursor.as_deref())
}

pub(super) fn log_event(session: &Session, kind: EventKind, event: serde_json::Value) {
    if let Some(log) = &session.log {
        log.append(kind, &event);
    }
}
