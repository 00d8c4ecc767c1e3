#!/usr/bin/env python3
"""The gateway as the client of the conformance suite's client scenarios (not auth).

Why this exists: `conformance client --scenario NAME --command "client.py"` starts an MCP
server per scenario and runs this with its URL. We configure one upstream at that URL and,
with the built `mcp-gateway` binary, list its tools (`mcp-gateway tools --json`) and call
each once, with arguments made from its input schema, as a client behind the gateway
would: what the scenario checks is what the gateway does as that server's client.

Environment: MCP_GATEWAY_BIN (the binary).
"""

import json
import os
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
        for tool in tools:
            properties = tool.get("inputSchema", {}).get("properties", {})
            arguments = {name: example(schema) for name, schema in properties.items()}
            if gateway_cli("call", tool["name"], "--args", json.dumps(arguments)).returncode != 0:
                return 1
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[-1]))
