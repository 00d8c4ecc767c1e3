//! `dynamic`: an MCP stdio server whose tool set changes while it runs.
//!
//! It exists to test how the gateway follows an upstream's changes: every change of the
//! tool set is announced with `notifications/tools/list_changed`, so the gateway must
//! refresh its view and tell its own clients. It also serves one prompt (with argument
//! completion) and one resource plus a resource template, so re-export of prompts and
//! resources can be tested against a server we control. The tool router macros fix the
//! tool set at compile time, hence the hand-written `ServerHandler`.
//!
//! Tools:
//! - `hello {name?}` (read-only): answers `Hello, <name>!` (`world` by default).
//! - `add_tool {name, description?}`: registers a tool called `name` (any non-empty string,
//!   so odd and over-long names can be tried), with `description` if given, announces the
//!   change and answers `added`.
//! - `remove_tool {name}`: removes a tool that `add_tool` registered, announces the change
//!   and answers `removed`.
//! - `describe_tool {name, description}`: gives any of its tools (this one included) a new
//!   description, announces the change and answers `described` — the "rug pull" of a
//!   server that changes what a tool says after it was approved.
//! - every added tool takes any arguments and echoes `{"tool": name, "arguments": {...}}`
//!   as structured content, with `"meta": {...}` when the request's `_meta` held more than
//!   a progress token.
//!
//! `DYNAMIC_TOOLS='["a", "b"]'` (a JSON array of names) registers tools at start, as if
//! `add_tool` had been called for each; `DYNAMIC_DESCRIPTIONS='{"hello": "…"}'` (a JSON
//! object) gives tools their descriptions at start, as if `describe_tool` had been called.
//!
//! Prompt `greet {name}`; resource `dynamic://tools` (the current tool names, one per
//! line; subscribers get `notifications/resources/updated` when it changes) and template
//! `dynamic://tools/{name}`.

use std::{
    collections::{BTreeMap, BTreeSet, HashSet},
    process::ExitCode,
    sync::Arc,
};

use mcp_gateway_examples::{Stdio, init_logging, refuse_discover, serve_stdio};
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams,
        CompleteResult, CompletionInfo, ContentBlock, DiscoverResult, GetPromptRequestParams,
        GetPromptResponse, GetPromptResult, Implementation, JsonObject, ListPromptsResult,
        ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
        Prompt, PromptArgument, PromptMessage, ReadResourceRequestParams, ReadResourceResponse,
        ReadResourceResult, Reference, Resource, ResourceContents, ResourceTemplate, Role,
        ServerCapabilities, ServerConfig, SubscribeRequestParams, Tool, ToolAnnotations,
        UnsubscribeRequestParams,
    },
    service::{Peer, RequestContext},
};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Mutex;

/// The tools that are always there.
const BUILT_IN: [&str; 6] = [
    "hello",
    "add_tool",
    "remove_tool",
    "describe_tool",
    "reject",
    "bad_output",
];
/// The resource listing the current tool names.
const TOOLS_URI: &str = "dynamic://tools";
/// The template naming one tool.
const TOOL_URI_PREFIX: &str = "dynamic://tools/";
/// Names offered when completing the `greet` prompt's argument.
const GREETABLE: [&str; 4] = ["alice", "bob", "carol", "dave"];

#[derive(Debug, Deserialize)]
struct HelloArgs {
    #[serde(default)]
    name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct NameArgs {
    name: String,
}

#[derive(Debug, Deserialize)]
struct AddArgs {
    name: String,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Debug, Deserialize)]
struct DescribeArgs {
    name: String,
    description: String,
}

struct State {
    /// Tools registered at run time, in name order.
    added: BTreeSet<String>,
    /// Descriptions given at start or by `add_tool` and `describe_tool`, by tool name, in
    /// place of the tools' own.
    descriptions: BTreeMap<String, String>,
    /// Resource URIs a client subscribed to.
    subscribed: HashSet<String>,
}

#[derive(Clone)]
struct Dynamic {
    state: Arc<Mutex<State>>,
}

impl Dynamic {
    fn with_tools(
        names: impl IntoIterator<Item = String>,
        descriptions: BTreeMap<String, String>,
    ) -> Self {
        let state = State {
            added: names.into_iter().collect(),
            descriptions,
            subscribed: HashSet::new(),
        };
        Self {
            state: Arc::new(Mutex::new(state)),
        }
    }

    async fn tools(&self) -> Vec<Tool> {
        let mut tools = vec![
            Tool::new(
                "hello",
                "Say hello to `name` (default: world).",
                schema(json!({
                    "type": "object",
                    "properties": {"name": {"type": "string", "description": "Who to greet."}}
                })),
            )
            .annotate(ToolAnnotations::new().read_only(true).open_world(false)),
            Tool::new(
                "add_tool",
                "Register a new tool called `name` and announce the changed tool list.",
                name_schema("The new tool's name."),
            )
            .annotate(
                ToolAnnotations::new()
                    .read_only(false)
                    .destructive(false)
                    .open_world(false),
            ),
            Tool::new(
                "remove_tool",
                "Remove a tool that add_tool registered and announce the changed tool list.",
                name_schema("The name of a tool that add_tool registered."),
            )
            .annotate(
                ToolAnnotations::new()
                    .read_only(false)
                    .destructive(true)
                    .open_world(false),
            ),
            Tool::new(
                "describe_tool",
                "Give one of this server's tools a new description and announce the changed \
                 tool list.",
                schema(json!({
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "description": "The tool's name."},
                        "description": {"type": "string", "description": "Its new description."}
                    },
                    "required": ["name", "description"]
                })),
            )
            .annotate(
                ToolAnnotations::new()
                    .read_only(false)
                    .destructive(false)
                    .open_world(false),
            ),
            // Misbehaviours on purpose, so the gateway's error codes can be produced for
            // real: a JSON-RPC error answer, and output that breaks the declared schema.
            Tool::new(
                "reject",
                "Always answers with a JSON-RPC error (for testing UPSTREAM_ERROR).",
                schema(json!({"type": "object"})),
            ),
            Tool::new(
                "bad_output",
                "Declares an integer `count` but returns a string (for testing OUTPUT_INVALID).",
                schema(json!({"type": "object"})),
            )
            .with_raw_output_schema(schema(json!({
                "type": "object",
                "properties": {"count": {"type": "integer"}},
                "required": ["count"]
            }))),
        ];
        let state = self.state.lock().await;
        tools.extend(state.added.iter().map(|name| {
            let description = format!("A tool added at run time; echoes its arguments as {name}.");
            Tool::new(name.clone(), description, schema(json!({"type": "object"})))
                .annotate(ToolAnnotations::new().read_only(true).open_world(false))
        }));
        for tool in &mut tools {
            if let Some(description) = state.descriptions.get(tool.name.as_ref()) {
                tool.description = Some(description.clone().into());
            }
        }
        tools
    }

    async fn tool_names(&self) -> Vec<String> {
        let state = self.state.lock().await;
        BUILT_IN
            .iter()
            .map(|name| (*name).to_owned())
            .chain(state.added.iter().cloned())
            .collect()
    }

    /// Makes `change` to the tool set and announces it; `Err` carries the caller-facing
    /// reason when nothing changed.
    async fn change(&self, change: Change, peer: &Peer<RoleServer>) -> Result<(), String> {
        let notify_resource = {
            let mut state = self.state.lock().await;
            match &change {
                Change::Add { name, description } => {
                    if name.is_empty() {
                        return Err("a tool name must not be empty".to_owned());
                    }
                    if BUILT_IN.contains(&name.as_str()) || !state.added.insert(name.clone()) {
                        return Err(format!("tool {name:?} already exists"));
                    }
                    if let Some(description) = description {
                        state.descriptions.insert(name.clone(), description.clone());
                    }
                }
                Change::Remove { name } => {
                    if !state.added.remove(name) {
                        return Err(format!("no tool {name:?} was added"));
                    }
                    state.descriptions.remove(name);
                }
                Change::Describe { name, description } => {
                    if !BUILT_IN.contains(&name.as_str()) && !state.added.contains(name) {
                        return Err(format!("no tool {name:?}"));
                    }
                    state.descriptions.insert(name.clone(), description.clone());
                }
            }
            // The resource lists names: a new description does not change it.
            !matches!(change, Change::Describe { .. }) && state.subscribed.contains(TOOLS_URI)
        };
        tracing::info!(?change, "tool set changed");
        if let Err(error) = peer.notify_tool_list_changed().await {
            tracing::warn!(%error, "cannot send tools/list_changed");
        }
        if notify_resource {
            let updated = rmcp::model::ResourceUpdatedNotificationParam::new(TOOLS_URI);
            if let Err(error) = peer.notify_resource_updated(updated).await {
                tracing::warn!(%error, "cannot send resources/updated");
            }
        }
        Ok(())
    }
}

/// A change of the tool set.
#[derive(Debug)]
enum Change {
    Add {
        name: String,
        description: Option<String>,
    },
    Remove {
        name: String,
    },
    Describe {
        name: String,
        description: String,
    },
}

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(object) => Arc::new(object),
        _ => Arc::default(),
    }
}

fn name_schema(description: &str) -> Arc<JsonObject> {
    schema(json!({
        "type": "object",
        "properties": {"name": {"type": "string", "description": description}},
        "required": ["name"]
    }))
}

fn parse<T: for<'de> Deserialize<'de>>(arguments: Option<JsonObject>) -> Result<T, ErrorData> {
    serde_json::from_value(Value::Object(arguments.unwrap_or_default()))
        .map_err(|error| ErrorData::invalid_params(error.to_string(), None))
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn failure(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

impl ServerHandler for Dynamic {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_completions()
                .enable_prompts()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("dynamic", env!("CARGO_PKG_VERSION")))
        .with_instructions("A server whose tools change at run time: add_tool, remove_tool.")
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        Err(refuse_discover())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools().await))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let result = match request.name.as_ref() {
            "hello" => {
                let args: HelloArgs = parse(request.arguments)?;
                text(format!(
                    "Hello, {}!",
                    args.name.as_deref().unwrap_or("world")
                ))
            }
            "add_tool" => {
                let args: AddArgs = parse(request.arguments)?;
                let add = Change::Add {
                    name: args.name,
                    description: args.description,
                };
                match self.change(add, &context.peer).await {
                    Ok(()) => text("added"),
                    Err(reason) => failure(reason),
                }
            }
            "remove_tool" => {
                let args: NameArgs = parse(request.arguments)?;
                match self
                    .change(Change::Remove { name: args.name }, &context.peer)
                    .await
                {
                    Ok(()) => text("removed"),
                    Err(reason) => failure(reason),
                }
            }
            "describe_tool" => {
                let args: DescribeArgs = parse(request.arguments)?;
                let describe = Change::Describe {
                    name: args.name,
                    description: args.description,
                };
                match self.change(describe, &context.peer).await {
                    Ok(()) => text("described"),
                    Err(reason) => failure(reason),
                }
            }
            "reject" => {
                return Err(ErrorData::invalid_params("rejected on purpose", None));
            }
            "bad_output" => CallToolResult::structured(json!({"count": "many"})),
            name if self.state.lock().await.added.contains(name) => {
                let mut echo =
                    json!({"tool": name, "arguments": request.arguments.unwrap_or_default()});
                let mut meta = context.meta.clone();
                meta.remove("progressToken");
                if !meta.is_empty() {
                    echo["meta"] = serde_json::to_value(&meta).unwrap_or_default();
                }
                CallToolResult::structured(echo)
            }
            name => {
                return Err(ErrorData::invalid_params(
                    format!("tool not found: {name}"),
                    None,
                ));
            }
        };
        Ok(result.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let greet = Prompt::new(
            "greet",
            Some("Ask the model to greet someone."),
            Some(vec![
                PromptArgument::new("name")
                    .with_description("Who to greet.")
                    .with_required(true),
            ]),
        );
        Ok(ListPromptsResult::with_all_items(vec![greet]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != "greet" {
            return Err(ErrorData::invalid_params(
                format!("prompt not found: {}", request.name),
                None,
            ));
        }
        let args: NameArgs = parse(request.arguments)?;
        let message =
            PromptMessage::new_text(Role::User, format!("Please greet {} warmly.", args.name));
        Ok(GetPromptResult::new(vec![message])
            .with_description("A greeting request.")
            .into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let values = match &request.r#ref {
            Reference::Prompt(prompt) if prompt.name == "greet" => GREETABLE
                .iter()
                .filter(|name| name.starts_with(&request.argument.value))
                .map(|name| (*name).to_owned())
                .collect(),
            Reference::Resource(template) if template.uri.starts_with(TOOLS_URI) => self
                .tool_names()
                .await
                .into_iter()
                .filter(|name| name.starts_with(&request.argument.value))
                .collect(),
            _ => Vec::new(),
        };
        let completion = CompletionInfo::new(values)
            .map_err(|message| ErrorData::internal_error(message, None))?;
        Ok(CompleteResult::new(completion))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let tools = Resource::new(TOOLS_URI, "tools")
            .with_description("The names of the tools this server offers now, one per line.")
            .with_mime_type("text/plain");
        Ok(ListResourcesResult::with_all_items(vec![tools]))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let tool = ResourceTemplate::new(format!("{TOOL_URI_PREFIX}{{name}}"), "tool")
            .with_description("Whether a tool of this name exists, and where it came from.")
            .with_mime_type("text/plain");
        Ok(ListResourceTemplatesResult::with_all_items(vec![tool]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let names = self.tool_names().await;
        let body = if request.uri == TOOLS_URI {
            names.join("\n")
        } else if let Some(name) = request.uri.strip_prefix(TOOL_URI_PREFIX) {
            match (BUILT_IN.contains(&name), names.iter().any(|n| n == name)) {
                (true, _) => format!("{name}: built in"),
                (false, true) => format!("{name}: added at run time"),
                (false, false) => format!("{name}: no such tool"),
            }
        } else {
            return Err(ErrorData::resource_not_found(
                format!("resource not found: {}", request.uri),
                None,
            ));
        };
        let contents = ResourceContents::text(body, request.uri).with_mime_type("text/plain");
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.state.lock().await.subscribed.insert(request.uri);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.state.lock().await.subscribed.remove(&request.uri);
        Ok(())
    }
}

/// The names in `DYNAMIC_TOOLS`, or none when it is unset.
fn initial_tools() -> Result<Vec<String>, String> {
    match std::env::var_os("DYNAMIC_TOOLS") {
        None => Ok(Vec::new()),
        Some(raw) => parse_tool_names(
            &raw.into_string()
                .map_err(|_| "DYNAMIC_TOOLS is not valid UTF-8".to_owned())?,
        ),
    }
}

/// The descriptions in `DYNAMIC_DESCRIPTIONS`, or none when it is unset.
fn initial_descriptions() -> Result<BTreeMap<String, String>, String> {
    match std::env::var("DYNAMIC_DESCRIPTIONS") {
        Err(std::env::VarError::NotPresent) => Ok(BTreeMap::new()),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err("DYNAMIC_DESCRIPTIONS is not valid UTF-8".to_owned())
        }
        Ok(raw) => serde_json::from_str(&raw).map_err(|error| {
            format!("DYNAMIC_DESCRIPTIONS must be a JSON object of descriptions: {error}")
        }),
    }
}

/// Reads a JSON array of tool names that do not clash with the built-in tools.
fn parse_tool_names(raw: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = serde_json::from_str(raw)
        .map_err(|error| format!("DYNAMIC_TOOLS must be a JSON array of names: {error}"))?;
    match names
        .iter()
        .find(|name| name.is_empty() || BUILT_IN.contains(&name.as_str()))
    {
        Some(bad) => Err(format!("DYNAMIC_TOOLS: cannot register {bad:?}")),
        None => Ok(names),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    init_logging();
    match initial_tools().and_then(|names| Ok((names, initial_descriptions()?))) {
        Ok((names, descriptions)) => {
            let server = Dynamic::with_tools(names, descriptions);
            serve_stdio("dynamic", server, Stdio::new()).await
        }
        Err(message) => {
            tracing::error!("{message}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_from_the_environment() {
        assert_eq!(
            parse_tool_names(r#"["b", "a a", "b"]"#).unwrap(),
            ["b", "a a", "b"]
        );
        assert!(parse_tool_names(r#"["hello"]"#).is_err());
        assert!(parse_tool_names(r#"[""]"#).is_err());
        assert!(parse_tool_names("b,c").is_err());
    }

    #[tokio::test]
    async fn added_tools_follow_the_built_in_ones_in_name_order() {
        let server = Dynamic::with_tools(
            ["zeta".to_owned(), "alpha".to_owned()],
            BTreeMap::from([("hello".to_owned(), "Greets.".to_owned())]),
        );
        let tools = server.tools().await;
        assert_eq!(tools[0].description.as_deref(), Some("Greets."));
        let names: Vec<String> = tools
            .into_iter()
            .map(|tool| tool.name.into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "hello",
                "add_tool",
                "remove_tool",
                "describe_tool",
                "reject",
                "bad_output",
                "alpha",
                "zeta"
            ]
        );
    }
}
