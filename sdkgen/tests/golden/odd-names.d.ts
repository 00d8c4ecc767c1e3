// Tools SDK: 8 tools from 2 servers. Call `await tools.<server>.<tool>(args)`, with
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
  class: {
    /** Names a hostile program might try to abuse */
    __proto__(args?: { [key: string]: unknown }): Promise<string>;
    /** Deletes things @destructive @idempotent */
    annotated(args?: { [key: string]: unknown }): Promise<string>;
    /**
     * Closes *\/ the comment
     * and has
     *
     * blank lines
     */
    "comment */ breaker"(args?: {
      /** ends *\/ early /* and opens @pattern ^a*\/$ */
      p?: string;
    }): Promise<string>;
    /** Only a title */
    constructor(args?: { [key: string]: unknown }): Promise<string>;
    defs_with_reserved_names(args?: {
      a?: $defs.String;
      b?: $defs.String;
      c?: $defs.MyType;
      d?: $defs.MyType;
      e?: $defs._0;
      f?: $defs._0;
    }): Promise<string>;
    /**
     * This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This …(truncated)
     * @readOnly
     * @openWorld
     */
    long(args?: {
      /**
       * This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This description is deliberately long. This …(truncated)
       */
      x?: string;
    }): Promise<string>;
  };
  "my server": {
    /** Reserved words and odd property names */
    default(args: {
      "": string;
      "$ref-like"?: string;
      "9lives"?: boolean;
      __proto__?: string;
      class: string;
      constructor?: number;
      "naïve"?: string;
      "quo\"te"?: string;
      "with space"?: string;
    }): Promise<string>;
    /** Server and tool names that are not identifiers */
    "get-sum"(args: { a: number; b: number }): Promise<string>;
  };
};
/** Calls a tool by its federated name; resolves to the whole MCP result. */
declare function callTool(name: ToolName, args?: { [key: string]: unknown }): Promise<CallToolResult>;
type ToolName =
  | "mcp__class____proto__"
  | "mcp__class__annotated"
  | "mcp__class__comment */ breaker"
  | "mcp__class__constructor"
  | "mcp__class__defs_with_reserved_names"
  | "mcp__class__long"
  | "mcp__my server__default"
  | "mcp__my server__get-sum";
declare namespace $defs {
  type MyType = number;
  type String = { s?: string };
  type _0 = boolean;
}
