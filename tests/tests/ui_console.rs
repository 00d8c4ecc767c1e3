//! The operator console (`/ui`) in a real browser: headless Chromium (Debian's
//! `chromium`, installed by scripts/install-browser) driven by npm `playwright-core`
//! through `tests/ui/console.mjs`, against the gateway binary with the example `kv` and
//! `slow` upstreams. The script first opens the console of a gateway with no tokens, which
//! shows its pages at once; then, on one with a token, it is asked for it, logs in,
//! watches the servers, kills an upstream and sees it restart, restarts one from its
//! button while a call is in flight there (the call still gets its answer), disables and
//! enables it, runs a tool from "try it" and finds it in the activity feed with its gate
//! decision and in the session logs, approves and denies questions waiting in the console,
//! waits for the metrics interval holding its calls, and checks that requests without the
//! cookie, with a wrong CSRF token or from a foreign Origin are refused. On every page: each control has a label, text
//! meets WCAG AA contrast, nothing is fetched from another origin, and nothing overflows a
//! phone's width. Screenshots of every page land in `target/ui-screenshots/`. A second
//! test drives the "People signed in" panel of a per-user server (`tests/ui/sign_ins.mjs`),
//! and a third a person's own per-user sign-in (`tests/ui/sign_in_page.mjs`).

use std::process::{Command, Stdio};
use std::time::Duration;

use mcp_gateway_tests::*;

const TOKEN: &str = "console-test-token-5d1c";

#[test]
fn an_operator_drives_the_console_in_a_browser() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        std::path::Path::new(&chromium).exists(),
        "{chromium} is missing: run scripts/install-browser"
    );
    let playwright = repo().join("tests/peers/node_modules/playwright-core");
    assert!(
        playwright.exists(),
        "{} is missing: run scripts/install-test-peers",
        playwright.display()
    );
    let config = format!(
        "[listen]\ntokens = [{{ token = {token}, operator = true }}]\n\n{kv}{slow}\n\
         [[policy]]\ntool = \"mcp__kv__set\"\ndecision = \"allow\"\n\n\
         [[policy]]\ntool = \"mcp__kv__delete\"\ndecision = \"ask\"\nreason = \"deleting needs a person\"\n\n\
         [gate]\nask_fallback = \"console\"\nask_timeout_ms = 60000\n",
        token = toml_str(TOKEN),
        kv = example_server("kv", "kv"),
        slow = slow_server_with_events(""),
    );
    let workspace = Workspace::new(&config);
    let mut gateway = workspace.serve_http(&[]);
    // A second gateway with no tokens, whose console opens without a login.
    let open_workspace = Workspace::new(&example_server("kv", "kv"));
    let open_gateway = open_workspace.serve_http(&[]);
    let screenshots = target_dir().join("ui-screenshots");
    let output = workspace.path("console.out");
    let mut browser = Command::new("node")
        .arg(repo().join("tests/ui/console.mjs"))
        .env("GATEWAY_URL", gateway.url(""))
        .env("GATEWAY_TOKEN", TOKEN)
        .env("SCREENSHOTS", &screenshots)
        .env("SLOW_EVENTS", workspace.slow_event_log())
        .env("OPEN_GATEWAY_URL", open_gateway.url(""))
        .env("CHROMIUM", &chromium)
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::fs::File::create(&output).unwrap()))
        .stderr(Stdio::from(
            std::fs::File::create(workspace.path("console.err")).unwrap(),
        ))
        .spawn()
        .expect("node runs");
    let status = wait_exit(&mut browser, Duration::from_secs(240));
    if status.is_none() {
        let _ = browser.kill();
        let _ = browser.wait();
    }
    let steps = std::fs::read_to_string(&output).unwrap_or_default();
    let errors = std::fs::read_to_string(workspace.path("console.err")).unwrap_or_default();
    assert!(
        status.is_some_and(|s| s.success()),
        "the console script failed ({status:?}):\n{steps}\n{errors}\n--- gateway log:\n{}",
        gateway.log_text()
    );
    assert!(steps.contains("all console checks passed"), "{steps}");
    for page in [
        "login",
        "servers",
        "catalog",
        "activity",
        "approvals",
        "sessions",
        "metrics",
        "config",
    ] {
        assert!(
            screenshots.join(format!("{page}.png")).is_file(),
            "no screenshot of {page}"
        );
    }
    // The console's calls went through the session log like any other.
    let events = workspace.session_events();
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool/result" && e["tool"] == "mcp__kv__set"),
        "the try-it call is in a session log"
    );
    let children = descendants(gateway.pid());
    let status = gateway.signal_and_wait(libc::SIGTERM, Duration::from_secs(20));
    assert!(status.is_some(), "the gateway stops on SIGTERM");
    assert!(
        eventually(Duration::from_secs(10), || !children
            .iter()
            .any(|&c| alive(c))),
        "no upstream left behind: {children:?}"
    );
}

/// The console's "People signed in" panel in a browser (tests/ui/sign_ins.mjs): a person
/// signed in to a per-user server (issue 40) is listed, with no token on the page, and
/// the operator revokes the sign-in with its button.
#[test]
fn an_operator_sees_and_revokes_a_persons_sign_in_in_the_browser() {
    use mcp_gateway_tests::idp::IdentityProvider;
    use mcp_gateway_tests::whoami::Whoami;
    use serde_json::json;

    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let whoami = Whoami::start(dir.path(), &idp);
    let workspace = Workspace::new(&format!(
        "[listen]\ntokens = [{{ token = {}, operator = true }}]\n[servers.who]\nurl = {}\n\
         [servers.who.oauth]\nper_user = true\n",
        toml_str(TOKEN),
        toml_str(whoami.url()),
    ))
    .with_env(
        "MCP_GATEWAY_TOKEN_KEY",
        "7d1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c",
    );
    let gateway = workspace.serve_http(&[]);
    let mut args = gateway.client_args("http", "/mcp");
    args.extend(
        [
            "--header",
            &format!("Authorization=Bearer {TOKEN}"),
            "--elicit",
            "browse",
            "--browse-as",
            "alice",
        ]
        .map(str::to_owned),
    );
    let run = python_client(
        &args,
        &json!([{"action": "call_tool", "name": "mcp__who__sign_in", "arguments": {}}]),
    );
    assert_eq!(run["ok"], true, "{run:#}\n{}", gateway.log_text());
    let identity = run["elicitations"][0]["browsed"]["body"]
        .as_str()
        .and_then(|page| page.split(" as ").nth(1))
        .and_then(|rest| rest.split('.').next())
        .unwrap_or_else(|| panic!("the callback page names the identity: {run:#}"))
        .to_owned();

    let output = Command::new("node")
        .arg(repo().join("tests/ui/sign_ins.mjs"))
        .env("GATEWAY_URL", gateway.url(""))
        .env("GATEWAY_TOKEN", TOKEN)
        .env("IDENTITY", &identity)
        .env("SECRETS", whoami.tokens().join("\n"))
        .env("CHROMIUM", &chromium)
        .stdin(Stdio::null())
        .output()
        .expect("node runs");
    let steps = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && steps.contains("all sign-in checks passed"),
        "{steps}\n{}\n--- gateway log:\n{}",
        String::from_utf8_lossy(&output.stderr),
        gateway.log_text()
    );
    let status = workspace.cli(&["auth", "status"]);
    assert_eq!(
        String::from_utf8_lossy(&status.stdout).trim(),
        "who\tper_user\tnobody has signed in",
        "revoked from the console"
    );
}

/// A per-user sign-in in a real browser (tests/ui/sign_in_page.mjs): the person types
/// their gateway token into the gateway's page, goes through the authorization server and
/// comes back signed in, the sign-in's cookie kept by Chromium's own rules (SameSite, path);
/// their call then reaches the server as them. The same browser on another person's link
/// is refused at the gateway's page, and that person's sign-in stores nothing.
#[test]
fn a_person_completes_their_own_sign_in_in_the_browser_and_no_one_elses() {
    use mcp_gateway_tests::idp::IdentityProvider;
    use mcp_gateway_tests::whoami::Whoami;
    use serde_json::json;

    const ALICE: &str = "alice-browser-token-0001";
    const BOB: &str = "bob-browser-token-000002";
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let whoami = Whoami::start(dir.path(), &idp);
    let workspace = Workspace::new(&format!(
        "[listen]\ntokens = [{}, {}]\n[servers.who]\nurl = {}\n[servers.who.oauth]\nper_user = true\n",
        toml_str(ALICE),
        toml_str(BOB),
        toml_str(whoami.url()),
    ))
    .with_env(
        "MCP_GATEWAY_TOKEN_KEY",
        "7d1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c",
    );
    let gateway = workspace.serve_http(&[]);
    let call = |token: &str, tool: &str| {
        let mut args = gateway.client_args("http", "/mcp");
        args.extend(
            [
                "--header",
                &format!("Authorization=Bearer {token}"),
                "--elicit",
                "none",
            ]
            .map(str::to_owned),
        );
        let run = python_client(
            &args,
            &json!([{"action": "call_tool", "name": tool, "arguments": {}}]),
        );
        run["results"][0]["result"].clone()
    };
    let link = |result: &serde_json::Value| {
        assert_eq!(error_code(result), Some("SIGN_IN_REQUIRED"), "{result:#}");
        result["_meta"]["mcp-gateway/error"]["detail"]["url"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let in_browser = |url: &str, token: &str, expect: &str| {
        let output = Command::new("node")
            .arg(repo().join("tests/ui/sign_in_page.mjs"))
            .env("SIGN_IN_URL", url)
            .env("GATEWAY_TOKEN", token)
            .env("EXPECT", expect)
            .env("CHROMIUM", &chromium)
            .stdin(Stdio::null())
            .output()
            .expect("node runs");
        let steps = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success() && steps.contains("all sign-in page checks passed"),
            "{steps}\n{}\n--- gateway log:\n{}",
            String::from_utf8_lossy(&output.stderr),
            gateway.log_text()
        );
    };

    let alices = link(&call(ALICE, "mcp__who__sign_in"));
    in_browser(&alices, ALICE, "Signed in to `who`");
    // Her next call of the sign-in tool connects as her, and the server's tools come.
    let again = call(ALICE, "mcp__who__sign_in");
    assert!(
        result_text(&again).contains("Signed in to `who`"),
        "{again:#}"
    );
    let mut last = serde_json::Value::Null;
    assert!(
        eventually(Duration::from_secs(30), || {
            last = call(ALICE, "mcp__who__whoami");
            last["structuredContent"]["subject"] == "alice"
        }),
        "Alice's call never reached the server as her: {last:#}"
    );

    let bobs = link(&call(BOB, "mcp__who__whoami"));
    in_browser(&bobs, ALICE, "SIGN_IN_WRONG_PERSON");
    link(&call(BOB, "mcp__who__whoami"));
}
