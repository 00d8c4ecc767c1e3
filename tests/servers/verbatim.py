#!/usr/bin/env python3
"""An MCP server whose definitions carry every optional field of the spec, keys of a later
revision and keys of its own vendor, for the tests that check a client behind the gateway
gets them as the server wrote them (`tests/tests/passthrough.rs`).

Why hand-written: the SDKs validate what they send, so none of them can send a key the
spec does not have. Only the Python standard library is used.

Usage: verbatim.py             speaks newline-delimited JSON-RPC on stdin/stdout
       verbatim.py --http PORT serves streamable HTTP at http://127.0.0.1:PORT/mcp
                               (answers as JSON bodies, no session, no GET stream)
       verbatim.py --print     prints its lists as one JSON object (by the key each
                               list's result has them under, and its other results
                               under `results` by method) and exits

It answers `initialize` (echoing the client's protocol version), `server/discover` with
-32601 (a server of 2025), the lists below (tools, prompts, resources and resource
templates), `prompts/get`, `resources/read` and `completion/complete` with the
results in RESULTS whatever they ask, and `tools/call` of each
with `{"content": [{"type": "text", "text": NAME}]}`, after sleeping the call's `seconds`
argument if it has one. The tools declare each `execution.taskSupport`: `everything`
optional, `bare` forbidden, `chore` required. Its `initialize` result carries the
`instructions` in VERBATIM_INSTRUCTIONS, when that is set. It accepts
`resources/subscribe` and `resources/unsubscribe`, writing each (method and URI) as a
line to the file VERBATIM_LOG names, when that is set.
"""

import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

TOOLS = [
    {
        "name": "everything",
        "title": "Every optional field",
        "description": "A tool whose definition carries every optional field.",
        "inputSchema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "id": {"type": "string", "x-mcp-header": "Id"},
                "count": {"type": "integer", "minimum": 0},
                "seconds": {"type": "number"},
            },
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {"ok": {"type": "boolean"}},
            "required": ["ok"],
        },
        "annotations": {
            "title": "Everything",
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
            "x-vendor-hint": "kept",
        },
        "icons": [
            {"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"]},
        ],
        "execution": {"taskSupport": "optional"},
        "_meta": {"com.example/owner": "team-a", "com.example/rank": 3},
        "x-vendor": {"nested": [1, "two", None, {"deep": True}]},
    },
    {
        "name": "bare",
        "inputSchema": {"type": "object"},
        "execution": {"taskSupport": "forbidden"},
    },
    {
        "name": "chore",
        "description": "Runs only as a task.",
        "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}},
        "execution": {"taskSupport": "required"},
    },
]

PROMPTS = [
    {
        "name": "greeting",
        "title": "A greeting",
        "description": "Greets someone.",
        "arguments": [{"name": "who", "description": "Whom", "required": True, "x-arg": 1}],
        "icons": [{"src": "https://example.com/p.png", "mimeType": "image/png"}],
        "_meta": {"com.example/owner": "team-a"},
        "x-vendor": "p",
    },
]

RESOURCES = [
    {
        "uri": "file:///verbatim/readme.md",
        "name": "readme",
        "title": "Read me",
        "description": "What this is.",
        "mimeType": "text/markdown",
        "size": 42,
        "annotations": {"audience": ["user"], "priority": 0.5,
                        "lastModified": "2026-01-01T00:00:00Z", "x-note": True},
        "_meta": {"com.example/owner": "team-a"},
        "x-vendor": "r",
    },
]

RESOURCE_TEMPLATES = [
    {
        "uriTemplate": "file:///verbatim/{name}",
        "name": "by-name",
        "mimeType": "text/plain",
        "annotations": {"audience": ["assistant"]},
        "x-vendor": "t",
    },
]

# What `prompts/get`, `resources/read` and `completion/complete` answer (whatever they are
# asked), with a content type from the future and keys of the server's vendor (and, on the
# prompt, the server's name for itself, which the gateway does not pass on).
RESULTS = {
    "prompts/get": {
        "description": "A greeting.",
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "Hello", "x-tone": "warm"}},
            {"role": "assistant", "content": {"type": "hologram", "frames": 3, "x-vendor": 1}},
        ],
        "_meta": {"com.example/owner": "team-a",
                  "io.modelcontextprotocol/serverInfo": {"name": "verbatim", "version": "1"}},
        "x-vendor": "g",
    },
    "resources/read": {
        "contents": [
            {"uri": "file:///verbatim/readme.md", "mimeType": "text/markdown",
             "text": "# Read me", "_meta": {"com.example/rev": 7}, "x-vendor": "c"},
            {"uri": "file:///verbatim/readme.md", "blob": "aGk=", "x-encoding": "none"},
        ],
        "x-vendor": "read",
    },
    "completion/complete": {
        "completion": {"values": ["Ada", "Alan"], "total": 2, "hasMore": False, "x-rank": [1, 2]},
        "x-vendor": "done",
    },
}

LISTS = {
    "tools/list": ("tools", TOOLS),
    "prompts/list": ("prompts", PROMPTS),
    "resources/list": ("resources", RESOURCES),
    "resources/templates/list": ("resourceTemplates", RESOURCE_TEMPLATES),
}


def answer(message):
    """The answer to one message, or None for a notification."""
    method = message.get("method")
    if "id" not in message or method is None:
        return None
    mid = message["id"]
    if method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": False}, "prompts": {},
                             "resources": {"subscribe": True},
                             "completions": {}},
            "serverInfo": {"name": "verbatim", "version": "1.0.0"},
        }
        if os.environ.get("VERBATIM_INSTRUCTIONS"):
            result["instructions"] = os.environ["VERBATIM_INSTRUCTIONS"]
        return {"jsonrpc": "2.0", "id": mid, "result": result}
    if method in LISTS:
        key, items = LISTS[method]
        return {"jsonrpc": "2.0", "id": mid, "result": {key: items}}
    if method in ("resources/subscribe", "resources/unsubscribe"):
        if os.environ.get("VERBATIM_LOG"):
            with open(os.environ["VERBATIM_LOG"], "a") as log:
                log.write(f"{method} {message['params']['uri']}\n")
        return {"jsonrpc": "2.0", "id": mid, "result": {}}
    if method in RESULTS:
        return {"jsonrpc": "2.0", "id": mid, "result": RESULTS[method]}
    if method == "tools/call":
        name = message["params"]["name"]
        time.sleep(float((message["params"].get("arguments") or {}).get("seconds", 0)))
        return {"jsonrpc": "2.0", "id": mid, "result": {
            "content": [{"type": "text", "text": name}]}}
    return {"jsonrpc": "2.0", "id": mid,
            "error": {"code": -32601, "message": f"method not found: {method}"}}


def serve_stdio():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        reply = answer(json.loads(body))
        if reply is None:
            self.send_response(202)
            self.end_headers()
            return
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.send_response(405)
        self.end_headers()

    do_DELETE = do_GET

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    if sys.argv[1:2] == ["--print"]:
        lists = {key: items for key, items in LISTS.values()}
        print(json.dumps({**lists, "results": RESULTS}))
    elif sys.argv[1:2] == ["--http"]:
        HTTPServer(("127.0.0.1", int(sys.argv[2])), Handler).serve_forever()
    else:
        serve_stdio()
