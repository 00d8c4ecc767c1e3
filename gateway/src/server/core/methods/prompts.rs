//! The prompts: `prompts/list` shows what the session may see, and `prompts/get` goes to
//! the upstream that owns the prompt, under the prompt's name there.

use rmcp::ErrorData;
use rmcp::model::{
    ClientRequest, GetPromptRequest, GetPromptRequestParams, ListPromptsRequest,
    PaginatedRequestParams, ServerResult,
};
use serde_json::json;

use super::call::{cursor, listed, log_event, page, passed_on};
use super::{Call, Key, Route, Serves};
use crate::observe::session_log::EventKind;

impl Route for ListPromptsRequest {
    const SERVES: Serves = Serves::WORK;

    fn key(&self) -> Option<Key<'_>> {
        None
    }

    async fn serve(self, call: Call) -> Result<ServerResult, ErrorData> {
        call.first_list().await;
        call.list_prompts(self.params)
    }
}

impl Route for GetPromptRequest {
    const SERVES: Serves = Serves::WORK;

    fn key(&self) -> Option<Key<'_>> {
        Some(Key {
            names: &self.params.name,
            state: self.params.request_state.as_deref(),
            responses: self.params.input_responses.as_ref(),
        })
    }

    async fn serve(self, call: Call) -> Result<ServerResult, ErrorData> {
        call.get_prompt(self.params).await
    }
}

impl Call {
    fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
    ) -> Result<ServerResult, ErrorData> {
        let prompts: Vec<_> = self
            .view()
            .prompts()
            .map(|p| p.definition.object.clone())
            .collect();
        let (prompts, next) = page(&prompts, cursor(&request))?;
        let fresh = self.gateway().catalog().fresh_until.prompts;
        let prompts = prompts.iter().map(|prompt| prompt.as_ref());
        Ok(listed(&self.revision, "prompts", prompts, next, fresh))
    }

    async fn get_prompt(&self, request: GetPromptRequestParams) -> Result<ServerResult, ErrorData> {
        let view = self.view();
        let prompt = view.prompt(&request.name).ok_or_else(|| {
            ErrorData::invalid_params(format!("no prompt named `{}`", request.name), None)
        })?;
        log_event(
            &self.session,
            EventKind::PromptsGet,
            json!({"prompt": request.name, "arguments": request.arguments}),
        );
        let mut params = request;
        params.name = prompt.original.clone();
        let request = ClientRequest::GetPromptRequest(GetPromptRequest::new(params));
        Ok(passed_on(self.forward(&prompt.server, request).await?))
    }
}
