#!/usr/bin/env python3
"""An MCP server whose tool result carries what SDKs refuse or drop, written by hand.

Why this exists: a gateway must pass a tool's result on as the server sent it, keys it
does not know and content of a type it has never heard of included (a later revision of
the spec adds one, a vendor adds a key). SDKs parse results into their own types and
either drop what those types do not declare or refuse the whole message, so this server
is plain JSON-RPC over the Python standard library. `tests/tests/tool_results.rs` calls
its tools through the gateway and compares what comes back with `RESULT` below.

Usage: tool_results.py                    newline-delimited JSON-RPC on stdin/stdout
       tool_results.py --http PORT        streamable HTTP at http://127.0.0.1:PORT/mcp,
                                          each tools/call answered on an SSE stream
       tool_results.py --http PORT --json the same, tools/call answered as a JSON body
       tool_results.py --http PORT --sessions
                                          (with or without --json) a session per
                                          `initialize`, its id in `Mcp-Session-Id`; a
                                          request naming a session it does not know
                                          (any more) gets 404
       tool_results.py --sse PORT         legacy SSE (2024-11-05): the event stream at
                                          GET http://127.0.0.1:PORT/sse, whose `endpoint`
                                          event names POST /messages?session=ID, and
                                          every answer a `message` event on the stream

It speaks 2025-11-25 (`initialize`; `server/discover` is -32601; over legacy SSE its
`initialize` answers 2024-11-05) unless TOOL_RESULTS_DISCOVER=1, when it also answers
`server/discover` as a server of 2026-07-28.

Tools: `show` {} returns RESULT; `show_error` {} returns RESULT with `isError: true`;
`show_known` {} returns RESULT without its hologram (every block of a type SDKs know, and
still keys they do not). With --sessions, `forget` {} forgets every session, as a server
that restarted would (its text says how many), so that the client must open a new one.
`python3 tool_results.py --print` prints RESULT as JSON, for the test to compare with;
`--print-tools` prints TOOLS (`show` carries a vendor's keys) the same way.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

# Every optional field of a tool result (2025-11-25 and 2026-07-28), keys of a vendor on
# the result and on blocks, and a content block of a type from the future.
RESULT: dict[str, Any] = {
    "content": [
        {
            "type": "text",
            "text": "every field",
            "annotations": {
                "audience": ["user", "assistant"],
                "priority": 0.5,
                "lastModified": "2025-11-25T10:00:00Z",
            },
            "_meta": {"vendor.example/block": 1},
            "x-vendor": {"on": "a text block"},
        },
        {
            "type": "image",
            "data": "aGVsbG8=",
            "mimeType": "image/png",
            "annotations": {"audience": ["user"]},
            "_meta": {"vendor.example/pixels": 2},
        },
        {"type": "audio", "data": "aGVsbG8=", "mimeType": "audio/wav"},
        {
            "type": "resource_link",
            "uri": "file:///srv/report.txt",
            "name": "report",
            "title": "The report",
            "description": "What the tool found",
            "mimeType": "text/plain",
            "size": 11,
            "icons": [{"src": "https://example.com/icon.png", "mimeType": "image/png"}],
            "annotations": {"priority": 1},
            "_meta": {"vendor.example/link": True},
        },
        {
            "type": "resource",
            "resource": {
                "uri": "file:///srv/inline.txt",
                "mimeType": "text/plain",
                "text": "inline",
                "_meta": {"vendor.example/contents": "kept"},
            },
            "annotations": {"audience": ["assistant"]},
        },
        {
            "type": "hologram",
            "data": {"frames": [1, 2, 3], "depth": "9cm"},
            "x-vendor": "from the future",
        },
    ],
    "structuredContent": {"answer": 42, "nested": {"list": [1, "two", None]}},
    "isError": False,
    "_meta": {"vendor.example/trace": "abc"},
    "x-vendor": {"on": "the result", "n": 1},
}

TOOLS = [
    {
        "name": "show",
        "title": "Show",
        "description": "Returns a result with every field.",
        "inputSchema": {"type": "object", "x-vendor": "in a schema"},
        "annotations": {"readOnlyHint": True, "x-vendor-hint": "kept"},
        "_meta": {"vendor.example/tool": 3},
        "x-vendor": {"on": "a tool"},
    },
    {
        "name": "show_error",
        "description": "The same result, as the tool's own error.",
        "inputSchema": {"type": "object"},
    },
    {
        "name": "show_known",
        "description": "The same result without the block of a type from the future.",
        "inputSchema": {"type": "object"},
    },
]

FORGET = {
    "name": "forget",
    "description": "Forgets every session, as a server that restarted would.",
    "inputSchema": {"type": "object"},
}

# The live sessions' ids, when served with --sessions (None: no sessions are kept, and
# every session id is taken).
SESSIONS: set[str] | None = None
SESSIONS_LOCK = threading.Lock()


def forget_sessions() -> int:
    """Forgets every session; how many there were."""
    with SESSIONS_LOCK:
        forgotten = len(SESSIONS or ())
        if SESSIONS is not None:
            SESSIONS.clear()
    return forgotten


def answer(message: dict[str, Any], revision: str | None = None) -> dict[str, Any] | None:
    """The answer to `message`, or None for a notification; `initialize` answers
    `revision`, or the client's own when None."""
    method = message.get("method")
    request_id = message.get("id")
    if method is None or request_id is None:
        return None
    params = message.get("params") or {}
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": revision or params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "tool-results", "version": "1.0.0"},
        }
    elif method == "server/discover" and os.environ.get("TOOL_RESULTS_DISCOVER") == "1":
        result = {
            "resultType": "complete",
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}},
            "ttlMs": 0,
            "cacheScope": "public",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "tool-results", "version": "1.0.0"}},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS + ([FORGET] if SESSIONS is not None else [])}
        if os.environ.get("TOOL_RESULTS_DISCOVER") == "1":
            result.update({"resultType": "complete", "ttlMs": 0, "cacheScope": "public"})
    elif method == "ping":
        result = {}
    elif method == "tools/call" and params.get("name") in ("show", "show_error", "show_known"):
        result = json.loads(json.dumps(RESULT))
        result["isError"] = params.get("name") == "show_error"
        if params.get("name") == "show_known":
            result["content"] = [b for b in result["content"] if b["type"] != "hologram"]
    elif method == "tools/call" and params.get("name") == "forget" and SESSIONS is not None:
        result = {"content": [{"type": "text", "text": f"forgot {forget_sessions()} sessions"}]}
    else:
        return {"jsonrpc": "2.0", "id": request_id,
                "error": {"code": -32601, "message": f"not here: {method}"}}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def serve_stdio() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            continue
        reply = answer(message)
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


def open_session() -> str:
    """The id of a new session (always the same one without --sessions)."""
    if SESSIONS is None:
        return "tool-results-session"
    session = uuid.uuid4().hex
    with SESSIONS_LOCK:
        SESSIONS.add(session)
    return session


def is_known(session: str | None) -> bool:
    """Whether a request naming `session` (or none) may be answered: any may without
    --sessions, and with it one that names no session or a live one."""
    with SESSIONS_LOCK:
        return SESSIONS is None or session is None or session in SESSIONS


def serve_http(port: int, json_body: bool) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def send_body(self, status: int, content_type: str | None, body: bytes,
                      headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            if content_type:
                self.send_header("Content-Type", content_type)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            message = json.loads(self.rfile.read(length) or b"{}")
            headers = {}
            if message.get("method") == "initialize":
                headers["Mcp-Session-Id"] = open_session()
            elif not is_known(self.headers.get("Mcp-Session-Id")):
                self.send_body(404, None, b"")
                return
            reply = answer(message)
            if reply is None:
                self.send_body(202, None, b"")
                return
            body = json.dumps(reply).encode()
            if message.get("method") == "tools/call" and not json_body:
                event = b"event: message\ndata: " + body + b"\n\n"
                self.send_body(200, "text/event-stream", event, headers)
            else:
                self.send_body(200, "application/json", body, headers)

        def do_GET(self) -> None:
            self.send_body(405, None, b"", {"Allow": "POST, DELETE"})

        def do_DELETE(self) -> None:
            with SESSIONS_LOCK:
                if SESSIONS is not None:
                    SESSIONS.discard(self.headers.get("Mcp-Session-Id", ""))
            self.send_body(200, None, b"")

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    threading.Event().wait()


def serve_legacy_sse(port: int) -> None:
    # Each open event stream's queue of answers, by session id.
    sessions: dict[str, queue.Queue[bytes | None]] = {}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if urlparse(self.path).path != "/sse":
                self.send_error(404)
                return
            session = uuid.uuid4().hex
            answers: queue.Queue[bytes | None] = queue.Queue()
            with lock:
                sessions[session] = answers
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            event = f"event: endpoint\ndata: /messages?session={session}\n\n".encode()
            try:
                while event is not None:
                    self.wfile.write(event)
                    self.wfile.flush()
                    event = answers.get()
            except OSError:
                pass
            finally:
                with lock:
                    sessions.pop(session, None)

        def do_POST(self) -> None:
            url = urlparse(self.path)
            session = parse_qs(url.query).get("session", [""])[0]
            with lock:
                answers = sessions.get(session)
            if url.path != "/messages" or answers is None:
                self.send_error(404)
                return
            length = int(self.headers.get("Content-Length") or 0)
            message = json.loads(self.rfile.read(length) or b"{}")
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            reply = answer(message, "2024-11-05")
            if reply is not None:
                answers.put(b"event: message\ndata: " + json.dumps(reply).encode() + b"\n\n")

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


def main(argv: list[str]) -> int:
    global SESSIONS
    if argv[:1] == ["--print"]:
        print(json.dumps(RESULT))
    elif argv[:1] == ["--print-tools"]:
        print(json.dumps(TOOLS))
    elif argv[:1] == ["--http"]:
        if "--sessions" in argv[2:]:
            SESSIONS = set()
        serve_http(int(argv[1]), "--json" in argv[2:])
    elif argv[:1] == ["--sse"]:
        serve_legacy_sse(int(argv[1]))
    else:
        serve_stdio()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
