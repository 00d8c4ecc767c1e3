//! Issue 16, the gateway as the OAuth client of a remote server, produced for real: the
//! remote server is a second gateway that takes a real identity provider's tokens
//! (tests/servers/idp.mjs, npm `oidc-provider`), so the 401s, 403s, refreshes and
//! revocations below all happen between real processes.
//!
//! - a machine client (`client_credentials`) signs in by itself, and steps up once when
//!   the server answers 403 `insufficient_scope`;
//! - a person signs in with `auth login` (dynamic registration, PKCE, loopback redirect),
//!   the token is refreshed when it expires and when the server answers 401, and after the
//!   sign-in is revoked the server is `needs_login` and its calls say what to run;
//! - tokens never show in `/healthz`, the logs, `config dump` or `auth status`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use mcp_gateway_tests::idp::IdentityProvider;
use mcp_gateway_tests::*;
use serde_json::{Value, json};

/// The remote server: kv behind a gateway that takes the provider's tokens, whose
/// `[listen.oauth.scopes]` table is `scopes`.
fn remote(idp: &IdentityProvider, scopes: &str) -> (Workspace, Gateway, String) {
    let address: SocketAddr = free_address();
    let resource = format!("http://{address}/mcp");
    let workspace = Workspace::new(&format!(
        "{}[listen.oauth]\nissuer = {}\naudience = {}\nleeway_secs = 0\n\
         [listen.oauth.scopes]\n{scopes}\n[profiles.all]\nallow = [\"*\"]\n",
        example_server("kv", "kv"),
        toml_str(idp.issuer()),
        toml_str(&resource),
    ));
    let gateway = workspace.serve_http_at(address, &[]);
    (workspace, gateway, resource)
}

/// The gateway under test, with the remote server as `remote` signing in per `oauth`.
fn local(resource: &str, oauth: &str) -> Workspace {
    Workspace::new(&format!(
        "[servers.remote]\nurl = {}\n[servers.remote.oauth]\n{oauth}\n",
        toml_str(resource)
    ))
}

fn call(gateway: &Gateway, tool: &str, arguments: Value) -> Value {
    let run = python_client(
        &gateway.client_args("http", "/mcp"),
        &json!([{"action": "call_tool", "name": tool, "arguments": arguments}]),
    );
    assert_eq!(run["results"][0]["ok"], true, "{run:#}");
    run["results"][0]["result"].clone()
}

fn remote_state(gateway: &Gateway) -> String {
    health(gateway)["upstreams"]["remote"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn wait_state(gateway: &Gateway, state: &str) {
    assert!(
        eventually(Duration::from_secs(30), || remote_state(gateway) == state),
        "remote never became {state}: {:#}\n{}",
        health(gateway),
        gateway.log_text()
    );
}

fn token_file(workspace: &Workspace) -> PathBuf {
    workspace.data_home().join("mcp-gateway/oauth/remote.json")
}

fn tokens(workspace: &Workspace) -> Value {
    serde_json::from_slice(&std::fs::read(token_file(workspace)).unwrap()).unwrap()
}

fn access_token(workspace: &Workspace) -> String {
    tokens(workspace)["credentials"]["token_response"]["access_token"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Puts `token` in place of the stored access token, as if the server had stopped
/// accepting the one it holds.
fn replace_access_token(workspace: &Workspace, token: &str) {
    let mut file = tokens(workspace);
    file["credentials"]["token_response"]["access_token"] = json!(token);
    std::fs::write(token_file(workspace), file.to_string()).unwrap();
}

fn no_secret_anywhere(workspace: &Workspace, gateway: &Gateway, secrets: &[&str]) {
    let health = health(gateway).to_string();
    let dump = String::from_utf8_lossy(&workspace.cli(&["config", "dump"]).stdout).into_owned();
    let status = String::from_utf8_lossy(&workspace.cli(&["auth", "status"]).stdout).into_owned();
    let events = serde_json::to_string(&workspace.session_events()).unwrap();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        for (place, text) in [
            ("/healthz", &health),
            ("config dump", &dump),
            ("auth status", &status),
            ("the session log", &events),
            ("the log", &gateway.log_text()),
        ] {
            assert!(!text.contains(secret), "a secret is in {place}");
        }
    }
}

#[test]
fn a_machine_client_signs_in_by_itself_and_steps_up_once_on_403() {
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let (_remote_workspace, _remote, resource) = remote(&idp, "\"mcp:admin\" = \"all\"");
    let workspace = local(
        &resource,
        "grant = \"client_credentials\"\nclient_id = \"machine\"\n\
         client_secret = \"machine-secret\"\nscopes = [\"mcp:read\"]",
    );
    let gateway = workspace.serve_http(&[]);
    wait_state(&gateway, "ready");
    let result = call(
        &gateway,
        "mcp__remote__mcp__kv__set",
        json!({"key": "k", "value": "v"}),
    );
    assert_ne!(result["isError"], true, "{result:#}");
    assert!(
        gateway.log_text().contains("stepped up"),
        "{}",
        gateway.log_text()
    );
    let granted = tokens(&workspace)["credentials"]["granted_scopes"].clone();
    assert!(granted.to_string().contains("mcp:admin"), "{granted}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(token_file(&workspace))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    no_secret_anywhere(
        &workspace,
        &gateway,
        &[&access_token(&workspace), "machine-secret"],
    );
}

#[test]
fn a_person_signs_in_the_token_refreshes_and_a_revoked_sign_in_needs_login() {
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 4);
    let (_remote_workspace, _remote, resource) = remote(&idp, "\"mcp:read\" = \"all\"");
    let workspace = local(&resource, "");

    // Before signing in: needs_login, and calls say what to run.
    let gateway = workspace.serve_http(&[]);
    wait_state(&gateway, "needs_login");
    let oauth = health(&gateway)["upstreams"]["remote"]["oauth"].clone();
    assert_eq!(oauth["state"], "needs_login", "{oauth:#}");
    assert_eq!(
        oauth["hint"], "run `mcp-gateway auth login remote`",
        "{oauth:#}"
    );
    drop(gateway);

    let browser = format!(
        "{} {}",
        python().display(),
        repo().join("tests/python/follow_redirects.py").display()
    );
    let login = workspace.cli(&["auth", "login", "remote", "--browser", &browser]);
    assert!(
        login.status.success(),
        "{}",
        String::from_utf8_lossy(&login.stderr)
    );
    let status = String::from_utf8_lossy(&workspace.cli(&["auth", "status"]).stdout).into_owned();
    assert!(
        status.starts_with("remote\tsigned_in\texpires ") && status.contains("\trefreshable"),
        "{status}"
    );

    let gateway = workspace.serve_http(&[]);
    wait_state(&gateway, "ready");
    let oauth = health(&gateway)["upstreams"]["remote"]["oauth"].clone();
    assert_eq!(oauth["state"], "signed_in", "{oauth:#}");
    assert_eq!(oauth["refreshable"], true, "{oauth:#}");
    assert!(oauth["expires_at"].is_string(), "{oauth:#}");
    let first = access_token(&workspace);
    call(
        &gateway,
        "mcp__remote__mcp__kv__set",
        json!({"key": "k", "value": "v"}),
    );

    // The access token lives 4 s: calls go on working, and once it has expired they are
    // made with a refreshed one.
    assert!(
        eventually(Duration::from_secs(20), || {
            let result = call(&gateway, "mcp__remote__mcp__kv__get", json!({"key": "k"}));
            assert_eq!(result["structuredContent"]["value"], "v", "{result:#}");
            access_token(&workspace) != first
        }),
        "the access token was never refreshed"
    );
    let refreshed = access_token(&workspace);

    // The server refuses the token it is sent (401): refreshed, and the call goes through.
    let refused = idp.forge(&json!({"aud": "http://127.0.0.1:1/other"}), "k1", None);
    replace_access_token(&workspace, &refused);
    let result = call(&gateway, "mcp__remote__mcp__kv__get", json!({"key": "k"}));
    assert_eq!(result["structuredContent"]["value"], "v", "{result:#}");
    let after_401 = access_token(&workspace);
    assert!(
        after_401 != refused && after_401 != refreshed,
        "refreshed after the 401"
    );
    no_secret_anywhere(&workspace, &gateway, &[&first, &refreshed, &after_401]);

    // An administrator revokes the sign-in; once the access token is refused, the refresh
    // is too: needs_login, and calls name the command.
    let file = tokens(&workspace);
    let refresh_token = file["credentials"]["token_response"]["refresh_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let client_id = file["credentials"]["client_id"]
        .as_str()
        .unwrap()
        .to_owned();
    idp.revoke(&refresh_token, &client_id);
    replace_access_token(&workspace, &refused);
    let result = call(&gateway, "mcp__remote__mcp__kv__get", json!({"key": "k"}));
    assert_eq!(result["isError"], true, "{result:#}");
    wait_state(&gateway, "needs_login");
    let result = call(&gateway, "mcp__remote__mcp__kv__get", json!({"key": "k"}));
    assert_eq!(
        error_code(&result),
        Some("UPSTREAM_UNAVAILABLE"),
        "{result:#}"
    );
    assert!(
        result_text(&result).contains("run `mcp-gateway auth login remote`"),
        "{result:#}"
    );
    let status = String::from_utf8_lossy(&workspace.cli(&["auth", "status"]).stdout).into_owned();
    assert!(status.starts_with("remote\tneeds_login"), "{status}");

    // Signing in again brings it back without a restart; signing out revokes and forgets.
    let login = workspace.cli(&["auth", "login", "remote", "--browser", &browser]);
    assert!(
        login.status.success(),
        "{}",
        String::from_utf8_lossy(&login.stderr)
    );
    wait_state(&gateway, "ready");
    let logout = workspace.cli(&["auth", "logout", "remote"]);
    assert!(
        String::from_utf8_lossy(&logout.stdout).contains("the server revoked the tokens"),
        "{}",
        String::from_utf8_lossy(&logout.stderr)
    );
    assert!(!token_file(&workspace).exists());
}
