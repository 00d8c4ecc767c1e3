//! The tools: `tools/list` shows what the session may see, and `tools/call` goes to the
//! gateway's pipeline; a call an upstream made a task of answers with the task's handle.

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ListToolsRequest, PaginatedRequestParams, ServerResult,
};

use super::call::{cursor, listed, page};
use super::{Call, Key, Route, Serves};
use crate::config::CatalogMode;
use crate::pipeline::{CallRequest, Origin, error};
use crate::tasks;

impl Route for ListToolsRequest {
    const SERVES: Serves = Serves::WORK;

    fn key(&self) -> Option<Key<'_>> {
        None
    }

    async fn serve(self, call: Call) -> Result<ServerResult, ErrorData> {
        call.first_list().await;
        call.list_tools(self.params)
    }
}

impl Route for CallToolRequest {
    const SERVES: Serves = Serves::WORK;

    fn key(&self) -> Option<Key<'_>> {
        Some(Key {
            names: &self.params.name,
            state: self.params.request_state.as_deref(),
            responses: self.params.input_responses.as_ref(),
        })
    }

    async fn serve(self, call: Call) -> Result<ServerResult, ErrorData> {
        call.call_tool(self.params).await
    }
}

impl Call {
    fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
    ) -> Result<ServerResult, ErrorData> {
        let session = &self.session;
        let tools = self.gateway().visible_tools(session);
        let (tools, next) = page(&tools, cursor(&request))?;
        // A search catalog's list grows with the session's searches: never cached.
        let fresh = (session.profile.catalog != CatalogMode::Search)
            .then(|| self.gateway().catalog().fresh_until.tools);
        let tools = tools.iter().map(|tool| tool.as_ref());
        Ok(listed(
            &self.revision,
            "tools",
            tools,
            next,
            fresh.flatten(),
        ))
    }

    async fn call_tool(&self, request: CallToolRequestParams) -> Result<ServerResult, ErrorData> {
        let mut caller = self.caller();
        caller.given_input = request.input_responses;
        // What the task's record keeps, should the call become a task.
        let asked = self
            .declared_tasks()
            .then(|| (request.name.to_string(), request.arguments.clone()));
        let result = self
            .gateway()
            .call(
                &self.session,
                CallRequest {
                    name: request.name.to_string(),
                    arguments: request.arguments,
                    cancel: self.cancel.clone(),
                    caller: Some(caller),
                    origin: Origin::Client,
                    trace: self.trace(),
                },
            )
            .await;
        if let Some((server, created)) = tasks::handle::carried(&result) {
            let (tool, arguments) = asked.unwrap_or_default();
            return self.upstream_task(tool, arguments, server, created).await;
        }
        match error::protocol_error(&result) {
            Some(error) => Err(error),
            None => Ok(result.into_server_result()),
        }
    }
}
