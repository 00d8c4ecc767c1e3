// Tools SDK: 36 tools from 3 servers. Call `await tools.<server>.<tool>(args)`, with
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
  everything: {
    /** Echoes back the input string @readOnly */
    echo(args: {
      /** Message to echo */
      message: string;
    }): Promise<string>;
    /** Demonstrates how annotations can be used to provide metadata about content. @readOnly */
    "get-annotated-message"(args: {
      /** Whether to include an example image @default false */
      includeImage?: boolean;
      /** Type of message to demonstrate different annotation patterns */
      messageType: "error" | "success" | "debug";
    }): Promise<string>;
    /** Returns all environment variables, helpful for debugging MCP server configuration @readOnly */
    "get-env"(args?: { [key: string]: unknown }): Promise<string>;
    /** Returns up to ten resource links that reference different types of resources @readOnly */
    "get-resource-links"(args?: {
      /** Number of resource links to return (1-10) @default 3 @minimum 1 @maximum 10 */
      count?: number;
    }): Promise<string>;
    /** Returns a resource reference that can be used by MCP clients @readOnly */
    "get-resource-reference"(args?: {
      /** ID of the text resource to fetch @default 1 */
      resourceId?: number;
      /** @default "Text" */
      resourceType?: "Text" | "Blob";
    }): Promise<string>;
    /** Returns structured content along with an output schema for client data validation @readOnly */
    "get-structured-content"(args: {
      /** Choose city */
      location: "New York" | "Chicago" | "Los Angeles";
    }): Promise<{
      /** Weather conditions description */
      conditions: string;
      /** Humidity percentage */
      humidity: number;
      /** Temperature in celsius */
      temperature: number;
    }>;
    /** Returns the sum of two numbers @readOnly */
    "get-sum"(args: {
      /** First number */
      a: number;
      /** Second number */
      b: number;
    }): Promise<string>;
    /** Returns a tiny MCP logo image. @readOnly */
    "get-tiny-image"(args?: { [key: string]: unknown }): Promise<string>;
    /**
     * Compresses a single file using gzip compression. Depending upon the selected output type, returns either the compressed data as a gzipped resource or a resource link, allowing it to be downloaded in a subsequent request during the current session.
     * @idempotent
     * @openWorld
     */
    "gzip-file-as-resource"(args?: {
      /**
       * URL or data URI of the file content to compress
       * @default "https://raw.githubusercontent.com/modelcontextprotocol/servers/refs/heads/main/README.md"
       * @format uri
       */
      data?: string;
      /** Name of the output file @default "README.md.gz" */
      name?: string;
      /**
       * How the resulting gzipped file should be returned. 'resourceLink' returns a link to a resource that can be read later, 'resource' returns a full resource object.
       * @default "resourceLink"
       */
      outputType?: "resourceLink" | "resource";
    }): Promise<string>;
    /**
     * Simulates a deep research operation that gathers, analyzes, and synthesizes information. Demonstrates MCP task-based operations with progress through multiple stages. If 'ambiguous' is true and client supports elicitation, sends an elicitation request for clarification.
     */
    "simulate-research-query"(args: {
      /**
       * Simulate an ambiguous query that requires clarification (triggers input_required status)
       * @default false
       */
      ambiguous?: boolean;
      /** The research topic to investigate */
      topic: string;
    }): Promise<string>;
    /** Toggles simulated, random-leveled logging on or off. */
    "toggle-simulated-logging"(args?: { [key: string]: unknown }): Promise<string>;
    /** Toggles simulated resource subscription updates on or off. */
    "toggle-subscriber-updates"(args?: { [key: string]: unknown }): Promise<string>;
    /** Demonstrates a long running operation with progress updates. @readOnly */
    "trigger-long-running-operation"(args?: {
      /** Duration of the operation in seconds @default 10 */
      duration?: number;
      /** Number of steps in the operation @default 5 */
      steps?: number;
    }): Promise<string>;
  };
  filesystem: {
    /**
     * Create a new directory or ensure a directory exists. Can create multiple nested directories in one operation. If the directory already exists, this operation will succeed silently. Perfect for setting up directory structures for projects or ensuring required paths exist. Only works within allowed directories.
     * @idempotent
     */
    create_directory(args: { path: string }): Promise<{ content: string }>;
    /**
     * Get a recursive tree view of files and directories as a JSON structure. Each entry includes 'name', 'type' (file/directory), and 'children' for directories. Files have no children array, while directories always have a children array (which may be empty). The output is formatted with 2-space indentation for readability. Only works within allowed directories.
     * @readOnly
     */
    directory_tree(args: {
      /** @default [] */
      excludePatterns?: string[];
      path: string;
    }): Promise<{ content: string }>;
    /**
     * Make line-based edits to a text file. Each edit replaces exact line sequences with new content. Returns a git-style diff showing the changes made. Only works within allowed directories.
     * @destructive
     */
    edit_file(args: {
      /** Preview changes using git-style diff format @default false */
      dryRun?: boolean;
      edits: {
        /** Text to replace with */
        newText: string;
        /** Text to search for - must match exactly */
        oldText: string;
      }[];
      path: string;
    }): Promise<{ content: string }>;
    /**
     * Retrieve detailed metadata about a file or directory. Returns comprehensive information including size, creation time, last modified time, permissions, and type. This tool is perfect for understanding file characteristics without reading the actual content. Only works within allowed directories.
     * @readOnly
     */
    get_file_info(args: { path: string }): Promise<{ content: string }>;
    /**
     * Returns the list of directories that this server is allowed to access. Subdirectories within these allowed directories are also accessible. Use this to understand which directories and their nested paths are available before trying to access files.
     * @readOnly
     */
    list_allowed_directories(args?: { [key: string]: unknown }): Promise<{ content: string }>;
    /**
     * Get a detailed listing of all files and directories in a specified path. Results clearly distinguish between files and directories with [FILE] and [DIR] prefixes. This tool is essential for understanding directory structure and finding specific files within a directory. Only works within allowed directories.
     * @readOnly
     */
    list_directory(args: { path: string }): Promise<{ content: string }>;
    /**
     * Get a detailed listing of all files and directories in a specified path, including sizes. Results clearly distinguish between files and directories with [FILE] and [DIR] prefixes. This tool is useful for understanding directory structure and finding specific files within a directory. Only works within allowed directories.
     * @readOnly
     */
    list_directory_with_sizes(args: {
      path: string;
      /** Sort entries by name or size @default "name" */
      sortBy?: "name" | "size";
    }): Promise<{ content: string }>;
    /**
     * Move or rename files and directories. Can move files between directories and rename them in a single operation. If the destination exists, the operation will fail. Works across different directories and can be used for simple renaming within the same directory. Both source and destination must be within allowed directories.
     * @destructive
     */
    move_file(args: { destination: string; source: string }): Promise<{ content: string }>;
    /** Read the complete contents of a file as text. DEPRECATED: Use read_text_file instead. @readOnly */
    read_file(args: {
      /** If provided, returns only the first N lines of the file */
      head?: number;
      path: string;
      /** If provided, returns only the last N lines of the file */
      tail?: number;
    }): Promise<{ content: string }>;
    /**
     * Read a file and return it as a base64-encoded content block with its MIME type. Image and audio files are returned as image/audio content; any other file type is returned as an embedded resource. Only works within allowed directories.
     * @readOnly
     */
    read_media_file(args: { path: string }): Promise<{
      content: ({ data: string; mimeType: string; type: "image" | "audio" } | {
        resource: { blob: string; mimeType?: string; uri: string };
        type: "resource";
      })[];
    }>;
    /**
     * Read the contents of multiple files simultaneously. This is more efficient than reading files one by one when you need to analyze or compare multiple files. Each file's content is returned with its path as a reference. Failed reads for individual files won't stop the entire operation. Only works within allowed directories.
     * @readOnly
     */
    read_multiple_files(args: {
      /**
       * Array of file paths to read. Each path must be a string pointing to a valid file within allowed directories.
       * @minItems 1
       */
      paths: string[];
    }): Promise<{ content: string }>;
    /**
     * Read the complete contents of a file from the file system as text. Handles various text encodings and provides detailed error messages if the file cannot be read. Use this tool when you need to examine the contents of a single file. Use the 'head' parameter to read only the first N lines of a file, or the 'tail' parameter to read only the last N lines of a file. Operates on the file as text regardless of extension. Only works within allowed directories.
     * @readOnly
     */
    read_text_file(args: {
      /** If provided, returns only the first N lines of the file */
      head?: number;
      path: string;
      /** If provided, returns only the last N lines of the file */
      tail?: number;
    }): Promise<{ content: string }>;
    /**
     * Recursively search for files and directories matching a pattern. The patterns should be glob-style patterns that match paths relative to the working directory. Use pattern like '*.ext' to match files in current directory, and '**\/*.ext' to match files in all subdirectories. Returns full paths to all matching items. Great for finding files when you don't know their exact location. Only searches within allowed directories.
     * @readOnly
     */
    search_files(args: {
      /** @default [] */
      excludePatterns?: string[];
      path: string;
      pattern: string;
    }): Promise<{ content: string }>;
    /**
     * Create a new file or completely overwrite an existing file with new content. Use with caution as it will overwrite existing files without warning. Handles text content with proper encoding. Only works within allowed directories.
     * @destructive
     * @idempotent
     */
    write_file(args: { content: string; path: string }): Promise<{ content: string }>;
  };
  memory: {
    /** Add new observations to existing entities in the knowledge graph */
    add_observations(args: {
      observations: {
        /** An array of observation contents to add */
        contents: string[];
        /** The name of the entity to add the observations to */
        entityName: string;
      }[];
    }): Promise<{ results: { addedObservations: string[]; entityName: string }[] }>;
    /** Create multiple new entities in the knowledge graph */
    create_entities(args: {
      entities: {
        /** The type of the entity */
        entityType: string;
        /** The name of the entity */
        name: string;
        /** An array of observation contents associated with the entity */
        observations: string[];
      }[];
    }): Promise<{
      entities: {
        /** The type of the entity */
        entityType: string;
        /** The name of the entity */
        name: string;
        /** An array of observation contents associated with the entity */
        observations: string[];
      }[];
    }>;
    /**
     * Create multiple new relations between entities in the knowledge graph. Relations should be in active voice
     */
    create_relations(args: {
      relations: {
        /** The name of the entity where the relation starts */
        from: string;
        /** The type of the relation */
        relationType: string;
        /** The name of the entity where the relation ends */
        to: string;
      }[];
    }): Promise<{
      relations: {
        /** The name of the entity where the relation starts */
        from: string;
        /** The type of the relation */
        relationType: string;
        /** The name of the entity where the relation ends */
        to: string;
      }[];
    }>;
    /**
     * Delete multiple entities and their associated relations from the knowledge graph
     * @destructive
     * @idempotent
     */
    delete_entities(args: {
      /** An array of entity names to delete */
      entityNames: string[];
    }): Promise<{ message: string; success: boolean }>;
    /** Delete specific observations from entities in the knowledge graph @destructive @idempotent */
    delete_observations(args: {
      deletions: {
        /** The name of the entity containing the observations */
        entityName: string;
        /** An array of observations to delete */
        observations: string[];
      }[];
    }): Promise<{ message: string; success: boolean }>;
    /** Delete multiple relations from the knowledge graph @destructive @idempotent */
    delete_relations(args: {
      /** An array of relations to delete */
      relations: {
        /** The name of the entity where the relation starts */
        from: string;
        /** The type of the relation */
        relationType: string;
        /** The name of the entity where the relation ends */
        to: string;
      }[];
    }): Promise<{ message: string; success: boolean }>;
    /** Open specific nodes in the knowledge graph by their names @readOnly */
    open_nodes(args: {
      /** An array of entity names to retrieve */
      names: string[];
    }): Promise<{
      entities: {
        /** The type of the entity */
        entityType: string;
        /** The name of the entity */
        name: string;
        /** An array of observation contents associated with the entity */
        observations: string[];
      }[];
      relations: {
        /** The name of the entity where the relation starts */
        from: string;
        /** The type of the relation */
        relationType: string;
        /** The name of the entity where the relation ends */
        to: string;
      }[];
    }>;
    /** Read the entire knowledge graph @readOnly */
    read_graph(args?: { [key: string]: unknown }): Promise<{
      entities: {
        /** The type of the entity */
        entityType: string;
        /** The name of the entity */
        name: string;
        /** An array of observation contents associated with the entity */
        observations: string[];
      }[];
      relations: {
        /** The name of the entity where the relation starts */
        from: string;
        /** The type of the relation */
        relationType: string;
        /** The name of the entity where the relation ends */
        to: string;
      }[];
    }>;
    /** Search for nodes in the knowledge graph based on a query @readOnly */
    search_nodes(args: {
      /** The search query to match against entity names, types, and observation content */
      query: string;
    }): Promise<{
      entities: {
        /** The type of the entity */
        entityType: string;
        /** The name of the entity */
        name: string;
        /** An array of observation contents associated with the entity */
        observations: string[];
      }[];
      relations: {
        /** The name of the entity where the relation starts */
        from: string;
        /** The type of the relation */
        relationType: string;
        /** The name of the entity where the relation ends */
        to: string;
      }[];
    }>;
  };
};
/** Calls a tool by its federated name; resolves to the whole MCP result. */
declare function callTool(name: ToolName, args?: { [key: string]: unknown }): Promise<CallToolResult>;
type ToolName =
  | "mcp__everything__echo"
  | "mcp__everything__get-annotated-message"
  | "mcp__everything__get-env"
  | "mcp__everything__get-resource-links"
  | "mcp__everything__get-resource-reference"
  | "mcp__everything__get-structured-content"
  | "mcp__everything__get-sum"
  | "mcp__everything__get-tiny-image"
  | "mcp__everything__gzip-file-as-resource"
  | "mcp__everything__simulate-research-query"
  | "mcp__everything__toggle-simulated-logging"
  | "mcp__everything__toggle-subscriber-updates"
  | "mcp__everything__trigger-long-running-operation"
  | "mcp__filesystem__create_directory"
  | "mcp__filesystem__directory_tree"
  | "mcp__filesystem__edit_file"
  | "mcp__filesystem__get_file_info"
  | "mcp__filesystem__list_allowed_directories"
  | "mcp__filesystem__list_directory"
  | "mcp__filesystem__list_directory_with_sizes"
  | "mcp__filesystem__move_file"
  | "mcp__filesystem__read_file"
  | "mcp__filesystem__read_media_file"
  | "mcp__filesystem__read_multiple_files"
  | "mcp__filesystem__read_text_file"
  | "mcp__filesystem__search_files"
  | "mcp__filesystem__write_file"
  | "mcp__memory__add_observations"
  | "mcp__memory__create_entities"
  | "mcp__memory__create_relations"
  | "mcp__memory__delete_entities"
  | "mcp__memory__delete_observations"
  | "mcp__memory__delete_relations"
  | "mcp__memory__open_nodes"
  | "mcp__memory__read_graph"
  | "mcp__memory__search_nodes";
