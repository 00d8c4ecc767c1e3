#!/usr/bin/env python3
"""An MCP stdio server, built on the official Python SDK (`mcp`), whose tool list changes
without a word and says how long it stays fresh.

Why this exists: a server of 2026-07-28 may tell its clients how long a list stays fresh
(`ttlMs`, SEP-2549) instead of announcing each change. The gateway must read such a list
again once its time is up, or its clients keep seeing what the server no longer offers.

Usage: fresh.py TOOLS_FILE TTL_MS   (stdio; the revision is whatever the client negotiates)
  `tools/list` answers with `ttlMs: TTL_MS`, and lists `hello` plus one tool for each line
  of TOOLS_FILE, read at every listing (a missing file names none); nothing announces a
  change of the file.

Tools:
  hello {}   returns "hello"
  NAME {}    (one per line of TOOLS_FILE) returns NAME
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mcp.server import CacheHint
from mcp.server.mcpserver import MCPServer
from mcp_types import Tool


class Fresh(MCPServer):
    def __init__(self, tools_file: Path, ttl_ms: int) -> None:
        super().__init__("fresh", cache_hints={"tools/list": CacheHint(ttl_ms=ttl_ms)})
        self.tools_file = tools_file

    def named(self) -> list[str]:
        try:
            return [line.strip() for line in self.tools_file.read_text().splitlines() if line.strip()]
        except FileNotFoundError:
            return []

    async def list_tools(self) -> list[Tool]:
        listed = await super().list_tools()
        schema: dict[str, Any] = {"type": "object", "properties": {}}
        return listed + [Tool(name=name, input_schema=schema) for name in self.named()]


def main(tools_file: str, ttl_ms: str) -> None:
    server = Fresh(Path(tools_file), int(ttl_ms))

    @server.tool()
    def hello() -> str:
        """Says hello."""
        return "hello"

    server.run("stdio")


if __name__ == "__main__":
    main(*sys.argv[1:])
