"""Headless sign-in for client.py: the official SDK's OAuth client with no person at the browser.

Why this exists: the gateway's OAuth tests must sign in the way a real MCP client does
(discovery from the 401, dynamic registration, authorization code with PKCE and a resource
indicator), but nobody clicks. The test identity provider (tests/servers/idp.mjs) signs the
user in and consents at once, so "opening the browser" is following redirects until the
provider sends us back to our redirect URI with the code.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urljoin, urlparse

import httpx2
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

REDIRECT_URI = "http://127.0.0.1:1/callback"


class MemoryStorage(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class Browser:
    """Follows the authorization URL to the redirect back; remembers the code it carried."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.callback: AuthorizationCodeResult | None = None
        self.doc = doc

    async def open(self, url: str) -> None:
        self.doc["sign_ins"] += 1
        async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as http:
            for _ in range(20):
                if url.startswith(REDIRECT_URI):
                    query = parse_qs(urlparse(url).query)
                    if "error" in query:
                        raise RuntimeError(f"authorization refused: {query}")
                    self.callback = AuthorizationCodeResult(
                        code=query["code"][0],
                        state=query.get("state", [None])[0],
                        iss=query.get("iss", [None])[0],
                    )
                    return
                response = await http.get(url)
                location = response.headers.get("location")
                if location is None:
                    raise RuntimeError(f"{url} answered {response.status_code} without a redirect")
                url = urljoin(url, location)
        raise RuntimeError("too many redirects during sign-in")

    async def code(self) -> AuthorizationCodeResult:
        if self.callback is None:
            raise RuntimeError("the authorization page never redirected back")
        callback, self.callback = self.callback, None
        return callback


def oauth_provider(server_url: str, doc: dict[str, Any]) -> OAuthClientProvider:
    """The SDK's OAuth client for `server_url`; counts its sign-ins in doc["sign_ins"]."""
    browser = Browser(doc)
    metadata = OAuthClientMetadata(
        client_name="mcp-gateway-test-client",
        redirect_uris=[REDIRECT_URI],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    return OAuthClientProvider(
        server_url=server_url,
        client_metadata=metadata,
        storage=MemoryStorage(),
        redirect_handler=browser.open,
        callback_handler=browser.code,
    )
