//! A typed, deterministic TypeScript SDK for MCP tools.
//!
//! In code mode the model never sees tool definitions one by one: it reads one SDK and
//! writes a program against it. [`generate`] turns the visible tools into that SDK:
//!
//! - [`Sdk::declarations`], the TypeScript the model reads;
//! - [`Sdk::bindings`], the JavaScript the `run_code` runtime installs to make it callable;
//! - [`Sdk::hash`], so caches can key on the SDK.
//!
//! # Shape
//!
//! ```ts
//! declare const tools: {
//!   everything: {
//!     /** Returns the sum of two numbers @readOnly */
//!     "get-sum"(args: { a: number; b: number }): Promise<string>;
//!   };
//!   kv: {
//!     /** Reads a key */
//!     get(args: { key: string }): Promise<{ value: string | null }>;
//!   };
//! };
//! declare function callTool(name: ToolName, args?: { [key: string]: unknown }): Promise<CallToolResult>;
//! declare class ToolCallError extends Error { readonly tool: string; readonly code: string }
//! ```
//!
//! One namespace per server and one async function per tool, keyed by the original names.
//! A tool that declares an outputSchema resolves to its `structuredContent`, typed from the
//! schema; any other resolves to the text of its text contents joined by `"\n"`. `callTool`
//! takes a federated name and resolves to the whole MCP result. A result with
//! `isError: true` rejects with a `ToolCallError` whose `code` is the gateway's error code
//! (`_meta["mcp-gateway/error"].code`, else `TOOL_ERROR`).
//!
//! The bindings are one JavaScript expression evaluating to
//! `(hostCall, pending) => ({ tools, callTool, ToolCallError })`: the catalog-independent
//! [`BINDINGS_FACTORY`] applied to [`Sdk::binding_table`], where
//! `hostCall(federatedName, args)` resolves to the MCP CallToolResult JSON and the
//! optional `pending` lists `[server, prefix]` for servers whose tools are not known yet:
//! `tools.<server>.<any>(args)` calls `prefix + any` for them.
//!
//! # Properties
//!
//! - Deterministic: servers, tools, properties and named types in lexicographic order; the
//!   same tools give byte-identical output (and hash) whatever their input order.
//! - Compact: descriptions are cut to [`Options::description_budget`] characters with
//!   [`CUT_MARKER`]; a type used once is inlined, one used twice is named once.
//! - Total: every input gives an SDK. Schemas deeper than [`Options::max_depth`], larger
//!   than [`NODE_BUDGET`] nodes, or not understood become `unknown`; `$ref` recursion
//!   becomes named types in the `$defs` namespace. It never recurses without bound and
//!   never panics.
//!
//! # Example
//!
//! ```
//! use sdkgen::{generate, Options, ToolSpec};
//! use serde_json::json;
//!
//! let sum = ToolSpec {
//!     federated_name: "mcp__everything__get-sum".into(),
//!     server: "everything".into(),
//!     name: "get-sum".into(),
//!     title: None,
//!     description: Some("Returns the sum of two numbers".into()),
//!     input_schema: json!({
//!         "type": "object",
//!         "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
//!         "required": ["a", "b"]
//!     }),
//!     output_schema: None,
//!     annotations: Some(json!({"readOnlyHint": true})),
//! };
//! let sdk = generate(&[sum], &Options::default());
//! assert!(sdk.declarations.contains(
//!     "/** Returns the sum of two numbers @readOnly */\n    \"get-sum\"(args: { a: number; b: number }): Promise<string>;"
//! ));
//! assert!(sdk.bindings.starts_with(sdkgen::BINDINGS_FACTORY));
//! assert_eq!(sdk.binding_table, "[\n  [\"everything\", \"get-sum\", \"mcp__everything__get-sum\", 0]\n]");
//! assert_eq!(sdk.tool_count, 1);
//! assert_eq!(sdk.hash.len(), 64);
//! ```
//!
//! # Layout
//!
//! - `declarations`: the SDK text, tool by tool; `bindings`: the runtime JavaScript.
//! - `schema`: JSON Schema → [`ts`] types; `refs`: `$ref` parsing and resolution.
//! - `ts`: the TypeScript type tree and its printer; `jsdoc`: comments; `names`: quoting and
//!   identifiers.

mod bindings;
mod declarations;

pub use bindings::FACTORY as BINDINGS_FACTORY;
mod jsdoc;
mod names;
mod refs;
mod schema;
mod ts;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

pub use jsdoc::CUT_MARKER;
pub use schema::NODE_BUDGET;

/// One visible tool, as the gateway's registry knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The gateway-wide name (`mcp__<server>__<tool>`) that `callTool` and `hostCall` take.
    pub federated_name: String,
    /// The upstream server's name: the namespace under `tools`.
    pub server: String,
    /// The tool's original name on its server: the function's key in the namespace.
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    /// The tool's inputSchema (JSON Schema); anything not understood types as `unknown`.
    pub input_schema: Value,
    /// The tool's outputSchema: when present the function resolves to structuredContent.
    pub output_schema: Option<Value>,
    /// MCP ToolAnnotations (`readOnlyHint`, `destructiveHint`, `idempotentHint`,
    /// `openWorldHint`, `title`).
    pub annotations: Option<Value>,
}

/// Limits on what the SDK spends on one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Characters kept of each description (tool, property, named type) before it is cut
    /// with [`CUT_MARKER`]. Default 512: every description of the reference servers
    /// (server-everything, -filesystem, -memory) fits whole.
    pub description_budget: usize,
    /// Schema nesting levels converted below a tool's schema root; deeper levels are
    /// `unknown`. Default 10.
    pub max_depth: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            description_budget: 512,
            max_depth: 10,
        }
    }
}

/// A generated SDK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sdk {
    /// TypeScript declarations: what the model reads.
    pub declarations: String,
    /// One JavaScript expression evaluating to `(hostCall, pending) => ({ tools, callTool,
    /// ToolCallError })`: [`BINDINGS_FACTORY`] applied to `binding_table`.
    pub bindings: String,
    /// The tools for [`BINDINGS_FACTORY`] (JSON): `[server, tool, federated name,
    /// 1 when it returns structuredContent else 0]` rows.
    pub binding_table: String,
    /// Lowercase hex SHA-256 of `declarations` followed by `bindings`.
    pub hash: String,
    /// How many tools the SDK holds (duplicates of a server and name are dropped).
    pub tool_count: usize,
}

/// Generates the SDK for `tools`. The order of `tools` does not matter; when two tools share
/// a server and a name, only the first in (federated name, content) order is kept.
pub fn generate(tools: &[ToolSpec], options: &Options) -> Sdk {
    let mut sorted: Vec<&ToolSpec> = tools.iter().collect();
    sorted.sort_unstable_by(|a, b| {
        (&a.server, &a.name, &a.federated_name)
            .cmp(&(&b.server, &b.name, &b.federated_name))
            .then_with(|| {
                // Full ties (a duplicate listing) are broken by content, not input order.
                let json = |t: &ToolSpec| serde_json::to_string(t).unwrap_or_default();
                json(a).cmp(&json(b))
            })
    });
    sorted.dedup_by(|later, earlier| later.server == earlier.server && later.name == earlier.name);

    let declarations = declarations::render(&sorted, options);
    let binding_table = bindings::table(&sorted);
    let bindings = bindings::render(&binding_table);
    let mut hasher = Sha256::new();
    hasher.update(declarations.as_bytes());
    hasher.update(bindings.as_bytes());
    let hash = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Sdk {
        declarations,
        bindings,
        binding_table,
        hash,
        tool_count: sorted.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(server: &str, name: &str, description: &str) -> ToolSpec {
        ToolSpec {
            federated_name: format!("mcp__{server}__{name}"),
            server: server.into(),
            name: name.into(),
            title: None,
            description: Some(description.into()),
            input_schema: json!({"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}),
            output_schema: None,
            annotations: None,
        }
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let options = Options::default();
        assert_eq!((options.description_budget, options.max_depth), (512, 10));
    }

    #[test]
    fn hash_is_the_sha256_of_declarations_then_bindings() {
        let sdk = generate(&[tool("kv", "get", "Reads a key")], &Options::default());
        let digest = Sha256::digest(format!("{}{}", sdk.declarations, sdk.bindings));
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(sdk.hash, hex);
        let other = generate(&[tool("kv", "get", "Reads a key!")], &Options::default());
        assert_ne!(sdk.hash, other.hash);
    }

    #[test]
    fn duplicates_are_dropped_whatever_the_order() {
        let a = tool("kv", "get", "first");
        let b = tool("kv", "get", "second");
        let one = generate(
            &[a.clone(), b.clone(), tool("kv", "put", "x")],
            &Options::default(),
        );
        let two = generate(&[b, tool("kv", "put", "x"), a], &Options::default());
        assert_eq!(one, two);
        assert_eq!(one.tool_count, 2);
        assert_eq!(one.declarations.matches("    get(").count(), 1);
    }

    #[test]
    fn the_shape_is_one_namespace_per_server_and_one_function_per_tool() {
        let tools = [
            tool("kv", "get", "Reads a key"),
            tool("everything", "get-sum", "Adds"),
        ];
        let sdk = generate(&tools, &Options::default());
        let d = &sdk.declarations;
        assert!(
            d.starts_with("// Tools SDK: 2 tools from 2 servers."),
            "{d}"
        );
        let everything = d.find("  everything: {\n").expect("everything namespace");
        let kv = d.find("  kv: {\n").expect("kv namespace");
        assert!(everything < kv, "servers in lexicographic order");
        assert!(d.contains(
            "    /** Reads a key */\n    get(args: { key: string }): Promise<string>;\n"
        ));
        assert!(d.contains("    \"get-sum\"(args: { key: string }): Promise<string>;\n"));
        assert!(d.contains(
            "type ToolName =\n  | \"mcp__everything__get-sum\"\n  | \"mcp__kv__get\";\n"
        ));
        assert!(sdk.bindings.contains(r#"["kv", "get", "mcp__kv__get", 0]"#));
    }

    #[test]
    fn long_descriptions_are_cut_to_the_budget() {
        let long = "word ".repeat(100);
        let options = Options {
            description_budget: 40,
            ..Options::default()
        };
        let sdk = generate(&[tool("kv", "get", &long)], &options);
        let line = sdk
            .declarations
            .lines()
            .find(|l| l.contains(CUT_MARKER))
            .expect("cut");
        assert_eq!(
            line.trim(),
            format!("/** {}{CUT_MARKER} */", "word ".repeat(8).trim_end())
        );
    }

    #[test]
    fn no_tools_still_make_a_valid_sdk() {
        let sdk = generate(&[], &Options::default());
        assert_eq!(sdk.tool_count, 0);
        assert!(sdk.declarations.contains("declare const tools: {\n};\n"));
        assert!(sdk.declarations.contains("type ToolName = never;\n"));
    }
}
