//! The resources: `resources/list` and `resources/templates/list` show what the session
//! may see, and `resources/read` goes to the upstream that owns the URI, under the URI it
//! knows (and its contents' URIs rewritten back, for a server whose URIs the gateway
//! rewrites).

use rmcp::ErrorData;
use rmcp::model::{
    ClientRequest, ListResourceTemplatesRequest, ListResourcesRequest, PaginatedRequestParams,
    ReadResourceRequest, ReadResourceRequestParams, ServerResult,
};
use serde_json::{Value, json};

use super::call::{cursor, listed, log_event, page, passed_on};
use super::{Call, Key, Route, Serves};
use crate::observe::session_log::EventKind;
use crate::upstream::resource_uri;

impl Route for ListResourcesRequest {
    const SERVES: Serves = Serves::WORK;

    fn key(&self) -> Option<Key<'_>> {
        None
    }

    async fn serve(self, call: Call) -> Result<ServerResult, ErrorData> {
        call.first_list().await;
        call.list_resources(self.params)
    }
}

impl Route for ListResourceTemplatesRequest {
    const SERVES: Serves = Serves::WORK;

    fn key(&self) -> Option<Key<'_>> {
        None
    }

    async fn serve(self, call: Call) -> Result<ServerResult, ErrorData> {
        call.first_list().await;
        call.list_resource_templates(self.params)
    }
}

impl Route for ReadResourceRequest {
    const SERVES: Serves = Serves::WORK;

    fn key(&self) -> Option<Key<'_>> {
        Some(Key {
            names: &self.params.uri,
            state: self.params.request_state.as_deref(),
            responses: self.params.input_responses.as_ref(),
        })
    }

    async fn serve(self, call: Call) -> Result<ServerResult, ErrorData> {
        call.read_resource(self.params).await
    }
}

impl Call {
    fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
    ) -> Result<ServerResult, ErrorData> {
        let resources: Vec<_> = self.view().resources().map(|r| r.object.clone()).collect();
        let (resources, next) = page(&resources, cursor(&request))?;
        let fresh = self.gateway().catalog().fresh_until.resources;
        let resources = resources.iter().map(|resource| resource.as_ref());
        Ok(listed(&self.revision, "resources", resources, next, fresh))
    }

    fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
    ) -> Result<ServerResult, ErrorData> {
        let templates: Vec<_> = self
            .view()
            .resource_templates()
            .map(|t| t.object.clone())
            .collect();
        let (templates, next) = page(&templates, cursor(&request))?;
        let fresh = self.gateway().catalog().fresh_until.resource_templates;
        let templates = templates.iter().map(|template| template.as_ref());
        Ok(listed(
            &self.revision,
            "resourceTemplates",
            templates,
            next,
            fresh,
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
    ) -> Result<ServerResult, ErrorData> {
        let (server, original) = self.owner_of(&self.view(), &request.uri)?;
        log_event(
            &self.session,
            EventKind::ResourcesRead,
            json!({"uri": request.uri}),
        );
        let mut params = request;
        params.uri = original;
        let request = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(params));
        let mut result = self.forward(&server, request).await?;
        if self.gateway().catalog().rewriting.contains(&server)
            && let Some(Value::Array(contents)) = result.get_mut("contents")
        {
            resource_uri::rewrite_contents(&server, contents);
        }
        if self.revision.is_stateless() {
            // What the revision's reader of a result it may cache needs: the upstream's
            // hints, or none (stale at once, private).
            result.entry("ttlMs").or_insert(0.into());
            result.entry("cacheScope").or_insert("private".into());
        }
        Ok(passed_on(result))
    }
}
