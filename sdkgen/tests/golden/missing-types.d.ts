// Tools SDK: 7 tools from 1 server. Call `await tools.<server>.<tool>(args)`, with
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
  loose: {
    empty_schema(args?: unknown): Promise<string>;
    maps(args?: {
      counts?: { [key: string]: number };
      env?: {
        /** Keys matching ^[A-Z_]+$ (and any other key) */
        [key: string]: boolean | string;
      };
      headers?: {
        /** Keys matching ^n-, ^x- */
        [key: string]: number | string;
      };
      mixed?: {
        fixed?: string;
        opt?: boolean;
        [key: string]: number | string | boolean | undefined;
      };
    }): Promise<string>;
    null_schema(args?: unknown): Promise<string>;
    string_schema(args?: unknown): Promise<string>;
    true_schema(args?: unknown): Promise<string>;
    tuples(args?: {
      /** @minItems 1 */
      draft7?: [string, number?];
      loose?: [string?, ...unknown[]];
      open?: [string?, ...boolean[]];
      /** @minItems 2 @maxItems 2 */
      pair?: [string, number];
    }): Promise<string>;
    /** No type at the root, required without properties */
    untyped(args: {
      any?: unknown;
      closed?: { [key: string]: never };
      /** Only a description */
      described?: unknown;
      ghost: unknown;
      /** @minItems 1 @maxItems 3 @uniqueItems */
      items_only?: string[];
      list?: unknown[];
      never?: never;
      obj?: { [key: string]: unknown };
      odd_type?: unknown;
      /** @format int32 @minimum 1 @maximum 10 @multipleOf 2 */
      ranges?: number;
      yes?: unknown;
    }): Promise<string>;
  };
};
/** Calls a tool by its federated name; resolves to the whole MCP result. */
declare function callTool(name: ToolName, args?: { [key: string]: unknown }): Promise<CallToolResult>;
type ToolName =
  | "mcp__loose__empty_schema"
  | "mcp__loose__maps"
  | "mcp__loose__null_schema"
  | "mcp__loose__string_schema"
  | "mcp__loose__true_schema"
  | "mcp__loose__tuples"
  | "mcp__loose__untyped";
