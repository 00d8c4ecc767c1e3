"""Capture the real tool lists of three npm MCP servers as sdkgen ToolSpec JSON.

Writes the fixture that sdkgen's tsc test reads (tests/fixtures/real-tools.json):
a list of ToolSpec objects for server-everything, server-filesystem (rooted at a
fresh temporary directory) and server-memory, listed over stdio with the official
MCP Python SDK. Re-run it when the pinned peers in tests/peers change:

    tests/peers/.venv/bin/python sdkgen/tests/capture_real_tools.py \
        tests/peers/node_modules/.bin > sdkgen/tests/fixtures/real-tools.json
"""

import json
import os
import sys
import tempfile

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


async def list_tools(command: str, args: list[str], env: dict[str, str]) -> list[dict]:
    params = StdioServerParameters(command=command, args=args, env=env)
    async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools, cursor = [], None
            while True:
                page = await session.list_tools(
                    params=None if cursor is None else {"cursor": cursor}
                )
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]


def to_spec(server: str, tool: dict) -> dict:
    return {
        "federated_name": f"mcp__{server}__{tool['name']}",
        "server": server,
        "name": tool["name"],
        "title": tool.get("title"),
        "description": tool.get("description"),
        "input_schema": tool.get("inputSchema", {"type": "object"}),
        "output_schema": tool.get("outputSchema"),
        "annotations": tool.get("annotations"),
    }


async def main() -> None:
    bin_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/peers/node_modules/.bin"
    specs = []
    with tempfile.TemporaryDirectory() as root, tempfile.TemporaryDirectory() as memdir:
        servers = [
            ("everything", "mcp-server-everything", ["stdio"], {}),
            ("filesystem", "mcp-server-filesystem", [root], {}),
            ("memory", "mcp-server-memory", [], {"MEMORY_FILE_PATH": os.path.join(memdir, "m.jsonl")}),
        ]
        for server, exe, args, env in servers:
            for tool in await list_tools(os.path.join(bin_dir, exe), args, env):
                specs.append(to_spec(server, tool))
    specs.sort(key=lambda s: (s["server"], s["name"]))
    json.dump(specs, sys.stdout, indent=1, sort_keys=True, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    anyio.run(main)
