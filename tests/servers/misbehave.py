#!/usr/bin/env python3
"""An MCP stdio server that misbehaves on purpose, in one way chosen by its first argument.

Why this exists: people leave the gateway running for weeks in front of servers that break
the protocol, hang, flood, or die at the worst moment. The robustness tests
(`tests/tests/robustness.rs`) federate this server, in one of the modes below, next to a
well-behaved one and check that the gateway keeps its promises anyway. Only the Python
standard library is used, so it runs wherever `python3` does.

Usage: misbehave.py MODE

Every mode speaks newline-delimited JSON-RPC on stdin/stdout, answers `initialize` (echoing
the client's protocol version) and `tools/list` correctly unless the mode says otherwise,
and offers these tools:
  echo {text}     returns `text` as a text content
  pid {}          returns {"pid": <this process>} as structuredContent
  big {bytes}     returns a text content of `bytes` bytes
  fail {}         answers with a JSON-RPC error (code -32000)
  malformed {}    answers with a result that is not a tool result ({"content": 42})

Modes:
  garbage        writes non-JSON lines (log lines, cut JSON, binary junk, JSON that is not a
                 JSON-RPC message) to stdout before every message it sends
  unknown-ids    answers every tools/call twice, under a string id and a number id that
                 the client never used, and never under the right one
  silent         never answers tools/call (initialize and tools/list are answered)
  deaf           on the first tools/call, stops reading its stdin for good, without
                 answering (logs {"event": "deaf"}): the gateway's writes fill the pipe
  flood          once initialized, sends notifications as fast as the client reads them:
                 progress for unknown tokens, debug log messages and unknown notifications
  flood-list-changed  the same with notifications/tools/list_changed only
                 (both stop after MISBEHAVE_FLOOD_COUNT notifications when it is set, and log
                 {"event": "flood-done", "sent"})
  huge           like `well`, for the `big` tool's large results (nothing else differs)
  oversized      answers every tools/call with one line of MISBEHAVE_LINE_MB (default 129)
                 MiB, streamed a MiB at a time (a valid tool result, had it been read),
                 then logs {"event": "oversized-done"}
  close-stdout   on tools/call, closes its stdout and keeps running (ignoring SIGTERM and
                 the end of stdin) without answering
  exit-on-init   exits with status 1 when it receives `initialize`, without answering
  exit-on-discover  exits with status 1 when it receives `server/discover` (a server that
                 cannot bear a method it does not know before `initialize`); otherwise well
  mute-on-init   never answers `initialize` and keeps running: an upstream that hangs
                 at start
  exit-on-reinit behaves on its first start; `echo` then exits mid-call, and every later
                 start exits during `initialize` (needs MISBEHAVE_LOG to count starts)
  stderr-noline  writes MISBEHAVE_STDERR_MB (default 256) MiB to stderr without a single
                 newline (meanwhile it behaves), then logs {"event": "stderr-done"}
  stderr-binary  on every tools/call, logs a line that is not UTF-8 and then an ordinary
                 line to stderr before answering (a write error there kills it, as it would
                 kill a naive server)
  well           behaves (a control)

With MISBEHAVE_DISCOVER=1 it also answers `server/discover` as a server of 2026-07-28 does
(without it, as a server of 2025 does: -32601), so every mode can be tried at either revision.

With MISBEHAVE_LIST_TTL_MS=N set, its `tools/list` says the list stays fresh N ms (`ttlMs`)
and carries one more tool each time it is read: `listing_K` for the K-th reading (from 1),
so a client sees which reading it got.

With MISBEHAVE_LOG=/path set, it appends one JSON line per event to that file, each with
the time it was written (`at_ms`, Unix milliseconds):
{"event": "start", "pid", "mode"}, {"event": "received", "pid", "method"?, "id"?, "params"?}
for every message read (params only for notifications/cancelled), {"event": "stdout-closed"},
and the flood and stderr events above. Tests read it to see that a cancellation arrived or
that a process started again.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Any

MODES = {
    "garbage",
    "mute-on-init",
    "unknown-ids",
    "silent",
    "deaf",
    "flood",
    "flood-list-changed",
    "huge",
    "oversized",
    "close-stdout",
    "exit-on-init",
    "exit-on-discover",
    "exit-on-reinit",
    "stderr-noline",
    "stderr-binary",
    "well",
}

GARBAGE = [
    b"INFO server: this is a log line printed to stdout by mistake\n",
    b'{"jsonrpc": "2.0", "id": \n',
    b"\xff\xfe\x00 binary junk \x01\x02\n",
    b"\n",
    b"   \n",
    b"[1, 2, 3]\n",
    b'{"hello": "world"}\n',
    b"Traceback (most recent call last): not really\n",
]

TOOLS = [
    {
        "name": "echo",
        "description": "Returns its text.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
    {
        "name": "pid",
        "description": "Returns this process's id.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "big",
        "description": "Returns a text of `bytes` bytes.",
        "inputSchema": {
            "type": "object",
            "properties": {"bytes": {"type": "integer", "minimum": 0}},
            "required": ["bytes"],
        },
    },
    {
        "name": "fail",
        "description": "Answers with a JSON-RPC error.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "malformed",
        "description": "Answers with something that is not a tool result.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]


class Server:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.out = sys.stdout.buffer
        self.lock = threading.Lock()
        self.log_path = os.environ.get("MISBEHAVE_LOG")
        self.flooding = False
        self.stdout_closed = False
        self.listings = 0

    def record(self, event: dict[str, Any]) -> None:
        if not self.log_path:
            return
        event["pid"] = os.getpid()
        event["at_ms"] = int(time.time() * 1000)
        line = (json.dumps(event) + "\n").encode()
        # One write on a file opened for appending: lines never interleave.
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def tool_list(self) -> dict[str, Any]:
        ttl = os.environ.get("MISBEHAVE_LIST_TTL_MS")
        if ttl is None:
            return {"tools": TOOLS}
        self.listings += 1
        listing = {"name": f"listing_{self.listings}", "description": "which reading this is",
                   "inputSchema": {"type": "object"}}
        return {"tools": TOOLS + [listing], "ttlMs": int(ttl)}

    def starts(self) -> int:
        if not self.log_path or not os.path.exists(self.log_path):
            return 0
        with open(self.log_path, encoding="utf-8") as file:
            return sum(1 for line in file if '"event": "start"' in line)

    def write(self, data: bytes) -> None:
        with self.lock:
            if self.stdout_closed:
                return
            if self.mode == "garbage":
                self.out.write(b"".join(GARBAGE))
            self.out.write(data)
            self.out.flush()

    def send(self, message: dict[str, Any]) -> None:
        message["jsonrpc"] = "2.0"
        self.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def result(self, request_id: Any, result: dict[str, Any]) -> None:
        self.send({"id": request_id, "result": result})

    def error(self, request_id: Any, code: int, message: str) -> None:
        self.send({"id": request_id, "error": {"code": code, "message": message}})

    def close_stdout(self) -> None:
        with self.lock:
            self.stdout_closed = True
            self.out.flush()
            os.close(1)
        self.record({"event": "stdout-closed"})

    def flood(self) -> None:
        notifications = [
            {"method": "notifications/progress",
             "params": {"progressToken": "nobody-asked", "progress": 1, "total": 2}},
            {"method": "notifications/message",
             "params": {"level": "debug", "logger": "flood", "data": "flooding"}},
            {"method": "notifications/flood", "params": {"n": 1}},
        ]
        if self.mode == "flood-list-changed":
            notifications = [{"method": "notifications/tools/list_changed"}]
        lines = [
            json.dumps(dict(n, jsonrpc="2.0"), separators=(",", ":")).encode() + b"\n"
            for n in notifications
        ]
        batch = b"".join(lines) * 64
        count = int(os.environ.get("MISBEHAVE_FLOOD_COUNT", "0"))
        sent = 0
        try:
            while count == 0 or sent < count:
                self.write(batch)
                sent += 64 * len(lines)
        except (BrokenPipeError, OSError):
            os._exit(0)
        self.record({"event": "flood-done", "sent": sent})

    def oversized(self, request_id: Any) -> None:
        megabytes = int(os.environ.get("MISBEHAVE_LINE_MB", "129"))
        head = json.dumps({"jsonrpc": "2.0", "id": request_id}, separators=(",", ":"))
        chunk = b"x" * (1 << 20)
        try:
            with self.lock:
                self.out.write(head[:-1].encode() + b',"result":{"content":[{"type":"text","text":"')
                for _ in range(megabytes):
                    self.out.write(chunk)
                self.out.write(b'"}]}}\n')
                self.out.flush()
        except (BrokenPipeError, OSError):
            # The gateway stopped reading: it closed the connection, as it should.
            os._exit(0)
        self.record({"event": "oversized-done", "megabytes": megabytes})

    def handle(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        request_id = message.get("id")
        event: dict[str, Any] = {"event": "received"}
        if method is not None:
            event["method"] = method
        if request_id is not None:
            event["id"] = request_id
        if method == "notifications/cancelled":
            event["params"] = message.get("params")
        self.record(event)
        if method is None or request_id is None:
            if method == "notifications/initialized" and self.mode.startswith("flood") and not self.flooding:
                self.flooding = True
                threading.Thread(target=self.flood, daemon=True).start()
            return
        if method == "initialize":
            if self.mode == "mute-on-init":
                return
            if self.mode == "exit-on-init" or (self.mode == "exit-on-reinit" and self.starts() > 1):
                sys.stderr.write("misbehave: exiting during initialize\n")
                sys.stderr.flush()
                os._exit(1)
            version = message.get("params", {}).get("protocolVersion", "2025-06-18")
            self.result(request_id, {
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": True}, "logging": {}},
                "serverInfo": {"name": f"misbehave-{self.mode}", "version": "1.0.0"},
            })
        elif method == "server/discover" and self.mode == "exit-on-discover":
            sys.stderr.write("misbehave: exiting on server/discover\n")
            sys.stderr.flush()
            os._exit(1)
        elif method == "server/discover" and os.environ.get("MISBEHAVE_DISCOVER") == "1":
            self.result(request_id, {
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {"listChanged": True}, "logging": {}},
                "ttlMs": 0,
                "cacheScope": "public",
                "_meta": {"io.modelcontextprotocol/serverInfo": {
                    "name": f"misbehave-{self.mode}", "version": "1.0.0"}},
            })
        elif method == "tools/list":
            self.result(request_id, self.tool_list())
        elif method == "ping":
            self.result(request_id, {})
        elif method == "tools/call":
            self.call(request_id, message.get("params") or {})
        else:
            self.error(request_id, -32601, f"method not found: {method}")

    def call(self, request_id: Any, params: dict[str, Any]) -> None:
        if self.mode == "silent":
            return
        if self.mode == "deaf":
            self.record({"event": "deaf"})
            while True:
                time.sleep(3600)
        if self.mode == "close-stdout":
            self.close_stdout()
            return
        name = params.get("name")
        arguments = params.get("arguments") or {}
        if self.mode == "stderr-binary":
            sys.stderr.buffer.write(b"raw bytes \xff\xfe\xfd are not UTF-8\n")
            sys.stderr.buffer.flush()
            sys.stderr.buffer.write(b"misbehave: answering tools/call\n")
            sys.stderr.buffer.flush()
        if self.mode == "oversized":
            self.oversized(request_id)
            return
        if self.mode == "exit-on-reinit" and name == "echo":
            os._exit(3)
        if self.mode == "unknown-ids":
            # Answers to requests the client never made: one with a string id, then the
            # real answer under a number id.
            self.send({"id": f"unknown-{request_id}", "result": {"content": []}})
            request_id = request_id + 100000 if isinstance(request_id, int) else f"unknown-{request_id}"
        if name == "echo":
            self.result(request_id, {"content": [{"type": "text", "text": str(arguments.get("text", ""))}]})
        elif name == "pid":
            self.result(request_id, {
                "content": [{"type": "text", "text": str(os.getpid())}],
                "structuredContent": {"pid": os.getpid()},
            })
        elif name == "big":
            size = int(arguments.get("bytes", 0))
            self.result(request_id, {"content": [{"type": "text", "text": "x" * size}]})
        elif name == "fail":
            self.error(request_id, -32000, "misbehave: this tool always fails")
        elif name == "malformed":
            self.result(request_id, {"content": 42})
        else:
            self.error(request_id, -32602, f"unknown tool: {name}")

    def serve(self) -> None:
        self.record({"event": "start", "mode": self.mode})
        if self.mode == "close-stdout":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if self.mode == "stderr-noline":
            threading.Thread(target=self.stderr_without_newline, daemon=True).start()
        for raw in sys.stdin.buffer:
            try:
                message = json.loads(raw)
            except ValueError:
                continue
            if isinstance(message, dict):
                self.handle(message)
        if self.stdout_closed:
            # Keep running after the client went away: the gateway must kill us.
            while True:
                time.sleep(3600)


    def stderr_without_newline(self) -> None:
        megabytes = int(os.environ.get("MISBEHAVE_STDERR_MB", "256"))
        chunk = b"x" * (1 << 20)
        for _ in range(megabytes):
            sys.stderr.buffer.write(chunk)
        sys.stderr.buffer.flush()
        self.record({"event": "stderr-done", "megabytes": megabytes})


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in MODES:
        print(f"usage: misbehave.py {'|'.join(sorted(MODES))}", file=sys.stderr)
        return 2
    Server(argv[0]).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
