//! The conformance server's MCP handler: every tool, resource and prompt the scenarios
//! call, in both lifecycles ([`Lifecycle`]).
//!
//! rmcp does the protocol work of either lifecycle (the handshake, per-request `_meta`
//! validation, `server/discover`, HTTP statuses, `resultType`, caching hints, the
//! `subscriptions/listen` acknowledgment); this handler only answers. Tools that need the
//! client ask it through the session's peer on a handshake session (a client that cannot
//! answer gets an explanation as the tool's text, as the suite's reference server does),
//! and through `InputRequiredResult` rounds on the per-request lifecycle ([`rounds`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    CompleteRequestParams, CompleteResult, ContentBlock, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, GetTaskParams, GetTaskResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, LoggingLevel,
    LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotificationParam, Prompt,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceTemplate, ServerCapabilities, ServerConfig, SetLevelRequestParams,
    SubscribeRequestParams, SubscriptionFilter, TASKS_EXTENSION_ID, Tool, UnsubscribeRequestParams,
    UpdateTaskParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::fixtures::{
    HEADER_PARAMETER_TOOL, TEMPLATE_PREFIX, TEMPLATE_SUFFIX, TEST_AUDIO, TEST_IMAGE, argument,
    complete_result, decode, prompts, resources, tools,
};
use crate::jobs::Jobs;
use crate::lifecycle::Lifecycle;
use crate::list_changes::{ListChange, ListChanges};
use crate::questions::Question;
use crate::request_state::Sealer;
use crate::rounds::{self, Outcome, Round};

const LOGGER: &str = "conformance-test-server";

/// What every handler of this process shares: a per-request client may open a listen
/// stream on one request and change a list on another, and retry a round on a third.
pub struct Shared {
    pub sealer: Sealer,
    pub list_changes: ListChanges,
    /// The tasks of every client (a task is polled on requests of its own).
    pub jobs: Jobs,
}

impl Shared {
    pub fn new() -> Self {
        Self {
            sealer: Sealer::new(),
            list_changes: ListChanges::new(),
            jobs: Jobs::default(),
        }
    }
}

/// The handler of one handshake session, or of one per-request request.
#[derive(Clone)]
pub struct Conformance {
    shared: Arc<Shared>,
    /// The least severe level a handshake session wants to hear (`logging/setLevel`).
    log_level: Arc<Mutex<LoggingLevel>>,
}

fn text_result(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(text)]).into()
}

/// Lower ranks are less severe; a message goes out when its rank reaches the wanted one.
fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl Conformance {
    pub fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            log_level: Arc::new(Mutex::new(LoggingLevel::Info)),
        }
    }

    async fn log(&self, context: &RequestContext<RoleServer>, level: LoggingLevel, data: &str) {
        let session_level = *self.log_level.lock().unwrap_or_else(|p| p.into_inner());
        let wanted = Lifecycle::of(context).log_threshold(context, session_level);
        if wanted.is_none_or(|wanted| severity(level) < severity(wanted)) {
            return;
        }
        let mut message = LoggingMessageNotificationParam::new(level, json!(data));
        message.logger = Some(LOGGER.into());
        let _ = context.peer.notify_logging_message(message).await;
    }

    /// Three log messages, 50 ms apart, each only if the client wants to hear it.
    async fn narrate(&self, context: &RequestContext<RoleServer>) {
        let steps = [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        ];
        for (step, data) in steps.into_iter().enumerate() {
            if step > 0 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            self.log(context, LoggingLevel::Info, data).await;
        }
    }

    /// Three progress notifications, 50 ms apart, when the call asked for progress; the
    /// progress token (or a note that there was none) as text.
    async fn progress(&self, context: &RequestContext<RoleServer>) -> String {
        let Some(token) = context.meta.get_progress_token() else {
            return "no progress token".into();
        };
        for (step, done) in [0.0, 50.0, 100.0].into_iter().enumerate() {
            if step > 0 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let mut params = ProgressNotificationParam::new(token.clone(), done);
            params.total = Some(100.0);
            params.message = Some(format!("Completed step {done} of 100"));
            let _ = context.peer.notify_progress(params).await;
        }
        match serde_json::to_value(&token) {
            Ok(Value::String(token)) => token,
            Ok(other) => other.to_string(),
            Err(_) => String::new(),
        }
    }

    /// One round of a multi round-trip tool.
    fn round_trip(
        &self,
        tool: impl FnOnce(&Round) -> Result<Outcome, ErrorData>,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let round = self.open_round(
            request.input_responses.clone(),
            request.request_state.as_deref(),
            context,
        )?;
        round.settle(tool(&round)?, |text| Ok(text_result(text)))
    }

    fn open_round(
        &self,
        responses: Option<rmcp::model::InputResponses>,
        state: Option<&str>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Round<'_>, ErrorData> {
        let capabilities = context.client_capabilities().unwrap_or_default();
        Round::open(responses, state, capabilities, &self.shared.sealer)
    }

    /// The tools only the per-request lifecycle lists; `None` for any other name.
    async fn call_per_request_tool(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, ErrorData>> {
        let name = request.name.as_ref();
        if let Some(tool) = rounds::tool(name) {
            return Some(self.round_trip(tool, request, context));
        }
        let announce = |change| {
            self.shared.list_changes.announce(change);
            Ok(text_result("Mutation triggered"))
        };
        Some(match name {
            // Only notifications may precede the answer on the response stream.
            "test_streaming_elicitation" => {
                self.progress(context).await;
                Ok(text_result("Streaming complete"))
            }
            "test_logging_tool" => {
                self.narrate(context).await;
                Ok(text_result("Logging evaluated"))
            }
            HEADER_PARAMETER_TOOL => Ok(text_result(format!(
                "Routed to region {}",
                argument(request.arguments.as_ref(), "region")
            ))),
            "test_trigger_tool_change" => announce(ListChange::Tools),
            "test_trigger_prompt_change" => announce(ListChange::Prompts),
            _ => return None,
        })
    }

    /// The tools every client sees.
    async fn call_common_tool(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(question) = Question::of(&request) {
            return match Lifecycle::of(context) {
                Lifecycle::PerRequest => {
                    self.round_trip(|round| Ok(question.round(round)), &request, context)
                }
                Lifecycle::Handshake => Ok(text_result(question.ask(context).await?)),
            };
        }
        let content =
            |content: Value| complete_result::<CallToolResult, _>(json!({"content": content}));
        match request.name.as_ref() {
            "test_simple_text" => Ok(text_result("This is a simple text response for testing.")),
            "test_image_content" => {
                content(json!([{"type": "image", "data": TEST_IMAGE, "mimeType": "image/png"}]))
            }
            "test_audio_content" => {
                content(json!([{"type": "audio", "data": TEST_AUDIO, "mimeType": "audio/wav"}]))
            }
            "test_embedded_resource" => content(json!([{"type": "resource", "resource": {
                "uri": "test://embedded-resource", "mimeType": "text/plain",
                "text": "This is an embedded resource content."
            }}])),
            "test_multiple_content_types" => content(json!([
                {"type": "text", "text": "Multiple content types test:"},
                {"type": "image", "data": TEST_IMAGE, "mimeType": "image/png"},
                {"type": "resource", "resource": {
                    "uri": "test://mixed-content-resource", "mimeType": "application/json",
                    "text": json!({"test": "data", "value": 123}).to_string()
                }}
            ])),
            "test_tool_with_logging" => {
                self.narrate(context).await;
                Ok(text_result("Tool with logging executed successfully"))
            }
            "test_tool_with_progress" => Ok(text_result(self.progress(context).await)),
            "test_error_handling" => complete_result::<CallToolResult, _>(json!({
                "content": [{"type": "text", "text": "This tool intentionally returns an error for testing"}],
                "isError": true
            })),
            "test_reconnection" => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Ok(text_result(
                    "Reconnection test completed successfully. If you received this, the client \
                     properly reconnected after stream closure.",
                ))
            }
            "json_schema_2020_12_tool" => Ok(text_result(format!(
                "JSON Schema 2020-12 tool called with: {}",
                Value::Object(request.arguments.unwrap_or_default())
            ))),
            other => Err(ErrorData::invalid_params(
                format!("no tool named `{other}`"),
                None,
            )),
        }
    }
}

/// A `list_*` handler that answers every item of a fixed JSON listing in one page; the
/// listing is a function of the request's lifecycle.
macro_rules! every_item {
    ($method:ident -> $result:ident of $item:ty = $items:expr) => {
        async fn $method(
            &self,
            _request: Option<PaginatedRequestParams>,
            context: RequestContext<RoleServer>,
        ) -> Result<$result, ErrorData> {
            let items: Vec<$item> = decode($items(Lifecycle::of(&context)))?;
            Ok($result::with_all_items(items))
        }
    };
}

/// A handler that accepts its request and does nothing (the suite only checks the answer).
macro_rules! accepted {
    ($method:ident($params:ty)) => {
        async fn $method(
            &self,
            _request: $params,
            _context: RequestContext<RoleServer>,
        ) -> Result<(), ErrorData> {
            Ok(())
        }
    };
}

impl ServerHandler for Conformance {
    fn get_info(&self) -> ServerConfig {
        let capabilities: ServerCapabilities = serde_json::from_value(json!({
            "tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "prompts": {"listChanged": true},
            "logging": {},
            "completions": {},
            "extensions": {TASKS_EXTENSION_ID: {}}
        }))
        .unwrap_or_default();
        ServerConfig::new(capabilities).with_server_info(Implementation::new(
            "mcp-conformance-test-server",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *self.log_level.lock().unwrap_or_else(|p| p.into_inner()) = request.level;
        Ok(())
    }

    /// Every list this server announces changes of (rmcp keeps only what get_info
    /// advertises and the client asked for).
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        self.shared.list_changes.forward(subscription).await
    }

    every_item!(list_tools -> ListToolsResult of Tool = tools);

    /// rmcp checks `Mcp-Param-*` headers against the called tool's schema, found here.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        let listed: Vec<Tool> = decode(tools(Lifecycle::PerRequest)).ok()?;
        listed.into_iter().find(|tool| tool.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if Lifecycle::of(&context) == Lifecycle::PerRequest
            && let Some(response) = self.call_per_request_tool(&request, &context).await
        {
            return response;
        }
        let open_round = || {
            self.open_round(
                request.input_responses.clone(),
                request.request_state.as_deref(),
                &context,
            )
        };
        if let Some(response) = self.shared.jobs.call(&request, &context, open_round).await {
            return response;
        }
        self.call_common_tool(request, &context).await
    }

    every_item!(list_resources -> ListResourcesResult of Resource = |_| resources());

    every_item!(list_resource_templates -> ListResourceTemplatesResult of ResourceTemplate = |_| json!([{
        "uriTemplate": format!("{TEMPLATE_PREFIX}{{id}}{TEMPLATE_SUFFIX}"),
        "name": "template",
        "title": "Resource Template",
        "description": "A resource template with parameter substitution",
        "mimeType": "application/json"
    }]));

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.as_str();
        let contents = match uri {
            "test://static-text" => json!({"uri": uri, "mimeType": "text/plain",
                "text": "This is the content of the static text resource."}),
            "test://static-binary" => {
                json!({"uri": uri, "mimeType": "image/png", "blob": TEST_IMAGE})
            }
            "test://watched-resource" => json!({"uri": uri, "mimeType": "text/plain",
                "text": "Watched resource content"}),
            _ => match uri
                .strip_prefix(TEMPLATE_PREFIX)
                .and_then(|rest| rest.strip_suffix(TEMPLATE_SUFFIX))
                .filter(|id| !id.is_empty() && !id.contains('/'))
            {
                Some(id) => json!({"uri": uri, "mimeType": "application/json",
                    "text": json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")}).to_string()}),
                None => {
                    return Err(ErrorData::resource_not_found(
                        format!("no resource `{uri}`"),
                        Some(json!({"uri": uri})),
                    ));
                }
            },
        };
        complete_result::<ReadResourceResult, _>(json!({"contents": [contents]}))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.shared.jobs.get(&request.task_id)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared
            .jobs
            .update(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared.jobs.cancel(&request.task_id)
    }

    accepted!(subscribe(SubscribeRequestParams));

    accepted!(unsubscribe(UnsubscribeRequestParams));

    every_item!(list_prompts -> ListPromptsResult of Prompt = prompts);

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let arg = |name: &str| argument(request.arguments.as_ref(), name).to_owned();
        let user = |content: Value| json!({"role": "user", "content": content});
        let text = |text: String| user(json!({"type": "text", "text": text}));
        let messages = match request.name.as_str() {
            rounds::PROMPT if Lifecycle::of(&context) == Lifecycle::PerRequest => {
                let round = self.open_round(
                    request.input_responses.clone(),
                    request.request_state.as_deref(),
                    &context,
                )?;
                return round.settle(rounds::ask_context(&round), |context| {
                    let messages = json!([text(format!("Prompt with context: {context}"))]);
                    complete_result::<GetPromptResult, _>(json!({"messages": messages}))
                });
            }
            "test_simple_prompt" => json!([text("This is a simple prompt for testing.".into())]),
            "test_prompt_with_arguments" => json!([text(format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                arg("arg1"),
                arg("arg2")
            ))]),
            "test_prompt_with_embedded_resource" => json!([
                user(
                    json!({"type": "resource", "resource": {"uri": arg("resourceUri"),
                    "mimeType": "text/plain", "text": "Embedded resource content for testing."}})
                ),
                text("Please process the embedded resource above.".into())
            ]),
            "test_prompt_with_image" => json!([
                user(json!({"type": "image", "data": TEST_IMAGE, "mimeType": "image/png"})),
                text("Please analyze the image above.".into())
            ]),
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no prompt named `{other}`"),
                    None,
                ));
            }
        };
        complete_result::<GetPromptResult, _>(json!({"messages": messages}))
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        complete_result::<CompleteResult, _>(
            json!({"completion": {"values": [], "total": 0, "hasMore": false}}),
        )
    }
}
