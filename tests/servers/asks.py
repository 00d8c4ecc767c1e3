#!/usr/bin/env python3
"""An MCP stdio server, built on the official Python SDK (`mcp`), whose tools need their
client: one elicits, one samples, one lists roots.

Why this exists: the gateway must carry these questions between a client and a server of
either protocol revision. The SDK asks them as the negotiated revision wants: at
2025-11-25 and before as requests of their own sent mid-call (`elicitation/create`,
`sampling/createMessage`, `roots/list`); at 2026-07-28 in an `InputRequiredResult`, the
call resuming when the client retries with the answers. The bridge tests
(`tests/tests/revisions.rs`) federate this server at either revision and call its tools
from clients of either revision.

Usage: asks.py   (stdio; the revision is whatever the client negotiates)

Tools:
  greet {}        asks for a name (elicitation) and returns "Hello, <name>!"
  summarize {}    asks the client's model to summarize (sampling) and returns its text
  count_roots {}  asks for the client's roots and returns "<n> roots: <uri>, ..."
  greet_with_progress {}
                  asks for a name like greet, then logs "greeting <name>" at info and
                  reports progress 0.5 and 1.0 before it answers: what comes after the
                  client answered its question
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample
from mcp_types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent
from pydantic import BaseModel


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


def ask_summary() -> Sample:
    question = SamplingMessage(role="user", content=TextContent(type="text", text="Summarize MCP."))
    return Sample([question], max_tokens=50)


def ask_roots() -> ListRoots:
    return ListRoots()


server = MCPServer("asks")


@server.tool()
def greet(person: Annotated[Name, Resolve(ask_name)]) -> str:
    """Greets the person the client names."""
    return f"Hello, {person.name}!"


@server.tool()
async def greet_with_progress(person: Annotated[Name, Resolve(ask_name)], ctx: Context) -> str:
    """Greets the person the client names, logging and reporting progress once it knows the name."""
    await ctx.info(f"greeting {person.name}")
    for progress in (0.5, 1.0):
        await ctx.report_progress(progress, 1.0, f"greeting {person.name}")
    return f"Hello, {person.name}!"


@server.tool()
def summarize(sampled: Annotated[CreateMessageResult, Resolve(ask_summary)]) -> str:
    """Returns what the client's model says."""
    content = sampled.content
    return content.text if isinstance(content, TextContent) else str(content)


@server.tool()
def count_roots(roots: Annotated[ListRootsResult, Resolve(ask_roots)]) -> str:
    """Counts the client's roots."""
    uris = ", ".join(str(root.uri) for root in roots.roots)
    return f"{len(roots.roots)} roots: {uris}"


if __name__ == "__main__":
    server.run("stdio")
