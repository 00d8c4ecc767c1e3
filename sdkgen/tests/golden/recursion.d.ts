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
  graph: {
    /** References that TypeScript would reject as circular aliases */
    alias_cycles(args?: {
      a?: $defs.A;
      nullable?: $defs.MaybeSelf;
      ok?: $defs.List;
      self?: $defs.Self;
    }): Promise<string>;
    /** Mutually recursive definitions (Expr ↔ Sum) */
    mutual(args: { expr: $defs.Expr }): Promise<string>;
    /** Pointer spellings, dangling and unsupported references */
    pointers(args?: {
      again?: $defs.AB;
      anchor?: unknown;
      encoded?: $defs.AB;
      into_property?: $defs.plain;
      missing?: unknown;
      plain?: { up?: $defs.plain };
      remote?: unknown;
    }): Promise<string>;
    /** Recursion in an output schema; the same Node as graph.tree */
    recursive_output(args: { path: string }): Promise<{ tree: $defs.Node }>;
    /** The root refers to itself with # */
    root_recursion(args: { next?: $defs.RootRecursionInput; value: number }): Promise<string>;
    /** Self-recursive definition through an array */
    tree(args: { root: $defs.Node }): Promise<string>;
  };
};
/** Calls a tool by its federated name; resolves to the whole MCP result. */
declare function callTool(name: ToolName, args?: { [key: string]: unknown }): Promise<CallToolResult>;
type ToolName =
  | "mcp__graph__alias_cycles"
  | "mcp__graph__mutual"
  | "mcp__graph__pointers"
  | "mcp__graph__recursive_output"
  | "mcp__graph__root_recursion"
  | "mcp__graph__tree";
declare namespace $defs {
  type A = unknown;
  /** Reached through an escaped and percent-encoded pointer */
  type AB = string;
  type Expr = number | { terms: $defs.Expr[] };
  type List = string | $defs.List[];
  type MaybeSelf = unknown;
  /** A tree node */
  type Node = { children?: $defs.Node[]; name: string };
  /** A linked list cell */
  type RootRecursionInput = { next?: $defs.RootRecursionInput; value: number };
  type Self = unknown;
  type plain = { up?: $defs.plain };
}
