//! What one upstream offers: who it says it is at `initialize`, and its tools, prompts,
//! resources and resource templates, read to the end of every paginated list, with how
//! long the upstream says each list stays fresh (`ttlMs`, protocol 2026-07-28). A list is
//! read again when the upstream says it changed, and when its `ttlMs` has run out
//! ([`FreshUntil::stale`]), not before.
//!
//! Lists are read on the connection's lane (in a renewed session when an HTTP server
//! forgot its own), and each definition is kept as the JSON object the upstream wrote
//! ([`Listed`]) beside the gateway's typed view of it: what the gateway does not read
//! (`execution`, a vendor's keys, keys of a later revision) reaches clients as the
//! upstream said it. A definition the gateway cannot read at all is left out with a
//! warning, not the whole list. Only a list rmcp reads (an HTTP server forgot its session
//! and even a new one did not reach the lane) is kept as rmcp's view written out again.

use std::ops::Deref;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    ClientRequest, CustomRequest, ErrorCode, Implementation, JsonObject, Prompt, RequestMetaObject,
    Resource, ResourceTemplate, ServerCapabilities, ServerPeerInfo, Tool,
};
use rmcp::service::{MergedList, ServiceError};
use rmcp::{Peer, RoleClient};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::UpstreamEvent;
use super::call_lane::{CallLane, Unanswered};
use super::lane::RawAnswer;
use super::streamable_http::lane::renew_session;

/// A definition as the upstream listed it: its JSON object, and the gateway's view of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed<T> {
    pub view: T,
    pub object: Arc<JsonObject>,
}

impl<T: Serialize> Listed<T> {
    /// A definition known only by the gateway's view (one rmcp read, or the gateway's own).
    pub fn of_view(view: T) -> Self {
        let object = match serde_json::to_value(&view) {
            Ok(Value::Object(object)) => object,
            _ => JsonObject::new(),
        };
        Self {
            view,
            object: Arc::new(object),
        }
    }
}

impl<T: Clone> Listed<T> {
    /// A copy whose `key` (in the object) and field (in the view, which `field` finds)
    /// are `value`: a definition under the name or URI clients see.
    pub fn renamed(
        &self,
        key: &str,
        value: String,
        field: impl FnOnce(&mut T) -> &mut String,
    ) -> Self {
        let mut view = self.view.clone();
        let mut object = (*self.object).clone();
        object.insert(key.to_owned(), value.clone().into());
        *field(&mut view) = value;
        Self {
            view,
            object: Arc::new(object),
        }
    }
}

impl<T> Deref for Listed<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.view
    }
}

/// Why a list could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ListFailed(String);

impl From<ServiceError> for ListFailed {
    fn from(error: ServiceError) -> Self {
        Self(super::rmcp_errors::worded(&error))
    }
}

/// Where an offer's lists are read: the connection's lane, or rmcp's client when the lane
/// has no session for them; `context` is what every request to a server of 2026-07-28
/// carries.
#[derive(Clone, Copy)]
pub struct Lister<'a> {
    pub peer: &'a Peer<RoleClient>,
    pub lane: &'a CallLane,
    pub context: Option<&'a RequestMetaObject>,
}

/// At most this many pages of one list are read: a server whose cursors never end must
/// not keep the gateway listing.
const MAX_PAGES: usize = 1_000;

/// A snapshot of an upstream's lists, replaced whole on each `list_changed`.
#[derive(Debug, Clone, Default)]
pub struct Offer {
    pub capabilities: ServerCapabilities,
    /// The server's `serverInfo` and `instructions`, as its `initialize` result gave them.
    pub server_info: Option<Implementation>,
    pub instructions: Option<String>,
    pub tools: Vec<Listed<Tool>>,
    pub prompts: Vec<Listed<Prompt>>,
    pub resources: Vec<Listed<Resource>>,
    pub resource_templates: Vec<Listed<ResourceTemplate>>,
    /// Until when each list is fresh, as the upstream said.
    pub fresh_until: FreshUntil,
}

/// Until when each of an upstream's lists is fresh: `None` where the upstream gave no
/// `ttlMs`, or 0 (it says when a list changes, or never). A list past its time is read
/// again.
#[derive(Debug, Clone, Copy, Default)]
pub struct FreshUntil {
    pub tools: Option<Instant>,
    pub prompts: Option<Instant>,
    pub resources: Option<Instant>,
    pub resource_templates: Option<Instant>,
}

/// How soon after a list was read it is read again at the earliest, whatever `ttlMs` the
/// upstream gave (a few milliseconds would have the gateway list without pause).
pub const RELIST_AT_MOST_EVERY: Duration = Duration::from_secs(1);

impl FreshUntil {
    /// When the first of the lists stops being fresh (`None`: none ever does).
    pub fn next(&self) -> Option<Instant> {
        [
            self.tools,
            self.prompts,
            self.resources,
            self.resource_templates,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// What reads again the lists that are no longer fresh at `now`.
    pub fn stale(&self, now: Instant) -> Vec<UpstreamEvent> {
        let stale = |until: Option<Instant>| until.is_some_and(|until| until <= now);
        let mut events = Vec::new();
        if stale(self.tools) {
            events.push(UpstreamEvent::ToolsChanged);
        }
        if stale(self.prompts) {
            events.push(UpstreamEvent::PromptsChanged);
        }
        if stale(self.resources) || stale(self.resource_templates) {
            events.push(UpstreamEvent::ResourcesChanged);
        }
        events
    }
}

/// The items of `list` (none when there is no list), and until when the upstream says
/// they are fresh.
fn fresh<T>(list: Option<MergedList<T>>) -> (Vec<T>, Option<Instant>) {
    let Some(list) = list else {
        return (Vec::new(), None);
    };
    // `ttlMs: 0` (rmcp's servers give it unless told otherwise) promises no freshness: it
    // is taken as no hint, so the list is read again when the server says it changed,
    // not polled.
    let until = list
        .ttl_ms
        .filter(|ttl| *ttl > 0)
        .and_then(|ttl| Instant::now().checked_add(Duration::from_millis(ttl)));
    (list.items, until)
}

impl Offer {
    /// Reads every list the server's capabilities (in its `initialize` result) announce.
    pub async fn read(
        lister: Lister<'_>,
        initialized: Option<ServerPeerInfo>,
    ) -> Result<Offer, ListFailed> {
        let mut offer = match initialized {
            Some(info) => Offer {
                capabilities: info.capabilities,
                server_info: info.server_info,
                instructions: info.instructions,
                ..Offer::default()
            },
            None => Offer::default(),
        };
        if offer.capabilities.tools.is_some() {
            offer.read_tools(lister).await?;
        }
        offer.read_prompts(lister).await?;
        offer.read_resources(lister).await?;
        Ok(offer)
    }

    /// Whether the list that `event` names differs in `other`.
    pub fn differs(&self, other: &Offer, event: &UpstreamEvent) -> bool {
        match event {
            UpstreamEvent::ToolsChanged => self.tools != other.tools,
            UpstreamEvent::PromptsChanged => self.prompts != other.prompts,
            UpstreamEvent::ResourcesChanged => {
                self.resources != other.resources
                    || self.resource_templates != other.resource_templates
            }
            UpstreamEvent::ResourceUpdated(_) => false,
        }
    }

    /// A copy with the list that `event` says changed read again.
    pub async fn refreshed(
        &self,
        lister: Lister<'_>,
        event: &UpstreamEvent,
    ) -> Result<Offer, ListFailed> {
        let mut offer = self.clone();
        match event {
            UpstreamEvent::ToolsChanged => offer.read_tools(lister).await?,
            UpstreamEvent::PromptsChanged => offer.read_prompts(lister).await?,
            UpstreamEvent::ResourcesChanged => offer.read_resources(lister).await?,
            UpstreamEvent::ResourceUpdated(_) => {}
        }
        Ok(offer)
    }

    async fn read_tools(&mut self, lister: Lister<'_>) -> Result<(), ListFailed> {
        let peer = lister.peer;
        (self.tools, self.fresh_until.tools) =
            read_listed(lister, "tools/list", "tools", || async {
                peer.list_all_tools_with_cache_hint().await.map(Some)
            })
            .await?;
        // A tool whose `x-mcp-header`s cannot be followed is left out, as a client of
        // 2026-07-28 must leave it out: its calls could not carry their headers.
        self.tools.retain(|tool| {
            let Some(why) = wire::routing::invalid_designation(&tool.input_schema) else {
                return true;
            };
            tracing::warn!(list = "tools", definition = %tool.name, "left out of the list: {why}");
            false
        });
        Ok(())
    }

    async fn read_prompts(&mut self, lister: Lister<'_>) -> Result<(), ListFailed> {
        if self.capabilities.prompts.is_some() {
            let peer = lister.peer;
            (self.prompts, self.fresh_until.prompts) =
                read_listed(lister, "prompts/list", "prompts", || async {
                    tolerate_missing(peer.list_all_prompts_with_cache_hint().await)
                })
                .await?;
        }
        Ok(())
    }

    async fn read_resources(&mut self, lister: Lister<'_>) -> Result<(), ListFailed> {
        if self.capabilities.resources.is_some() {
            let peer = lister.peer;
            (self.resources, self.fresh_until.resources) =
                read_listed(lister, "resources/list", "resources", || async {
                    tolerate_missing(peer.list_all_resources_with_cache_hint().await)
                })
                .await?;
            (self.resource_templates, self.fresh_until.resource_templates) = read_listed(
                lister,
                "resources/templates/list",
                "resourceTemplates",
                || async {
                    tolerate_missing(peer.list_all_resource_templates_with_cache_hint().await)
                },
            )
            .await?;
        }
        Ok(())
    }
}

/// The list `method` answers under `key`, read on the lane (in a renewed session when an
/// HTTP server forgot its own: see [`CallLane::in_session`]), else (when even then the
/// lane has no session) through rmcp with `by_rmcp`; with until when it is fresh. A
/// server that answers "method not found" lists nothing.
async fn read_listed<T, F>(
    lister: Lister<'_>,
    method: &str,
    key: &str,
    by_rmcp: impl FnOnce() -> F,
) -> Result<(Vec<Listed<T>>, Option<Instant>), ListFailed>
where
    T: DeserializeOwned + Serialize,
    F: Future<Output = Result<Option<MergedList<T>>, ServiceError>>,
{
    let lane = lister.lane;
    let read = |()| read_objects(lane, method, key, lister.context);
    let renew = async {
        renew_session(lister.peer).await;
        Ok(())
    };
    match lane.in_session((), read, renew).await {
        Ok(Ok((objects, until))) => {
            let listed = objects
                .into_iter()
                .filter_map(|o| view_of(o, key))
                .collect();
            return Ok((listed, until));
        }
        // No session for the lane, even a renewed one: rmcp's client has one.
        Ok(Err(_)) => {}
        Err(Unread::Missing) => return Ok((Vec::new(), None)),
        Err(Unread::Failed(reason)) => return Err(ListFailed(reason)),
    }
    let (items, until) = fresh(by_rmcp().await?);
    Ok((items.into_iter().map(Listed::of_view).collect(), until))
}

/// Why a list was not read on a lane.
enum Unread {
    /// The server answered "method not found": it has no such list.
    Missing,
    Failed(String),
}

/// One page of a list, with the definitions as the upstream wrote them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Page {
    next_cursor: Option<String>,
    ttl_ms: Option<u64>,
    #[serde(flatten)]
    rest: JsonObject,
}

/// Every definition of the list `method` answers under `key`, read to its last page on
/// `lane`, and until when it is fresh: the earliest time a page's `ttlMs` gives, none
/// when a page gives none (as rmcp merges pages). `None` when the lane has no session
/// for it.
async fn read_objects(
    lane: &CallLane,
    method: &str,
    key: &str,
    context: Option<&RequestMetaObject>,
) -> Result<Option<(Vec<JsonObject>, Option<Instant>)>, Unread> {
    let mut objects = Vec::new();
    let mut cursor: Option<String> = None;
    let mut until = Some(None);
    for _ in 0..MAX_PAGES {
        let mut params = JsonObject::new();
        if let Some(cursor) = &cursor {
            params.insert("cursor".into(), cursor.clone().into());
        }
        if let Some(context) = context {
            let context = serde_json::to_value(context).unwrap_or_default();
            params.insert("_meta".into(), context);
        }
        let request = CustomRequest::new(method, Some(Value::Object(params)));
        let answer = lane
            .request(&lane.next_id(), ClientRequest::CustomRequest(request))
            .await;
        let raw = match answer {
            Ok(RawAnswer::Result(raw)) => raw,
            Ok(RawAnswer::Error(error)) if error.code == ErrorCode::METHOD_NOT_FOUND => {
                return Err(Unread::Missing);
            }
            Ok(RawAnswer::Error(error)) => {
                return Err(Unread::Failed(format!(
                    "{method} answered: {}",
                    error.message
                )));
            }
            Err(Unanswered::NoSession) => return Ok(None),
            Err(Unanswered::Closed) => {
                return Err(Unread::Failed("the connection closed".into()));
            }
            Err(Unanswered::Failed(reason) | Unanswered::Unreachable(reason)) => {
                return Err(Unread::Failed(reason));
            }
        };
        let mut page: Page = serde_json::from_str(raw.get())
            .map_err(|error| Unread::Failed(format!("{method}: not a list: {error}")))?;
        match page.rest.remove(key) {
            Some(Value::Array(items)) => {
                objects.extend(items.into_iter().filter_map(|item| match item {
                    Value::Object(object) => Some(object),
                    _ => None,
                }))
            }
            None => {}
            Some(_) => return Err(Unread::Failed(format!("{method}: `{key}` is not a list"))),
        }
        until = match (until, page.ttl_ms.filter(|ttl| *ttl > 0)) {
            (Some(until), Some(ttl)) => {
                let expires = Instant::now().checked_add(Duration::from_millis(ttl));
                Some(until.into_iter().chain(expires).min())
            }
            _ => None,
        };
        let next = page.next_cursor.filter(|next| !next.is_empty());
        if next.is_none() || next == cursor {
            return Ok(Some((objects, until.flatten())));
        }
        cursor = next;
    }
    Err(Unread::Failed(format!(
        "{method}: more than {MAX_PAGES} pages"
    )))
}

/// The gateway's view of a definition the upstream wrote as `object` in its list `key`;
/// `None`, with a warning, when the gateway cannot read it.
fn view_of<T: DeserializeOwned>(object: JsonObject, key: &str) -> Option<Listed<T>> {
    match serde_json::from_value::<T>(Value::Object(object.clone())) {
        Ok(view) => Some(Listed {
            view,
            object: Arc::new(object),
        }),
        Err(error) => {
            let named = ["name", "uri", "uriTemplate"]
                .iter()
                .find_map(|field| object.get(*field).and_then(Value::as_str))
                .unwrap_or("?");
            tracing::warn!(
                list = key,
                definition = named,
                "left out of the list: {error}"
            );
            None
        }
    }
}

/// A server that announces a capability but answers "method not found" for its list
/// offers nothing there; that must not make the whole upstream fail.
fn tolerate_missing<T>(
    result: Result<MergedList<T>, ServiceError>,
) -> Result<Option<MergedList<T>>, ServiceError> {
    match result {
        Err(ServiceError::McpError(error))
            if error.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND =>
        {
            Ok(None)
        }
        other => other.map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_stale_once_its_ttl_ran_out_and_resources_go_with_their_templates() {
        let now = Instant::now();
        let later = now + Duration::from_secs(60);
        let fresh = FreshUntil {
            tools: Some(now),
            prompts: Some(later),
            resources: None,
            resource_templates: Some(now),
        };
        assert_eq!(fresh.next(), Some(now));
        assert_eq!(
            fresh.stale(now),
            [UpstreamEvent::ToolsChanged, UpstreamEvent::ResourcesChanged]
        );
        assert!(fresh.stale(now - Duration::from_millis(1)).is_empty());
        assert_eq!(FreshUntil::default().next(), None);
        assert!(FreshUntil::default().stale(later).is_empty());
    }
}
