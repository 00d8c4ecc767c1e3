//! Issue 16, the gateway as an OAuth protected resource, against a real identity provider
//! (npm `oidc-provider`, tests/servers/idp.mjs): the official Python SDK's OAuth client
//! discovers the provider from the gateway's 401, registers, signs in and calls a tool;
//! tokens that are expired, wrongly signed, for another audience or issuer, signed with an
//! unpublished key or with `alg: none` are refused with 401, a token without a mapped scope
//! with 403; scopes pick profiles; static tokens keep working; a key rotation is picked up.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcp_gateway_tests::idp::IdentityProvider;
use mcp_gateway_tests::*;
use serde_json::{Value, json};

const STATIC: &str = "static-token-beside-oauth";

struct Setup {
    idp: IdentityProvider,
    workspace: Workspace,
    gateway: Gateway,
    resource: String,
}

/// kv behind a gateway that takes the provider's tokens: `mcp:admin` gets every tool,
/// `mcp:read` only kv get and list.
fn setup() -> Setup {
    setup_with("")
}

/// [`setup`] with `oauth` added to `[listen.oauth]`.
fn setup_with(oauth: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let address: SocketAddr = free_address();
    let resource = format!("http://{address}/mcp");
    let workspace = Workspace::new(&format!(
        "{}[listen]\ntokens = [{}]\n[listen.oauth]\nissuer = {}\naudience = {}\nleeway_secs = 0\n{oauth}\
         [listen.oauth.scopes]\n\"mcp:admin\" = \"admin\"\n\"mcp:read\" = \"reader\"\n\
         [profiles.admin]\nallow = [\"*\"]\n\
         [profiles.reader]\nallow = [\"mcp__kv__get\", \"mcp__kv__list\"]\n",
        example_server("kv", "kv"),
        toml_str(STATIC),
        toml_str(idp.issuer()),
        toml_str(&resource),
    ));
    std::mem::forget(dir); // the key file must outlive a restart of the provider
    let gateway = workspace.serve_http_at(address, &[]);
    Setup {
        idp,
        workspace,
        gateway,
        resource,
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// POSTs `initialize` to /mcp with `token`; status, WWW-Authenticate and body.
fn initialize(gateway: &Gateway, token: Option<&str>) -> (u16, String, String) {
    let bearer = token.map(|token| format!("Bearer {token}"));
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    if let Some(bearer) = &bearer {
        headers.push(("Authorization", bearer));
    }
    let (status, headers, body) = http_request(
        gateway.address,
        "POST",
        "/mcp",
        &headers,
        INITIALIZE.as_bytes(),
    );
    let challenge = headers
        .iter()
        .find(|(name, _)| name == "www-authenticate")
        .map(|(_, value)| value.clone())
        .unwrap_or_default();
    (status, challenge, body)
}

fn with_token(gateway: &Gateway, token: &str) -> Vec<String> {
    let mut args = gateway.client_args("http", "/mcp");
    args.extend(["--header".into(), format!("Authorization=Bearer {token}")]);
    args
}

#[test]
fn the_python_sdk_signs_in_through_the_provider_and_calls_a_tool() {
    let setup = setup();
    let mut args = setup.gateway.client_args("http", "/mcp");
    args.push("--oauth".into());
    let run = python_client(
        &args,
        &json!([
            {"action": "list_tools"},
            {"action": "call_tool", "name": "mcp__kv__set", "arguments": {"key": "k", "value": "v"}},
            {"action": "call_tool", "name": "mcp__kv__get", "arguments": {"key": "k"}},
        ]),
    );
    assert_eq!(run["ok"], true, "{run:#}");
    assert_eq!(run["sign_ins"], 1, "{run:#}");
    // Both scopes were asked for (scopes_supported); mcp:admin is listed first: profile admin.
    assert!(tool_names(action_result(&run, 0)).contains(&"mcp__kv__set".to_owned()));
    assert_eq!(
        action_result(&run, 2)["structuredContent"]["value"],
        "v",
        "{run:#}"
    );
}

#[test]
fn the_401_names_the_metadata_which_names_the_provider() {
    let setup = setup();
    let (status, challenge, _) = initialize(&setup.gateway, None);
    assert_eq!(status, 401);
    let metadata_path = "/.well-known/oauth-protected-resource/mcp";
    assert_eq!(
        challenge,
        format!(
            "Bearer resource_metadata=\"http://{}{metadata_path}\"",
            setup.gateway.address
        )
    );
    for path in [metadata_path, "/.well-known/oauth-protected-resource"] {
        let (status, _, body) = http_get(setup.gateway.address, path);
        assert_eq!(status, 200, "{path}: {body}");
        let metadata: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(metadata["resource"], setup.resource.as_str());
        assert_eq!(
            metadata["authorization_servers"],
            json!([setup.idp.issuer()])
        );
        assert_eq!(
            metadata["scopes_supported"],
            json!(["mcp:admin", "mcp:read"])
        );
    }
}

#[test]
fn bad_tokens_are_refused_with_401_and_a_token_without_a_mapped_scope_with_403() {
    let setup = setup();
    let idp = &setup.idp;
    let aud = setup.resource.as_str();
    let now = now();
    let header_b64 = "eyJhbGciOiJub25lIiwidHlwIjoiYXQrand0In0"; // {"alg":"none","typ":"at+jwt"}
    let unsigned = {
        let forged = idp.forge(&json!({"aud": aud, "scope": "mcp:admin"}), "k1", None);
        let payload = forged.split('.').nth(1).unwrap().to_owned();
        format!("{header_b64}.{payload}.")
    };
    let cases = [
        (
            "expired",
            idp.forge(
                &json!({"aud": aud, "scope": "mcp:read", "exp": now - 5}),
                "k1",
                None,
            ),
            "expired",
        ),
        (
            "not valid yet",
            idp.forge(
                &json!({"aud": aud, "scope": "mcp:read", "nbf": now + 300}),
                "k1",
                None,
            ),
            "not valid yet",
        ),
        (
            "wrongly signed",
            idp.forge(
                &json!({"aud": aud, "scope": "mcp:read"}),
                "stranger",
                Some("k1"),
            ),
            "signature",
        ),
        (
            "another audience",
            idp.forge(
                &json!({"aud": "http://127.0.0.1:1/mcp", "scope": "mcp:read"}),
                "k1",
                None,
            ),
            "audience",
        ),
        (
            "another issuer",
            idp.forge(
                &json!({"aud": aud, "iss": "http://evil.example"}),
                "k1",
                None,
            ),
            "issuer",
        ),
        (
            "unknown key",
            idp.forge(&json!({"aud": aud, "scope": "mcp:read"}), "stranger", None),
            "key",
        ),
        (
            "nobody's",
            idp.forge(
                &json!({"aud": aud, "scope": "mcp:read", "sub": null}),
                "k1",
                None,
            ),
            "sub or client_id",
        ),
        ("alg none", unsigned, "well-formed"),
        ("not a JWT", "garbage".to_owned(), "well-formed"),
    ];
    for (case, token, reason) in &cases {
        let (status, challenge, _) = initialize(&setup.gateway, Some(token));
        assert_eq!(status, 401, "{case}");
        assert!(
            challenge.starts_with("Bearer error=\"invalid_token\"") && challenge.contains(reason),
            "{case}: {challenge}"
        );
        assert!(
            challenge.contains("resource_metadata="),
            "{case}: {challenge}"
        );
    }
    let unmapped = idp.forge(&json!({"aud": aud, "scope": "openid"}), "k1", None);
    let (status, challenge, _) = initialize(&setup.gateway, Some(&unmapped));
    assert_eq!(status, 403);
    assert!(
        challenge.starts_with("Bearer error=\"insufficient_scope\", scope=\"mcp:admin mcp:read\""),
        "{challenge}"
    );
    // Nothing of a refused token reaches the log.
    let log = setup.gateway.log_text();
    for (case, token, _) in &cases {
        assert!(!log.contains(token.as_str()), "{case} token in the log");
    }
}

#[test]
fn scopes_pick_profiles_and_static_tokens_keep_working() {
    let mut setup = setup();
    let reader = setup.idp.machine_token(&setup.resource, "mcp:read");
    let run = python_client(
        &with_token(&setup.gateway, &reader),
        &json!([
            {"action": "list_tools"},
            {"action": "call_tool", "name": "mcp__kv__get", "arguments": {"key": "k"}},
        ]),
    );
    assert_eq!(
        tool_names(action_result(&run, 0)),
        ["mcp__kv__get", "mcp__kv__list"],
        "{run:#}"
    );
    let run = python_client(
        &with_token(&setup.gateway, STATIC),
        &json!([{"action": "list_tools"}]),
    );
    assert!(tool_names(action_result(&run, 0)).contains(&"mcp__kv__set".to_owned()));
    // The session logs are complete once the gateway has stopped.
    setup
        .gateway
        .signal_and_wait(libc::SIGTERM, Duration::from_secs(30));
    let events = serde_json::to_string(&setup.workspace.session_events()).unwrap();
    assert!(
        events.contains("mcp__kv__get"),
        "the call is logged: {events}"
    );
    assert!(!events.contains(&reader), "the token is in the session log");
}

#[test]
fn a_key_rotation_is_picked_up() {
    let mut setup = setup();
    let before = setup.idp.machine_token(&setup.resource, "mcp:read");
    assert_eq!(initialize(&setup.gateway, Some(&before)).0, 200);
    setup.idp.restart("k2,k1");
    let after = setup.idp.machine_token(&setup.resource, "mcp:read");
    assert_ne!(
        kid(&after),
        kid(&before),
        "the provider signs with the new key"
    );
    // The gateway fetches the key set at most once a second, whatever tokens ask for: the
    // new key is taken once that second has passed.
    assert!(
        eventually(PATIENCE, || initialize(&setup.gateway, Some(&after)).0
            == 200),
        "the new key was never taken"
    );
    assert_eq!(
        initialize(&setup.gateway, Some(&before)).0,
        200,
        "old key still published"
    );
}

#[test]
fn keys_older_than_the_bound_are_not_used_while_the_provider_is_down() {
    let Setup {
        idp,
        gateway,
        resource,
        ..
    } = setup_with("jwks_max_age_secs = 2\n");
    let token = idp.machine_token(&resource, "mcp:read");
    assert_eq!(initialize(&gateway, Some(&token)).0, 200);
    drop(idp);
    // The keys fetched for the first request serve while they are younger than the bound.
    assert_eq!(initialize(&gateway, Some(&token)).0, 200, "kept keys");
    // Once they are older than the bound, they are not used.
    let mut refused = (0, String::new());
    assert!(
        eventually(PATIENCE, || {
            let (status, _, body) = initialize(&gateway, Some(&token));
            refused = (status, body);
            status != 200
        }),
        "the keys were used past their age bound"
    );
    let (status, body) = refused;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("keys cannot be fetched"), "{body}");
}

/// The `kid` of a JWT's header.
fn kid(token: &str) -> String {
    let header = token.split('.').next().unwrap();
    let decoded = base64_url_decode(header);
    let header: Value = serde_json::from_slice(&decoded).unwrap();
    header["kid"].as_str().unwrap().to_owned()
}

fn base64_url_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::new();
    for byte in text.bytes() {
        let value = ALPHABET.iter().position(|&c| c == byte).unwrap() as u32;
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

/// GET `path` on `gateway` with `token`: status and JSON body.
fn get_with_token(gateway: &Gateway, path: &str, token: &str) -> (u16, Value) {
    let bearer = format!("Bearer {token}");
    let (status, _, body) = http_request(
        gateway.address,
        "GET",
        path,
        &[("Authorization", bearer.as_str())],
        b"",
    );
    (status, serde_json::from_str(&body).unwrap_or_default())
}

#[test]
fn the_clients_token_never_goes_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let idp = IdentityProvider::start(dir.path(), "k1", 300);
    let front_address: SocketAddr = free_address();
    let front_resource = format!("http://{front_address}/mcp");
    // Behind the front gateway, a server that would take the very tokens clients bring to
    // the front one (same provider, same audience): passed through, they would open it.
    let behind_workspace = Workspace::new(&format!(
        "{}[listen.oauth]\nissuer = {}\naudience = {}\n",
        example_server("kv", "kv"),
        toml_str(idp.issuer()),
        toml_str(&front_resource),
    ));
    let behind = behind_workspace.serve_http(&[]);
    let front_workspace = Workspace::new(&format!(
        "[servers.behind]\nurl = {}\n[listen.oauth]\nissuer = {}\naudience = {}\n",
        toml_str(format!("http://{}/mcp", behind.address)),
        toml_str(idp.issuer()),
        toml_str(&front_resource),
    ));
    let front = front_workspace.serve_http_at(front_address, &[]);
    let token = idp.machine_token(&front_resource, "mcp:read");
    assert_eq!(initialize(&behind, Some(&token)).0, 200, "behind takes it");

    let run = python_client(
        &with_token(&front, &token),
        &json!([{"action": "list_tools"}]),
    );
    assert_eq!(run["ok"], true, "the token opens the front: {run:#}");
    let (status, health) = get_with_token(&front, "/healthz", &token);
    assert_eq!(status, 200);
    let behind_health = &health["upstreams"]["behind"];
    assert_ne!(behind_health["state"], "ready", "{health:#}");
    assert!(
        behind_health["last_error"]
            .as_str()
            .is_some_and(|error| error.contains("Auth required")),
        "the front reached behind without a token: {health:#}"
    );
    assert!(
        !tool_names(action_result(&run, 0))
            .iter()
            .any(|name| name.starts_with("mcp__behind__")),
        "{run:#}"
    );
}

#[test]
fn a_machine_token_without_a_subject_is_not_the_person_its_client_id_names() {
    use mcp_gateway_tests::streamable::{open_session, post};

    let mut setup = setup();
    let aud = setup.resource.as_str();
    let person = setup.idp.forge(
        &json!({"aud": aud, "scope": "mcp:admin", "sub": "alice"}),
        "k1",
        None,
    );
    // A machine client whose id happens to be Alice's subject, with a token naming no one
    // but the client.
    let machine = setup.idp.forge(
        &json!({"aud": aud, "scope": "mcp:admin", "sub": null, "client_id": "alice"}),
        "k1",
        None,
    );
    let address = setup.gateway.address;
    let session = open_session(address, Some(&person));
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let (status, _, body) = post(address, Some(&session), Some(&machine), ping);
    assert_eq!(status, 403, "the machine reached Alice's session: {body}");
    let (status, _, body) = post(address, Some(&session), Some(&person), ping);
    assert_eq!(status, 200, "{body}");

    // Its own calls are logged as the client's.
    let run = python_client(
        &with_token(&setup.gateway, &machine),
        &json!([{"action": "call_tool", "name": "mcp__kv__list", "arguments": {}}]),
    );
    action_result(&run, 0);
    setup
        .gateway
        .signal_and_wait(libc::SIGTERM, Duration::from_secs(30));
    let identities: Vec<Value> = setup
        .workspace
        .session_events()
        .into_iter()
        .filter(|event| event["type"] == "tool/call")
        .map(|event| event["identity"].clone())
        .collect();
    assert_eq!(identities, [json!("client:alice")]);
}
