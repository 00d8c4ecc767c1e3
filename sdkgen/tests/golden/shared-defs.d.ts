// Tools SDK: 4 tools from 1 server. Call `await tools.<server>.<tool>(args)`, with
// brackets for names that are not identifiers (`tools.kv["get-item"]({ key: "x" })`).
// A tool with an output schema resolves to its structuredContent, others to their text.
// A failed call throws ToolCallError.
/** One item of a tool result's content. */
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
declare const tools: {
  shop: {
    get(args?: { item?: $defs.Item }): Promise<string>;
    /** A different Item used twice: named Item2 */
    list(args?: { a?: $defs.Item2; b?: $defs.Item2 }): Promise<string>;
    /** Used once: inlined with its doc */
    once(args?: {
      /** A stock keeping unit */
      only?: { sku: string };
    }): Promise<string>;
    /** Same Item definition as shop.get: shares its name */
    put(args?: { extra?: string; item?: $defs.Item }): Promise<string>;
  };
};
/** Calls a tool by its federated name; resolves to the whole MCP result. */
declare function callTool(name: ToolName, args?: { [key: string]: unknown }): Promise<CallToolResult>;
type ToolName =
  | "mcp__shop__get"
  | "mcp__shop__list"
  | "mcp__shop__once"
  | "mcp__shop__put";
declare namespace $defs {
  type Item = { id: string; next?: $defs.Item };
  /** A stock keeping unit */
  type Item2 = { sku: string };
}
