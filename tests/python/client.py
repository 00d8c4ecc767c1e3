#!/usr/bin/env python3
"""Drive one MCP server with the official Python SDK (`mcp` 2.3.0) and report what happened.

Why this exists: the gateway must work with the clients people really use. The Rust
integration tests run this script as a subprocess against the gateway (over stdio, legacy
SSE or streamable HTTP), hand it a script of MCP actions and read back ONE JSON document on
stdout with the exact result of every action, every elicitation request the server made and
every notification that arrived. Nothing else is written to stdout; diagnostics go to stderr.

Usage:
  client.py --transport stdio --command EXE [--args JSON_ARRAY] [--env K=V]... [--inherit-env]
            [--cwd DIR]
  client.py --transport sse  --url http://127.0.0.1:PORT/sse [--header K=V]...
  client.py --transport http --url http://127.0.0.1:PORT/mcp [--header K=V]... [--oauth]
            --oauth: sign in with the SDK's OAuth client, headless (see signin.py)
  common:   [--script JSON | --script-file PATH]   (default: the script is read from stdin)
            [--elicit accept|decline|cancel|browse|none] [--elicit-content JSON]
            [--browse-as ACCOUNT] [--browse-token TOKEN]
                                   (browse: a URL elicitation is accepted and its URL
                                    opened by ACCOUNT's browser (browser.py): redirects
                                    followed, login_hint=ACCOUNT added to authorization
                                    requests, and TOKEN typed into the gateway's sign-in
                                    form (default: the bearer token of --header
                                    Authorization); form ones are accepted)
            [--elicit-delay-ms MS]  (the person takes this long to answer)
            [--sample TEXT] [--sample-delay-ms MS]  (declare sampling; answer every request
                                                     with this text, after MS)
            [--sample-progress]  (report progress 0.5 then 1.0 on each sampling request that
                                  carries a progress token, before the delay)
            [--roots JSON_ARRAY]  (declare roots; list these {"uri", "name"?} roots)
            [--mode legacy|auto] [--timeout SECONDS]
            --mode legacy (default): initialize, protocol 2025-11-25; auto: server/discover,
            then 2026-07-28 (stateless requests) when the server speaks it

The script is a JSON array of actions, run in order. Every action is an object with an
"action" key and may carry "expect_error": true (the action must fail; success is then the
failure). Actions:
  {"action": "list_tools" | "list_prompts" | "list_resources" | "list_resource_templates",
   "cursor"?: str}            without "cursor" every page is fetched and the items joined
  {"action": "call_tool", "name": str, "arguments"?: {}, "progress"?: bool,
   "cancel_after_ms"?: int, "timeout_ms"?: int, "meta"?: {}}
  {"action": "get_prompt", "name": str, "arguments"?: {str: str}}
  {"action": "read_resource", "uri": str}
  {"action": "subscribe" | "unsubscribe", "uri": str}
  {"action": "complete", "ref": {"type": "ref/prompt", "name": str} |
                                {"type": "ref/resource", "uri": str},
   "argument": {"name": str, "value": str}, "context_arguments"?: {str: str}}
  {"action": "ping"}
  {"action": "set_logging_level", "level": str}
  {"action": "roots_changed"}                           send notifications/roots/list_changed
  {"action": "sleep", "ms": int}                        do nothing for `ms` (the gateway's
                                                        timers run meanwhile)
  {"action": "wait_elicitations", "count"?: int (default 1), "timeout_ms"?: int
   (default 5000)}             until `count` elicitations were answered or cancelled
  {"action": "wait_file", "path": str, "line_with": [str, ...], "timeout_ms"?: int
   (default 5000)}             until a line of the file contains every one of `line_with`
                               (an upstream's event log says it saw something)
  {"action": "wait_notification", "method": str, "count"?: int (default 1),
   "timeout_ms"?: int (default 5000)}      until `count` notifications of `method` arrived
  {"action": "wait_call", "name": str, "arguments"?: {}, "text": str, "timeout_ms"?: int
   (default 5000)}
                 calls the tool every 100 ms until a text of its result contains `text`;
                 result = that result
  {"action": "wait_tool", "name": str, "timeout_ms"?: int (default 5000)}
                 lists tools every 100 ms until `name` is listed; result = that listing
  {"action": "listen", "tools_list_changed"?: bool, "prompts_list_changed"?: bool,
   "resources_list_changed"?: bool, "resource_subscriptions"?: [uri, ...],
   "then": [action, ...], "events"?: int (default 1), "timeout_ms"?: int (default 5000)}
                 (2026-07-28 only) opens subscriptions/listen, runs `then` while it is
                 open, and waits for `events` change events; result = {"honored": <the
                 filter the server acknowledged>, "events": [event class names],
                 "updated": [uri of each ResourceUpdated event], "then": entries}
  {"action": "parallel", "actions": [action, ...], "concurrency"?: int,
   "tolerate_failures"?: bool}     run concurrently (at most `concurrency` at once, default
                                   all); result = entries; with tolerate_failures, failed
                                   entries do not fail the action

Output (exit status 0 when every action went as expected, 1 when one did not, 2 when the
connection or the command line failed; the document is printed in every case but bad usage):
  {"ok": bool, "error"?: str,
   "server": {"protocol_version", "server_info"?, "capabilities", "instructions"?},
   "results": [{"action": str, "ok": bool, "result"?: <MCP result>, "error"?: {...},
                "pages"?: int, "progress"?: [{"progress", "total"?, "message"?}],
                "cancelled"?: bool}],
   "elicitations": [{"params": <ElicitRequestParams>, "response": <ElicitResult> | null,
                     "cancelled"?: true, "browsed"?: {"status": int, "url": str, "body": str}}],
                     response null while the person "thinks"
   "samplings": [{"params": <CreateMessageRequestParams>, "during_action": int | null,
                  "progress_token"?: str | int, "cancelled"?: true}],
   "roots_requests": [{"during_action": int | null}],
   "notifications": [{"method": str, "params"?: {...}, "during_action": int | null}],
   "transport_errors": [str]}
MCP results are model_dump(mode="json", by_alias=True, exclude_none=True) of the SDK's
models. An error is {"type": "mcp", "code", "message", "data"?} for a JSON-RPC error and
{"type": <exception class>, "message"} otherwise (e.g. RuntimeError when structuredContent
does not match the tool's outputSchema: the SDK checks it, listing tools first if needed).
Stops at the first action that did not go as expected.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any


import anyio
import httpx2
import mcp_types as types
from mcp import Client, MCPDeprecationWarning, MCPError, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.subscriptions import ResourceUpdated

import signin
from browser import browse

LIST_ACTIONS = {
    "list_tools": "tools",
    "list_prompts": "prompts",
    "list_resources": "resources",
    "list_resource_templates": "resourceTemplates",
}
MAX_PAGES = 100
EXAMPLE_FORMATS = {
    "email": "test@example.com",
    "uri": "https://example.com/",
    "date": "2000-01-01",
    "date-time": "2000-01-01T00:00:00Z",
}


class UsageError(Exception):
    """The command line or the script is malformed."""


class ActionFailed(Exception):
    """An action did not go as the script expected; `result` is what it did produce."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def innermost(error: BaseException) -> BaseException:
    """The one error inside (nested) single-member exception groups, as anyio raises them."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def describe_error(error: BaseException) -> dict[str, Any]:
    error = innermost(error)
    if isinstance(error, MCPError):
        described: dict[str, Any] = {"type": "mcp", "code": error.code, "message": error.message}
        if error.data is not None:
            described["data"] = error.data
        return described
    return {"type": type(error).__name__, "message": str(error) or type(error).__name__}


def key_values(pairs: list[str], what: str) -> dict[str, str]:
    parsed = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} must look like KEY=VALUE, got {pair!r}")
        parsed[key] = value
    return parsed


def bearer_token(headers: dict[str, str]) -> str | None:
    """The bearer token among `headers`, if any: what the person at the browser holds."""
    for key, value in headers.items():
        if key.lower() == "authorization" and value.startswith("Bearer "):
            return value.removeprefix("Bearer ")
    return None


def example_value(schema: dict[str, Any]) -> Any:
    """A value that satisfies a (flat) elicitation property schema."""
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    for variants in ("oneOf", "anyOf"):
        for variant in schema.get(variants, []):
            if "const" in variant:
                return variant["const"]
    kind = schema.get("type")
    if kind == "string" and schema.get("format") in EXAMPLE_FORMATS:
        return EXAMPLE_FORMATS[schema["format"]]
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "array":
        items = schema.get("items", {})
        for variants in ("anyOf", "oneOf"):
            for variant in items.get(variants, []):
                if "const" in variant:
                    return [variant["const"]]
        return items.get("enum", [])[:1]
    return "test"


class Recorder:
    """Everything the server sent on its own: notifications, elicitations, transport faults."""

    def __init__(self, elicit: str, elicit_content: dict[str, Any] | None, doc: dict[str, Any],
                 elicit_delay_ms: int = 0, sample: str | None = None,
                 roots: list[dict[str, Any]] | None = None, sample_delay_ms: int = 0,
                 sample_progress: bool = False) -> None:
        self.sample = sample
        self.sample_delay_ms = sample_delay_ms
        self.sample_progress = sample_progress
        self.roots = roots
        self.samplings: list[dict[str, Any]] = doc["samplings"]
        self.roots_requests: list[dict[str, Any]] = doc["roots_requests"]
        self.elicit = elicit
        self.browse_as: str | None = None
        self.browse_token: str | None = None
        self.elicit_delay_ms = elicit_delay_ms
        self.elicit_content = elicit_content
        self.notifications: list[dict[str, Any]] = doc["notifications"]
        self.elicitations: list[dict[str, Any]] = doc["elicitations"]
        self.transport_errors: list[str] = doc["transport_errors"]
        self.current_action: int | None = None
        self.changed = anyio.Event()

    async def on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.transport_errors.append(f"{type(message).__name__}: {message}")
            return
        raw = dump(message)
        entry = {"method": raw.get("method"), "during_action": self.current_action}
        if "params" in raw:
            entry["params"] = raw["params"]
        self.notifications.append(entry)
        self.changed.set()
        self.changed = anyio.Event()

    def count(self, method: str) -> int:
        return sum(1 for n in self.notifications if n["method"] == method)

    async def on_sample(self, context: Any, params: Any) -> types.CreateMessageResult:
        entry: dict[str, Any] = {"params": dump(params), "during_action": self.current_action}
        self.samplings.append(entry)
        meta = context.meta or {}
        token = meta.get("progress_token", meta.get("progressToken"))
        if token is not None:
            entry["progress_token"] = token
            if self.sample_progress:
                for progress in (0.5, 1.0):
                    await context.session.send_progress_notification(token, progress, 1.0)
        if self.sample_delay_ms:
            try:
                await anyio.sleep(self.sample_delay_ms / 1000)
            except anyio.get_cancelled_exc_class():
                entry["cancelled"] = True
                raise
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=self.sample or ""),
            model="test-model",
            stop_reason="endTurn",
        )

    async def on_list_roots(self, context: Any) -> types.ListRootsResult:
        self.roots_requests.append({"during_action": self.current_action})
        return types.ListRootsResult(roots=[types.Root(**root) for root in self.roots or []])

    async def on_elicit(self, context: Any, params: Any) -> types.ElicitResult:
        entry: dict[str, Any] = {"params": dump(params), "response": None}
        self.elicitations.append(entry)
        if self.elicit_delay_ms:
            try:
                await anyio.sleep(self.elicit_delay_ms / 1000)
            except anyio.get_cancelled_exc_class():
                entry["cancelled"] = True
                raise
        if self.elicit == "browse" and getattr(params, "mode", "form") == "url":
            entry["browsed"] = await browse(params.url, self.browse_as, self.browse_token)
            response = types.ElicitResult(action="accept")
            entry["response"] = dump(response)
            return response
        if self.elicit in ("accept", "browse"):
            if getattr(params, "mode", "form") == "url":
                response = types.ElicitResult(action="accept")
            else:
                content = self.elicit_content
                if content is None:
                    schema = getattr(params, "requested_schema", None) or {}
                    if not isinstance(schema, dict):
                        schema = dump(schema)
                    properties = schema.get("properties", {})
                    content = {name: example_value(prop) for name, prop in properties.items()}
                response = types.ElicitResult(action="accept", content=content)
        else:
            response = types.ElicitResult(action=self.elicit)
        entry["response"] = dump(response)
        return response


def require(action: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in action:
        raise UsageError(f"action {action.get('action')!r} needs {key!r}")
    value = action[key]
    if not isinstance(value, kind):
        raise UsageError(f"action {action.get('action')!r}: {key!r} has the wrong type")
    return value


async def list_all(client: Client, name: str, action: dict[str, Any], entry: dict[str, Any]) -> Any:
    method = getattr(client, name)
    if "cursor" in action:
        return dump(await method(cursor=action["cursor"]))
    first: dict[str, Any] | None = None
    cursor = None
    for page_number in range(1, MAX_PAGES + 1):
        page = dump(await method(cursor=cursor))
        if first is None:
            first = page
        else:
            first[LIST_ACTIONS[name]].extend(page[LIST_ACTIONS[name]])
        cursor = page.get("nextCursor")
        if cursor is None:
            first.pop("nextCursor", None)
            entry["pages"] = page_number
            return first
    raise RuntimeError(f"{name}: still paginating after {MAX_PAGES} pages")


async def call_tool(client: Client, action: dict[str, Any], entry: dict[str, Any]) -> Any:
    name = require(action, "name", str)
    arguments = action.get("arguments")
    progress_callback = None
    if action.get("progress"):
        updates: list[dict[str, Any]] = []
        entry["progress"] = updates

        async def progress_callback(progress: float, total: float | None, message: str | None) -> None:
            update: dict[str, Any] = {"progress": progress}
            if total is not None:
                update["total"] = total
            if message is not None:
                update["message"] = message
            updates.append(update)

    timeout = action["timeout_ms"] / 1000 if "timeout_ms" in action else None
    call = client.call_tool(
        name,
        arguments,
        read_timeout_seconds=timeout,
        progress_callback=progress_callback,
        meta=action.get("meta"),
    )
    if "cancel_after_ms" not in action:
        return dump(await call)
    result = None
    with anyio.move_on_after(action["cancel_after_ms"] / 1000) as scope:
        result = await call
    entry["cancelled"] = scope.cancelled_caught
    return None if result is None else dump(result)


async def perform(client: Client, recorder: Recorder, action: dict[str, Any], entry: dict[str, Any]) -> Any:
    kind = action.get("action")
    if kind in LIST_ACTIONS:
        return await list_all(client, kind, action, entry)
    if kind == "call_tool":
        return await call_tool(client, action, entry)
    if kind == "get_prompt":
        return dump(await client.get_prompt(require(action, "name", str), action.get("arguments")))
    if kind == "read_resource":
        return dump(await client.read_resource(require(action, "uri", str)))
    if kind == "subscribe":
        return dump(await client.session.subscribe_resource(require(action, "uri", str)))
    if kind == "unsubscribe":
        return dump(await client.session.unsubscribe_resource(require(action, "uri", str)))
    if kind == "complete":
        ref = require(action, "ref", dict)
        if ref.get("type") == "ref/prompt":
            reference: Any = types.PromptReference(type="ref/prompt", name=ref["name"])
        elif ref.get("type") == "ref/resource":
            reference = types.ResourceTemplateReference(type="ref/resource", uri=ref["uri"])
        else:
            raise UsageError("complete: ref.type must be ref/prompt or ref/resource")
        argument = require(action, "argument", dict)
        return dump(await client.complete(reference, argument, action.get("context_arguments")))
    if kind == "ping":
        return dump(await client.send_ping())
    if kind == "set_logging_level":
        return dump(await client.session.set_logging_level(require(action, "level", str)))
    if kind == "roots_changed":
        await client.send_roots_list_changed()
        return None
    if kind == "sleep":
        await anyio.sleep(require(action, "ms", int) / 1000)
        return None
    if kind == "wait_elicitations":
        count = action.get("count", 1)
        timeout_ms = action.get("timeout_ms", 5000)

        def settled() -> int:
            return sum(1 for e in recorder.elicitations if e["response"] or e.get("cancelled"))

        with anyio.move_on_after(timeout_ms / 1000):
            while settled() < count:
                await anyio.sleep(0.05)
            return {"count": settled()}
        raise ActionFailed(f"{settled()} of {count} elicitations settled within {timeout_ms} ms")
    if kind == "wait_file":
        path = Path(require(action, "path", str))
        wanted = require(action, "line_with", list)
        timeout_ms = action.get("timeout_ms", 5000)

        def found() -> str | None:
            text = path.read_text() if path.exists() else ""
            return next((l for l in text.splitlines() if all(w in l for w in wanted)), None)

        with anyio.move_on_after(timeout_ms / 1000):
            while (line := found()) is None:
                await anyio.sleep(0.05)
            return {"line": line}
        raise ActionFailed(f"no line of {path} with {wanted} within {timeout_ms} ms")
    if kind == "wait_notification":
        method = require(action, "method", str)
        count = action.get("count", 1)
        timeout_ms = action.get("timeout_ms", 5000)
        with anyio.move_on_after(timeout_ms / 1000):
            while recorder.count(method) < count:
                await recorder.changed.wait()
        seen = recorder.count(method)
        if seen < count:
            raise ActionFailed(f"{seen} of {count} {method} notifications within {timeout_ms} ms")
        return {"count": seen}
    if kind == "wait_call":
        name = require(action, "name", str)
        wanted = require(action, "text", str)
        timeout_ms = action.get("timeout_ms", 5000)
        result: dict[str, Any] = {}
        with anyio.move_on_after(timeout_ms / 1000):
            while True:
                result = dump(await client.call_tool(name, action.get("arguments")))
                texts = [c.get("text", "") for c in result.get("content", [])]
                if any(wanted in text for text in texts):
                    return result
                await anyio.sleep(0.1)
        raise ActionFailed(f"{name} never answered with {wanted!r} within {timeout_ms} ms", result)
    if kind == "wait_tool":
        name = require(action, "name", str)
        timeout_ms = action.get("timeout_ms", 5000)
        listed: dict[str, Any] = {}
        with anyio.move_on_after(timeout_ms / 1000):
            while True:
                listed = await list_all(client, "list_tools", {}, entry)
                if any(tool["name"] == name for tool in listed["tools"]):
                    return listed
                await anyio.sleep(0.1)
        raise ActionFailed(f"{name} was not listed within {timeout_ms} ms", listed)
    if kind == "listen":
        wanted = action.get("events", 1)
        timeout_ms = action.get("timeout_ms", 5000)
        async with client.listen(
            tools_list_changed=bool(action.get("tools_list_changed")),
            prompts_list_changed=bool(action.get("prompts_list_changed")),
            resources_list_changed=bool(action.get("resources_list_changed")),
            resource_subscriptions=action.get("resource_subscriptions", ()),
        ) as subscription:
            then = [await run_action(client, recorder, sub) for sub in action.get("then", [])]
            events: list[str] = []
            updated: list[str] = []
            with anyio.move_on_after(timeout_ms / 1000):
                async for event in subscription:
                    events.append(type(event).__name__)
                    if isinstance(event, ResourceUpdated):
                        updated.append(event.uri)
                    if len(events) >= wanted:
                        break
            honored = dump(subscription.honored) if subscription.honored is not None else None
            result = {"honored": honored, "events": events, "updated": updated, "then": then}
        if len(events) < wanted:
            raise ActionFailed(f"{len(events)} of {wanted} events within {timeout_ms} ms", result)
        return result
    if kind == "parallel":
        actions = require(action, "actions", list)
        entries: list[dict[str, Any] | None] = [None] * len(actions)
        limiter = anyio.CapacityLimiter(action.get("concurrency") or max(len(actions), 1))

        async def run_one(position: int, sub_action: dict[str, Any]) -> None:
            async with limiter:
                entries[position] = await run_action(client, recorder, sub_action)

        async with anyio.create_task_group() as group:
            for position, sub_action in enumerate(actions):
                group.start_soon(run_one, position, sub_action)
        failed = [e for e in entries if e is not None and not e["ok"]]
        if failed and not action.get("tolerate_failures"):
            raise ActionFailed(f"{len(failed)} of {len(actions)} parallel actions failed", entries)
        return entries
    raise UsageError(f"unknown action {kind!r}")


async def run_action(client: Client, recorder: Recorder, action: Any) -> dict[str, Any]:
    if not isinstance(action, dict) or not isinstance(action.get("action"), str):
        raise UsageError(f"every action must be an object with an 'action' string, got {action!r}")
    expect_error = bool(action.get("expect_error"))
    entry: dict[str, Any] = {"action": action["action"]}
    try:
        result = await perform(client, recorder, action, entry)
    except UsageError:
        raise
    except ActionFailed as failed:
        if failed.result is not None:
            entry["result"] = failed.result
        entry["ok"] = expect_error
        entry["error"] = {"type": "ActionFailed", "message": str(failed)}
        return entry
    except Exception as error:  # noqa: BLE001 - every failure is reported, not raised
        entry["ok"] = expect_error
        entry["error"] = describe_error(error)
        return entry
    if result is not None:
        entry["result"] = result
    entry["ok"] = not expect_error
    return entry


def make_transport(opts: argparse.Namespace, doc: dict[str, Any]) -> Any:
    if opts.transport == "stdio":
        if not opts.command:
            raise UsageError("--transport stdio needs --command")
        try:
            args = json.loads(opts.args) if opts.args else []
        except json.JSONDecodeError as error:
            raise UsageError(f"--args must be a JSON array of strings: {error}") from error
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise UsageError("--args must be a JSON array of strings")
        env = dict(os.environ) if opts.inherit_env else {}
        env.update(key_values(opts.env, "--env"))
        params = StdioServerParameters(command=opts.command, args=args, env=env or None, cwd=opts.cwd)
        return stdio_client(params)
    if not opts.url:
        raise UsageError(f"--transport {opts.transport} needs --url")
    headers = key_values(opts.header, "--header")
    if opts.transport == "sse":
        return sse_client(opts.url, headers=headers or None)
    return http_transport(opts.url, headers, opts.oauth, doc)


@asynccontextmanager
async def http_transport(
    url: str, headers: dict[str, str], oauth: bool, doc: dict[str, Any]
) -> AsyncIterator[Any]:
    # The SDK's own HTTP client factory (its MCP timeouts), with the extra headers.
    auth = None
    if oauth:
        doc["sign_ins"] = 0
        auth = signin.oauth_provider(url, doc)
    async with create_mcp_http_client(headers=headers or None, auth=auth) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            yield streams


async def run(opts: argparse.Namespace, script: list[Any], doc: dict[str, Any]) -> int:
    recorder = Recorder(opts.elicit, opts.elicit_content, doc, opts.elicit_delay_ms,
                        opts.sample, opts.roots, opts.sample_delay_ms, opts.sample_progress)
    recorder.browse_as = opts.browse_as
    recorder.browse_token = opts.browse_token or bearer_token(key_values(opts.header, "--header"))
    client = Client(
        make_transport(opts, doc),
        mode=opts.mode,
        cache=None,
        message_handler=recorder.on_message,
        elicitation_callback=None if opts.elicit == "none" else recorder.on_elicit,
        sampling_callback=None if opts.sample is None else recorder.on_sample,
        list_roots_callback=None if opts.roots is None else recorder.on_list_roots,
        client_info=types.Implementation(name="mcp-gateway-test-client", version="1.0.0"),
    )
    try:
        await client.__aenter__()
    except Exception as error:  # noqa: BLE001
        doc["error"] = f"cannot connect: {describe_error(error)['message'] or type(error).__name__}"
        return 2
    status = 0
    try:
        doc["server"] = {
            "protocol_version": client.protocol_version,
            "capabilities": dump(client.server_capabilities),
        }
        if client.server_info is not None:
            doc["server"]["server_info"] = dump(client.server_info)
        if client.instructions is not None:
            doc["server"]["instructions"] = client.instructions
        for index, action in enumerate(script):
            recorder.current_action = index
            entry = await run_action(client, recorder, action)
            doc["results"].append(entry)
            if not entry["ok"]:
                expected = "an error" if action.get("expect_error") else "success"
                detail = entry.get("error", {}).get("message", "it succeeded")
                doc["error"] = f"action {index} ({entry['action']}) did not give {expected}: {detail}"
                status = 1
                break
        recorder.current_action = None
    finally:
        try:
            await client.__aexit__(None, None, None)
        except Exception as error:  # noqa: BLE001 - the outcome of the actions stands
            recorder.transport_errors.append(f"on close: {describe_error(error)['message']}")
    return status


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transport", choices=["stdio", "sse", "http"], required=True)
    parser.add_argument("--command", help="stdio: the server executable")
    parser.add_argument("--args", help="stdio: the server's arguments as a JSON array")
    parser.add_argument("--env", action="append", default=[], help="stdio: K=V for the server")
    parser.add_argument("--inherit-env", action="store_true", help="stdio: pass this environment on")
    parser.add_argument("--cwd", help="stdio: the server's working directory")
    parser.add_argument("--url", help="sse/http: the endpoint URL")
    parser.add_argument("--header", action="append", default=[], help="sse/http: K=V request header")
    parser.add_argument("--oauth", action="store_true", help="http: sign in with OAuth, headless")
    parser.add_argument("--script", help="the actions as a JSON array")
    parser.add_argument("--script-file", help="a file holding the actions as a JSON array")
    parser.add_argument("--elicit", choices=["accept", "decline", "cancel", "browse", "none"],
                        default="none")
    parser.add_argument("--browse-as", help="browse: the login_hint of the sign-in page")
    parser.add_argument("--browse-token", help="browse: the gateway token typed into its form")
    parser.add_argument("--elicit-content", help="accept: the JSON object to answer with")
    parser.add_argument("--elicit-delay-ms", type=int, default=0,
                        help="wait this long before answering an elicitation")
    parser.add_argument("--sample", help="declare sampling and answer every request with this text")
    parser.add_argument("--sample-progress", action="store_true",
                        help="report progress 0.5 and 1.0 on each sampling request")
    parser.add_argument("--sample-delay-ms", type=int, default=0,
                        help="wait this long before answering a sampling request")
    parser.add_argument("--roots", help="declare roots and list these (a JSON array of {uri, name?})")
    parser.add_argument("--mode", choices=["auto", "legacy"], default="legacy")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for the whole run")
    opts = parser.parse_args(argv)
    if opts.script is not None and opts.script_file is not None:
        raise UsageError("give --script or --script-file, not both")
    if opts.script is not None:
        raw = opts.script
    elif opts.script_file is not None:
        with open(opts.script_file, encoding="utf-8") as file:
            raw = file.read()
    else:
        raw = sys.stdin.read()
    try:
        script = json.loads(raw)
    except json.JSONDecodeError as error:
        raise UsageError(f"the script is not JSON: {error}") from error
    if not isinstance(script, list):
        raise UsageError("the script must be a JSON array of actions")
    if opts.elicit_content is not None:
        opts.elicit_content = json.loads(opts.elicit_content)
        if not isinstance(opts.elicit_content, dict):
            raise UsageError("--elicit-content must be a JSON object")
    if opts.roots is not None:
        opts.roots = json.loads(opts.roots)
        if not isinstance(opts.roots, list):
            raise UsageError("--roots must be a JSON array")
    return opts, script


def main(argv: list[str]) -> int:
    # ping, resources/subscribe and logging/setLevel are deprecated in the 2026 protocol but
    # still what these tests exercise; the warnings would only clutter stderr.
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    try:
        opts, script = parse_args(argv)
    except (UsageError, OSError, json.JSONDecodeError) as error:
        print(f"client.py: {error}", file=sys.stderr)
        return 2
    doc: dict[str, Any] = {
        "ok": False,
        "server": None,
        "results": [],
        "elicitations": [],
        "samplings": [],
        "roots_requests": [],
        "notifications": [],
        "transport_errors": [],
    }

    async def bounded() -> int:
        with anyio.fail_after(opts.timeout):
            return await run(opts, script, doc)

    try:
        status = anyio.run(bounded)
    except BaseException as raised:  # noqa: BLE001 - report, then fail
        error = innermost(raised)
        if isinstance(error, UsageError):
            doc["error"] = f"bad input: {error}"
            status = 2
        elif isinstance(error, TimeoutError):
            doc["error"] = f"timed out after {opts.timeout} s"
            status = 1
        else:
            doc["error"] = f"{type(error).__name__}: {error}"
            status = 2
    doc["ok"] = status == 0
    print(json.dumps(doc, indent=1, sort_keys=False))
    sys.stdout.flush()
    if status != 0:
        print(f"client.py: {doc['error']}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
