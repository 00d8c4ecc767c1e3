((table) => (hostCall, pending) => {
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
})([
  ["everything", "echo", "mcp__everything__echo", 0],
  ["everything", "get-annotated-message", "mcp__everything__get-annotated-message", 0],
  ["everything", "get-env", "mcp__everything__get-env", 0],
  ["everything", "get-resource-links", "mcp__everything__get-resource-links", 0],
  ["everything", "get-resource-reference", "mcp__everything__get-resource-reference", 0],
  ["everything", "get-structured-content", "mcp__everything__get-structured-content", 1],
  ["everything", "get-sum", "mcp__everything__get-sum", 0],
  ["everything", "get-tiny-image", "mcp__everything__get-tiny-image", 0],
  ["everything", "gzip-file-as-resource", "mcp__everything__gzip-file-as-resource", 0],
  ["everything", "simulate-research-query", "mcp__everything__simulate-research-query", 0],
  ["everything", "toggle-simulated-logging", "mcp__everything__toggle-simulated-logging", 0],
  ["everything", "toggle-subscriber-updates", "mcp__everything__toggle-subscriber-updates", 0],
  ["everything", "trigger-long-running-operation", "mcp__everything__trigger-long-running-operation", 0],
  ["filesystem", "create_directory", "mcp__filesystem__create_directory", 1],
  ["filesystem", "directory_tree", "mcp__filesystem__directory_tree", 1],
  ["filesystem", "edit_file", "mcp__filesystem__edit_file", 1],
  ["filesystem", "get_file_info", "mcp__filesystem__get_file_info", 1],
  ["filesystem", "list_allowed_directories", "mcp__filesystem__list_allowed_directories", 1],
  ["filesystem", "list_directory", "mcp__filesystem__list_directory", 1],
  ["filesystem", "list_directory_with_sizes", "mcp__filesystem__list_directory_with_sizes", 1],
  ["filesystem", "move_file", "mcp__filesystem__move_file", 1],
  ["filesystem", "read_file", "mcp__filesystem__read_file", 1],
  ["filesystem", "read_media_file", "mcp__filesystem__read_media_file", 1],
  ["filesystem", "read_multiple_files", "mcp__filesystem__read_multiple_files", 1],
  ["filesystem", "read_text_file", "mcp__filesystem__read_text_file", 1],
  ["filesystem", "search_files", "mcp__filesystem__search_files", 1],
  ["filesystem", "write_file", "mcp__filesystem__write_file", 1],
  ["memory", "add_observations", "mcp__memory__add_observations", 1],
  ["memory", "create_entities", "mcp__memory__create_entities", 1],
  ["memory", "create_relations", "mcp__memory__create_relations", 1],
  ["memory", "delete_entities", "mcp__memory__delete_entities", 1],
  ["memory", "delete_observations", "mcp__memory__delete_observations", 1],
  ["memory", "delete_relations", "mcp__memory__delete_relations", 1],
  ["memory", "open_nodes", "mcp__memory__open_nodes", 1],
  ["memory", "read_graph", "mcp__memory__read_graph", 1],
  ["memory", "search_nodes", "mcp__memory__search_nodes", 1]
])