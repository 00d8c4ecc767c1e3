//! `kv`: an in-memory key-value store served over MCP stdio (or, with `--http ADDRESS`,
//! over streamable HTTP at `http://ADDRESS/mcp`, one store shared by every session).
//!
//! It exists so the gateway has an upstream of its own whose tools carry every annotation
//! the pipeline reads: `get` and `list` are read-only (safe to run in parallel and to
//! retry), `set` mutates but is idempotent, `delete` is destructive. `get`, `list`, `set`
//! and `delete` return structured content with an `outputSchema`, so federation can be
//! checked to carry both. The store lives as long as the process; nothing is persisted.
//!
//! With `KV_TRACE_LOG=/path` set, every `list` appends one JSON line to that file with the
//! W3C trace context it arrived with: `{"tool": "list", "meta": <_meta.traceparent>,
//! "header": <the HTTP traceparent header>}` (each `null` when absent). Tests read it to
//! see that the gateway passes a call's trace on.

use std::{collections::BTreeMap, io::Write, process::ExitCode, sync::Arc};

use mcp_gateway_examples::{Stdio, init_logging, refuse_discover, serve_http, serve_stdio};
use rmcp::{
    ErrorData, Json, RoleServer, ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{DiscoverResult, Extensions, RequestMetaObject},
    service::RequestContext,
    tool, tool_handler, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

/// Arguments naming one key.
#[derive(Debug, Deserialize, JsonSchema)]
struct KeyArgs {
    /// The key.
    key: String,
}

/// Arguments of `set`.
#[derive(Debug, Deserialize, JsonSchema)]
struct SetArgs {
    /// The key.
    key: String,
    /// The value to store under the key.
    value: String,
}

/// Arguments of `list`.
#[derive(Debug, Deserialize, JsonSchema)]
struct ListArgs {
    /// Only keys that start with this prefix; all keys when absent.
    #[serde(default)]
    prefix: Option<String>,
}

/// One key and its value (`null` when the key is not set).
#[derive(Debug, Serialize, JsonSchema)]
struct Entry {
    key: String,
    value: Option<String>,
}

/// The keys `list` found, in ascending order.
#[derive(Debug, Serialize, JsonSchema)]
struct Keys {
    keys: Vec<String>,
}

/// The outcome of `delete`.
#[derive(Debug, Serialize, JsonSchema)]
struct Deleted {
    key: String,
    /// Whether the key existed before the call.
    deleted: bool,
}

#[derive(Clone)]
struct Kv {
    store: Arc<Mutex<BTreeMap<String, String>>>,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Kv {
    fn new() -> Self {
        Self {
            store: Arc::default(),
            tool_router: Self::tool_router(),
        }
    }

    /// Read the value stored under a key; `value` is null when the key is not set.
    #[tool(annotations(title = "Get a value", read_only_hint = true))]
    async fn get(&self, Parameters(args): Parameters<KeyArgs>) -> Json<Entry> {
        let value = self.store.lock().await.get(&args.key).cloned();
        Json(Entry {
            key: args.key,
            value,
        })
    }

    /// List the stored keys in ascending order, optionally only those starting with `prefix`.
    #[tool(annotations(title = "List keys", read_only_hint = true))]
    async fn list(
        &self,
        Parameters(args): Parameters<ListArgs>,
        meta: RequestMetaObject,
        extensions: Extensions,
    ) -> Json<Keys> {
        record_trace("list", &meta, &extensions);
        let prefix = args.prefix.unwrap_or_default();
        let keys = self
            .store
            .lock()
            .await
            .keys()
            .filter(|key| key.starts_with(&prefix))
            .cloned()
            .collect();
        Json(Keys { keys })
    }

    /// Store a value under a key, replacing any previous value. Returns the stored entry.
    #[tool(annotations(
        title = "Set a value",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn set(&self, Parameters(args): Parameters<SetArgs>) -> Json<Entry> {
        self.store
            .lock()
            .await
            .insert(args.key.clone(), args.value.clone());
        Json(Entry {
            key: args.key,
            value: Some(args.value),
        })
    }

    /// Remove a key and its value. `deleted` says whether the key existed.
    #[tool(annotations(
        title = "Delete a key",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn delete(&self, Parameters(args): Parameters<KeyArgs>) -> Json<Deleted> {
        let deleted = self.store.lock().await.remove(&args.key).is_some();
        Json(Deleted {
            key: args.key,
            deleted,
        })
    }
}

/// Appends the trace context of one call to `KV_TRACE_LOG`, when set.
fn record_trace(tool: &str, meta: &RequestMetaObject, extensions: &Extensions) {
    let Some(path) = std::env::var_os("KV_TRACE_LOG") else {
        return;
    };
    let header = extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.headers.get("traceparent"))
        .and_then(|value| value.to_str().ok());
    let line = serde_json::json!({
        "tool": tool,
        "meta": meta.get_traceparent(),
        "header": header,
    });
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut file| writeln!(file, "{line}"));
    if let Err(e) = written {
        tracing::warn!("KV_TRACE_LOG: {e}");
    }
}

#[tool_handler(
    router = self.tool_router,
    name = "kv",
    instructions = "An in-memory key-value store: get, list, set and delete string values."
)]
impl ServerHandler for Kv {
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        Err(refuse_discover())
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    init_logging();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => serve_stdio("kv", Kv::new(), Stdio::new()).await,
        [flag, address] if flag == "--http" => {
            let kv = Kv::new();
            serve_http("kv", address, move || kv.clone()).await
        }
        _ => {
            eprintln!("usage: kv [--http ADDRESS]");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(key: &str) -> Parameters<KeyArgs> {
        Parameters(KeyArgs { key: key.into() })
    }

    #[tokio::test]
    async fn set_get_list_delete_round_trip() {
        let kv = Kv::new();
        assert_eq!(kv.get(key("a")).await.0.value, None);
        for (k, v) in [("app/x", "1"), ("app/y", "2"), ("other", "3")] {
            let stored = kv
                .set(Parameters(SetArgs {
                    key: k.into(),
                    value: v.into(),
                }))
                .await;
            assert_eq!(stored.0.value.as_deref(), Some(v));
        }
        assert_eq!(kv.get(key("app/y")).await.0.value.as_deref(), Some("2"));
        let listed = kv
            .list(
                Parameters(ListArgs {
                    prefix: Some("app/".into()),
                }),
                RequestMetaObject::default(),
                Extensions::new(),
            )
            .await;
        assert_eq!(listed.0.keys, ["app/x", "app/y"]);
        assert!(kv.delete(key("app/x")).await.0.deleted);
        assert!(!kv.delete(key("app/x")).await.0.deleted);
        let all = kv
            .list(
                Parameters(ListArgs { prefix: None }),
                RequestMetaObject::default(),
                Extensions::new(),
            )
            .await;
        assert_eq!(all.0.keys, ["app/y", "other"]);
    }

    #[test]
    fn annotations_mark_what_is_safe_to_repeat() {
        let tools = Kv::tool_router().list_all();
        let hints = |name: &str| {
            let tool = tools.iter().find(|t| t.name == name).expect(name);
            let a = tool.annotations.clone().expect("annotated");
            (a.read_only_hint, a.destructive_hint, a.idempotent_hint)
        };
        assert_eq!(hints("get"), (Some(true), None, None));
        assert_eq!(hints("list"), (Some(true), None, None));
        assert_eq!(hints("set"), (Some(false), Some(false), Some(true)));
        assert_eq!(hints("delete"), (Some(false), Some(true), Some(true)));
        assert!(tools.iter().all(|t| t.output_schema.is_some()));
    }
}
