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
  test_withdrawn_sampling {prompt, after_ms}
                            asks the client's model about `prompt`, and when no answer
                            came within `after_ms` withdraws the question
                            (`notifications/cancelled`) and returns "withdrawn <its id>"
  test_abandoned_sampling {prompt, after_ms}
                            asks the client's model about `prompt`, and when no answer
                            came within `after_ms` returns "abandoned <its id>", leaving the
                            question open (not withdrawn)
  test_exit_while_asking {prompt, after_ms}
                            asks the client's model about `prompt`, and when no answer
                            came within `after_ms` exits, the question still open
  test_late_answers         the ids of questions withdrawn or abandoned that were answered
                            all the same, as a JSON array
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
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
    {
        "name": "test_withdrawn_sampling",
        "description": "Asks the client's model, and withdraws the question unanswered.",
        "inputSchema": {"type": "object",
                        "properties": {"prompt": {"type": "string"},
                                       "after_ms": {"type": "integer"}},
                        "required": ["prompt", "after_ms"]},
    },
    {
        "name": "test_abandoned_sampling",
        "description": "Asks the client's model, and returns without waiting for the answer.",
        "inputSchema": {"type": "object",
                        "properties": {"prompt": {"type": "string"},
                                       "after_ms": {"type": "integer"}},
                        "required": ["prompt", "after_ms"]},
    },
    {
        "name": "test_exit_while_asking",
        "description": "Asks the client's model, and exits without waiting for the answer.",
        "inputSchema": {"type": "object",
                        "properties": {"prompt": {"type": "string"},
                                       "after_ms": {"type": "integer"}},
                        "required": ["prompt", "after_ms"]},
    },
    {
        "name": "test_late_answers",
        "description": "The withdrawn questions that were answered all the same.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]
# The ids of the questions withdrawn or abandoned, and of those answered all the same.
WITHDRAWN: set[str] = set()
LATE: list[str] = []


def write(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def read_lines(lines: queue.Queue[str | None]) -> None:
    """Puts each line of stdin on `lines`, then None at its end."""
    for line in sys.stdin:
        lines.put(line)
    lines.put(None)


LINES: queue.Queue[str | None] = queue.Queue()
# Set when no message came within the time `read` was given.
QUIET = {"quiet": True}


def read(timeout: float | None = None) -> dict[str, Any] | None:
    """The next JSON-RPC message on stdin; None at its end, QUIET after `timeout` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            line = LINES.get(timeout=remaining)
        except queue.Empty:
            return QUIET
        if line is None:
            return None
        try:
            return json.loads(line)
        except ValueError:
            continue


class Asker:
    """Sends the client requests of its own, each under a fresh id."""

    def __init__(self) -> None:
        self.next_id = 0

    def ask(self, method: str, params: dict[str, Any],
            timeout: float | None = None, withdraw: bool = True) -> dict[str, Any] | str:
        """The answer to `method`, serving what else comes meanwhile; when none came
        within `timeout` seconds, the question is given up (and withdrawn, with
        `withdraw`) and its id returned."""
        self.next_id += 1
        request_id = f"ask-{self.next_id}"
        write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            message = read(remaining)
            if message is None:
                sys.exit(0)
            if message is QUIET:
                WITHDRAWN.add(request_id)
                if withdraw:
                    write({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": request_id, "reason": "no longer needed"}})
                return request_id
            if message.get("id") == request_id and "method" not in message:
                return message
            reply = answer(message, self)
            if reply is not None:
                write(reply)


def call(name: str, arguments: dict[str, Any], asker: Asker) -> dict[str, Any]:
    if name == "test_late_answers":
        return {"content": [{"type": "text", "text": json.dumps(LATE)}]}
    if name in ("test_withdrawn_sampling", "test_abandoned_sampling", "test_exit_while_asking"):
        withdrawing = name == "test_withdrawn_sampling"
        asked = asker.ask("sampling/createMessage", {
            "messages": [{"role": "user",
                          "content": {"type": "text", "text": arguments.get("prompt", "")}}],
            "maxTokens": 50,
        }, timeout=arguments.get("after_ms", 0) / 1000, withdraw=withdrawing)
        if isinstance(asked, str) and name == "test_exit_while_asking":
            sys.exit(0)
        if isinstance(asked, str):
            given_up = "withdrawn" if withdrawing else "abandoned"
            return {"content": [{"type": "text", "text": f"{given_up} {asked}"}]}
        return {"content": [{"type": "text", "text": f"answered in time: {json.dumps(asked)}"}],
                "isError": True}
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
    if method is None and request_id in WITHDRAWN:
        LATE.append(request_id)
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
    elif method == "tools/call" and params.get("name") in (tool["name"] for tool in TOOLS):
        result = call(params["name"], params.get("arguments") or {}, asker)
    else:
        return {"jsonrpc": "2.0", "id": request_id,
                "error": {"code": -32601, "message": f"not here: {method}"}}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def main() -> int:
    threading.Thread(target=read_lines, args=(LINES,), daemon=True).start()
    asker = Asker()
    while (message := read()) is not None:
        reply = answer(message, asker)
        if reply is not None:
            write(reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
