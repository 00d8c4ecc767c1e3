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

Usage: task_support.py   speaks newline-delimited JSON-RPC on stdin/stdout

Each call runs in a thread of its own; `notifications/cancelled` stops it (it then sends
no answer). What a tool asks its client (`elicitation/create`) is a request of the
server's, answered by the client on stdin. The tools:

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
    with WRITING:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


class Cancelled(Exception):
    """The client cancelled the call."""


class ToolFailed(Exception):
    """The call ends with a JSON-RPC error."""


class Call:
    def __init__(self, mid):
        self.mid = mid
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
        send({"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create", "params": {
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
        send(reply)


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


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        message = json.loads(line)
        method = message.get("method")
        if method is None:
            # The client's answer to a question of a call.
            with ASKED_LOCK:
                waiting = ASKED.pop(message.get("id"), None)
            if waiting is not None:
                waiting[1] = message
                waiting[0].set()
        elif "id" not in message:
            if method == "notifications/cancelled":
                key = json.dumps((message.get("params") or {}).get("requestId"))
                call = RUNNING.get(key)
                if call is not None:
                    call.cancelled.set()
        elif method == "tools/call":
            call = Call(message["id"])
            RUNNING[json.dumps(message["id"])] = call
            threading.Thread(target=serve_call, args=(call, message.get("params") or {}),
                             daemon=True).start()
        else:
            send(answer(message))


if __name__ == "__main__":
    main()
