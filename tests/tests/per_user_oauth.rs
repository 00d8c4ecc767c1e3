//! Issue 40, per-user upstream credentials, between real processes: the test identity
//! provider (tests/servers/idp.mjs, npm `oidc-provider`) is the authorization server of a
//! real streamable HTTP MCP server (tests/servers/whoami.py, the official Python SDK) that
//! verifies each bearer token and answers with its subject. The gateway's callers are told
//! apart by their static tokens; each signs in at the provider as a person of their own
//! (its `login_hint`), through the client:
//!
//! - a 2025-11-25 client gets `elicitation/create` with `mode: "url"`, and a 2026-07-28
//!   client the same question inside an `InputRequiredResult`; the official Python SDK
//!   client follows the URL as a browser would (tests/python/client.py `--elicit browse`),
//!   the gateway's `/oauth/callback` stores the token, and the waiting call completes as
//!   that person;
//! - a client without URL elicitation gets `SIGN_IN_REQUIRED` with the URL, and its next
//!   call after the sign-in goes through;
//! - every call reaches the server as its own caller, concurrently;
//! - a wrong, replayed or another identity's `state`, and an authorization server's
//!   refusal, store nothing and complete no call with anyone's token;
//! - the token files hold no token in clear text;
//! - a 2025-11-25 client's resource subscription (the server is spoken to at 2026-07-28)
//!   is a `subscriptions/listen` stream on the person's own connection, which ends when
//!   that person unsubscribes, whoever else is still subscribed; spoken to in a 2025-11-25
//!   session, the server holds the person's `resources/subscribe` until the gateway
//!   unsubscribes on the person's connection, when they unsubscribe or their session ends,
//!   and the connection is not closed as idle while it holds one;
//! - with replicas sharing Redis behind HAProxy, a person signs in through one replica
//!   (the browser coming back to another) and calls through the others as themselves, Redis holds no token in clear text, and an
//!   expired token is refreshed exactly once while 32 calls are in flight on three
//!   replicas.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use mcp_gateway_tests::cluster::{Haproxy, Redis, ready};
use mcp_gateway_tests::idp::IdentityProvider;
use mcp_gateway_tests::whoami::Whoami;
use mcp_gateway_tests::*;
use serde_json::{Value, json};

const KEY: &str = "4f1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c";
const WHOAMI: &str = "mcp__who__whoami";
const SIGN_IN: &str = "mcp__who__sign_in";

/// A caller of the gateway: its static token, and the person it signs in as upstream.
struct Person {
    token: &'static str,
    account: &'static str,
}

const ALICE: Person = Person {
    token: "alice-gateway-token-0001",
    account: "alice",
};
const BOB: Person = Person {
    token: "bob-gateway-token-000002",
    account: "bob",
};
const CAROL: Person = Person {
    token: "carol-gateway-token-0003",
    account: "carol",
};
const DAVE: Person = Person {
    token: "dave-gateway-token-00004",
    account: "dave",
};
const EVE: Person = Person {
    token: "eve-gateway-token-000005",
    account: "eve",
};
const RUTH: Person = Person {
    token: "ruth-gateway-token-00006",
    account: "refuse",
};
const EVERYONE: [&Person; 6] = [&ALICE, &BOB, &CAROL, &DAVE, &EVE, &RUTH];

/// Everyone's a caller, and Alice the gateway's operator besides (she uses the console).
fn gateway_workspace(whoami: &Whoami) -> Workspace {
    let tokens: Vec<String> = EVERYONE
        .iter()
        .map(|p| match p.account {
            "alice" => format!("{{ token = {}, operator = true }}", toml_str(p.token)),
            _ => toml_str(p.token),
        })
        .collect();
    Workspace::new(&format!(
        "[listen]\ntokens = [{}]\n[servers.who]\nurl = {}\n[servers.who.oauth]\nper_user = true\n",
        tokens.join(", "),
        toml_str(whoami.url()),
    ))
    .with_env("MCP_GATEWAY_TOKEN_KEY", KEY)
}

/// client.py's arguments for `person` over streamable HTTP: `mode` is `legacy`
/// (2025-11-25) or `auto` (2026-07-28); `elicit` what it does with elicitations.
fn client(gateway: &Gateway, person: &Person, mode: &str, elicit: &str) -> Vec<String> {
    let mut args = gateway.client_args("http", "/mcp");
    args.extend(
        [
            "--header",
            &format!("Authorization=Bearer {}", person.token),
            "--mode",
            mode,
            "--elicit",
            elicit,
            "--browse-as",
            person.account,
            "--timeout",
            "60",
        ]
        .map(str::to_owned),
    );
    args
}

fn call(tool: &str) -> Value {
    json!({"action": "call_tool", "name": tool, "arguments": {}})
}

fn subject(result: &Value) -> String {
    result["structuredContent"]["subject"]
        .as_str()
        .unwrap_or_else(|| panic!("no subject in {result:#}"))
        .to_owned()
}

/// The one elicitation of `run`, which must be a URL one, to the gateway's sign-in page,
/// that was browsed to the end.
fn browsed_sign_in(run: &Value) -> &Value {
    let elicitations = run["elicitations"].as_array().unwrap();
    assert_eq!(elicitations.len(), 1, "{run:#}");
    let asked = &elicitations[0];
    assert_eq!(asked["params"]["mode"], "url", "{run:#}");
    assert!(
        asked["params"]["url"]
            .as_str()
            .unwrap()
            .contains("/oauth/sign-in?state="),
        "{run:#}"
    );
    &asked["browsed"]
}

fn sealed_files(workspace: &Workspace) -> Vec<PathBuf> {
    let dir = workspace.data_home().join("mcp-gateway/oauth/users/who");
    std::fs::read_dir(dir)
        .map(|entries| entries.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default()
}

#[test]
fn each_person_signs_in_through_their_client_and_reaches_the_server_as_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let whoami = Whoami::start(dir.path(), &idp);
    let workspace = gateway_workspace(&whoami);
    let gateway = workspace.serve_http(&[]);
    let auth = format!("Bearer {}", ALICE.token);
    let (_, _, healthz) = http_request(
        gateway.address,
        "GET",
        "/healthz",
        &[("Authorization", &auth)],
        b"",
    );
    let healthz: Value = serde_json::from_str(&healthz).unwrap();
    assert_eq!(
        healthz["upstreams"]["who"]["state"], "per_user",
        "{healthz:#}"
    );

    // Nobody has signed in: the server offers its sign-in. Alice (2025-11-25) calls it,
    // is asked to open the URL, signs in, and the call completes; the server's own tools
    // replace the sign-in tool and reach her as herself.
    let run = python_client(
        &client(&gateway, &ALICE, "legacy", "browse"),
        &json!([
            {"action": "list_tools"},
            call(SIGN_IN),
            {"action": "wait_tool", "name": WHOAMI, "timeout_ms": 30000},
            call(WHOAMI),
        ]),
    );
    assert_eq!(run["ok"], true, "{run:#}\n{}", gateway.log_text());
    assert_eq!(tool_names(&run["results"][0]["result"]), [SIGN_IN]);
    assert!(
        result_text(&run["results"][1]["result"]).contains("Signed in to `who`"),
        "{run:#}"
    );
    let browsed = browsed_sign_in(&run);
    assert_eq!(browsed["status"], 200, "{run:#}");
    assert!(
        browsed["url"]
            .as_str()
            .unwrap()
            .contains("/oauth/callback?"),
        "{run:#}"
    );
    assert!(
        browsed["body"]
            .as_str()
            .unwrap()
            .contains("Signed in to `who` as token:"),
        "{run:#}"
    );
    assert_eq!(subject(&run["results"][3]["result"]), "alice");
    // The client is told the sign-in it was sent to is done.
    let id = run["elicitations"][0]["params"]["elicitationId"].clone();
    assert!(
        run["notifications"].as_array().unwrap().iter().any(|n| {
            n["method"] == "notifications/elicitation/complete"
                && n["params"]["elicitationId"] == id
        }),
        "{run:#}"
    );

    // Replayed: the callback Alice's browser reached, once more, stores nothing.
    let callback = browsed["url"].as_str().unwrap().to_owned();
    let path = callback.split_once(&gateway.address.to_string()).unwrap().1;
    let (status, _, body) = http_get(gateway.address, path);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("SIGN_IN_STATE_UNKNOWN"), "{body}");
    // Wrong: a state nobody was given.
    let (status, _, body) = http_get(gateway.address, "/oauth/callback?code=c&state=made-up");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("SIGN_IN_STATE_UNKNOWN"), "{body}");

    // At once: Bob (2025-11-25) and Carol (2026-07-28: the question comes inside an
    // InputRequiredResult) sign in, while Alice calls on both revisions; every call
    // reaches the server as its own caller.
    let many = |n: usize| json!([{"action": "parallel", "actions": vec![call(WHOAMI); n]}]);
    let runs: Vec<(&str, Child)> = vec![
        (
            "bob",
            spawn_python_client(&client(&gateway, &BOB, "legacy", "browse"), &many(4)),
        ),
        (
            "carol",
            spawn_python_client(&client(&gateway, &CAROL, "auto", "browse"), &many(4)),
        ),
        (
            "alice",
            spawn_python_client(&client(&gateway, &ALICE, "auto", "browse"), &many(4)),
        ),
        (
            "alice",
            spawn_python_client(&client(&gateway, &ALICE, "legacy", "browse"), &many(4)),
        ),
    ];
    for (who, child) in runs {
        let run = python_client_output(child);
        assert_eq!(run["ok"], true, "{who}: {run:#}\n{}", gateway.log_text());
        for entry in run["results"][0]["result"].as_array().unwrap() {
            assert_eq!(subject(&entry["result"]), who, "{run:#}");
        }
        if who == "alice" {
            assert!(
                run["elicitations"].as_array().unwrap().is_empty(),
                "{run:#}"
            );
        } else {
            // Four calls at once, one sign-in.
            assert_eq!(browsed_sign_in(&run)["status"], 200, "{run:#}");
        }
        if who == "carol" {
            assert_eq!(run["server"]["protocol_version"], "2026-07-28", "{run:#}");
        }
    }

    // Dave's client cannot open URLs: a clear error with the URL; once he has opened it
    // himself, his next call goes through as him.
    let run = python_client(
        &client(&gateway, &DAVE, "legacy", "none"),
        &json!([call(WHOAMI)]),
    );
    let refused = &run["results"][0]["result"];
    assert_eq!(error_code(refused), Some("SIGN_IN_REQUIRED"), "{run:#}");
    let url = refused["_meta"]["mcp-gateway/error"]["detail"]["url"]
        .as_str()
        .unwrap_or_else(|| panic!("no URL in {refused:#}"))
        .to_owned();
    assert!(result_text(refused).contains(&url), "{refused:#}");
    assert!(open_as(&url, &DAVE));
    let run = python_client(
        &client(&gateway, &DAVE, "legacy", "none"),
        &json!([call(WHOAMI)]),
    );
    assert_eq!(subject(&run["results"][0]["result"]), "dave", "{run:#}");

    // Another identity's state: Bob's credentials presented with Eve's sign-in are
    // refused, and the sign-in is spent: Eve's browser then stores nothing either.
    let run = python_client(
        &client(&gateway, &EVE, "legacy", "none"),
        &json!([call(WHOAMI)]),
    );
    let url = run["results"][0]["result"]["_meta"]["mcp-gateway/error"]["detail"]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    let state = url
        .split(['?', '&'])
        .find_map(|pair| pair.strip_prefix("state="))
        .unwrap()
        .to_owned();
    let (status, _, body) = http_request(
        gateway.address,
        "GET",
        &format!("/oauth/callback?code=c&state={state}"),
        &[("Authorization", &format!("Bearer {}", BOB.token))],
        b"",
    );
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("SIGN_IN_STATE_FOREIGN"), "{body}");
    assert!(!open_as(&url, &EVE), "a spent state signed Eve in");
    let run = python_client(
        &client(&gateway, &EVE, "legacy", "none"),
        &json!([call(WHOAMI)]),
    );
    assert_eq!(
        error_code(&run["results"][0]["result"]),
        Some("SIGN_IN_REQUIRED"),
        "Eve has no token: {run:#}"
    );

    // The authorization server refuses: the waiting call fails saying so, and nothing
    // is stored.
    let run = python_client(
        &client(&gateway, &RUTH, "legacy", "browse"),
        &json!([call(WHOAMI)]),
    );
    let failed = &run["results"][0]["result"];
    assert_eq!(error_code(failed), Some("SIGN_IN_FAILED"), "{run:#}");
    assert!(result_text(failed).contains("access_denied"), "{failed:#}");
    assert_eq!(browsed_sign_in(&run)["status"], 400, "{run:#}");

    // Operations: `auth status` lists each person's sign-in, never a token.
    let status = workspace.cli(&["auth", "status"]);
    let listed = String::from_utf8_lossy(&status.stdout).into_owned();
    let signed_in = |listed: &str| {
        let lines: Vec<&str> = listed.lines().collect();
        assert!(
            lines.iter().all(|l| l.starts_with("who/token:")),
            "{listed}"
        );
        lines.iter().filter(|l| l.contains("\tsigned_in\t")).count()
    };
    assert_eq!(
        signed_in(&listed),
        4,
        "{listed}{}",
        String::from_utf8_lossy(&status.stderr)
    );

    // The console lists them too, and revokes Bob's: his next call asks him again.
    let (cookie, csrf) = console_login(&gateway, ALICE.token);
    let (status, _, body) = http_request(
        gateway.address,
        "GET",
        "/ui/api/sign-ins",
        &[("Cookie", &cookie)],
        b"",
    );
    assert_eq!(status, 200, "{body}");
    let listed: Value = serde_json::from_str(&body).unwrap();
    let people = listed["servers"][0]["people"].as_array().unwrap().clone();
    assert_eq!(listed["servers"][0]["server"], "who", "{listed:#}");
    assert_eq!(
        people.iter().filter(|p| p["state"] == "signed_in").count(),
        4,
        "{listed:#}"
    );
    assert!(!body.contains("access_token"), "{body}");
    let bob = identity_of(&BOB);
    assert!(
        people.iter().any(|p| p["identity"] == bob.as_str()),
        "{listed:#}"
    );
    let (status, _, body) = http_request(
        gateway.address,
        "POST",
        "/ui/api/sign-ins/who/revoke",
        &[
            ("Cookie", &cookie),
            ("X-CSRF-Token", &csrf),
            ("Content-Type", "application/json"),
        ],
        json!({"identity": bob}).to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    let run = python_client(
        &client(&gateway, &BOB, "legacy", "none"),
        &json!([call(WHOAMI)]),
    );
    assert_eq!(
        error_code(&run["results"][0]["result"]),
        Some("SIGN_IN_REQUIRED"),
        "{run:#}"
    );

    // `auth logout --server who --user` signs Dave out (the provider revokes his tokens).
    let dave = identity_of(&DAVE);
    let logout = workspace.cli(&["auth", "logout", "--server", "who", "--user", &dave]);
    assert!(
        String::from_utf8_lossy(&logout.stdout).contains("the server revoked the tokens"),
        "{}{}",
        String::from_utf8_lossy(&logout.stdout),
        String::from_utf8_lossy(&logout.stderr)
    );
    let run = python_client(
        &client(&gateway, &DAVE, "legacy", "none"),
        &json!([call(WHOAMI)]),
    );
    assert_eq!(
        error_code(&run["results"][0]["result"]),
        Some("SIGN_IN_REQUIRED"),
        "{run:#}"
    );

    // Alice and Carol remain signed in, each in a sealed file that holds none of the
    // tokens the server saw; no token in the log or the session log either.
    let status = workspace.cli(&["auth", "status"]);
    assert_eq!(signed_in(&String::from_utf8_lossy(&status.stdout)), 2);
    let files = sealed_files(&workspace);
    assert!(files.len() >= 2, "{files:?}");
    let tokens = whoami.tokens();
    assert!(tokens.len() >= 4, "{tokens:?}");
    let log = gateway.log_text();
    // The session log names whose sign-in each call used, and the server.
    let calls: Vec<Value> = workspace
        .session_events()
        .into_iter()
        .filter(|e| e["type"] == "tool/call" && e["tool"] == WHOAMI)
        .collect();
    assert!(!calls.is_empty());
    for call in &calls {
        assert_eq!(call["server"], "who", "{call}");
        assert!(
            call["identity"].as_str().unwrap().starts_with("token:"),
            "{call}"
        );
    }
    let events = serde_json::to_string(&workspace.session_events()).unwrap();
    for token in &tokens {
        for file in &files {
            let bytes = std::fs::read(file).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(token.as_str()),
                "{} holds a token in clear",
                file.display()
            );
        }
        assert!(!log.contains(token.as_str()), "a token is in the log");
        assert!(
            !events.contains(token.as_str()),
            "a token is in the session log"
        );
    }
}

/// The identity the gateway names `person` by: `token:` and the first 128 bits of the
/// SHA-256 of their token, as the callback page says it.
fn identity_of(person: &Person) -> String {
    let output = Command::new("sh")
        .args([
            "-c",
            "printf %s \"$1\" | sha256sum | cut -c1-32",
            "sh",
            person.token,
        ])
        .output()
        .unwrap();
    format!("token:{}", String::from_utf8_lossy(&output.stdout).trim())
}

/// Logs in to the console with `token`: its cookie (`name=value`) and CSRF token.
fn console_login(gateway: &Gateway, token: &str) -> (String, String) {
    let (status, headers, body) = http_request(
        gateway.address,
        "POST",
        "/ui/api/login",
        &[("Content-Type", "application/json")],
        json!({"token": token}).to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    let cookie = headers
        .iter()
        .find(|(name, _)| name == "set-cookie")
        .and_then(|(_, value)| value.split(';').next())
        .unwrap()
        .to_owned();
    let csrf = serde_json::from_str::<Value>(&body).unwrap()["csrf"]
        .as_str()
        .unwrap()
        .to_owned();
    (cookie, csrf)
}

/// Opens `url` as `person`'s browser would (tests/python/browser.py: their account at the
/// provider, their token typed into the gateway's form): whether the page it ended at (the
/// gateway's callback) said it worked.
fn open_as(url: &str, person: &Person) -> bool {
    browse(url, person.account, Some(person.token))["status"]
        .as_u64()
        .is_some_and(|status| status < 400)
}

/// What `account`'s browser, holding the gateway token `token`, ended at after opening
/// `url` (tests/python/browser.py): `{"status", "url", "body"}`.
fn browse(url: &str, account: &str, token: Option<&str>) -> Value {
    browse_until(url, account, token, None)
}

/// [`browse`], stopping before a redirect to the path `stop_at` (status 0, its URL).
fn browse_until(url: &str, account: &str, token: Option<&str>, stop_at: Option<&str>) -> Value {
    let mut command = Command::new(python());
    command
        .arg(repo().join("tests/python/browser.py"))
        .args([url, "--as", account]);
    if let Some(token) = token {
        command.args(["--token", token]);
    }
    if let Some(path) = stop_at {
        command.args(["--stop-at", path]);
    }
    let output = command.output().unwrap();
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "browser.py: {error}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// Every string value in `redis` (the records among them), as text.
fn redis_values(redis: &Redis) -> Vec<(String, String)> {
    let port = redis.address.port().to_string();
    let cli = |args: &[&str]| {
        let output = Command::new("redis-cli")
            .args(["-p", &port, "--raw"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    cli(&["--scan"])
        .lines()
        .filter(|key| cli(&["TYPE", key]).trim() == "string")
        .map(|key| (key.to_owned(), cli(&["GET", key])))
        .collect()
}

/// The `exp` claim of a JWT (not verified: the test only reads when it ends).
fn expiry(token: &str) -> u64 {
    let payload = token.split('.').nth(1).unwrap();
    let bytes = base64_url(payload);
    let claims: Value = serde_json::from_slice(&bytes).unwrap();
    claims["exp"].as_u64().unwrap()
}

fn base64_url(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::new();
    for c in text.bytes().filter(|c| *c != b'=') {
        let value = ALPHABET.iter().position(|a| *a == c).unwrap() as u32;
        bits = (bits << 6) | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    out
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn replicas_share_each_persons_sign_in_through_redis_and_refresh_it_once() {
    let dir = tempfile::tempdir().unwrap();
    // Access tokens live 12 s: long enough to sign in and call, short enough to expire.
    let idp = IdentityProvider::start(dir.path(), "k1", 12);
    let whoami = Whoami::start(dir.path(), &idp);
    let redis = Redis::start();
    // Browsers come back to the second replica, whichever began the sign-in.
    let addresses: Vec<SocketAddr> = (0..3).map(|_| free_address()).collect();
    let config = format!(
        "[listen]\ntokens = [{}]\npublic_url = {}\n[cluster]\nredis_url = {}\n\
         [servers.who]\nurl = {}\n[servers.who.oauth]\nper_user = true\n",
        toml_str(ALICE.token),
        toml_str(format!("http://{}", addresses[1])),
        toml_str(redis.url()),
        toml_str(whoami.url()),
    );
    let replicas: Vec<(Workspace, Gateway)> = addresses
        .iter()
        .map(|address| {
            let workspace = Workspace::new(&config).with_env("MCP_GATEWAY_TOKEN_KEY", KEY);
            let gateway = workspace.serve_http_at(*address, &[]);
            (workspace, gateway)
        })
        .collect();
    for (_, gateway) in &replicas {
        assert!(
            eventually(PATIENCE, || ready(gateway)),
            "{}",
            gateway.log_text()
        );
    }
    let backends: Vec<SocketAddr> = replicas.iter().map(|(_, g)| g.address).collect();
    let haproxy = Haproxy::start(dir.path(), &backends);
    let logs = || {
        replicas
            .iter()
            .map(|(_, g)| g.log_text())
            .collect::<Vec<_>>()
            .join("\n----\n")
    };

    // Alice signs in through the first replica; her browser comes back to the second,
    // which completes the sign-in; her call on the first goes on.
    let first = &replicas[0].1;
    let run = python_client(
        &client(first, &ALICE, "legacy", "browse"),
        &json!([call(SIGN_IN), {"action": "wait_tool", "name": WHOAMI, "timeout_ms": 30000}]),
    );
    assert_eq!(run["ok"], true, "{run:#}\n{}", logs());
    let browsed = browsed_sign_in(&run);
    assert_eq!(browsed["status"], 200, "{run:#}");
    assert!(
        browsed["url"]
            .as_str()
            .unwrap()
            .starts_with(&format!("http://{}/oauth/callback", addresses[1])),
        "{run:#}"
    );
    assert!(
        result_text(&run["results"][0]["result"]).contains("Signed in to `who`"),
        "{run:#}"
    );

    // She calls through the others, directly and through HAProxy: as herself, never asked.
    let mut through = vec![];
    for (_, gateway) in &replicas[1..] {
        through.push(client(gateway, &ALICE, "legacy", "none"));
    }
    let mut balanced = haproxy.client_args("/mcp");
    balanced.extend(client(first, &ALICE, "legacy", "none").into_iter().skip(4));
    through.push(balanced);
    for args in &through {
        let run = python_client(
            args,
            &json!([{"action": "wait_tool", "name": WHOAMI, "timeout_ms": 30000}, call(WHOAMI), call(WHOAMI), call(WHOAMI)]),
        );
        assert_eq!(run["ok"], true, "{run:#}\n{}", logs());
        for index in 1..4 {
            assert_eq!(
                subject(&run["results"][index]["result"]),
                "alice",
                "{run:#}"
            );
        }
    }

    // Redis holds her sign-in, sealed: no token the server saw is in any value, and no
    // replica wrote a token file.
    let values = redis_values(&redis);
    assert!(
        values
            .iter()
            .any(|(key, _)| key.contains(":record:oauth/who/")),
        "{:?}",
        values.iter().map(|(k, _)| k).collect::<Vec<_>>()
    );
    let seen = whoami.tokens();
    for token in &seen {
        for (key, value) in &values {
            assert!(
                !value.contains(token.as_str()),
                "{key} holds a token in clear"
            );
        }
    }
    for (workspace, _) in &replicas {
        assert!(
            !workspace
                .data_home()
                .join("mcp-gateway/oauth/users")
                .exists()
        );
    }
    // `auth status` reads the sign-ins from Redis too.
    let status = replicas[2].0.cli(&["auth", "status"]);
    let listed = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(
        listed.starts_with(&format!("who/{}\tsigned_in\t", identity_of(&ALICE))),
        "{listed}{}",
        String::from_utf8_lossy(&status.stderr)
    );

    // Once the token has expired, 32 calls at once on three replicas: one refresh.
    let last = seen.last().unwrap().clone();
    let ends = expiry(&last);
    assert!(
        eventually(Duration::from_secs(30), || now_secs() > ends),
        "the access token never expired"
    );
    let before = whoami.tokens().len();
    let runs: Vec<Child> = replicas
        .iter()
        .zip([11, 11, 10])
        .map(|((_, gateway), n)| {
            spawn_python_client(
                &client(gateway, &ALICE, "legacy", "none"),
                &json!([{"action": "parallel", "actions": vec![call(WHOAMI); n]}]),
            )
        })
        .collect();
    for child in runs {
        let run = python_client_output(child);
        assert_eq!(run["ok"], true, "{run:#}\n{}", logs());
        for entry in run["results"][0]["result"].as_array().unwrap() {
            assert_eq!(subject(&entry["result"]), "alice", "{run:#}");
        }
    }
    let fresh = &whoami.tokens()[before..];
    assert_eq!(
        fresh.len(),
        1,
        "refreshed {} times: {}",
        fresh.len(),
        logs()
    );
    assert!(expiry(&fresh[0]) > ends);
}

/// The number of token exchanges the provider has done.
fn exchanges(idp: &IdentityProvider) -> u64 {
    let (status, _, body) = http_get(idp.address, "/test/exchanges");
    assert_eq!(status, 200, "{body}");
    body.trim().parse().unwrap()
}

#[test]
fn token_exchange_reaches_the_server_as_each_caller_with_no_sign_in() {
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let whoami = Whoami::start(dir.path(), &idp);
    let address = free_address();
    let resource = format!("http://{address}/mcp");
    let workspace = Workspace::new(&format!(
        "[listen.oauth]\nissuer = {}\naudience = {}\n[servers.who]\nurl = {}\n\
         [servers.who.oauth]\ngrant = \"token_exchange\"\nclient_id = \"exchanger\"\n\
         client_secret = \"exchanger-secret\"\nscopes = [\"mcp:read\"]\n",
        toml_str(idp.issuer()),
        toml_str(&resource),
        toml_str(whoami.url()),
    ))
    .with_env("MCP_GATEWAY_TOKEN_KEY", KEY);
    let gateway = workspace.serve_http_at(address, &[]);
    // The callers' own tokens for the gateway, from the provider.
    let token_of = |subject: &str| {
        idp.forge(
            &json!({"sub": subject, "aud": resource, "scope": "mcp:read"}),
            "k1",
            None,
        )
    };
    let args = |subject: &str, mode: &str| {
        let mut args = gateway.client_args("http", "/mcp");
        args.extend(
            [
                "--header",
                &format!("Authorization=Bearer {}", token_of(subject)),
                "--mode",
                mode,
                "--elicit",
                "accept",
            ]
            .map(str::to_owned),
        );
        args
    };

    // Nobody has called yet: the first call (the sign-in tool) exchanges Alice's token and
    // connects; the server's tools are then listed.
    let run = python_client(
        &args("alice", "legacy"),
        &json!([call(SIGN_IN), {"action": "wait_tool", "name": WHOAMI, "timeout_ms": 30000}]),
    );
    assert_eq!(run["ok"], true, "{run:#}\n{}", gateway.log_text());

    // Alice (2025-11-25) and Bob (2026-07-28) at once: each reaches the server as
    // themselves, nobody is asked anything, and each identity's token is exchanged once.
    let many = json!([{"action": "parallel", "actions": vec![call(WHOAMI); 4]}, call(WHOAMI)]);
    let runs = [
        (
            "alice",
            spawn_python_client(&args("alice", "legacy"), &many),
        ),
        ("bob", spawn_python_client(&args("bob", "auto"), &many)),
    ];
    for (who, child) in runs {
        let run = python_client_output(child);
        assert_eq!(run["ok"], true, "{who}: {run:#}\n{}", gateway.log_text());
        for entry in run["results"][0]["result"].as_array().unwrap() {
            assert_eq!(subject(&entry["result"]), who, "{run:#}");
        }
        assert_eq!(subject(&run["results"][1]["result"]), who, "{run:#}");
        assert!(
            run["elicitations"].as_array().unwrap().is_empty(),
            "{run:#}"
        );
    }
    assert_eq!(
        exchanges(&idp),
        2,
        "one exchange per identity, then the cached token"
    );

    // The tokens the server saw are not the callers' own, and none is kept in clear.
    let seen = whoami.tokens();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for file in sealed_files(&workspace) {
        let bytes = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
        for token in &seen {
            assert!(
                !bytes.contains(token.as_str()),
                "{} holds a token",
                file.display()
            );
        }
    }
}

#[test]
fn over_stdio_the_local_user_signs_in_through_the_client_and_calls_as_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let whoami = Whoami::start(dir.path(), &idp);
    let workspace = Workspace::new(&format!(
        "[servers.who]\nurl = {}\n[servers.who.oauth]\nper_user = true\n",
        toml_str(whoami.url()),
    ));
    // The gateway runs as the client's child: it gets the key and data folder from here.
    let mut args = python_stdio_args(&workspace, &[]);
    args.extend(
        [
            "--env",
            &format!("MCP_GATEWAY_TOKEN_KEY={KEY}"),
            "--env",
            &format!("XDG_DATA_HOME={}", workspace.data_home().display()),
            "--env",
            "USER=carol-at-her-desk",
            "--elicit",
            "browse",
            "--browse-as",
            "carol",
        ]
        .map(str::to_owned),
    );
    let run = python_client(
        &args,
        &json!([
            call(SIGN_IN),
            {"action": "wait_tool", "name": WHOAMI, "timeout_ms": 30000},
            call(WHOAMI),
        ]),
    );
    assert_eq!(run["ok"], true, "{run:#}");
    let browsed = browsed_sign_in(&run);
    assert_eq!(browsed["status"], 200, "{run:#}");
    assert!(
        browsed["body"]
            .as_str()
            .unwrap()
            .contains("as local:carol-at-her-desk"),
        "{run:#}"
    );
    assert_eq!(subject(&run["results"][2]["result"]), "carol");
    assert_eq!(sealed_files(&workspace).len(), 1);
}

/// A 2025-11-25 client's subscription to a resource of a per-user server spoken to at
/// 2026-07-28 (whoami.py answers `server/discover`, and has no `resources/subscribe`)
/// becomes a `subscriptions/listen` of that resource on the person's own connection: the
/// person hears of its update, and unsubscribes. The connection does not count as idle
/// while it listens.
#[test]
fn a_2025_clients_subscription_to_a_per_user_server_of_2026_07_28_hears_it() {
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let whoami = Whoami::start(dir.path(), &idp);
    let workspace = Workspace::new(&format!(
        "[servers.who]\nurl = {}\nrewrite_uris = false\n[servers.who.oauth]\nper_user = true\n\
         idle_disconnect_secs = 1\n",
        toml_str(whoami.url()),
    ));
    let mut args = python_stdio_args(&workspace, &[]);
    args.extend(
        [
            "--env",
            &format!("MCP_GATEWAY_TOKEN_KEY={KEY}"),
            "--env",
            &format!("XDG_DATA_HOME={}", workspace.data_home().display()),
            "--env",
            "USER=carol-at-her-desk",
            "--mode",
            "legacy",
            "--elicit",
            "browse",
            "--browse-as",
            "carol",
        ]
        .map(str::to_owned),
    );
    let run = python_client(
        &args,
        &json!([
            call(SIGN_IN),
            {"action": "wait_tool", "name": WHOAMI, "timeout_ms": 30000},
            {"action": "subscribe", "uri": "whoami://watched"},
            {"action": "sleep", "ms": 2500},
            call("mcp__who__touch_watched"),
            {"action": "wait_notification", "method": "notifications/resources/updated"},
            {"action": "unsubscribe", "uri": "whoami://watched"},
        ]),
    );
    assert_eq!(run["ok"], true, "{run:#}");
    assert_eq!(run["server"]["protocol_version"], "2025-11-25", "{run:#}");
    let updated = notifications_of(&run, "notifications/resources/updated");
    assert_eq!(
        updated.first().map(|n| &n["params"]["uri"]),
        Some(&json!("whoami://watched")),
        "{run:#}"
    );
}

/// Each person's subscription is a stream on their own connection: when Alice
/// unsubscribes while Bob is still subscribed, her stream closes (and her connection with
/// it, once idle), and Bob's still brings him the update.
#[test]
fn one_persons_unsubscription_ends_their_own_stream_and_not_anothers() {
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let whoami = Whoami::start(dir.path(), &idp);
    let workspace = Workspace::new(&format!(
        "[listen]\ntokens = [{}, {}]\n[servers.who]\nurl = {}\nrewrite_uris = false\n\
         [servers.who.oauth]\nper_user = true\nidle_disconnect_secs = 1\n",
        toml_str(ALICE.token),
        toml_str(BOB.token),
        toml_str(whoami.url()),
    ))
    .with_env("MCP_GATEWAY_TOKEN_KEY", KEY);
    let gateway = workspace.serve_http(&[]);
    let alice_closed = || {
        let alice = identity_of(&ALICE);
        gateway
            .log_text()
            .lines()
            .filter(|line| line.contains("closing an idle per-user connection"))
            .filter(|line| line.contains(&alice))
            .count()
    };
    let watched = "whoami://watched";
    let run = python_client(
        &client(&gateway, &ALICE, "legacy", "browse"),
        &json!([call(SIGN_IN), {"action": "wait_tool", "name": WHOAMI, "timeout_ms": 30000}]),
    );
    assert_eq!(run["ok"], true, "{run:#}");
    let run = python_client(
        &client(&gateway, &BOB, "legacy", "browse"),
        &json!([call(WHOAMI)]),
    );
    assert_eq!(subject(&run["results"][0]["result"]), "bob", "{run:#}");
    assert!(
        eventually(PATIENCE, || alice_closed() == 1),
        "{}",
        gateway.log_text()
    );
    let bob = spawn_python_client(
        &client(&gateway, &BOB, "legacy", "browse"),
        &json!([
            {"action": "subscribe", "uri": watched},
            {"action": "wait_notification", "method": "notifications/resources/updated",
             "timeout_ms": 60000},
        ]),
    );
    let run = python_client(
        &client(&gateway, &ALICE, "legacy", "browse"),
        &json!([
            {"action": "sleep", "ms": 2000},
            {"action": "subscribe", "uri": watched},
            {"action": "unsubscribe", "uri": watched},
        ]),
    );
    assert_eq!(run["ok"], true, "{run:#}");
    assert!(
        eventually(PATIENCE, || alice_closed() == 2),
        "Alice's connection still listens: {}",
        gateway.log_text()
    );
    let run = python_client(
        &client(&gateway, &ALICE, "legacy", "browse"),
        &json!([call("mcp__who__touch_watched")]),
    );
    assert_eq!(run["ok"], true, "{run:#}");
    let bob = python_client_output(bob);
    assert_eq!(bob["ok"], true, "{bob:#}");
}

/// Each person's resources of a per-user server are their own: an update the server
/// sends on one person's connection reaches that person's subscription, not another
/// person's subscription to the same URI.
#[test]
fn a_persons_resource_update_reaches_them_and_not_another_subscriber() {
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let whoami = Whoami::start(dir.path(), &idp);
    let workspace = Workspace::new(&format!(
        "[listen]\ntokens = [{}, {}]\n[servers.who]\nurl = {}\nprotocol = \"2025-11-25\"\n\
         rewrite_uris = false\n[servers.who.oauth]\nper_user = true\n",
        toml_str(ALICE.token),
        toml_str(BOB.token),
        toml_str(whoami.url()),
    ))
    .with_env("MCP_GATEWAY_TOKEN_KEY", KEY);
    let gateway = workspace.serve_http(&[]);
    let watched = "whoami://watched";
    for person in [&ALICE, &BOB] {
        let run = python_client(
            &client(&gateway, person, "legacy", "browse"),
            &json!([call(SIGN_IN), {"action": "wait_tool", "name": WHOAMI, "timeout_ms": 30000}]),
        );
        assert_eq!(run["ok"], true, "{run:#}");
    }
    let bob = spawn_python_client(
        &client(&gateway, &BOB, "legacy", "browse"),
        &json!([
            {"action": "subscribe", "uri": watched},
            {"action": "sleep", "ms": 6000},
        ]),
    );
    let alice = python_client(
        &client(&gateway, &ALICE, "legacy", "browse"),
        &json!([
            {"action": "subscribe", "uri": watched},
            {"action": "sleep", "ms": 2000},
            call("mcp__who__touch_mine"),
            {"action": "wait_notification", "method": "notifications/resources/updated",
             "timeout_ms": 10000},
        ]),
    );
    assert_eq!(alice["ok"], true, "{alice:#}");
    let bob = python_client_output(bob);
    assert_eq!(bob["ok"], true, "{bob:#}");
    let heard = notifications_of(&bob, "notifications/resources/updated");
    assert!(heard.is_empty(), "Bob heard of Alice's resource: {bob:#}");
}

/// A person's `resources/subscribe` to a per-user server spoken to in a 2025-11-25
/// session is held by the server for that person; when the person's session ends without
/// unsubscribing, the gateway unsubscribes on the person's own connection, and the server
/// keeps nothing for them.
#[test]
fn a_persons_subscription_in_a_2025_session_ends_upstream_with_their_session() {
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let whoami = Whoami::start(dir.path(), &idp);
    let workspace = Workspace::new(&format!(
        "[listen]\ntokens = [{}]\n[servers.who]\nurl = {}\nprotocol = \"2025-11-25\"\n\
         rewrite_uris = false\n[servers.who.oauth]\nper_user = true\n",
        toml_str(ALICE.token),
        toml_str(whoami.url()),
    ))
    .with_env("MCP_GATEWAY_TOKEN_KEY", KEY);
    let gateway = workspace.serve_http(&[]);
    let subscribed =
        json!({"action": "call_tool", "name": "mcp__who__subscribed", "arguments": {}});
    let run = python_client(
        &client(&gateway, &ALICE, "legacy", "browse"),
        &json!([
            call(SIGN_IN),
            {"action": "wait_tool", "name": WHOAMI, "timeout_ms": 30000},
            {"action": "subscribe", "uri": "whoami://watched"},
            subscribed,
        ]),
    );
    assert_eq!(run["ok"], true, "{run:#}");
    let held = &run["results"][3]["result"]["structuredContent"]["uris"];
    assert_eq!(held, &json!(["whoami://watched"]), "{run:#}");

    // The client has left (its session ended with a DELETE) without unsubscribing.
    let mut last = Value::Null;
    let released = eventually(PATIENCE, || {
        last = python_client(
            &client(&gateway, &ALICE, "legacy", "none"),
            &json!([subscribed]),
        );
        last["results"][0]["result"]["structuredContent"]["uris"] == json!([])
    });
    assert!(
        released,
        "the server still holds Alice's subscription: {last:#}\n{}",
        gateway.log_text()
    );
}

/// A per-user connection holding a person's `resources/subscribe` (the server spoken to in
/// a 2025-11-25 session, whose subscriptions live in it) is not closed as idle: the
/// person still hears of the resource's update after a quiet spell longer than
/// `idle_disconnect_secs`. Once the person's session has ended, it is closed.
#[test]
fn a_connection_holding_a_2025_subscription_is_not_closed_as_idle() {
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let whoami = Whoami::start(dir.path(), &idp);
    let workspace = Workspace::new(&format!(
        "[listen]\ntokens = [{}]\n[servers.who]\nurl = {}\nprotocol = \"2025-11-25\"\n\
         rewrite_uris = false\n[servers.who.oauth]\nper_user = true\nidle_disconnect_secs = 1\n",
        toml_str(ALICE.token),
        toml_str(whoami.url()),
    ))
    .with_env("MCP_GATEWAY_TOKEN_KEY", KEY);
    let gateway = workspace.serve_http(&[]);
    let run = python_client(
        &client(&gateway, &ALICE, "legacy", "browse"),
        &json!([call(SIGN_IN), {"action": "wait_tool", "name": WHOAMI, "timeout_ms": 30000}]),
    );
    assert_eq!(run["ok"], true, "{run:#}");
    let alice = identity_of(&ALICE);
    let alice_closed = || {
        gateway
            .log_text()
            .lines()
            .filter(|line| line.contains("closing an idle per-user connection"))
            .filter(|line| line.contains(&alice))
            .count()
    };
    assert!(
        eventually(PATIENCE, || alice_closed() == 1),
        "{}",
        gateway.log_text()
    );
    let run = python_client(
        &client(&gateway, &ALICE, "legacy", "none"),
        &json!([
            {"action": "subscribe", "uri": "whoami://watched"},
            {"action": "sleep", "ms": 3500},
            call("mcp__who__touch_watched"),
            {"action": "wait_notification", "method": "notifications/resources/updated",
             "timeout_ms": 10000},
        ]),
    );
    assert_eq!(run["ok"], true, "{run:#}\n{}", gateway.log_text());
    assert!(
        eventually(PATIENCE, || alice_closed() == 2),
        "the connection outlived the subscription: {}",
        gateway.log_text()
    );
}

/// A person's subscription outlives the per-user server's restart: the server (spoken
/// to in a 2025-11-25 session) forgot the session of the person's connection, and the
/// gateway subscribes the new one again on that person's behalf, and hers alone.
#[test]
fn a_persons_subscription_outlives_the_restart_of_a_per_user_server() {
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let whoami = Whoami::start(dir.path(), &idp);
    let address = whoami.address;
    let workspace = Workspace::new(&format!(
        "[listen]\ntokens = [{}]\n[servers.who]\nurl = {}\nprotocol = \"2025-11-25\"\n\
         rewrite_uris = false\n[servers.who.oauth]\nper_user = true\n",
        toml_str(ALICE.token),
        toml_str(whoami.url()),
    ))
    .with_env("MCP_GATEWAY_TOKEN_KEY", KEY);
    let gateway = workspace.serve_http(&[]);
    let restarted = dir.path().join("restarted");
    let alice = spawn_python_client(
        &client(&gateway, &ALICE, "legacy", "browse"),
        &json!([
            call(SIGN_IN),
            {"action": "wait_tool", "name": WHOAMI, "timeout_ms": 30000},
            {"action": "subscribe", "uri": "whoami://watched"},
            {"action": "wait_file", "path": restarted.to_string_lossy(),
             "line_with": ["restarted"], "timeout_ms": 60000},
            {"action": "wait_call", "name": "mcp__who__touch_watched", "text": "touched",
             "timeout_ms": 30000},
            {"action": "sleep", "ms": 1000},
            call("mcp__who__touch_watched"),
            {"action": "wait_notification", "method": "notifications/resources/updated",
             "timeout_ms": 10000},
        ]),
    );
    let heard = || std::fs::read_to_string(dir.path().join("whoami.log")).unwrap_or_default();
    let subscribed = "alice subscribed to whoami://watched";
    assert!(
        eventually(Duration::from_secs(60), || heard().contains(subscribed)),
        "the server never heard Alice subscribe: {}",
        heard()
    );
    drop(whoami);
    let _whoami = Whoami::start_at(dir.path(), &idp, address);
    std::fs::write(&restarted, "restarted\n").unwrap();
    let run = python_client_output(alice);
    assert_eq!(run["ok"], true, "{run:#}\n{}", gateway.log_text());
    assert!(
        heard().contains(subscribed),
        "the server started again heard: {}",
        heard()
    );
}

#[test]
fn a_sign_in_whose_refresh_fails_asks_the_person_again() {
    let dir = tempfile::tempdir().unwrap();
    // Access tokens live 4 s; the provider forgets every refresh token when restarted.
    let mut idp = IdentityProvider::start(dir.path(), "k1", 4);
    let whoami = Whoami::start(dir.path(), &idp);
    let workspace = gateway_workspace(&whoami);
    let gateway = workspace.serve_http(&[]);
    let run = python_client(
        &client(&gateway, &ALICE, "legacy", "browse"),
        &json!([call(SIGN_IN), {"action": "wait_tool", "name": WHOAMI, "timeout_ms": 30000}, call(WHOAMI)]),
    );
    assert_eq!(run["ok"], true, "{run:#}\n{}", gateway.log_text());
    assert_eq!(subject(&run["results"][2]["result"]), "alice");

    // Her token expires, and the provider no longer knows her refresh token.
    let ends = expiry(whoami.tokens().last().unwrap());
    assert!(
        eventually(Duration::from_secs(30), || now_secs() > ends),
        "the access token never expired"
    );
    idp.restart("k1");
    let run = python_client(
        &client(&gateway, &ALICE, "legacy", "browse"),
        &json!([call(WHOAMI)]),
    );
    assert_eq!(run["ok"], true, "{run:#}\n{}", gateway.log_text());
    assert_eq!(browsed_sign_in(&run)["status"], 200, "asked again: {run:#}");
    assert_eq!(subject(&run["results"][0]["result"]), "alice", "{run:#}");
}

#[test]
fn a_listener_that_names_nobody_signs_nobody_in() {
    // No tokens and no [listen.oauth]: a caller is nobody, and nobody's token is used.
    let workspace = Workspace::new(
        "[servers.who]\nurl = \"http://127.0.0.1:1/mcp\"\n[servers.who.oauth]\nper_user = true\n",
    )
    .with_env("MCP_GATEWAY_TOKEN_KEY", KEY);
    let gateway = workspace.serve_http(&[]);
    let mut args = gateway.client_args("http", "/mcp");
    args.extend(["--elicit", "browse"].map(str::to_owned));
    let run = python_client(&args, &json!([call(SIGN_IN)]));
    let failed = &run["results"][0]["result"];
    assert_eq!(error_code(failed), Some("SIGN_IN_FAILED"), "{run:#}");
    assert_eq!(
        failed["_meta"]["mcp-gateway/error"]["detail"]["reason"], "SIGN_IN_NO_IDENTITY",
        "{run:#}"
    );
    assert!(
        run["elicitations"].as_array().unwrap().is_empty(),
        "{run:#}"
    );
    // Nor is there one sign-in for everyone to make.
    let login = workspace.cli(&["auth", "login", "who"]);
    assert!(!login.status.success());
    assert!(
        String::from_utf8_lossy(&login.stderr).contains("OAUTH_NO_LOGIN"),
        "{}",
        String::from_utf8_lossy(&login.stderr)
    );

    // Without the token key, the server says why it keeps no sign-in.
    let keyless = Workspace::new(
        "[servers.who]\nurl = \"http://127.0.0.1:1/mcp\"\n[servers.who.oauth]\nper_user = true\n",
    );
    let gateway = keyless.serve_http(&[]);
    let healthz = health(&gateway);
    assert_eq!(
        healthz["upstreams"]["who"]["state"], "failed",
        "{healthz:#}"
    );
    assert!(
        healthz["upstreams"]["who"]["last_error"]
            .as_str()
            .unwrap()
            .starts_with("TOKEN_KEY_MISSING"),
        "{healthz:#}"
    );
}

#[test]
fn an_idle_persons_connection_closes_and_opens_again_without_a_new_sign_in() {
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let whoami = Whoami::start(dir.path(), &idp);
    let workspace = Workspace::new(&format!(
        "[listen]\ntokens = [{}]\n[servers.who]\nurl = {}\n[servers.who.oauth]\nper_user = true\n\
         idle_disconnect_secs = 1\n",
        toml_str(ALICE.token),
        toml_str(whoami.url()),
    ))
    .with_env("MCP_GATEWAY_TOKEN_KEY", KEY);
    let gateway = workspace.serve_http(&[]);
    let run = python_client(
        &client(&gateway, &ALICE, "legacy", "browse"),
        &json!([call(SIGN_IN), {"action": "wait_tool", "name": WHOAMI, "timeout_ms": 30000}, call(WHOAMI)]),
    );
    assert_eq!(run["ok"], true, "{run:#}\n{}", gateway.log_text());
    assert!(
        eventually(PATIENCE, || gateway
            .log_text()
            .contains("closing an idle per-user connection")),
        "{}",
        gateway.log_text()
    );
    let run = python_client(
        &client(&gateway, &ALICE, "legacy", "browse"),
        &json!([call(WHOAMI)]),
    );
    assert_eq!(subject(&run["results"][0]["result"]), "alice", "{run:#}");
    assert!(
        run["elicitations"].as_array().unwrap().is_empty(),
        "{run:#}"
    );
}

/// `client` for `person`, whose sign-in link is opened by `at_browser`'s browser instead
/// (their account at the provider, their gateway token typed into the page).
fn client_opened_by(
    gateway: &Gateway,
    person: &Person,
    mode: &str,
    at_browser: &Person,
) -> Vec<String> {
    let mut args = client(gateway, person, mode, "browse");
    let account = args.iter().position(|arg| arg == "--browse-as").unwrap() + 1;
    args[account] = at_browser.account.to_owned();
    args.extend(["--browse-token".to_owned(), at_browser.token.to_owned()]);
    args
}

/// The sign-in link a client without URL elicitation was given with `SIGN_IN_REQUIRED`.
fn required_sign_in(run: &Value) -> String {
    let refused = &run["results"][0]["result"];
    assert_eq!(error_code(refused), Some("SIGN_IN_REQUIRED"), "{run:#}");
    refused["_meta"]["mcp-gateway/error"]["detail"]["url"]
        .as_str()
        .unwrap_or_else(|| panic!("no URL in {refused:#}"))
        .to_owned()
}

#[test]
fn a_sign_in_link_opened_by_another_person_signs_nobody_in() {
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let whoami = Whoami::start(dir.path(), &idp);
    let workspace = gateway_workspace(&whoami);
    let gateway = workspace.serve_http(&[]);
    let bob = identity_of(&BOB);
    // Eve signs in first, with her own browser, so the server's tools are known.
    let run = python_client(
        &client(&gateway, &EVE, "legacy", "browse"),
        &json!([call(SIGN_IN), {"action": "wait_tool", "name": WHOAMI, "timeout_ms": 30000}]),
    );
    assert_eq!(run["ok"], true, "{run:#}\n{}", gateway.log_text());

    // Alice's client (2025-11-25), then Carol's (2026-07-28), is shown a sign-in link, and
    // Bob's browser opens it: signed in at the provider as Bob, with Bob's gateway token.
    for (person, mode) in [(&ALICE, "legacy"), (&CAROL, "auto")] {
        let run = python_client(
            &client_opened_by(&gateway, person, mode, &BOB),
            &json!([call(WHOAMI)]),
        );
        let browsed = browsed_sign_in(&run);
        assert_eq!(browsed["status"], 403, "{run:#}");
        assert!(
            browsed["body"]
                .as_str()
                .unwrap()
                .contains("SIGN_IN_WRONG_PERSON"),
            "{run:#}"
        );
        // The waiting call ends, saying why.
        let failed = &run["results"][0]["result"];
        assert_eq!(error_code(failed), Some("SIGN_IN_FAILED"), "{run:#}");
        let text = result_text(failed);
        assert!(
            text.contains(&identity_of(person)) && text.contains(&bob),
            "{failed:#}"
        );
        // Nothing was stored: the next call asks again, and the person's own browser
        // then completes it, and the call that waited returns as them.
        let run = python_client(
            &client(&gateway, person, mode, "none"),
            &json!([call(WHOAMI)]),
        );
        required_sign_in(&run);
        let run = python_client(
            &client(&gateway, person, mode, "browse"),
            &json!([call(WHOAMI)]),
        );
        assert_eq!(browsed_sign_in(&run)["status"], 200, "{run:#}");
        assert_eq!(subject(&run["results"][0]["result"]), person.account);
    }
    let status = String::from_utf8_lossy(&workspace.cli(&["auth", "status"]).stdout).into_owned();
    assert!(!status.contains(&bob), "Bob was never signed in: {status}");

    // Dave shows he is himself, but his browser does not go on: the authorization
    // server's URL is opened by Bob's browser, which the gateway never saw. The callback
    // stores nothing, and Dave's sign-in is spent.
    let run = python_client(
        &client(&gateway, &DAVE, "legacy", "none"),
        &json!([call(WHOAMI)]),
    );
    let url = required_sign_in(&run);
    let state = url.split_once("state=").unwrap().1.to_owned();
    let page = &url[url.find("/oauth/").unwrap()..];
    let form = format!("state={state}&token={}", DAVE.token);
    let (status, headers, body) = http_request(
        gateway.address,
        "POST",
        page,
        &[("Content-Type", "application/x-www-form-urlencoded")],
        form.as_bytes(),
    );
    assert_eq!(status, 303, "{body}");
    let header = |name: &str| {
        headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
            .unwrap_or_else(|| panic!("no {name} in {headers:?}"))
    };
    assert!(header("set-cookie").contains("HttpOnly"), "{headers:?}");
    assert_eq!(header("x-content-type-options"), "nosniff");
    let authorization_url = header("location");
    assert!(authorization_url.contains("code_challenge="), "{headers:?}");
    let elsewhere = browse(&authorization_url, BOB.account, None);
    assert_eq!(elsewhere["status"], 403, "{elsewhere:#}");
    assert!(
        elsewhere["body"]
            .as_str()
            .unwrap()
            .contains("SIGN_IN_BROWSER_UNPROVEN"),
        "{elsewhere:#}"
    );
    let run = python_client(
        &client(&gateway, &DAVE, "legacy", "none"),
        &json!([call(WHOAMI)]),
    );
    // A token nobody holds is nobody's proof either.
    let url = required_sign_in(&run);
    let wrong = Person {
        token: "nobody-has-this-token-07",
        account: "dave",
    };
    assert!(!open_as(&url, &wrong));
    assert!(whoami.tokens().iter().all(|token| {
        let claims = token.split('.').nth(1).map(base64_url).unwrap_or_default();
        !String::from_utf8_lossy(&claims).contains("\"sub\":\"bob\"")
    }));
}

#[test]
fn with_an_identity_provider_the_person_at_the_browser_signs_in_there_first() {
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let whoami = Whoami::start(dir.path(), &idp);
    let address = free_address();
    let resource = format!("http://{address}/mcp");
    let workspace = Workspace::new(&format!(
        "[listen.oauth]\nissuer = {}\naudience = {}\n[servers.who]\nurl = {}\n\
         [servers.who.oauth]\nper_user = true\n",
        toml_str(idp.issuer()),
        toml_str(&resource),
        toml_str(whoami.url()),
    ))
    .with_env("MCP_GATEWAY_TOKEN_KEY", KEY);
    let gateway = workspace.serve_http_at(address, &[]);
    // The callers' own tokens for the gateway, from the provider.
    let args = |caller: &str, mode: &str, at_browser: &str| {
        let token = idp.forge(
            &json!({"sub": caller, "aud": resource, "scope": "mcp:read"}),
            "k1",
            None,
        );
        let mut args = gateway.client_args("http", "/mcp");
        args.extend(
            [
                "--header",
                &format!("Authorization=Bearer {token}"),
                "--mode",
                mode,
                "--elicit",
                "browse",
                "--browse-as",
                at_browser,
                "--timeout",
                "60",
            ]
            .map(str::to_owned),
        );
        args
    };

    // Alice (2025-11-25) signs in at the gateway's provider, as herself, then at the
    // server's: her call returns as her.
    let run = python_client(&args("alice", "legacy", "alice"), &json!([call(SIGN_IN)]));
    assert_eq!(run["ok"], true, "{run:#}\n{}", gateway.log_text());
    let browsed = browsed_sign_in(&run);
    assert_eq!(browsed["status"], 200, "{run:#}\n{}", gateway.log_text());
    assert!(
        browsed["body"]
            .as_str()
            .unwrap()
            .contains("Signed in to `who` as subject:alice"),
        "{run:#}"
    );

    // Bob's link (2026-07-28) opened by a browser signed in as Eve: refused at the
    // gateway's page, before the server's provider is reached; nothing is stored.
    let run = python_client(&args("bob", "auto", "eve"), &json!([call(WHOAMI)]));
    let browsed = browsed_sign_in(&run);
    assert_eq!(browsed["status"], 403, "{run:#}");
    assert!(
        browsed["body"]
            .as_str()
            .unwrap()
            .contains("SIGN_IN_WRONG_PERSON"),
        "{run:#}"
    );
    assert_eq!(
        error_code(&run["results"][0]["result"]),
        Some("SIGN_IN_FAILED"),
        "{run:#}"
    );
    // Bob's own browser then signs him in, and the call that waited returns as him.
    let run = python_client(&args("bob", "auto", "bob"), &json!([call(WHOAMI)]));
    assert_eq!(browsed_sign_in(&run)["status"], 200, "{run:#}");
    assert_eq!(subject(&run["results"][0]["result"]), "bob", "{run:#}");

    // Login CSRF: Mallory signs in at the gateway's provider as herself for her own
    // sign-in, keeps the link back to the gateway instead of following it, and sends it
    // to Carol. Carol's browser never began that login: it is refused there, so it never
    // goes on to sign in at the server (with Carol's own account) for Mallory.
    let mut mallory = args("mallory", "legacy", "mallory");
    let elicit = mallory.iter().position(|arg| arg == "browse").unwrap();
    mallory[elicit] = "none".into();
    let run = python_client(&mallory, &json!([call(WHOAMI)]));
    let refused = &run["results"][0]["result"];
    assert_eq!(error_code(refused), Some("SIGN_IN_REQUIRED"), "{run:#}");
    let link = refused["_meta"]["mcp-gateway/error"]["detail"]["url"]
        .as_str()
        .unwrap();
    let kept = browse_until(link, "mallory", None, Some("/oauth/sign-in/verified"));
    let return_link = kept["url"].as_str().unwrap().to_owned();
    assert!(return_link.contains("code="), "{kept:#}");
    let carols = browse(&return_link, "carol", None);
    assert_eq!(carols["status"], 403, "{carols:#}");
    assert!(
        carols["body"]
            .as_str()
            .unwrap()
            .contains("SIGN_IN_BROWSER_UNPROVEN"),
        "{carols:#}"
    );
    let seen: Vec<String> = whoami.tokens();
    assert!(
        seen.iter().all(|token| {
            let claims = token.split('.').nth(1).map(base64_url).unwrap_or_default();
            let claims = String::from_utf8_lossy(&claims).into_owned();
            !claims.contains("\"sub\":\"eve\"") && !claims.contains("\"sub\":\"carol\"")
        }),
        "Eve's or Carol's account reached the server"
    );
}

/// The key the token key is rotated to, in [`a_token_key_rotation_keeps_every_sign_in`].
const NEW_KEY: &str = "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b";

/// `auth status`'s lines that say signed in, with the token key `keys`.
fn signed_in_with(workspace: &Workspace, keys: &str) -> usize {
    let status = Command::new(gateway_bin())
        .args(["auth", "status", "--config"])
        .arg(workspace.config())
        .env("RUST_LOG", "warn")
        .env("XDG_DATA_HOME", workspace.data_home())
        .env("MCP_GATEWAY_TOKEN_KEY", keys)
        .output()
        .unwrap();
    String::from_utf8_lossy(&status.stdout)
        .lines()
        .filter(|line| line.contains("\tsigned_in\t"))
        .count()
}

/// A key rotation across replicas sharing Redis, rolled out as docs/oauth.md says: while
/// one replica still seals with the old key and another already with the new one, a
/// sign-in begun on the first (its sign-in-in-progress records sealed with the old key)
/// completes on the second (which seals the tokens with the new key), and the call
/// waiting on the first goes on; a sign-in sealed with the old key is used by the second;
/// `auth rotate-key` seals what the old key sealed again, after which the new key alone
/// serves everyone without asking anyone to sign in again. The key file must be private.
#[test]
fn a_token_key_rotation_keeps_every_sign_in() {
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let whoami = Whoami::start(dir.path(), &idp);
    let redis = Redis::start();
    let config = |public_url: Option<SocketAddr>| {
        let public = public_url
            .map(|address| format!("public_url = {}\n", toml_str(format!("http://{address}"))))
            .unwrap_or_default();
        format!(
            "[listen]\ntokens = [{}, {}]\n{public}[cluster]\nredis_url = {}\n\
             [servers.who]\nurl = {}\n[servers.who.oauth]\nper_user = true\n",
            toml_str(ALICE.token),
            toml_str(BOB.token),
            toml_str(redis.url()),
            toml_str(whoami.url()),
        )
    };
    let serve = |workspace: &Workspace, address: SocketAddr| {
        let gateway = workspace.serve_http_at(address, &[]);
        assert!(
            eventually(PATIENCE, || ready(&gateway)),
            "{}",
            gateway.log_text()
        );
        gateway
    };
    let calls_as = |gateway: &Gateway, person: &Person| {
        let run = python_client(
            &client(gateway, person, "legacy", "none"),
            &json!([{"action": "wait_tool", "name": WHOAMI, "timeout_ms": 30000}, call(WHOAMI)]),
        );
        assert_eq!(run["ok"], true, "{run:#}\n{}", gateway.log_text());
        subject(&run["results"][1]["result"])
    };

    // Before: the old key alone. Bob signs in.
    let before = Workspace::new(&config(None)).with_env("MCP_GATEWAY_TOKEN_KEY", KEY);
    let gateway = serve(&before, free_address());
    let run = python_client(
        &client(&gateway, &BOB, "legacy", "browse"),
        &json!([call(SIGN_IN), {"action": "wait_tool", "name": WHOAMI, "timeout_ms": 30000}, call(WHOAMI)]),
    );
    assert_eq!(run["ok"], true, "{run:#}\n{}", gateway.log_text());
    assert_eq!(subject(&run["results"][2]["result"]), "bob", "{run:#}");
    drop(gateway);

    // Mid-rotation: the first replica seals with the old key, the second with the new;
    // browsers come back to the second. Alice signs in through the first.
    let addresses = [free_address(), free_address()];
    let first = Workspace::new(&config(Some(addresses[1])))
        .with_env("MCP_GATEWAY_TOKEN_KEY", &format!("{KEY} {NEW_KEY}"));
    let second = Workspace::new(&config(Some(addresses[1])))
        .with_env("MCP_GATEWAY_TOKEN_KEY", &format!("{NEW_KEY} {KEY}"));
    let replicas = [serve(&first, addresses[0]), serve(&second, addresses[1])];
    let run = python_client(
        &client(&replicas[0], &ALICE, "legacy", "browse"),
        &json!([{"action": "wait_tool", "name": WHOAMI, "timeout_ms": 30000}, call(WHOAMI)]),
    );
    let logs = || {
        format!(
            "{}\n----\n{}",
            replicas[0].log_text(),
            replicas[1].log_text()
        )
    };
    assert_eq!(
        subject(&run["results"][1]["result"]),
        "alice",
        "{run:#}\n{}",
        logs()
    );
    let browsed = browsed_sign_in(&run);
    assert_eq!(browsed["status"], 200, "{run:#}");
    assert!(
        browsed["url"]
            .as_str()
            .unwrap()
            .starts_with(&format!("http://{}/oauth/callback", addresses[1])),
        "{run:#}"
    );
    // Each replica serves both, whichever key sealed their sign-in.
    for gateway in &replicas {
        assert_eq!(calls_as(gateway, &ALICE), "alice");
        assert_eq!(calls_as(gateway, &BOB), "bob");
    }
    assert_eq!(
        signed_in_with(&second, NEW_KEY),
        1,
        "Bob's is the old key's"
    );
    assert_eq!(signed_in_with(&second, KEY), 1, "Alice's is the new key's");

    // `auth rotate-key` seals Bob's sign-in again, under the new key.
    let rotated = second.cli(&["auth", "rotate-key"]);
    let said = String::from_utf8_lossy(&rotated.stdout).into_owned();
    assert!(
        rotated.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&rotated.stderr)
    );
    let bob = identity_of(&BOB);
    let alice = identity_of(&ALICE);
    assert!(
        said.contains(&format!("who/{bob}\tsealed again under the current key")),
        "{said}"
    );
    assert!(
        said.contains(&format!("who/{alice}\tunder the current key already")),
        "{said}"
    );
    assert_eq!(signed_in_with(&second, NEW_KEY), 2, "{said}");
    assert_eq!(signed_in_with(&second, KEY), 0, "{said}");
    drop(replicas);

    // After: the new key alone, from a file. One that others can read is refused.
    let key_file = dir.path().join("token-key");
    std::fs::write(&key_file, format!("{NEW_KEY}\n")).unwrap();
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let after = Workspace::new(&config(None))
        .with_env("MCP_GATEWAY_TOKEN_KEY_FILE", &key_file.to_string_lossy());
    let status = after.cli(&["auth", "status"]);
    let listed = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(
        listed.starts_with("who\tper_user\tTOKEN_KEY_FILE_EXPOSED"),
        "{listed}"
    );
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let gateway = serve(&after, free_address());
    assert_eq!(calls_as(&gateway, &ALICE), "alice");
    assert_eq!(calls_as(&gateway, &BOB), "bob");
}

/// Over stdio the sign-in page is served on loopback, and only the local user the gateway
/// runs as gets past it: another user of the machine who opens the link (here `nobody`,
/// by `setpriv`) ends the sign-in, and the waiting call says who opened it.
#[test]
fn over_stdio_another_local_user_cannot_complete_the_sign_in() {
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let whoami = Whoami::start(dir.path(), &idp);
    let workspace = Workspace::new(&format!(
        "[servers.who]\nurl = {}\n[servers.who.oauth]\nper_user = true\n",
        toml_str(whoami.url()),
    ))
    .with_env("MCP_GATEWAY_TOKEN_KEY", KEY);
    let mut gateway = workspace.raw_stdio();
    gateway.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {"form": {}, "url": {}}},
        "clientInfo": {"name": "raw", "version": "0"}}}),
    );
    assert_eq!(gateway.read()["id"], 1);
    gateway.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    gateway.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": SIGN_IN, "arguments": {}}}));
    let asked = loop {
        let message = gateway.read();
        if message["method"] == "elicitation/create" {
            break message;
        }
    };
    assert_eq!(asked["params"]["mode"], "url", "{asked:#}");
    let url = asked["params"]["url"].as_str().unwrap().to_owned();
    let opened = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c"])
        .arg(
            "import sys, urllib.request, urllib.error\n\
             try:\n    r = urllib.request.urlopen(sys.argv[1]); print(r.status, r.read().decode())\n\
             except urllib.error.HTTPError as e:\n    print(e.code, e.read().decode())",
        )
        .arg(&url)
        .output()
        .unwrap();
    let page = String::from_utf8_lossy(&opened.stdout).into_owned();
    assert!(
        page.starts_with("403") && page.contains("SIGN_IN_WRONG_PERSON"),
        "{page}{}",
        String::from_utf8_lossy(&opened.stderr)
    );
    gateway.send(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}}));
    let answer = loop {
        let message = gateway.read();
        if message["id"] == 2 {
            break message;
        }
    };
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        answer["result"]["isError"] == true && text.contains("uid 65534"),
        "{answer:#}"
    );
    assert!(sealed_files(&workspace).is_empty(), "nothing is stored");
}
