#!/usr/bin/env node
// An MCP server written on the official TypeScript SDK (npm @modelcontextprotocol/sdk,
// pinned in tests/peers) that speaks both revisions as servers built on today's SDKs do,
// for the tests that check what such a server does reaches a client of either revision
// behind the gateway (tests/tests/dual_revision.rs, scripts/conformance). Served over
// streamable HTTP at http://127.0.0.1:PORT/mcp, or over stdio with the SDK's own stdio
// server transport; both modes share its tools, resources and prompts.
//
// Usage: node ts_sdk.mjs PORT
//        node ts_sdk.mjs --stdio
//
// The SDK (1.32.2) knows no revision after 2025-11-25: it has no `server/discover`, reads
// no revision from a request's `_meta`, and has no `subscriptions/listen`. What 2026-07-28
// needs beyond it is added here by hand, in both modes alike: `server/discover` names both
// revisions; `subscriptions/listen` acknowledges the changes asked for and carries them,
// marked with its id, until the client closes it (HTTP) or cancels it (stdio);
// `resources/subscribe` and `resources/unsubscribe` are refused as removed stateful RPCs;
// results say `resultType: "complete"`. Its tools still ask their client by request
// (`sampling/createMessage`, `elicitation/create`), as the SDK's tools do at every
// revision: over HTTP on the call's stream, over stdio on the one pipe.
//
// Over HTTP, 2025-11-25 and earlier: sessions opened by `initialize`, as the SDK serves
// them (each with its own Server and transport, and an in-memory event store so streams
// resume). 2026-07-28: a request whose MCP-Protocol-Version header says so carries its
// own context, needs no session, and is served by a Server of its own on a stateless
// transport.
//
// Over stdio, one Server on the SDK's stdio transport serves its one client at either
// revision: a client of 2025 opens its session with `initialize`; a request whose `_meta`
// names 2026-07-28 is served on its own, which the SDK allows (it asks for no
// `initialize` before other requests).
//
// Its tools, resources and prompts are those the conformance suite's server scenarios
// call. The tool `touch_watched` says `test://watched-resource` changed: to the sessions
// that subscribed to it (2025) and to the listen streams that asked for it (2026); its
// result says how many were told (`touched: N told`).
// `test_withdrawn_sampling` {prompt, after_ms} asks the client's model and, with no answer
// within `after_ms`, withdraws the question (`notifications/cancelled`, on the call's
// stream) and returns "withdrawn"; `test_abandoned_sampling` {prompt, after_ms} asks the
// same, and after `after_ms` returns "abandoned" without waiting for the answer or
// withdrawing the question; `test_exit_while_asking` {prompt, after_ms} asks the same, and
// after `after_ms` the server exits. `test_late_answers` lists, as JSON, the ids of the
// questions answered all the same after they were withdrawn or (over HTTP, for requests of
// 2026-07-28) after their request had ended.

import { randomUUID } from 'node:crypto';
import http from 'node:http';
const sdk = new URL('../peers/node_modules/@modelcontextprotocol/sdk/dist/esm/', import.meta.url);
const { Server } = await import(new URL('server/index.js', sdk));
const { StdioServerTransport } = await import(new URL('server/stdio.js', sdk));
const { StreamableHTTPServerTransport } = await import(new URL('server/streamableHttp.js', sdk));
const {
  CallToolRequestSchema,
  CompleteRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} = await import(new URL('types.js', sdk));

const STATELESS = '2026-07-28';
const INFO = { name: 'ts-sdk-dual-revision', version: '1.0.0' };
const CAPABILITIES = {
  tools: { listChanged: true },
  resources: { subscribe: true, listChanged: true },
  prompts: { listChanged: true },
  logging: {},
  completions: {},
};
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=';
const WATCHED = 'test://watched-resource';
const EMPTY = { type: 'object', properties: {} };

const text = (value) => ({ content: [{ type: 'text', text: value }] });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Who hears of resource updates: each session of 2025 (the URIs it subscribed to) and each
// open 2026 listen stream (the URIs it asked for), as { uris: Set, updated(uri) }.
const watchers = new Set();
// The questions tools withdrew (by the id they went out under), and those of them that
// were answered all the same.
const withdrawn = new Set();
const late = [];
// Events of every stream, for resumption (Last-Event-ID).
const events = new Map();
const eventStore = {
  async storeEvent(streamId, message) {
    const id = `${streamId}::${String(events.size).padStart(8, '0')}`;
    events.set(id, { streamId, message });
    return id;
  },
  async replayEventsAfter(lastEventId, { send }) {
    const streamId = lastEventId.split('::')[0];
    for (const [id, event] of events) {
      if (event.streamId === streamId && id > lastEventId) await send(id, event.message);
    }
    return streamId;
  },
};

const TOOLS = {
  test_simple_text: async () => text('This is a simple text response for testing.'),
  test_image_content: async () => ({ content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] }),
  test_audio_content: async () => ({ content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] }),
  test_embedded_resource: async () => ({
    content: [
      {
        type: 'resource',
        resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' },
      },
    ],
  }),
  test_multiple_content_types: async () => ({
    content: [
      { type: 'text', text: 'Multiple content types test:' },
      { type: 'image', data: PNG, mimeType: 'image/png' },
      {
        type: 'resource',
        resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' },
      },
    ],
  }),
  test_tool_with_logging: async (_args, extra) => {
    for (const data of ['Tool execution started', 'Tool processing data', 'Tool execution completed']) {
      await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data } });
      await sleep(50);
    }
    return text('Tool with logging executed successfully');
  },
  test_tool_with_progress: async (_args, extra) => {
    const progressToken = extra._meta?.progressToken ?? 0;
    for (const progress of [0, 50, 100]) {
      await extra.sendNotification({
        method: 'notifications/progress',
        params: { progressToken, progress, total: 100, message: `Completed step ${progress} of 100` },
      });
      await sleep(50);
    }
    return text(String(progressToken));
  },
  test_error_handling: async () => {
    throw new Error('This tool intentionally returns an error for testing');
  },
  test_reconnection: async (_args, extra) => {
    extra.closeSSEStream?.();
    await sleep(100);
    return text('Reconnection test completed successfully.');
  },
  test_sampling: async (args, extra) => {
    const result = await extra.sendRequest(
      {
        method: 'sampling/createMessage',
        params: { messages: [{ role: 'user', content: { type: 'text', text: args.prompt } }], maxTokens: 100 },
      },
      CreateMessageResultSchema,
    );
    return text(`LLM response: ${result.content?.text ?? 'No response'}`);
  },
  test_withdrawn_sampling: async (args, extra) => {
    const params = { messages: [{ role: 'user', content: { type: 'text', text: args.prompt } }], maxTokens: 100 };
    try {
      const result = await extra.sendRequest({ method: 'sampling/createMessage', params }, CreateMessageResultSchema, {
        timeout: args.after_ms,
      });
      return { ...text(`answered in time: ${JSON.stringify(result)}`), isError: true };
    } catch (error) {
      if (error.code === ErrorCode.RequestTimeout) return text('withdrawn');
      return { ...text(`refused: ${error.message}`), isError: true };
    }
  },
  test_abandoned_sampling: async (args, extra) => {
    const params = { messages: [{ role: 'user', content: { type: 'text', text: args.prompt } }], maxTokens: 100 };
    // Neither awaited nor withdrawn: the call ends with the question open.
    extra.sendRequest({ method: 'sampling/createMessage', params }, CreateMessageResultSchema).catch(() => {});
    await sleep(args.after_ms);
    return text('abandoned');
  },
  test_exit_while_asking: async (args, extra) => {
    const params = { messages: [{ role: 'user', content: { type: 'text', text: args.prompt } }], maxTokens: 100 };
    extra.sendRequest({ method: 'sampling/createMessage', params }, CreateMessageResultSchema).catch(() => {});
    await sleep(args.after_ms);
    process.exit(0);
  },
  test_late_answers: async () => text(JSON.stringify(late)),
  test_elicitation: async (args, extra) =>
    elicited(extra, {
      mode: 'form',
      message: args.message,
      requestedSchema: {
        type: 'object',
        properties: { response: { type: 'string', description: "User's response" } },
        required: ['response'],
      },
    }),
  test_elicitation_sep1034_defaults: async (_args, extra) =>
    elicited(extra, {
      mode: 'form',
      message: 'Please review and update the form fields with defaults',
      requestedSchema: {
        type: 'object',
        properties: {
          name: { type: 'string', description: 'User name', default: 'John Doe' },
          age: { type: 'integer', description: 'User age', default: 30 },
          score: { type: 'number', description: 'User score', default: 95.5 },
          status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
          verified: { type: 'boolean', description: 'Verification status', default: true },
        },
        required: [],
      },
    }),
  test_elicitation_sep1330_enums: async (_args, extra) =>
    elicited(extra, {
      mode: 'form',
      message: 'Please select options from the enum fields',
      requestedSchema: {
        type: 'object',
        properties: {
          untitledSingle: { type: 'string', description: 'Select one option', enum: ['option1', 'option2', 'option3'] },
          titledSingle: {
            type: 'string',
            description: 'Select one option with titles',
            oneOf: [
              { const: 'value1', title: 'First Option' },
              { const: 'value2', title: 'Second Option' },
              { const: 'value3', title: 'Third Option' },
            ],
          },
          legacyEnum: {
            type: 'string',
            description: 'Select one option (legacy)',
            enum: ['opt1', 'opt2', 'opt3'],
            enumNames: ['Option One', 'Option Two', 'Option Three'],
          },
          untitledMulti: {
            type: 'array',
            description: 'Select multiple options',
            minItems: 1,
            maxItems: 3,
            items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
          },
          titledMulti: {
            type: 'array',
            description: 'Select multiple options with titles',
            minItems: 1,
            maxItems: 3,
            items: {
              anyOf: [
                { const: 'value1', title: 'First Choice' },
                { const: 'value2', title: 'Second Choice' },
                { const: 'value3', title: 'Third Choice' },
              ],
            },
          },
        },
        required: [],
      },
    }),
  json_schema_2020_12_tool: async (args) => text(`JSON Schema 2020-12 tool called with: ${JSON.stringify(args)}`),
  touch_watched: async () => {
    let told = 0;
    for (const watcher of watchers) {
      if (watcher.uris.has(WATCHED)) {
        await watcher.updated(WATCHED);
        told += 1;
      }
    }
    return text(`touched: ${told} told`);
  },
};

const SCHEMAS = {
  test_sampling: { type: 'object', properties: { prompt: { type: 'string' } }, required: ['prompt'] },
  test_elicitation: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] },
  test_withdrawn_sampling: {
    type: 'object',
    properties: { prompt: { type: 'string' }, after_ms: { type: 'integer' } },
    required: ['prompt', 'after_ms'],
  },
  test_abandoned_sampling: {
    type: 'object',
    properties: { prompt: { type: 'string' }, after_ms: { type: 'integer' } },
    required: ['prompt', 'after_ms'],
  },
  test_exit_while_asking: {
    type: 'object',
    properties: { prompt: { type: 'string' }, after_ms: { type: 'integer' } },
    required: ['prompt', 'after_ms'],
  },
  json_schema_2020_12_tool: {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    $defs: { address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
    properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
    additionalProperties: false,
  },
};

async function elicited(extra, params) {
  const result = await extra.sendRequest({ method: 'elicitation/create', params }, ElicitResultSchema);
  return text(`Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`);
}

const RESOURCES = {
  'test://static-text': { name: 'static-text', mimeType: 'text/plain', text: 'This is the content of the static text resource.' },
  'test://static-binary': { name: 'static-binary', mimeType: 'image/png', blob: PNG },
  [WATCHED]: { name: 'watched-resource', mimeType: 'text/plain', text: 'Watched resource content' },
};

const PROMPTS = {
  test_simple_prompt: {
    arguments: [],
    messages: () => [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }],
  },
  test_prompt_with_arguments: {
    arguments: [
      { name: 'arg1', description: 'First test argument', required: true },
      { name: 'arg2', description: 'Second test argument', required: true },
    ],
    messages: (args) => [
      { role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${args.arg1}', arg2='${args.arg2}'` } },
    ],
  },
  test_prompt_with_embedded_resource: {
    arguments: [{ name: 'resourceUri', description: 'URI of the resource to embed', required: true }],
    messages: (args) => [
      {
        role: 'user',
        content: { type: 'resource', resource: { uri: args.resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } },
      },
      { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
    ],
  },
  test_prompt_with_image: {
    arguments: [],
    messages: () => [
      { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
      { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
    ],
  },
};

// A Server with every handler, and, when it `servesSession` of 2025, that session's watcher
// (for its caller to add to `watchers` while the session lasts). Requests of 2026-07-28, and
// every request to a Server without a session, are refused `resources/subscribe` and
// `resources/unsubscribe`.
function newServer({ servesSession = false } = {}) {
  const server = new Server(INFO, { capabilities: CAPABILITIES });
  const session = servesSession ? { uris: new Set(), updated: (uri) => server.sendResourceUpdated({ uri }) } : undefined;
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: Object.keys(TOOLS).map((name) => ({ name, description: name, inputSchema: SCHEMAS[name] ?? EMPTY })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const tool = TOOLS[request.params.name];
    if (!tool) return { ...text(`Unknown tool: ${request.params.name}`), isError: true };
    try {
      return await tool(request.params.arguments ?? {}, extra);
    } catch (error) {
      return { ...text(error.message), isError: true };
    }
  });
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: Object.entries(RESOURCES).map(([uri, { name, mimeType }]) => ({ uri, name, mimeType })),
  }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({
    resourceTemplates: [{ uriTemplate: 'test://template/{id}/data', name: 'template', mimeType: 'application/json' }],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    const uri = request.params.uri;
    const template = /^test:\/\/template\/([^/]+)\/data$/.exec(uri);
    if (template) {
      const id = template[1];
      return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }] };
    }
    const resource = RESOURCES[uri];
    if (!resource) {
      const error = new Error(`Resource not found: ${uri}`);
      error.code = -32002;
      error.data = { uri };
      throw error;
    }
    const { name: _name, ...content } = resource;
    return { contents: [{ uri, ...content }] };
  });
  server.setRequestHandler(SubscribeRequestSchema, async (request) => {
    subscriptionsOf(session, request).add(request.params.uri);
    return {};
  });
  server.setRequestHandler(UnsubscribeRequestSchema, async (request) => {
    subscriptionsOf(session, request).delete(request.params.uri);
    return {};
  });
  server.setRequestHandler(ListPromptsRequestSchema, async () => ({
    prompts: Object.entries(PROMPTS).map(([name, { arguments: args }]) => ({ name, description: name, arguments: args })),
  }));
  server.setRequestHandler(GetPromptRequestSchema, async (request) => {
    const prompt = PROMPTS[request.params.name];
    if (!prompt) throw new Error(`Unknown prompt: ${request.params.name}`);
    return { messages: prompt.messages(request.params.arguments ?? {}) };
  });
  server.setRequestHandler(SetLevelRequestSchema, async () => ({}));
  server.setRequestHandler(CompleteRequestSchema, async () => ({ completion: { values: [], total: 0, hasMore: false } }));
  return { server, session };
}

// The URIs `session` subscribed to, for a request of its own; a removed stateful RPC to a
// request of 2026-07-28.
function subscriptionsOf(session, request) {
  if (!session || revisionOf(request) === STATELESS) {
    const error = new Error(removedStatefulRpc(request.method));
    error.code = ErrorCode.MethodNotFound;
    throw error;
  }
  return session.uris;
}

const revisionOf = (request) => request.params?._meta?.['io.modelcontextprotocol/protocolVersion'];
const removedStatefulRpc = (method) => `${method} is a removed stateful RPC at ${STATELESS}: use subscriptions/listen`;

// The answer to `server/discover`: both revisions.
const DISCOVERED = {
  resultType: 'complete',
  supportedVersions: ['2025-03-26', '2025-06-18', '2025-11-25', STATELESS],
  capabilities: CAPABILITIES,
  ttlMs: 0,
  cacheScope: 'private',
  _meta: { 'io.modelcontextprotocol/serverInfo': INFO },
};

// A 2026 `subscriptions/listen` of `notifications` (request `id`), whose notifications
// `notify(method, params)` sends: acknowledged, then told of updates to the resources it
// asked for until `closed` resolves.
async function listen(id, notifications, notify, closed) {
  const _meta = { 'io.modelcontextprotocol/subscriptionId': id };
  await notify('notifications/subscriptions/acknowledged', { notifications, _meta });
  const watcher = {
    uris: new Set(notifications.resourceSubscriptions ?? []),
    updated: (uri) => notify('notifications/resources/updated', { uri, _meta }),
  };
  watchers.add(watcher);
  await closed;
  watchers.delete(watcher);
}

function event(response, message) {
  response.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
}

function json(response, status, body) {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
}

// A result as 2026-07-28 words it: `resultType` says it is complete.
const completed = (message) =>
  message.result && !message.result.resultType ? { ...message, result: { resultType: 'complete', ...message.result } } : message;

const refusal = (id, code, message) => ({ jsonrpc: '2.0', id: id ?? null, error: { code, message } });

// A request of 2026-07-28: its own context, no session.
async function serveStateless(request, response, body) {
  const id = body?.id;
  switch (body?.method) {
    case 'server/discover':
      return json(response, 200, { jsonrpc: '2.0', id, result: DISCOVERED });
    case 'subscriptions/listen': {
      response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const notify = async (method, params) => event(response, { jsonrpc: '2.0', method, params });
      const closed = new Promise((resolve) => response.on('close', resolve));
      return listen(id, body.params?.notifications ?? {}, notify, closed);
    }
  }
  if (body && !body.method && withdrawn.has(body.id)) {
    // An answer to a question its tool withdrew: noted, and dropped.
    late.push(body.id);
    return response.writeHead(202).end();
  }
  if (body && !body.method && asked.has(body.id)) {
    // A client's answer to what a tool asked: to the request's own Server, under its id.
    const { transport, id: asked_as } = asked.get(body.id);
    asked.delete(body.id);
    response.writeHead(202).end();
    transport.onmessage?.({ ...body, id: asked_as });
    return;
  }
  // The SDK knows no revision after 2025-11-25: its transport is told the one whose wire it shares.
  const at = request.rawHeaders.findIndex((name, i) => i % 2 === 0 && name.toLowerCase() === 'mcp-protocol-version');
  request.rawHeaders[at + 1] = '2025-11-25';
  const { server } = newServer();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  const send = transport.send.bind(transport);
  // This request's questions: the id each went out under, by the Server's own.
  const renamed = new Map();
  transport.send = (message, options) => {
    if (message.method && message.id !== undefined) {
      // A question of this request's Server: numbered apart from every other request's.
      const id = `ask-${++questions}`;
      asked.set(id, { transport, id: message.id });
      renamed.set(message.id, id);
      return send({ ...message, id }, options);
    }
    if (message.method === 'notifications/cancelled' && renamed.has(message.params?.requestId)) {
      // A question withdrawn: under the id it went out under.
      const id = renamed.get(message.params.requestId);
      asked.delete(id);
      withdrawn.add(id);
      return send({ ...message, params: { ...message.params, requestId: id } }, options);
    }
    return send(completed(message), options);
  };
  response.on('close', () => {
    // Questions still open when their request ended: any answer to them comes too late.
    for (const id of renamed.values()) {
      if (asked.delete(id)) withdrawn.add(id);
    }
    transport.close();
    server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(request, response, body);
}

// The questions the tools of 2026-07-28 requests asked, by the id they went out under: each
// request has a Server and transport of its own, and the answer comes in a request of its own.
const asked = new Map();
let questions = 0;

// Sessions of 2025 over HTTP: their transports by id.
const sessions = new Map();

async function serveSession(request, response, body) {
  const sessionId = request.headers['mcp-session-id'];
  const known = sessionId && sessions.get(sessionId);
  if (known) return known.handleRequest(request, response, body);
  if (sessionId) return json(response, 404, refusal(body?.id, -32001, 'Session not found'));
  if (request.method !== 'POST' || body?.method !== 'initialize') {
    return json(response, 400, refusal(body?.id, -32000, 'Bad Request: no session'));
  }
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    eventStore,
    retryInterval: 500,
    onsessioninitialized: (id) => {
      sessions.set(id, transport);
      watchers.add(session);
    },
  });
  const { server, session } = newServer({ servesSession: true });
  transport.onclose = () => {
    sessions.delete(transport.sessionId);
    watchers.delete(session);
  };
  await server.connect(transport);
  await transport.handleRequest(request, response, body);
}

function readBody(request) {
  return new Promise((resolve) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      const raw = Buffer.concat(chunks).toString();
      try {
        resolve(raw ? JSON.parse(raw) : undefined);
      } catch {
        resolve(null);
      }
    });
  });
}

// Over stdio: one Server on the SDK's stdio transport, for its one client at either
// revision; `server/discover` and `subscriptions/listen` answered by hand, the results of
// requests of 2026-07-28 marked complete, and answers to withdrawn questions noted.
async function serveStdio() {
  const { server, session } = newServer({ servesSession: true });
  watchers.add(session);
  server.fallbackRequestHandler = async (request, extra) => {
    switch (request.method) {
      case 'server/discover':
        return DISCOVERED;
      case 'subscriptions/listen': {
        const notify = (method, params) => extra.sendNotification({ method, params });
        const closed = new Promise((resolve) => extra.signal.addEventListener('abort', resolve, { once: true }));
        await listen(request.id, request.params?.notifications ?? {}, notify, closed);
        return {};
      }
    }
    const error = new Error('Method not found');
    error.code = ErrorCode.MethodNotFound;
    throw error;
  };
  const transport = new StdioServerTransport();
  await server.connect(transport);
  // The ids of the client's requests of 2026-07-28 not answered yet.
  const stateless = new Set();
  const receive = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if (message.method && message.id !== undefined && revisionOf(message) === STATELESS) stateless.add(message.id);
    if (!message.method && withdrawn.has(message.id)) {
      // An answer to a question its tool withdrew: noted, and dropped.
      late.push(message.id);
      return;
    }
    receive(message, extra);
  };
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    if (message.method === 'notifications/cancelled') withdrawn.add(message.params?.requestId);
    if (!message.method && stateless.delete(message.id)) return send(completed(message), options);
    return send(message, options);
  };
}

function serveHttp(port) {
  http
    .createServer(async (request, response) => {
      if (new URL(request.url, 'http://localhost').pathname !== '/mcp') return json(response, 404, refusal(null, -32000, 'Not found'));
      // DNS rebinding: only this machine's names are served.
      if (![`127.0.0.1:${port}`, `localhost:${port}`].includes(request.headers.host)) {
        return json(response, 403, refusal(null, -32000, 'Forbidden: foreign Host'));
      }
      const body = request.method === 'POST' ? await readBody(request) : undefined;
      if (body === null) return json(response, 400, refusal(null, -32700, 'Parse error'));
      try {
        if (request.headers['mcp-protocol-version'] === STATELESS && !request.headers['mcp-session-id']) {
          await serveStateless(request, response, body);
        } else {
          await serveSession(request, response, body);
        }
      } catch (error) {
        if (!response.headersSent) json(response, 500, refusal(body?.id, -32603, String(error)));
      }
    })
    .listen(port, '127.0.0.1');
}

const port = Number(process.argv[2]);
if (process.argv[2] === '--stdio') {
  await serveStdio();
} else if (Number.isInteger(port)) {
  serveHttp(port);
} else {
  console.error('usage: node ts_sdk.mjs PORT | node ts_sdk.mjs --stdio');
  process.exit(2);
}
