#!/usr/bin/env python3
"""`echo` over streamable HTTP on the official Python SDK (`mcp`), with its defaults.

Why this exists: the benchmark's forwarding group measures the gateway in front of the
kinds of HTTP servers users run, and many are Python ones served like this (uvicorn,
sessions, SSE answers). The Rust twin is `examples/src/bin/echo.rs`.

Usage: echo.py PORT   (listens on http://127.0.0.1:PORT/mcp)

Tools:
  echo {text}   returns its argument unchanged
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("echo")


@server.tool()
def echo(text: str) -> str:
    """Returns its argument unchanged."""
    return text


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: echo.py PORT")
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
