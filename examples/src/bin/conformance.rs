//! `conformance PORT`: the server that the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, server scenarios) expects, over streamable HTTP at
//! `http://127.0.0.1:PORT/mcp`.
//!
//! It exists so `scripts/conformance` can run the suite twice, against this server directly
//! and through the gateway (`prefix = ""`, `rewrite_uris = false`), and show that the
//! gateway passes the whole protocol through: the two runs must agree check for check.
//! Every tool, resource and prompt here is written from the scenario's documented
//! expectations (names, URIs and contents are the suite's, to the byte), so the results
//! are data: JSON as the scenarios spell it, decoded into rmcp's types. Tools that need the
//! client (`test_sampling`, `test_elicitation*`) ask it through the session's peer, and a
//! client that cannot answer gets an explanation as the tool's text, as the suite's own
//! reference server does.

#![allow(
    deprecated,
    reason = "logging, sampling and resources/subscribe are what 2025 clients use"
)]

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_gateway_examples::{init_logging, refuse_discover, serve_http};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    CreateMessageRequestParams, DiscoverResult, ElicitRequestParams, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, LoggingLevel,
    LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotificationParam, Prompt,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceTemplate, ServerCapabilities, ServerConfig, SetLevelRequestParams,
    SubscribeRequestParams, Tool, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// A 1×1 red PNG.
const TEST_IMAGE: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file.
const TEST_AUDIO: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";
const LOGGER: &str = "conformance-test-server";

/// Decodes JSON written in this file into an rmcp type; the JSON is ours, so a failure is
/// a bug here, reported to the client as an internal error rather than a panic.
fn decode<T: DeserializeOwned>(value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// A result of type `T` written as JSON, as the response type that carries it.
fn answer<T: DeserializeOwned, R: From<T>>(value: Value) -> Result<R, ErrorData> {
    decode::<T>(value).map(R::from)
}

fn text_result(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![rmcp::model::ContentBlock::text(text)]).into()
}

/// Lower ranks are less severe; a message goes out when its rank reaches the session's.
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

/// The tools the scenarios call, as `tools/list` shows them.
fn tools() -> Value {
    let no_args = json!({"type": "object", "properties": {}});
    let tool = |name: &str, description: &str| json!({"name": name, "description": description, "inputSchema": no_args});
    json!([
        tool("test_simple_text", "Tests simple text content response"),
        tool("test_image_content", "Tests image content response"),
        tool("test_audio_content", "Tests audio content response"),
        tool("test_embedded_resource", "Tests embedded resource content response"),
        tool("test_multiple_content_types", "Tests response with multiple content types (text, image, resource)"),
        tool("test_tool_with_logging", "Tests tool that emits log messages during execution"),
        tool("test_tool_with_progress", "Tests tool that reports progress notifications"),
        tool("test_error_handling", "Tests error response handling"),
        tool("test_reconnection", "Tests a call whose result arrives after a pause"),
        {
            "name": "test_sampling",
            "description": "Tests server-initiated sampling (LLM completion request)",
            "inputSchema": {"type": "object", "properties": {
                "prompt": {"type": "string", "description": "The prompt to send to the LLM"}
            }, "required": ["prompt"]}
        },
        {
            "name": "test_elicitation",
            "description": "Tests server-initiated elicitation (user input request)",
            "inputSchema": {"type": "object", "properties": {
                "message": {"type": "string", "description": "The message to show the user"}
            }, "required": ["message"]}
        },
        tool("test_elicitation_sep1034_defaults", "Tests elicitation with default values per SEP-1034"),
        tool("test_elicitation_sep1330_enums", "Tests elicitation with enum schema improvements per SEP-1330"),
        {
            "name": "json_schema_2020_12_tool",
            "description": "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
            "inputSchema": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {"address": {"type": "object", "properties": {
                    "street": {"type": "string"}, "city": {"type": "string"}
                }}},
                "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
                "additionalProperties": false
            }
        }
    ])
}

/// The form `test_elicitation` asks for.
fn simple_form(message: &str) -> Value {
    json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {"type": "object", "properties": {
            "response": {"type": "string", "description": "User's response"}
        }, "required": ["response"]}
    })
}

/// SEP-1034: a default for every primitive type.
fn defaults_form() -> Value {
    json!({
        "mode": "form",
        "message": "Please review and update the form fields with defaults",
        "requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "description": "User status",
                       "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "description": "Verification status", "default": true}
        }, "required": []}
    })
}

/// SEP-1330: the five enum shapes.
fn enums_form() -> Value {
    json!({
        "mode": "form",
        "message": "Please select options from the enum fields",
        "requestedSchema": {"type": "object", "properties": {
            "untitledSingle": {"type": "string", "description": "Select one option",
                               "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "description": "Select one option with titles",
                             "oneOf": [{"const": "value1", "title": "First Option"},
                                       {"const": "value2", "title": "Second Option"},
                                       {"const": "value3", "title": "Third Option"}]},
            "legacyEnum": {"type": "string", "description": "Select one option (legacy)",
                           "enum": ["opt1", "opt2", "opt3"],
                           "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "description": "Select multiple options",
                              "minItems": 1, "maxItems": 3,
                              "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "description": "Select multiple options with titles",
                            "minItems": 1, "maxItems": 3,
                            "items": {"anyOf": [{"const": "value1", "title": "First Choice"},
                                                {"const": "value2", "title": "Second Choice"},
                                                {"const": "value3", "title": "Third Choice"}]}}
        }, "required": []}
    })
}

fn resources() -> Value {
    json!([
        {"uri": "test://static-text", "name": "static-text", "title": "Static Text Resource",
         "description": "A static text resource for testing", "mimeType": "text/plain"},
        {"uri": "test://static-binary", "name": "static-binary", "title": "Static Binary Resource",
         "description": "A static binary resource (image) for testing", "mimeType": "image/png"},
        {"uri": "test://watched-resource", "name": "watched-resource", "title": "Watched Resource",
         "description": "A resource that clients may subscribe to", "mimeType": "text/plain"}
    ])
}

const TEMPLATE_PREFIX: &str = "test://template/";
const TEMPLATE_SUFFIX: &str = "/data";

fn prompts() -> Value {
    json!([
        {"name": "test_simple_prompt", "title": "Simple Test Prompt",
         "description": "A simple prompt without arguments"},
        {"name": "test_prompt_with_arguments", "title": "Prompt With Arguments",
         "description": "A prompt with required arguments",
         "arguments": [{"name": "arg1", "description": "First test argument", "required": true},
                       {"name": "arg2", "description": "Second test argument", "required": true}]},
        {"name": "test_prompt_with_embedded_resource", "title": "Prompt With Embedded Resource",
         "description": "A prompt that includes an embedded resource",
         "arguments": [{"name": "resourceUri", "description": "URI of the resource to embed", "required": true}]},
        {"name": "test_prompt_with_image", "title": "Prompt With Image",
         "description": "A prompt that includes image content"}
    ])
}

/// One session of the conformance server.
#[derive(Clone)]
struct Conformance {
    /// The least severe level this session wants to hear (`logging/setLevel`).
    log_level: Arc<Mutex<LoggingLevel>>,
}

impl Conformance {
    fn new() -> Self {
        Self {
            log_level: Arc::new(Mutex::new(LoggingLevel::Info)),
        }
    }

    async fn log(&self, context: &RequestContext<RoleServer>, level: LoggingLevel, data: &str) {
        let wanted = *self.log_level.lock().unwrap_or_else(|p| p.into_inner());
        if severity(level) < severity(wanted) {
            return;
        }
        let mut message = LoggingMessageNotificationParam::new(level, json!(data));
        message.logger = Some(LOGGER.into());
        let _ = context.peer.notify_logging_message(message).await;
    }

    async fn progress(&self, context: &RequestContext<RoleServer>) -> Result<String, ErrorData> {
        let Some(token) = context.meta.get_progress_token() else {
            return Ok("no progress token".into());
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
        Ok(serde_json::to_value(&token)
            .map(|v| match v {
                Value::String(s) => s,
                other => other.to_string(),
            })
            .unwrap_or_default())
    }

    async fn sample(
        &self,
        prompt: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<String, ErrorData> {
        let params: CreateMessageRequestParams = decode(json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "maxTokens": 100
        }))?;
        Ok(match context.peer.create_message(params).await {
            Ok(answer) => {
                let text = serde_json::to_value(&answer.message.content)
                    .ok()
                    .and_then(|c| c.get("text").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_else(|| "No response".into());
                format!("LLM response: {text}")
            }
            Err(e) => format!("Sampling not supported or error: {e}"),
        })
    }

    async fn elicit(
        &self,
        form: Value,
        context: &RequestContext<RoleServer>,
        label: &str,
    ) -> Result<String, ErrorData> {
        let params: ElicitRequestParams = decode(form)?;
        Ok(match context.peer.create_elicitation(params).await {
            Ok(answer) => format!(
                "{label}: action={}, content={}",
                serde_json::to_value(answer.action)
                    .ok()
                    .and_then(|a| a.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                answer.content.unwrap_or_else(|| json!({}))
            ),
            Err(e) => format!("Elicitation not supported or error: {e}"),
        })
    }
}

fn argument<'a>(request: &'a CallToolRequestParams, name: &str) -> &'a str {
    request
        .arguments
        .as_ref()
        .and_then(|args| args.get(name))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// A `list_*` handler that answers every item of a fixed JSON listing in one page.
macro_rules! every_item {
    ($method:ident -> $result:ident of $item:ty = $items:expr) => {
        async fn $method(
            &self,
            _request: Option<PaginatedRequestParams>,
            _context: RequestContext<RoleServer>,
        ) -> Result<$result, ErrorData> {
            let items: Vec<$item> = decode($items)?;
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
            "completions": {}
        }))
        .unwrap_or_default();
        ServerConfig::new(capabilities).with_server_info(Implementation::new(
            "mcp-conformance-test-server",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        Err(refuse_discover())
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *self.log_level.lock().unwrap_or_else(|p| p.into_inner()) = request.level;
        Ok(())
    }

    every_item!(list_tools -> ListToolsResult of Tool = tools());

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let content = |content: Value| answer::<CallToolResult, _>(json!({"content": content}));
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
                for (step, data) in [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ]
                .into_iter()
                .enumerate()
                {
                    if step > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    self.log(&context, LoggingLevel::Info, data).await;
                }
                Ok(text_result("Tool with logging executed successfully"))
            }
            "test_tool_with_progress" => Ok(text_result(self.progress(&context).await?)),
            "test_error_handling" => answer::<CallToolResult, _>(json!({
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
            "test_sampling" => Ok(text_result(
                self.sample(argument(&request, "prompt"), &context).await?,
            )),
            "test_elicitation" => Ok(text_result(
                self.elicit(
                    simple_form(argument(&request, "message")),
                    &context,
                    "User response",
                )
                .await?,
            )),
            "test_elicitation_sep1034_defaults" => Ok(text_result(
                self.elicit(defaults_form(), &context, "Elicitation completed")
                    .await?,
            )),
            "test_elicitation_sep1330_enums" => Ok(text_result(
                self.elicit(enums_form(), &context, "Elicitation completed")
                    .await?,
            )),
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

    every_item!(list_resources -> ListResourcesResult of Resource = resources());

    every_item!(list_resource_templates -> ListResourceTemplatesResult of ResourceTemplate = json!([{
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
                        None,
                    ));
                }
            },
        };
        answer::<ReadResourceResult, _>(json!({"contents": [contents]}))
    }

    accepted!(subscribe(SubscribeRequestParams));

    accepted!(unsubscribe(UnsubscribeRequestParams));

    every_item!(list_prompts -> ListPromptsResult of Prompt = prompts());

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let arg = |name: &str| {
            request
                .arguments
                .as_ref()
                .and_then(|args| args.get(name))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let user = |content: Value| json!({"role": "user", "content": content});
        let messages = match request.name.as_str() {
            "test_simple_prompt" => json!([user(
                json!({"type": "text", "text": "This is a simple prompt for testing."})
            )]),
            "test_prompt_with_arguments" => json!([user(json!({"type": "text",
                "text": format!("Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1"), arg("arg2"))}))]),
            "test_prompt_with_embedded_resource" => json!([
                user(
                    json!({"type": "resource", "resource": {"uri": arg("resourceUri"),
                    "mimeType": "text/plain", "text": "Embedded resource content for testing."}})
                ),
                user(
                    json!({"type": "text", "text": "Please process the embedded resource above."})
                )
            ]),
            "test_prompt_with_image" => json!([
                user(json!({"type": "image", "data": TEST_IMAGE, "mimeType": "image/png"})),
                user(json!({"type": "text", "text": "Please analyze the image above."}))
            ]),
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no prompt named `{other}`"),
                    None,
                ));
            }
        };
        answer::<GetPromptResult, _>(json!({"messages": messages}))
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        decode(json!({"completion": {"values": [], "total": 0, "hasMore": false}}))
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    init_logging();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [port] if port.parse::<u16>().is_ok() => {
            serve_http(
                "conformance",
                &format!("127.0.0.1:{port}"),
                Conformance::new,
            )
            .await
        }
        _ => {
            eprintln!("usage: conformance PORT   (serves http://127.0.0.1:PORT/mcp)");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every fixed definition decodes into rmcp's types, so no scenario meets an internal
    /// error, and the elicitation forms survive decoding with every field the suite checks.
    #[test]
    fn definitions_decode_and_keep_what_the_suite_checks() {
        assert_eq!(decode::<Vec<Tool>>(tools()).expect("tools").len(), 14);
        assert_eq!(
            decode::<Vec<Resource>>(resources())
                .expect("resources")
                .len(),
            3
        );
        assert_eq!(decode::<Vec<Prompt>>(prompts()).expect("prompts").len(), 4);
        for form in [simple_form("hi"), defaults_form(), enums_form()] {
            let params: ElicitRequestParams = decode(form.clone()).expect("form");
            let again = serde_json::to_value(&params).expect("encode");
            assert_eq!(
                again["requestedSchema"], form["requestedSchema"],
                "the form must reach the client unchanged"
            );
        }
    }
}
