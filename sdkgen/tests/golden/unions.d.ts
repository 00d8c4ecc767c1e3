// Tools SDK: 6 tools from 1 server. Call `await tools.<server>.<tool>(args)`, with
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
  shapes: {
    /** allOf becomes an intersection */
    all_of(args: { id: string } & { tags?: string[] }): Promise<string>;
    any_object(args?: { payload?: { x: number } | { y: string } }): Promise<string>;
    /** Discriminated union with const tags */
    area(args: {
      shape: { kind: "circle"; radius: number } | { h: number; kind: "rect"; w: number };
    }): Promise<{ area: number }>;
    /** Object with anyOf of required sets */
    either_field(args: { email?: string; phone?: string } & ({ email: unknown } | { phone: unknown })): Promise<string>;
    nested_union_array(args?: {
      anything?: unknown;
      impossible?: never;
      nothing?: never;
      values?: (string | number)[];
    }): Promise<string>;
    nullable(args?: {
      a?: string | null;
      b?: string | null;
      /** @default null */
      c?: number | null;
      d?: number | string;
    }): Promise<string>;
  };
};
/** Calls a tool by its federated name; resolves to the whole MCP result. */
declare function callTool(name: ToolName, args?: { [key: string]: unknown }): Promise<CallToolResult>;
type ToolName =
  | "mcp__shapes__all_of"
  | "mcp__shapes__any_object"
  | "mcp__shapes__area"
  | "mcp__shapes__either_field"
  | "mcp__shapes__nested_union_array"
  | "mcp__shapes__nullable";
