//! The reserved `search_tools` tool: in `catalog = "search"` it stands in for the
//! catalog. A client asks in its own words; the best matches come back with their full
//! definitions — JSON Schema for native clients, TypeScript declarations (sdkgen's, the
//! same text the full SDK has for the same tools) for a code-mode session — and, for a
//! session that calls tools natively, join its `tools/list` (the client is sent
//! `list_changed`). With `[search] model`, every catalog's tools are handed to the model
//! in the background as the catalog arrives, and results say how they were ranked
//! (`structuredContent.ranking`: `lexical` until the vectors are made).
//!
//! ```toml
//! [gateway]
//! catalog = "search"
//! pinned = ["mcp__fs__read_text_file"]   # listed anyway
//! [search]
//! model = "/usr/share/mcp-gateway/all-MiniLM-L6-v2"   # ranks by meaning too
//! ```

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Map, Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::config::{Mode, SearchConfig};
use crate::pipeline::{BoxFuture, BuiltinTool, ErrorCode, Executor, Invocation, ToolError};
use crate::registry::search::semantic::{Document, Semantic};
use crate::registry::search::{Hit, Ranking, SearchIndex, SearchIndexes};
use crate::registry::view::SessionView;
use crate::registry::{Catalog, Registry};
use crate::session::Session;
use crate::tool_result::{Block, ToolResult};

/// The name of the gateway's own search tool; reserved, never shadowed.
pub const SEARCH_TOOLS: &str = "search_tools";

/// Matches returned when the caller does not say.
pub const DEFAULT_LIMIT: usize = 5;

/// The most matches one call returns.
pub const MAX_LIMIT: usize = 50;

/// Characters of server names the tool's description lists before it cuts them.
const SERVER_LIST_BUDGET: usize = 300;

/// The tools a session has found: listed for it from then on. Shared by the session's
/// `search_tools` calls and its catalog watcher, which tells the client.
#[derive(Clone, Default)]
pub struct Found(Arc<FoundState>);

#[derive(Default)]
struct FoundState {
    names: Mutex<BTreeSet<String>>,
    changed: Notify,
}

impl Found {
    /// The session's found tools.
    pub fn of(session: &Session) -> Found {
        session.with_state(|found: &mut Found| found.clone())
    }

    /// Whether `name` was found.
    pub fn contains(&self, name: &str) -> bool {
        self.lock().contains(name)
    }

    /// Adds `names`; wakes [`Found::changed`] when one is new.
    fn add<'a>(&self, names: impl IntoIterator<Item = &'a str>) {
        let mut found = self.lock();
        let before = found.len();
        found.extend(names.into_iter().map(str::to_owned));
        if found.len() != before {
            self.0.changed.notify_one();
        }
    }

    /// Resolves when tools were added since the last time it resolved.
    pub async fn changed(&self) {
        self.0.changed.notified().await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.0.names.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What a caller asked for.
#[derive(Debug, PartialEq)]
pub struct Query {
    pub text: String,
    pub server: Option<String>,
    pub limit: usize,
}

impl Query {
    /// Reads `{query, server?, limit?}`; a wrong shape is INVALID_ARGS naming the field.
    pub fn parse(arguments: Option<&Map<String, Value>>) -> Result<Query, ToolError> {
        let empty = Map::new();
        let arguments = arguments.unwrap_or(&empty);
        let invalid = |field: &str, what: &str| {
            ToolError::new(
                ErrorCode::InvalidArgs,
                format!("arguments at `/{field}`: {what}"),
            )
        };
        if let Some(unknown) = arguments
            .keys()
            .find(|k| !["query", "server", "limit"].contains(&k.as_str()))
        {
            return Err(invalid(
                unknown,
                "unknown argument; expected query, server, limit",
            ));
        }
        let text = match arguments.get("query") {
            Some(Value::String(text)) => text.clone(),
            _ => return Err(invalid("query", "a string is required")),
        };
        let server = match arguments.get("server") {
            None | Some(Value::Null) => None,
            Some(Value::String(server)) => Some(server.clone()),
            Some(_) => return Err(invalid("server", "a string is required")),
        };
        let limit = match arguments.get("limit") {
            None | Some(Value::Null) => DEFAULT_LIMIT,
            Some(limit) => match limit.as_u64() {
                Some(n @ 1..) if n as usize <= MAX_LIMIT => n as usize,
                _ => {
                    return Err(invalid(
                        "limit",
                        &format!("an integer from 1 to {MAX_LIMIT} is required"),
                    ));
                }
            },
        };
        Ok(Query {
            text,
            server,
            limit,
        })
    }
}

/// The `search_tools` tool, and the indexes it keeps per catalog and profile.
pub struct SearchTool {
    registry: Arc<Registry>,
    indexes: SearchIndexes,
    semantic: Option<Arc<Semantic>>,
}

impl SearchTool {
    /// The tool over `registry`'s catalogs; with `config`'s model, it starts loading the
    /// model and has every catalog's tools embedded as the catalog arrives, until
    /// `shutdown`.
    pub fn start(
        registry: Arc<Registry>,
        config: &SearchConfig,
        shutdown: CancellationToken,
    ) -> Self {
        let semantic = Semantic::start(config, shutdown.clone());
        if let Some(semantic) = &semantic {
            tokio::spawn(embed_catalogs(registry.clone(), semantic.clone(), shutdown));
        }
        Self {
            registry,
            indexes: SearchIndexes::new(semantic.clone()),
            semantic,
        }
    }

    /// Resolves once the current catalog's tools have their vectors, or the model could
    /// not be loaded; at once without a model.
    pub async fn settled(&self) {
        if let Some(semantic) = &self.semantic {
            semantic.want(documents(&self.registry.catalog()));
            semantic.settled().await;
        }
    }

    /// The index of the tools `session` may see in the current catalog.
    pub fn index(&self, session: &Session) -> Arc<SearchIndex> {
        let view = SessionView::new(self.registry.catalog(), session.profile.clone());
        self.indexes.get(&view)
    }

    /// The matches for `query` among the tools `session` may see, and how they were
    /// ranked.
    pub async fn find(
        &self,
        session: &Session,
        query: &Query,
    ) -> Result<(Vec<Hit>, Ranking), ToolError> {
        let index = self.index(session);
        if let Some(server) = &query.server
            && !index.servers().contains_key(server.as_str())
        {
            return Err(ToolError::new(
                ErrorCode::InvalidArgs,
                format!(
                    "arguments at `/server`: no server `{server}`; there are {}",
                    server_list(&index)
                ),
            ));
        }
        let meanings = match index.semantic() {
            Some(semantic) if !query.text.trim().is_empty() => {
                semantic.embed_query(&query.text).await
            }
            _ => Vec::new(),
        };
        Ok(index.search(&query.text, &meanings, query.server.as_deref(), query.limit))
    }
}

impl BuiltinTool for SearchTool {
    fn definition(&self, session: &Session) -> Tool {
        let index = self.index(session);
        let servers = format!(
            " This gateway holds {} tools from {}.",
            index.len(),
            server_list(&index)
        );
        let returns = match session.mode() {
            Mode::Code => {
                "The best matches come back as TypeScript declarations for run_code programs \
                 (`tools.<server>.<tool>(args)`); every tool can be called from a program \
                 whether searched or not."
            }
            Mode::Native | Mode::Both => {
                "Only a few are listed: the best matches come back with their full \
                 definitions and join the tool list. Any tool can also be called by its name."
            }
        };
        let description = format!(
            "Find tools by what they do: describe the task in a few words (\"read a file\", \
             \"commit staged changes\").{servers} {returns} An empty query with `server` \
             lists that server's tools."
        );
        Tool::new(SEARCH_TOOLS, description, input_schema())
            .annotate(ToolAnnotations::new().read_only(true).open_world(false))
    }
}

impl Executor for SearchTool {
    fn call<'a>(
        &'a self,
        invocation: &'a Invocation,
        _signal: CancellationToken,
        _trace: &'a opentelemetry::Context,
    ) -> BoxFuture<'a, Result<ToolResult, ToolError>> {
        Box::pin(async move {
            let query = Query::parse(invocation.arguments.as_ref())?;
            let session = &invocation.session;
            let (hits, ranking) = self.find(session, &query).await?;
            let mut result = if session.mode() == Mode::Code {
                declarations(&query, &hits)
            } else {
                Found::of(session).add(hits.iter().map(|hit| hit.tool.name.as_str()));
                definitions(&query, &hits)
            };
            if let Some(Value::Object(structured)) = result.structured_content_mut() {
                structured.insert("ranking".into(), ranking.as_str().into());
            }
            Ok(result)
        })
    }
}

/// Hands every catalog's tools to the model as the catalog arrives (it embeds those
/// without a vector), until `shutdown`.
async fn embed_catalogs(
    registry: Arc<Registry>,
    semantic: Arc<Semantic>,
    shutdown: CancellationToken,
) {
    let mut catalogs = registry.watch();
    loop {
        let catalog = catalogs.borrow_and_update().clone();
        semantic.want(documents(&catalog));
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = catalogs.changed() => if changed.is_err() { return },
        }
    }
}

/// What the model reads of each tool of `catalog`.
fn documents(catalog: &Catalog) -> Vec<Document> {
    catalog
        .tools
        .values()
        .map(|tool| Document::of(tool))
        .collect()
}

fn input_schema() -> Arc<rmcp::model::JsonObject> {
    let schema = json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What the tool should do, in a few words."},
            "server": {"type": "string", "description": "Only this server's tools."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": format!("How many matches (default {DEFAULT_LIMIT}).")}
        },
        "required": ["query"],
        "additionalProperties": false
    });
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

/// `a (13), b (12), …` within [`SERVER_LIST_BUDGET`].
fn server_list(index: &SearchIndex) -> String {
    let servers = index.servers();
    let mut out = format!("{} servers (", servers.len());
    for (i, (server, count)) in servers.iter().enumerate() {
        if out.len() > SERVER_LIST_BUDGET {
            out.push_str(&format!(", … +{} more", servers.len() - i));
            break;
        }
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&format!("{server}: {count}"));
    }
    out.push(')');
    out
}

/// The header line of a result.
fn header(query: &Query, hits: &[Hit], then: &str) -> String {
    match hits.len() {
        0 => format!(
            "No tool matches \"{}\". Try other words, or an empty query with `server` to list a server's tools.",
            query.text
        ),
        n => format!("{n} tools for \"{}\"{then}", query.text),
    }
}

/// For native clients: the matches' definitions, as `tools/list` gives them.
fn definitions(query: &Query, hits: &[Hit]) -> ToolResult {
    let tools: Vec<Value> = hits
        .iter()
        .map(|hit| Value::Object((*hit.tool.listed).clone()))
        .collect();
    let mut text = header(
        query,
        hits,
        ", best first; they are now listed and callable by name:",
    );
    for tool in &tools {
        text.push('\n');
        text.push_str(&tool.to_string());
    }
    ToolResult::success(vec![Block::text(text)]).with_structured_content(json!({"tools": tools}))
}

/// For code-mode sessions: the matches' TypeScript declarations.
fn declarations(query: &Query, hits: &[Hit]) -> ToolResult {
    let specs: Vec<sdkgen::ToolSpec> = hits.iter().map(|hit| hit.tool.sdk_spec()).collect();
    let sdk = sdkgen::generate(&specs, &sdkgen::Options::default());
    let tools: Vec<Value> = hits
        .iter()
        .map(|hit| json!({"name": hit.tool.name, "server": &*hit.tool.server, "tool": hit.tool.original}))
        .collect();
    let mut text = header(
        query,
        hits,
        ", best first; call them from run_code as declared:",
    );
    if !hits.is_empty() {
        text.push_str("\n```ts\n");
        text.push_str(&sdk.declarations);
        text.push_str("```");
    }
    ToolResult::success(vec![Block::text(text)])
        .with_structured_content(json!({"tools": tools, "declarations": sdk.declarations}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(arguments: Value) -> Result<Query, String> {
        Query::parse(arguments.as_object()).map_err(|e| e.message)
    }

    #[test]
    fn queries_are_read_with_their_defaults() {
        assert_eq!(
            parse(json!({"query": "read a file"})).unwrap(),
            Query {
                text: "read a file".into(),
                server: None,
                limit: DEFAULT_LIMIT
            }
        );
        let full = parse(json!({"query": "", "server": "git", "limit": 12})).unwrap();
        assert_eq!((full.server.as_deref(), full.limit), (Some("git"), 12));
    }

    #[test]
    fn bad_arguments_name_the_field() {
        assert!(parse(json!({})).unwrap_err().contains("`/query`"));
        assert!(parse(json!({"query": 3})).unwrap_err().contains("`/query`"));
        assert!(
            parse(json!({"query": "x", "limit": 0}))
                .unwrap_err()
                .contains("`/limit`")
        );
        assert!(
            parse(json!({"query": "x", "limit": 51}))
                .unwrap_err()
                .contains("`/limit`")
        );
        assert!(
            parse(json!({"query": "x", "limit": 2.5}))
                .unwrap_err()
                .contains("`/limit`")
        );
        assert!(
            parse(json!({"query": "x", "server": 1}))
                .unwrap_err()
                .contains("`/server`")
        );
        assert!(
            parse(json!({"query": "x", "sever": "git"}))
                .unwrap_err()
                .contains("`/sever`")
        );
    }

    #[tokio::test]
    async fn found_tools_wake_the_watcher_only_when_new() {
        let found = Found::default();
        found.add(["a", "b"]);
        tokio::time::timeout(std::time::Duration::from_secs(1), found.changed())
            .await
            .expect("woken");
        assert!(found.contains("a") && !found.contains("c"));
        found.add(["a"]);
        let again =
            tokio::time::timeout(std::time::Duration::from_millis(50), found.changed()).await;
        assert!(again.is_err(), "nothing new, no wake-up");
    }
}
