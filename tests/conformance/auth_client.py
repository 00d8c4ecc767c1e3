#!/usr/bin/env python3
"""The gateway as the client of the conformance suite's authorization scenarios.

Why this exists: `conformance client --suite auth --command "auth_client.py"` starts an MCP
server (and an authorization server) per scenario and runs this with the server's URL. We
configure one upstream at that URL with `[servers.target.oauth]`, sign in without a person
(`auth login --browser follow_redirects.py`: the suite's authorization server redirects at
once), list the tools and call one, all with the built `mcp-gateway` binary. A step-up (403
`insufficient_scope` on the call) is answered the way a person would: `auth status` says the
server wants a larger scope, so sign in again (which asks for it) and call again, once.

Environment: MCP_CONFORMANCE_SCENARIO, MCP_CONFORMANCE_CONTEXT (JSON: client_id,
client_secret, ... for scenarios with pre-registered clients), MCP_GATEWAY_BIN (the binary).
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
FOLLOW = HERE.parent / "python" / "follow_redirects.py"


def toml_str(value: str) -> str:
    return json.dumps(value)


def main(url: str) -> int:
    gateway = os.environ.get("MCP_GATEWAY_BIN", str(HERE.parents[1] / "target/debug/mcp-gateway"))
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory() as workdir:
        oauth = []
        if "client-credentials" in scenario:
            oauth.append('grant = "client_credentials"')
        if context.get("client_id"):
            oauth.append(f"client_id = {toml_str(context['client_id'])}")
        if context.get("client_secret"):
            oauth.append(f"client_secret = {toml_str(context['client_secret'])}")
        if "cimd" in scenario:
            oauth.append('client_metadata_url = "https://conformance-test.local/client-metadata.json"')
        config = Path(workdir, "config.toml")
        config.write_text(
            f"[servers.target]\nurl = {toml_str(url)}\n[servers.target.oauth]\n"
            + "\n".join(oauth)
            + f"\n[log]\nsessions_dir = {toml_str(str(Path(workdir, 'sessions')))}\n"
        )
        env = dict(os.environ, XDG_DATA_HOME=str(Path(workdir, "data")), RUST_LOG="warn")
        browser = f"{toml_str(PYTHON)} {toml_str(str(FOLLOW))}"

        def gateway_cli(*args: str) -> subprocess.CompletedProcess:
            done = subprocess.run(
                [gateway, *args, "--config", str(config)],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            print(f"$ mcp-gateway {' '.join(args)} -> {done.returncode}\n{done.stdout}{done.stderr}", file=sys.stderr)
            return done

        if gateway_cli("auth", "login", "target", "--browser", browser).returncode != 0:
            return 1
        tools = gateway_cli("tools")
        names = [line.split("\t")[0] for line in tools.stdout.splitlines() if line.startswith("mcp__target__")]
        if tools.returncode != 0 or not names:
            return 1
        call = gateway_cli("call", names[0], "--args", "{}")
        # What a person does after a call is refused for its scope: `auth status` says the
        # server wants more (the gateway remembered the scope of the 403), so sign in again.
        if "wants" in gateway_cli("auth", "status").stdout:
            if gateway_cli("auth", "login", "target", "--browser", browser).returncode != 0:
                return 1
            call = gateway_cli("call", names[0], "--args", "{}")
        return 0 if call.returncode in (0, 2) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[-1]))
