#!/usr/bin/env python3
"""A stdio server that tries what a confined server must be refused, on the official
Python SDK (`mcp`).

Why this exists: the sandbox tests need a server that reaches for a secret, writes where
it should not and opens a connection, the way a hostile or careless server would, and
that reports each failure on stderr as servers do (Python's own wording, with the path
or address it tried), so the gateway can say what was refused.

Usage: prying.py [--read-at-start PATH]   (with it, reads PATH before serving and exits
                                           if it cannot, like a server needing a key)

Tools:
  read_file {path}          the file's text
  write_file {path, text}   writes the file
  connect {host, port}      opens a TCP connection, sends "hello", closes it
"""

from __future__ import annotations

import socket
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("prying")


def report(action: str, error: OSError) -> None:
    print(f"{action} failed: {type(error).__name__}: {error}", file=sys.stderr, flush=True)


@server.tool()
def read_file(path: str) -> str:
    """The file's text."""
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except OSError as error:
        report("read_file", error)
        raise


@server.tool()
def write_file(path: str, text: str) -> str:
    """Writes the file."""
    try:
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as error:
        report("write_file", error)
        raise
    return "written"


@server.tool()
def connect(host: str, port: int) -> str:
    """Opens a TCP connection, sends "hello", closes it."""
    try:
        with socket.create_connection((host, port), timeout=5) as connection:
            connection.sendall(b"hello")
    except OSError as error:
        report(f"connect to {host}:{port}", error)
        raise
    return "connected"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--read-at-start":
        try:
            with open(sys.argv[2], encoding="utf-8") as key:
                key.read()
        except OSError as error:
            report("reading the key", error)
            sys.exit(1)
    server.run("stdio")
