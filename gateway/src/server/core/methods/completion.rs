//! `completion/complete`: completions for a prompt's or a resource template's argument,
//! from the upstream that owns the prompt or the template.

use rmcp::ErrorData;
use rmcp::model::{ClientRequest, CompleteRequest, CompleteRequestParams, Reference, ServerResult};

use super::call::passed_on;
use super::{Call, Key, Route, Serves};

impl Route for CompleteRequest {
    const SERVES: Serves = Serves::WORK;

    fn key(&self) -> Option<Key<'_>> {
        None
    }

    async fn serve(self, call: Call) -> Result<ServerResult, ErrorData> {
        call.complete(self.params).await
    }
}

impl Call {
    async fn complete(&self, request: CompleteRequestParams) -> Result<ServerResult, ErrorData> {
        let view = self.view();
        let mut params = request;
        let server = match &mut params.r#ref {
            Reference::Prompt(prompt) => {
                let federated = view.prompt(&prompt.name).ok_or_else(|| {
                    ErrorData::invalid_params(format!("no prompt named `{}`", prompt.name), None)
                })?;
                prompt.name = federated.original.clone();
                federated.server.clone()
            }
            Reference::Resource(template) => {
                let (server, original) = self.owner_of(&view, &template.uri)?;
                template.uri = original;
                server
            }
            _ => {
                return Err(ErrorData::invalid_params(
                    "unsupported completion reference",
                    None,
                ));
            }
        };
        let request = ClientRequest::CompleteRequest(CompleteRequest::new(params));
        Ok(passed_on(self.forward(&server, request).await?))
    }
}
