#!/usr/bin/env python3
"""A browser with nobody in front of it: GETs the URL given and follows every redirect.

Why this exists: `mcp-gateway auth login --browser CMD` hands the authorization page to CMD.
The test identity providers (tests/servers/idp.mjs, the conformance suite's) sign the user
in and consent at once, so following redirects, cookies kept, ends at the gateway's loopback
redirect URI with the code, which is all a person would have done.

Usage: follow_redirects.py URL   (exit 0 once a page answers without redirecting)
"""

import sys

import httpx2


def main(url: str) -> int:
    with httpx2.Client(follow_redirects=True, timeout=30, max_redirects=20) as http:
        response = http.get(url)
    print(f"follow_redirects.py: ended at {response.url} ({response.status_code})", file=sys.stderr)
    return 0 if response.status_code < 400 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
