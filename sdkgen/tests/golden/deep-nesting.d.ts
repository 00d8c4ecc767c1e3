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
  deep: {
    all_of_chain(args?: { s?: unknown }): Promise<string>;
    arrays(args?: { m?: unknown[][][][][][][][][][] }): Promise<string>;
    fits(args: { l1: { l2: { l3: { l4: { l5: string } } } } }): Promise<string>;
    /** 30 nested objects: past max_depth they become unknown */
    objects(args: {
      l1: {
        l2: {
          l3: {
            l4: { l5: { l6: { l7: { l8: { l9: { l10: { l11: unknown } } } } } } };
          };
        };
      };
    }): Promise<string>;
  };
};
/** Calls a tool by its federated name; resolves to the whole MCP result. */
declare function callTool(name: ToolName, args?: { [key: string]: unknown }): Promise<CallToolResult>;
type ToolName =
  | "mcp__deep__all_of_chain"
  | "mcp__deep__arrays"
  | "mcp__deep__fits"
  | "mcp__deep__objects";
