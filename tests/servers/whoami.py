#!/usr/bin/env python3
"""An MCP server that says who called it: streamable HTTP on the official Python SDK, an
OAuth protected resource whose tokens come from the test identity provider (idp.mjs).

Why this exists: per-user upstream credentials (issue 40) must be shown end to end: each
person's call has to reach the remote server with that person's own token. This server
verifies the bearer token for real (signature from the provider's JWKS, issuer, audience =
this server's URL, expiry) and answers with the token's subject, so a test sees whose
token each call carried.

Usage: whoami.py PORT ISSUER TOKENS_FILE
  listens on http://127.0.0.1:PORT/mcp; every distinct token it accepts is appended to
  TOKENS_FILE (one a line), so a test can search the gateway's stores for them.

Tools:
  whoami {}          returns {"subject": <the bearer token's sub>}
  touch_watched {}   says WATCHED changed, to every `subscriptions/listen` stream that
                     asked for it and every session subscribed to it
  touch_mine {}      says WATCHED changed, on the caller's session only (its own copy of
                     the resource changed, nobody else's)
  subscribed {}      returns {"uris": [...]}: the resources the bearer's subject holds a
                     `resources/subscribe` to (2025-11-25 sessions), so a test sees which
                     subscriptions the server still keeps for whom

Resources:
  whoami://watched   (WATCHED) the text "watched"
"""

from __future__ import annotations

import json
import sys
import urllib.request

import jwt
import mcp_types as types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.session import ServerSession

WATCHED = "whoami://watched"


class JwtVerifier:
    """Checks the provider's JWT access tokens (RFC 9068) for this resource."""

    def __init__(self, issuer: str, resource: str, tokens_file: str) -> None:
        with urllib.request.urlopen(f"{issuer}/.well-known/openid-configuration") as answer:
            metadata = json.load(answer)
        self.keys = jwt.PyJWKClient(metadata["jwks_uri"])
        self.issuer = issuer
        self.resource = resource
        self.tokens_file = tokens_file
        self.seen: set[str] = set()

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            key = self.keys.get_signing_key_from_jwt(token)
            claims = jwt.decode(token, key.key, algorithms=["RS256"], audience=self.resource,
                                issuer=self.issuer)
        except jwt.PyJWTError as error:
            print(f"whoami.py: refused a token: {error}", file=sys.stderr)
            return None
        if token not in self.seen:
            self.seen.add(token)
            with open(self.tokens_file, "a", encoding="utf-8") as out:
                out.write(token + "\n")
        return AccessToken(token=token, client_id=claims.get("client_id", ""),
                           scopes=claims.get("scope", "").split(), expires_at=claims.get("exp"),
                           resource=self.resource, subject=claims.get("sub"), claims=claims)


def main(port: int, issuer: str, tokens_file: str) -> None:
    resource = f"http://127.0.0.1:{port}/mcp"
    server = MCPServer(
        "whoami",
        token_verifier=JwtVerifier(issuer, resource, tokens_file),
        auth=AuthSettings(issuer_url=issuer, resource_server_url=resource,
                          required_scopes=["mcp:read"]),
    )

    @server.tool()
    def whoami() -> dict[str, str | None]:
        """Says whose token this call carried."""
        token = get_access_token()
        return {"subject": token.subject if token else None}

    # The bearer's subject -> the URIs it is subscribed to with `resources/subscribe`.
    subscriptions: dict[str | None, set[str]] = {}
    # The sessions subscribed to WATCHED, which hear of its updates.
    watchers: list[ServerSession] = []

    @server.tool()
    async def touch_watched(ctx: Context) -> str:
        """Says the watched resource changed."""
        await ctx.notify_resource_updated(WATCHED)
        for session in list(watchers):
            try:
                await session.send_resource_updated(WATCHED)
            except Exception as error:  # noqa: BLE001 (a session gone hears nothing)
                print(f"whoami.py: a subscribed session is gone: {error}", file=sys.stderr)
        return "touched"

    @server.tool()
    async def touch_mine(ctx: Context) -> str:
        """Says the caller's own watched resource changed, to the caller only."""
        await ctx.session.send_resource_updated(WATCHED)
        return "touched"

    @server.resource(WATCHED)
    def watched() -> str:
        """A resource clients subscribe to."""
        return "watched"

    def subject_of(ctx: ServerRequestContext) -> str | None:
        user = ctx.request.user if ctx.request is not None else None
        if isinstance(user, AuthenticatedUser):
            return user.access_token.subject
        token = get_access_token()
        return token.subject if token else None

    async def subscribe(ctx: ServerRequestContext, params: types.SubscribeRequestParams
                        ) -> types.EmptyResult:
        subject = subject_of(ctx)
        print(f"whoami.py: {subject} subscribed to {params.uri}", file=sys.stderr)
        subscriptions.setdefault(subject, set()).add(str(params.uri))
        if str(params.uri) == WATCHED and ctx.session not in watchers:
            watchers.append(ctx.session)
        return types.EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext, params: types.UnsubscribeRequestParams
                          ) -> types.EmptyResult:
        subject = subject_of(ctx)
        print(f"whoami.py: {subject} unsubscribed from {params.uri}", file=sys.stderr)
        subscriptions.get(subject, set()).discard(str(params.uri))
        if str(params.uri) == WATCHED and ctx.session in watchers:
            watchers.remove(ctx.session)
        return types.EmptyResult()

    lowlevel = server._lowlevel_server  # noqa: SLF001 (MCPServer has no decorator for these)
    lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams,
                                 unsubscribe)

    @server.tool()
    def subscribed(ctx: Context) -> dict[str, list[str]]:
        """The resources the caller holds a `resources/subscribe` to."""
        return {"uris": sorted(subscriptions.get(subject_of(ctx.request_context), set()))}

    server.run("streamable-http", host="127.0.0.1", port=port)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: whoami.py PORT ISSUER TOKENS_FILE")
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3])
