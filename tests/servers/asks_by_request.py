#!/usr/bin/env python3
"""An MCP stdio server of both revisions whose tools ask their client by request mid-call,
written by hand.

Why this exists: servers built on today's SDKs answer `server/discover` (so a client
speaks 2026-07-28 to them) and still ask their client with requests of their own during
a call (`sampling/createMessage`, `elicitation/create`), as at 2025-11-25. Over stdio
nothing ties such a request to the call it belongs to, so the gateway must relate it the
way it does for a server of 2025 (`tests/tests/dual_revision.rs`). Only the Python
standard library is used.

Usage: asks_by_request.py   newline-delimited JSON-RPC on stdin/stdout

It answers `initialize` (echoing the client's protocol version), `server/discover` as a
server of 2026-07-28 and 2025-11-25, `tools/list` and `ping`; every other request
(`subscriptions/listen` among them) is -32601.

Tools:
  test_sampling {prompt}    asks the client's model about `prompt` and returns
                            "LLM response: <its text>"
  test_elicitation {message}
                            asks the client's person `message` (a form with a string
                            `response`) and returns
                            "Elicitation completed: action=<action>, content=<content>"
"""

from __future__ import annotations

import json
import sys
from typing import Any

INFO = {"name": "asks-by-request", "version": "1.0.0"}
CAPABILITIES: dict[str, Any] = {"tools": {}}
TOOLS = [
    {
        "name": "test_sampling",
        "description": "Asks the client's model about the prompt.",
        "inputSchema": {"type": "object", "properties": {"prompt": {"type": "string"}},
                        "required": ["prompt"]},
    },
    {
        "name": "test_elicitation",
        "description": "Asks the client's person the message.",
        "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}},
                        "required": ["message"]},
    },
]


def write(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def read() -> dict[str, Any] | None:
    """The next JSON-RPC message on stdin; None at its end."""
    for line in sys.stdin:
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


class Asker:
    """Sends the client requests of its own, each under a fresh id."""

    def __init__(self) -> None:
        self.next_id = 0

    def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The answer to `method`, serving what else comes meanwhile."""
        self.next_id += 1
        request_id = f"ask-{self.next_id}"
        write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while (message := read()) is not None:
            if message.get("id") == request_id and "method" not in message:
                return message
            reply = answer(message, self)
            if reply is not None:
                write(reply)
        sys.exit(0)


def call(name: str, arguments: dict[str, Any], asker: Asker) -> dict[str, Any]:
    if name == "test_sampling":
        asked = asker.ask("sampling/createMessage", {
            "messages": [{"role": "user",
                          "content": {"type": "text", "text": arguments.get("prompt", "")}}],
            "maxTokens": 50,
        })
        if "error" in asked:
            return {"content": [{"type": "text", "text": f"refused: {asked['error']}"}],
                    "isError": True}
        text = asked["result"]["content"].get("text", "")
        return {"content": [{"type": "text", "text": f"LLM response: {text}"}]}
    asked = asker.ask("elicitation/create", {
        "mode": "form",
        "message": arguments.get("message", ""),
        "requestedSchema": {"type": "object",
                            "properties": {"response": {"type": "string"}}},
    })
    if "error" in asked:
        return {"content": [{"type": "text", "text": f"refused: {asked['error']}"}],
                "isError": True}
    result = asked["result"]
    content = json.dumps(result.get("content"), separators=(",", ":"))
    text = f"Elicitation completed: action={result.get('action')}, content={content}"
    return {"content": [{"type": "text", "text": text}]}


def answer(message: dict[str, Any], asker: Asker) -> dict[str, Any] | None:
    """The answer to `message`, or None for a notification or an answer."""
    method = message.get("method")
    request_id = message.get("id")
    if method is None or request_id is None:
        return None
    params = message.get("params") or {}
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": CAPABILITIES,
            "serverInfo": INFO,
        }
    elif method == "server/discover":
        result = {
            "resultType": "complete",
            "supportedVersions": ["2026-07-28", "2025-11-25"],
            "capabilities": CAPABILITIES,
            "ttlMs": 0,
            "cacheScope": "public",
            "_meta": {"io.modelcontextprotocol/serverInfo": INFO},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS, "resultType": "complete", "ttlMs": 0, "cacheScope": "public"}
    elif method == "ping":
        result = {}
    elif method == "tools/call" and params.get("name") in ("test_sampling", "test_elicitation"):
        result = call(params["name"], params.get("arguments") or {}, asker)
    else:
        return {"jsonrpc": "2.0", "id": request_id,
                "error": {"code": -32601, "message": f"not here: {method}"}}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def main() -> int:
    asker = Asker()
    while (message := read()) is not None:
        reply = answer(message, asker)
        if reply is not None:
            write(reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
