#!/usr/bin/env python3
"""A person's browser with nobody in front of it, for the per-user sign-in tests.

Why this exists: a per-user sign-in sends a person to the gateway's sign-in page, which
finds out who they are before it sends them on to the authorization server: a form for
their gateway token, or a login at the gateway's identity provider. The test identity
provider (tests/servers/idp.mjs) signs in the account its `login_hint` names and consents
at once, so a person is: follow every redirect (cookies kept), add `login_hint=ACCOUNT` to
every authorization request, and type TOKEN into the gateway's token form.

Usage: browser.py URL [--as ACCOUNT] [--token TOKEN] [--stop-at PATH]
  prints {"status", "url", "body"} of the page it ended at; exit 0 when its status < 400.
  --stop-at: do not open a redirect to PATH; end there with status 0 and that URL (what
  an attacker keeps to send someone else).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any
from urllib.parse import parse_qsl, urlencode, urljoin, urlparse, urlunparse

import anyio
import httpx2

HIDDEN_STATE = re.compile(r'name="state" value="([^"]*)"')


def with_login_hint(url: str, account: str | None) -> str:
    """`url` with login_hint=ACCOUNT when it is an authorization request (response_type)."""
    parts = urlparse(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if account is None or not any(key == "response_type" for key, _ in query):
        return url
    query = [(k, v) for k, v in query if k != "login_hint"] + [("login_hint", account)]
    return urlunparse(parts._replace(query=urlencode(query)))


async def browse(
    url: str, account: str | None, token: str | None, stop_at: str | None = None
) -> dict[str, Any]:
    """Opens `url` as the person `account` (holding the gateway token `token`, if any)."""
    async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as http:
        response = await http.get(with_login_hint(url, account))
        typed = False
        for _ in range(30):
            location = response.headers.get("location")
            if response.is_redirect and location is not None:
                url = with_login_hint(urljoin(str(response.url), location), account)
                if stop_at is not None and urlparse(url).path == stop_at:
                    return {"status": 0, "url": url, "body": ""}
                response = await http.get(url)
                continue
            form = HIDDEN_STATE.search(response.text)
            if form and 'name="token"' in response.text and token is not None and not typed:
                typed = True
                response = await http.post(
                    str(response.url), data={"state": form.group(1), "token": token}
                )
                continue
            break
    return {"status": response.status_code, "url": str(response.url), "body": response.text}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--as", dest="account")
    parser.add_argument("--token")
    parser.add_argument("--stop-at")
    opts = parser.parse_args(argv)
    ended = anyio.run(browse, opts.url, opts.account, opts.token, opts.stop_at)
    print(json.dumps(ended))
    return 0 if ended["status"] < 400 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
