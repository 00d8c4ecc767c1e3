//! The JavaScript that makes the declarations callable.
//!
//! It is [`FACTORY`], the same for every catalog, applied to the catalog's tool table
//! (JSON), so a runtime can compile the factory once and give each run only its table.
//! The result is a function that takes the runtime's `hostCall(federatedName,
//! args)` (which resolves to the MCP CallToolResult JSON) and, optionally, `pending`: the
//! servers whose tools are not known yet (still starting, or down since the host started)
//! as `[server, name prefix]` pairs, and returns `{ tools, callTool, ToolCallError }`. A
//! pending server's namespace turns any tool name into a call of `prefix + name`, so the
//! host answers it (with the server's state, or with the result once the server is up)
//! instead of the program failing on an undefined namespace. It reads no global but the language's own intrinsics, captured when
//! it runs (before the program does), so a program that later replaces `Object`, `Array`
//! or `Promise.prototype.then` changes nothing here.
//!
//! The program is a hostile peer: namespaces are frozen null-prototype objects whose only
//! properties are the real tools (`tools.kv.constructor` is `undefined`), `callTool` turns
//! away any name that is not a real tool before reaching the host, and `hostCall` is never
//! handed to code the program controls.

use crate::ToolSpec;
use crate::names::push_string_literal;

/// A function from the tool table (`[server, tool, federated name, returns
/// structuredContent]` rows) to the bindings function.
pub const FACTORY: &str = r#"((table) => (hostCall, pending) => {
  "use strict";
  const freeze = Object.freeze, define = Object.defineProperty, create = Object.create;
  const isArray = Array.isArray, toText = String, ProxyCtor = Proxy;
  const own = (target, key, value) => define(target, key, { value, enumerable: true });
  class ToolCallError extends Error {
    constructor(tool, code, message) {
      super(toText(message));
      own(this, "tool", toText(tool));
      own(this, "code", toText(code));
    }
  }
  define(ToolCallError.prototype, "name", { value: "ToolCallError" });
  freeze(ToolCallError.prototype);
  freeze(ToolCallError);
  const isObject = (v) => v !== null && typeof v === "object";
  const textOf = (result) => {
    const content = result.content;
    let text = "", first = true;
    if (!isArray(content)) return text;
    for (let i = 0; i < content.length; i++) {
      const item = content[i];
      if (isObject(item) && item.type === "text" && typeof item.text === "string") {
        text += (first ? "" : "\n") + item.text;
        first = false;
      }
    }
    return text;
  };
  const failure = (tool, result) => {
    const meta = result._meta;
    const error = isObject(meta) && isObject(meta["mcp-gateway/error"]) ? meta["mcp-gateway/error"] : {};
    const code = typeof error.code === "string" ? error.code : "TOOL_ERROR";
    const message = typeof error.message === "string" ? error.message : textOf(result);
    return new ToolCallError(tool, code, message);
  };
  const call = async (tool, args) => {
    let result;
    try {
      result = await hostCall(tool, args === undefined ? {} : args);
    } catch (e) {
      if (e instanceof ToolCallError) throw e;
      const code = isObject(e) && typeof e.code === "string" ? e.code : "TOOL_ERROR";
      throw new ToolCallError(tool, code, isObject(e) && typeof e.message === "string" ? e.message : toText(e));
    }
    if (!isObject(result)) throw new ToolCallError(tool, "TOOL_ERROR", "the tool returned no result");
    if (result.isError === true) throw failure(tool, result);
    return result;
  };
  const structured = (tool) => freeze(async (args) => {
    const result = await call(tool, args);
    if (result.structuredContent === undefined) {
      throw new ToolCallError(tool, "OUTPUT_INVALID", "the tool declares an output schema but returned no structuredContent");
    }
    return result.structuredContent;
  });
  const textual = (tool) => freeze(async (args) => textOf(await call(tool, args)));
  const tools = create(null), known = create(null);
  for (let i = 0; i < table.length; i++) {
    const row = table[i];
    if (tools[row[0]] === undefined) own(tools, row[0], create(null));
    own(tools[row[0]], row[1], row[3] ? structured(row[2]) : textual(row[2]));
    if (known[row[2]] !== true) own(known, row[2], true);
  }
  for (let i = 0; i < table.length; i++) freeze(tools[table[i][0]]);
  // A pending server's tools are unknown: each one resolves to its structuredContent when
  // it has one, else to its text.
  const late = (tool) => freeze(async (args) => {
    const result = await call(tool, args);
    return result.structuredContent !== undefined ? result.structuredContent : textOf(result);
  });
  const servers = isArray(pending) ? pending : [];
  for (let i = 0; i < servers.length; i++) {
    const server = toText(servers[i][0]), prefix = toText(servers[i][1]);
    if (tools[server] !== undefined) continue;
    const handler = create(null);
    // Not `then`: awaiting a namespace must not call a tool.
    own(handler, "get", (_, key) => typeof key === "string" && key !== "then" ? late(prefix + key) : undefined);
    own(tools, server, new ProxyCtor(freeze(create(null)), freeze(handler)));
  }
  freeze(tools);
  freeze(known);
  const callTool = freeze(async (name, args) => {
    if (typeof name !== "string" || known[name] !== true) {
      throw new ToolCallError(toText(name), "TOOL_NOT_FOUND", "no tool named " + toText(name));
    }
    return call(name, args);
  });
  return freeze({ tools, callTool, ToolCallError });
})"#;

/// The tool table of `tools`, already sorted by (server, name) and deduplicated: JSON,
/// one row per line.
pub(crate) fn table(tools: &[&ToolSpec]) -> String {
    let mut out = String::from("[\n");
    for (i, tool) in tools.iter().enumerate() {
        out.push_str(if i == 0 { "  [" } else { ",\n  [" });
        push_string_literal(&tool.server, &mut out);
        out.push_str(", ");
        push_string_literal(&tool.name, &mut out);
        out.push_str(", ");
        push_string_literal(&tool.federated_name, &mut out);
        out.push_str(if tool.output_schema.is_some() {
            ", 1]"
        } else {
            ", 0]"
        });
    }
    out.push_str("\n]");
    out
}

/// The bindings expression for a tool table: [`FACTORY`] applied to it.
pub(crate) fn render(table: &str) -> String {
    format!("{FACTORY}({table})")
}
