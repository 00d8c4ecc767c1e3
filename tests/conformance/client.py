#!/usr/bin/env python3
"""The gateway as the client of the conformance suite's client scenarios (not auth).

Why this exists: `conformance client --scenario NAME --command "client.py"` starts an MCP
server per scenario and runs this with its URL. We configure one upstream at that URL and,
with the built `mcp-gateway` binary, list its tools (`mcp-gateway tools --json`) and call
each once, with arguments made from its input schema, from a client behind the gateway:
the official Python SDK (tests/python/client.py) speaking to `mcp-gateway serve --stdio`,
which accepts what the server asks it (elicitation: the schema's defaults; sampling: a
fixed text). The calls are those the scenario names in MCP_CONFORMANCE_CONTEXT
(`toolCalls`), when it does (an argument given as null left out, as not provided: the
gateway checks arguments against the tool's schema, which null fails); a tool that asks for "the inputSchema the client observed for
NAME" gets that tool's schema as the gateway listed it. What the scenario checks is what
the gateway does as that server's client.

Environment: MCP_GATEWAY_BIN (the binary).
"""

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def example(schema: dict) -> object:
    """A value of the (flat) JSON Schema `schema`."""
    kind = schema.get("type")
    if "default" in schema:
        return schema["default"]
    if "enum" in schema:
        return schema["enum"][0]
    return {"number": 1, "integer": 1, "boolean": True, "array": [], "object": {}}.get(kind, "x")


def main(url: str) -> int:
    gateway = os.environ.get("MCP_GATEWAY_BIN", str(HERE.parents[1] / "target/debug/mcp-gateway"))
    with tempfile.TemporaryDirectory() as workdir:
        config = Path(workdir, "config.toml")
        config.write_text(
            f"[servers.target]\nurl = {json.dumps(url)}\n"
            f"[log]\nsessions_dir = {json.dumps(str(Path(workdir, 'sessions')))}\n"
        )
        env = dict(os.environ, XDG_DATA_HOME=str(Path(workdir, "data")), RUST_LOG="warn")

        def gateway_cli(*args: str) -> subprocess.CompletedProcess:
            done = subprocess.run(
                [gateway, *args, "--config", str(config)],
                env=env, capture_output=True, text=True, timeout=60,
            )
            print(f"$ mcp-gateway {' '.join(args)} -> {done.returncode}\n{done.stdout}{done.stderr}",
                  file=sys.stderr)
            return done

        listed = gateway_cli("tools", "--json")
        if listed.returncode != 0:
            return 1
        tools = [t for t in json.loads(listed.stdout) if t["name"].startswith("mcp__target__")]
        schemas = {t["name"]: t.get("inputSchema", {}) for t in tools}

        def argument(schema: dict) -> object:
            observed = re.search(r"inputSchema the client observed for (\S+?),", schema.get("description", ""))
            if observed and f"mcp__target__{observed.group(1)}" in schemas:
                return schemas[f"mcp__target__{observed.group(1)}"]
            return example(schema)

        named = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT", "{}")).get("toolCalls")
        calls = (
            [
                (
                    f"mcp__target__{call['name']}",
                    {key: value for key, value in call.get("arguments", {}).items() if value is not None},
                )
                for call in named
            ]
            if named
            else [
                (name, {key: argument(value) for key, value in schema.get("properties", {}).items()})
                for name, schema in schemas.items()
            ]
        )
        script = [{"action": "call_tool", "name": name, "arguments": arguments} for name, arguments in calls]
        serve = ["serve", "--stdio", "--wait-for-upstreams", "--config", str(config)]
        run = subprocess.run(
            [
                str(HERE.parents[1] / "tests/peers/.venv/bin/python"),
                str(HERE.parents[1] / "tests/python/client.py"),
                "--transport", "stdio", "--command", gateway, "--args", json.dumps(serve),
                "--inherit-env", "--env", f"XDG_DATA_HOME={Path(workdir, 'data')}",
                "--elicit", "accept", "--sample", "A sampled answer",
                "--script", json.dumps(script),
            ],
            env=env, capture_output=True, text=True, timeout=120,
        )
        print(f"$ client.py -> {run.returncode}\n{run.stdout}{run.stderr}", file=sys.stderr)
        return 0 if run.returncode == 0 and json.loads(run.stdout or "{}").get("ok") else 1

if __name__ == "__main__":
    sys.exit(main(sys.argv[-1]))
