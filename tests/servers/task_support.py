#!/usr/bin/env python3
"""A server of 2025-11-25 whose tools declare `execution.taskSupport`, named and behaving
as the conformance suite's `tasks-*` scenarios call them, for the test that runs those
scenarios through the gateway (`tests/tests/task_support.rs`): a server of 2025-11-25 has
no tasks of 2026-07-28, so every task a client sees is the gateway's own, made as the
tool's declaration says.

Why hand-written: the tools must declare `execution.taskSupport` while the server speaks
2025-11-25 only (no `server/discover`), and run as plain calls (it declares no `tasks`
capability, so no client asks it for a task of 2025-11-25). Only the Python standard
library is used.

Usage: task_support.py             speaks newline-delimited JSON-RPC on stdin/stdout
       task_support.py --http PORT serves streamable HTTP at http://127.0.0.1:PORT/mcp
                                   (no session, no GET stream: a call's answer is an
                                   event stream carrying what the tool asks before it)

Each call runs in a thread of its own; `notifications/cancelled` stops it (it then sends
no answer). What a tool asks its client (`elicitation/create`) is a request of the
server's (on stdout, or on the call's event stream), whose answer the client sends as it
sends everything else. The tools:

  greet               forbidden  `Hello, NAME!` at once
  slow_compute        optional   sleeps `seconds`, then says it is done with `label`
  failing_job         required   a tool error (`isError`) after a second
  protocol_error_job  optional   a JSON-RPC error after a second
  confirm_delete      optional   asks to confirm deleting `filename`, then says what it did
  multi_input         optional   asks two questions at once, then says both answers
  test_tool_with_task required   asks for the user's name (`user_name`), then greets it
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REVISION = "2025-11-25"


def schema(properties=None):
    return {"type": "object", "properties": properties or {}}


TOOLS = [
    {"name": "greet", "description": "Says hello.",
     "inputSchema": schema({"name": {"type": "string"}}),
     "execution": {"taskSupport": "forbidden"}},
    {"name": "slow_compute", "description": "Works `seconds` seconds, then answers.",
     "inputSchema": schema({"seconds": {"type": "number"}, "label": {"type": "string"}}),
     "execution": {"taskSupport": "optional"}},
    {"name": "failing_job", "description": "Fails as a tool after a second.",
     "inputSchema": schema(), "execution": {"taskSupport": "required"}},
    {"name": "protocol_error_job", "description": "Fails with a protocol error after a second.",
     "inputSchema": schema(), "execution": {"taskSupport": "optional"}},
    {"name": "confirm_delete", "description": "Asks to confirm deleting `filename`.",
     "inputSchema": schema({"filename": {"type": "string"}}),
     "execution": {"taskSupport": "optional"}},
    {"name": "multi_input", "description": "Asks two questions at once.",
     "inputSchema": schema(), "execution": {"taskSupport": "optional"}},
    {"name": "test_tool_with_task", "description": "Asks for a name, then greets it.",
     "inputSchema": schema(), "execution": {"taskSupport": "required"}},
]

# Writes to stdout, one message a line, from any thread.
WRITING = threading.Lock()
# The calls running, by request id: each one's cancellation.
RUNNING = {}
# The server's requests waiting for the client's answer, by id: [event, answer].
ASKED = {}
ASKED_LOCK = threading.Lock()
NEXT_ASK = [0]


def send(message):
    """Writes `message` to stdout."""
    with WRITING:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


class Cancelled(Exception):
    """The client cancelled the call."""


class ToolFailed(Exception):
    """The call ends with a JSON-RPC error."""


class Call:
    """A call running: its request id, its cancellation, and where what it sends goes."""

    def __init__(self, mid, send):
        self.mid = mid
        self.send = send
        self.cancelled = threading.Event()

    def work(self, seconds):
        if self.cancelled.wait(max(0.0, min(float(seconds), 3600.0))):
            raise Cancelled()

    def elicit(self, message, field, kind):
        """The client's answer to one question: the field's value, or None if declined."""
        with ASKED_LOCK:
            NEXT_ASK[0] += 1
            ask_id = f"ask-{NEXT_ASK[0]}"
            waiting = [threading.Event(), None]
            ASKED[ask_id] = waiting
        self.send({"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create", "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": {field: {"type": kind}},
                                "required": [field]},
        }})
        while not waiting[0].wait(0.05):
            if self.cancelled.is_set():
                with ASKED_LOCK:
                    ASKED.pop(ask_id, None)
                raise Cancelled()
        answer = waiting[1]
        if "error" in answer:
            raise ToolFailed(f"elicitation failed: {answer['error'].get('message')}")
        result = answer.get("result") or {}
        if result.get("action") != "accept":
            return None
        return (result.get("content") or {}).get(field)


def text(value, error=False):
    result = {"content": [{"type": "text", "text": value}]}
    if error:
        result["isError"] = True
    return result


def run_tool(call, name, arguments):
    """The result of tool `name`, or raises."""
    if name == "greet":
        return text(f"Hello, {arguments.get('name', '')}!")
    if name == "slow_compute":
        seconds = arguments.get("seconds", 1)
        call.work(seconds)
        return text(f"slow_compute `{arguments.get('label', '')}` done after {seconds}s")
    if name == "failing_job":
        call.work(1)
        return text("failing_job failed, as it always does", error=True)
    if name == "protocol_error_job":
        call.work(1)
        raise ToolFailed("protocol_error_job failed with a protocol error, as it always does")
    if name == "confirm_delete":
        filename = arguments.get("filename", "")
        confirmed = call.elicit(f"Delete `{filename}`?", "confirm", "boolean")
        return text(f"Deleted `{filename}`" if confirmed is True else f"Kept `{filename}`")
    if name == "multi_input":
        answers = {}

        def ask(field, message, kind):
            try:
                answers[field] = call.elicit(message, field, kind)
            except (Cancelled, ToolFailed) as e:
                answers[field] = e

        both = [threading.Thread(target=ask, args=args) for args in
                (("name", "Your name?", "string"), ("confirm", "Go ahead?", "boolean"))]
        for thread in both:
            thread.start()
        for thread in both:
            thread.join()
        for value in answers.values():
            if isinstance(value, Exception):
                raise value
        return text(f"multi_input: name={answers['name']}, confirm={answers['confirm']}")
    if name == "test_tool_with_task":
        user = call.elicit("What is your name?", "name", "string")
        return text(f"Hello, {user or 'stranger'}!")
    raise ToolFailed(f"unknown tool: {name}")


def serve_call(call, params):
    """Runs the call and sends its answer (none when it was cancelled)."""
    try:
        result = run_tool(call, params.get("name"), params.get("arguments") or {})
        reply = {"jsonrpc": "2.0", "id": call.mid, "result": result}
    except Cancelled:
        reply = None
    except ToolFailed as e:
        reply = {"jsonrpc": "2.0", "id": call.mid,
                 "error": {"code": -32603, "message": str(e)}}
    RUNNING.pop(json.dumps(call.mid), None)
    if reply is not None:
        call.send(reply)


def answer(message):
    """The answer to a request that is answered at once, or None."""
    method, mid = message["method"], message["id"]
    if method == "initialize":
        return {"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": REVISION,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "task-support", "version": "1.0.0"},
        }}
    if method == "ping":
        return {"jsonrpc": "2.0", "id": mid, "result": {}}
    if method == "tools/list":
        return {"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}}
    return {"jsonrpc": "2.0", "id": mid,
            "error": {"code": -32601, "message": f"method not found: {method}"}}


def receive(message):
    """Takes in a message that starts no call: an answer to a question, or a
    notification; the answer to a request, or None."""
    method = message.get("method")
    if method is None:
        # The client's answer to a question of a call.
        with ASKED_LOCK:
            waiting = ASKED.pop(message.get("id"), None)
        if waiting is not None:
            waiting[1] = message
            waiting[0].set()
        return None
    if "id" not in message:
        if method == "notifications/cancelled":
            call = RUNNING.get(json.dumps((message.get("params") or {}).get("requestId")))
            if call is not None:
                call.cancelled.set()
        return None
    return answer(message)


def start_call(message, send):
    """The call `message` starts, registered so that its cancellation reaches it."""
    call = Call(message["id"], send)
    RUNNING[json.dumps(message["id"])] = call
    return call


def serve_stdio():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        message = json.loads(line)
        if message.get("method") == "tools/call" and "id" in message:
            call = start_call(message, send)
            threading.Thread(target=serve_call, args=(call, message.get("params") or {}),
                             daemon=True).start()
            continue
        reply = receive(message)
        if reply is not None:
            send(reply)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        message = json.loads(body)
        if message.get("method") == "tools/call" and "id" in message:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            writing = threading.Lock()

            def send_event(event):
                with writing:
                    try:
                        self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                        self.wfile.flush()
                    except OSError:
                        call.cancelled.set()

            call = start_call(message, send_event)
            serve_call(call, message.get("params") or {})
            return
        reply = receive(message)
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
    if sys.argv[1:2] == ["--http"]:
        ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), Handler).serve_forever()
    else:
        serve_stdio()
