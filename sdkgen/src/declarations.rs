//! The declarations the model reads: a global `tools` object with one namespace per server
//! and one async function per tool, `callTool` for the whole MCP result, `ToolCallError`,
//! and the named schema types in the `$defs` namespace.
//!
//! Layout is fixed so the text is byte-identical for the same tools: servers and tools in
//! lexicographic order (the caller sorts), properties sorted, named types by name, two-space
//! indentation, one member per line.

use std::collections::BTreeMap;

use crate::jsdoc::Doc;
use crate::names::{push_property_key, push_string_literal};
use crate::schema::{self, Defs, RootName};
use crate::ts::{DEFS_NAMESPACE, Ty};
use crate::{Options, ToolSpec};

/// Types every SDK shares: the MCP result shape, the error class and the console.
const PREAMBLE: &str = r#"/** One item of a tool result's content. */
type Content =
  | { type: "text"; text: string }
  | { type: "image" | "audio"; data: string; mimeType: string }
  | { type: "resource_link"; uri: string; name: string; mimeType?: string; description?: string }
  | { type: "resource"; resource: { uri: string; mimeType?: string; text?: string; blob?: string } };
/** The whole MCP result of a tool call, as callTool returns it. */
interface CallToolResult {
  content: Content[];
  structuredContent?: { [key: string]: unknown };
  isError?: boolean;
  _meta?: { [key: string]: unknown };
}
/**
 * Thrown when a tool call fails. `tool` is the federated tool name, `code` a stable error
 * code (INVALID_ARGS, TOOL_NOT_FOUND, DENIED, TOOL_TIMEOUT, UPSTREAM_ERROR, TOOL_ERROR, ...).
 */
declare class ToolCallError extends Error {
  constructor(tool: string, code: string, message: string);
  readonly tool: string;
  readonly code: string;
}
/** What the program logs is returned to the caller with its result. */
interface Console {
  log(...data: unknown[]): void;
  info(...data: unknown[]): void;
  warn(...data: unknown[]): void;
  error(...data: unknown[]): void;
  debug(...data: unknown[]): void;
}
declare var console: Console;
"#;

/// Renders the declarations for `tools`, already sorted by (server, name) and deduplicated.
pub(crate) fn render(tools: &[&ToolSpec], options: &Options) -> String {
    let mut defs = Defs::default();
    let mut by_server: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for tool in tools {
        let method = method(tool, options, &mut defs);
        by_server.entry(&tool.server).or_default().push(method);
    }
    defs.break_alias_cycles();

    let mut out = String::new();
    out.push_str(&format!(
        "// Tools SDK: {} from {}. Call `await tools.<server>.<tool>(args)`, with\n\
         // brackets for names that are not identifiers (`tools.kv[\"get-item\"]({{ key: \"x\" }})`).\n\
         // A tool with an output schema resolves to its structuredContent, others to their text.\n\
         // A failed call throws ToolCallError.\n",
        counted(tools.len(), "tool"),
        counted(by_server.len(), "server")
    ));
    out.push_str(PREAMBLE);

    out.push_str("declare const tools: {\n");
    for (server, methods) in &by_server {
        out.push_str("  ");
        push_property_key(server, &mut out);
        out.push_str(": {\n");
        for method in methods {
            out.push_str(method);
        }
        out.push_str("  };\n");
    }
    out.push_str("};\n");

    out.push_str(
        "/** Calls a tool by its federated name; resolves to the whole MCP result. */\n\
         declare function callTool(name: ToolName, args?: { [key: string]: unknown }): Promise<CallToolResult>;\n",
    );
    out.push_str("type ToolName =");
    if tools.is_empty() {
        out.push_str(" never");
    }
    let mut federated: Vec<&str> = tools.iter().map(|t| t.federated_name.as_str()).collect();
    federated.sort_unstable();
    federated.dedup();
    for name in federated {
        out.push_str("\n  | ");
        push_string_literal(name, &mut out);
    }
    out.push_str(";\n");

    if !defs.is_empty() {
        out.push_str("declare namespace ");
        out.push_str(DEFS_NAMESPACE);
        out.push_str(" {\n");
        for (name, named) in defs.entries() {
            if let Some(doc) = &named.doc {
                doc.render("  ", &mut out);
            }
            out.push_str("  type ");
            out.push_str(name);
            out.push_str(" = ");
            named.ty.write(1, &mut out);
            out.push_str(";\n");
        }
        out.push_str("}\n");
    }
    out
}

fn counted(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// One tool's member of its server namespace, with its comment.
fn method<'a>(tool: &'a ToolSpec, options: &Options, defs: &mut Defs<'a>) -> String {
    let name = |suffix| RootName {
        tool: &tool.name,
        suffix,
    };
    let args = schema::convert_document(&tool.input_schema, name("Input"), options, defs);
    let result = match &tool.output_schema {
        Some(output) => schema::convert_document(output, name("Output"), options, defs),
        None => Ty::Keyword("string"),
    };
    let optional = match &args {
        Ty::Object(object) => object.props.iter().all(|p| p.optional),
        Ty::Unknown => true,
        _ => false,
    };
    let mut out = String::new();
    if let Some(doc) = tool_doc(tool, options) {
        doc.render("    ", &mut out);
    }
    out.push_str("    ");
    push_property_key(&tool.name, &mut out);
    out.push_str(if optional { "(args?: " } else { "(args: " });
    args.write(2, &mut out);
    out.push_str("): Promise<");
    result.write(2, &mut out);
    out.push_str(">;\n");
    out
}

/// The tool's description (or title), then its annotations as tags.
fn tool_doc<'a>(tool: &'a ToolSpec, options: &Options) -> Option<Doc<'a>> {
    let mut doc = Doc::default();
    let annotations = tool.annotations.as_ref().and_then(|a| a.as_object());
    let title = tool.title.as_deref().or_else(|| {
        annotations
            .and_then(|a| a.get("title"))
            .and_then(|t| t.as_str())
    });
    let prose = [tool.description.as_deref(), title]
        .into_iter()
        .flatten()
        .find(|t| !t.trim().is_empty());
    if let Some(text) = prose {
        doc.push_text(text.into(), options.description_budget);
    }
    let hint = |key: &str| {
        annotations
            .and_then(|a| a.get(key))
            .and_then(|v| v.as_bool())
            == Some(true)
    };
    if hint("readOnlyHint") {
        doc.push_tag("@readOnly".into());
    } else {
        if hint("destructiveHint") {
            doc.push_tag("@destructive".into());
        }
        if hint("idempotentHint") {
            doc.push_tag("@idempotent".into());
        }
    }
    if hint("openWorldHint") {
        doc.push_tag("@openWorld".into());
    }
    (!doc.is_empty()).then_some(doc)
}
