//! Issue 8, part 4: one test per security promise not already proven in `transports.rs`
//! (loopback default, tokens, Host/Origin and body size are there): profile masks enforced
//! at call time for a token bound to a profile, sessions bound to the token that opened
//! them, secrets masked in `config dump`, in the session log and in the gateway's own log,
//! run_code programs without file, network or environment access, no way for one
//! session to reach another session's calls, and a console for operators only.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;

use mcp_gateway_tests::*;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CancelledNotificationParam, NumberOrString};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

const ADMIN: &str = "admin-token-for-security-tests";
const READER: &str = "reader-token-for-security-tests";
const OPERATOR: &str = "operator-token-for-security-tests";

fn call(name: &str, arguments: Value) -> Value {
    json!({"action": "call_tool", "name": name, "arguments": arguments})
}

fn run_code(code: &str) -> Value {
    call("run_code", json!({"code": code}))
}

/// client.py arguments for `path` on `gateway` with `token`, over `transport` (http | sse).
fn client_args(gateway: &Gateway, transport: &str, path: &str, token: &str) -> Vec<String> {
    let mut args = gateway.client_args(transport, path);
    args.extend(["--header".into(), format!("Authorization=Bearer {token}")]);
    args
}

/// kv behind two tokens: ADMIN sees everything, READER is bound to `reader` (kv get and
/// list only). `everything` is a profile that hides nothing, to show that a path cannot
/// widen what a bound token sees. run_code is on.
fn two_tokens() -> Workspace {
    Workspace::new(&format!(
        "[gateway]\nmode = \"both\"\n{}[listen]\ntokens = [{}, {{ token = {}, profile = \"reader\" }}]\n\
         [profiles.reader]\nallow = [\"mcp__kv__get\", \"mcp__kv__list\"]\n\
         [profiles.everything]\nallow = [\"*\"]\n",
        example_server("kv", "kv"),
        toml_str(ADMIN),
        toml_str(READER),
    ))
}

/// What ADMIN reads under `key` (null when it was never set).
fn admin_reads(gateway: &Gateway, key: &str) -> Value {
    let run = python_client(
        &client_args(gateway, "http", "/mcp", ADMIN),
        &json!([call("mcp__kv__get", json!({"key": key}))]),
    );
    action_result(&run, 0)["structuredContent"]["value"].clone()
}

#[test]
fn a_token_bound_to_a_profile_is_held_to_it_at_call_time() {
    let workspace = two_tokens();
    let gateway = workspace.serve_http(&[]);
    let attempts = json!([
        {"action": "list_tools"},
        call("mcp__kv__set", json!({"key": "direct", "value": "x"})),
        call("mcp__kv__get", json!({"key": "direct"})),
        run_code("await callTool('mcp__kv__set', { key: 'code', value: 'x' }); return 'set';"),
        run_code("return typeof tools.kv?.set;"),
        run_code("return await tools.kv.set({ key: 'code', value: 'x' });"),
    ]);
    // At /mcp, at a path whose profile hides nothing, and over legacy SSE at that path.
    for (transport, path) in [
        ("http", "/mcp"),
        ("http", "/mcp/everything"),
        ("sse", "/sse/everything"),
    ] {
        let run = python_client(&client_args(&gateway, transport, path, READER), &attempts);
        let federated: Vec<String> = tool_names(action_result(&run, 0))
            .into_iter()
            .filter(|name| name.starts_with("mcp__"))
            .collect();
        assert_eq!(
            federated,
            ["mcp__kv__get", "mcp__kv__list"],
            "{transport} {path}: {run:#}"
        );
        assert_eq!(
            error_code(action_result(&run, 1)),
            Some("TOOL_NOT_FOUND"),
            "{transport} {path}: {run:#}"
        );
        assert_eq!(
            error_code(action_result(&run, 2)),
            None,
            "a visible tool works: {run:#}"
        );
        let from_code = action_result(&run, 3);
        assert_eq!(
            error_code(from_code),
            Some("CODE_RUN_FAILED"),
            "{transport} {path}: {run:#}"
        );
        assert!(
            result_text(from_code).contains("no tool named mcp__kv__set"),
            "{run:#}"
        );
        assert_eq!(
            action_result(&run, 4)["structuredContent"]["result"],
            "undefined",
            "the SDK has no hidden tool: {run:#}"
        );
        // The JavaScript error is a bare TypeError; the failure says what is missing.
        let hidden = result_text(action_result(&run, 5));
        assert!(
            hidden.contains("TypeError")
                && hidden.contains(
                    "hint: server `kv` offers this session no tool `set` (`tools.kv.set`); \
                     its tools: get, list"
                ),
            "{transport} {path}: {hidden}"
        );
    }
    assert_eq!(
        admin_reads(&gateway, "direct"),
        Value::Null,
        "no write got through"
    );
    assert_eq!(
        admin_reads(&gateway, "code"),
        Value::Null,
        "no write got through"
    );
}

/// One JSON-RPC POST to `/mcp` with `token` (and a session id); status, headers, body.
fn post_mcp(
    gateway: &Gateway,
    token: &str,
    session: Option<&str>,
    message: Value,
) -> (u16, Vec<(String, String)>, String) {
    post_mcp_at(gateway, "/mcp", token, session, message)
}

/// [`post_mcp`] to another path, such as `/mcp/{profile}`.
fn post_mcp_at(
    gateway: &Gateway,
    path: &str,
    token: &str,
    session: Option<&str>,
    message: Value,
) -> (u16, Vec<(String, String)>, String) {
    let auth = format!("Bearer {token}");
    let mut headers = vec![
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    if let Some(session) = session {
        headers.push(("Mcp-Session-Id", session));
    }
    http_request(
        gateway.address,
        "POST",
        path,
        &headers,
        message.to_string().as_bytes(),
    )
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "security-test", "version": "1"}
    }})
}

fn set_call(id: u64, key: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "mcp__kv__set", "arguments": {"key": key, "value": "stolen"}}})
}

/// Opens a legacy SSE session with `token`; returns the open stream and the announced
/// `/message?sessionId=…` path.
fn open_sse(gateway: &Gateway, token: &str) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(gateway.address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET /sse HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n",
        gateway.address
    )
    .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "the SSE stream ended"
        );
        if let Some(path) = line.trim().strip_prefix("data:") {
            let path = path.trim();
            if path.contains("sessionId=") {
                return (stream, path.to_owned());
            }
        }
    }
}

#[test]
fn a_session_belongs_to_the_token_that_opened_it() {
    let workspace = two_tokens();
    let gateway = workspace.serve_http(&[]);

    // Streamable HTTP: ADMIN opens a session; READER presents its id.
    let (status, headers, body) = post_mcp(&gateway, ADMIN, None, initialize());
    assert_eq!(status, 200, "{body}");
    let session = headers
        .iter()
        .find(|(name, _)| name == "mcp-session-id")
        .map(|(_, value)| value.clone())
        .expect("a session id");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, body) = post_mcp(&gateway, ADMIN, Some(&session), initialized);
    assert!(status < 300, "{status} {body}");
    let (http_status, _, http_body) =
        post_mcp(&gateway, READER, Some(&session), set_call(1, "over-http"));
    // Nor may READER end the session or read its stream.
    let reader = format!("Bearer {READER}");
    for method in ["DELETE", "GET"] {
        let headers = [
            ("Authorization", reader.as_str()),
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", session.as_str()),
        ];
        let (status, _, body) = http_request(gateway.address, method, "/mcp", &headers, b"");
        assert_eq!(status, 403, "READER's {method} of ADMIN's session: {body}");
    }
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let (status, _, body) = post_mcp(&gateway, ADMIN, Some(&session), ping);
    assert_eq!(status, 200, "the opener's session lives on: {body}");

    // Legacy SSE: ADMIN opens and initializes a session; READER posts to its endpoint.
    let (_stream, endpoint) = open_sse(&gateway, ADMIN);
    let post = |token: &str, message: Value| {
        let auth = format!("Bearer {token}");
        http_request(
            gateway.address,
            "POST",
            &endpoint,
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            message.to_string().as_bytes(),
        )
    };
    assert_eq!(post(ADMIN, initialize()).0, 202);
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(ADMIN, initialized).0, 202);
    let (sse_status, _, sse_body) = post(READER, set_call(7, "over-sse"));
    let ping = json!({"jsonrpc": "2.0", "id": 8, "method": "ping"});
    assert_eq!(post(ADMIN, ping).0, 202, "the opener's session lives on");

    let refused = [401, 403, 404];
    assert!(
        refused.contains(&http_status) && refused.contains(&sse_status),
        "another token's session is refused: streamable HTTP got {http_status} ({http_body}), \
         legacy SSE got {sse_status} ({sse_body})"
    );
    assert_eq!(
        admin_reads(&gateway, "over-http"),
        Value::Null,
        "READER wrote through ADMIN's session"
    );
    assert_eq!(
        admin_reads(&gateway, "over-sse"),
        Value::Null,
        "READER wrote through ADMIN's session"
    );
}

/// A path naming no profile must not fall back to the default profile: `/mcp/typo` and
/// `/sse/typo` answer 404 and open no session, whatever the token.
#[test]
fn an_unknown_profile_path_is_404_and_opens_no_session() {
    let workspace = two_tokens();
    let gateway = workspace.serve_http(&[]);
    for token in [ADMIN, READER] {
        for path in ["/mcp/nosuch", "/mcp/nosuch/", "/mcp/everything/extra"] {
            let (status, headers, body) = post_mcp_at(&gateway, path, token, None, initialize());
            assert_eq!(status, 404, "{path}: {body}");
            assert!(
                !headers.iter().any(|(name, _)| name == "mcp-session-id"),
                "{path} opened a session: {headers:?}"
            );
            if path == "/mcp/nosuch" {
                assert!(body.contains("unknown profile `nosuch`"), "{body}");
            }
        }
        let auth = format!("Bearer {token}");
        let (status, _, body) = http_request(
            gateway.address,
            "GET",
            "/sse/nosuch",
            &[("Authorization", &auth), ("Accept", "text/event-stream")],
            b"",
        );
        assert_eq!(status, 404, "/sse/nosuch: {body}");
        assert!(body.contains("unknown profile `nosuch`"), "{body}");
    }
    // Known profiles keep working, with and without a trailing slash.
    for path in ["/mcp/everything", "/mcp/everything/", "/mcp", "/mcp/"] {
        let (status, headers, body) = post_mcp_at(&gateway, path, ADMIN, None, initialize());
        assert_eq!(status, 200, "{path}: {body}");
        assert!(
            headers.iter().any(|(name, _)| name == "mcp-session-id"),
            "{path}: {headers:?}"
        );
    }
}

#[test]
fn config_dump_masks_every_secret() {
    // bad_input.rs covers a header and a plain token; here: env values, a token bound to a
    // profile, and credentials in an upstream URL (user info and query).
    let workspace = Workspace::new(
        "[servers.remote]\nurl = \"https://alice:hunter2-userinfo@mcp.example.com/mcp?api_key=hunter2-query\"\n\
         headers = { X-Api-Key = \"hunter2-header\" }\n\
         [servers.local]\ncommand = \"/bin/true\"\nenv = { API_KEY = \"hunter2-env\" }\n\
         [listen]\ntokens = [{ token = \"hunter2-bound-token\", profile = \"reader\" }]\n\
         [profiles.reader]\nallow = [\"mcp__local__*\"]\n",
    );
    let output = workspace.cli(&["config", "dump"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let dump = String::from_utf8_lossy(&output.stdout);
    assert!(
        dump.contains("mcp.example.com"),
        "the dump stays useful: {dump}"
    );
    assert!(
        dump.contains("reader"),
        "the bound profile is shown: {dump}"
    );
    let leaked: Vec<&str> = dump
        .lines()
        .filter(|line| line.contains("hunter2"))
        .collect();
    assert!(leaked.is_empty(), "secrets are printed: {leaked:?}");
}

/// A console login with `token`, the gateway named `host`: the status, the error code (if
/// refused) and the login cookie (`name=value`, if admitted).
fn console_login(gateway: &Gateway, token: &str, host: &str) -> (u16, Value, Option<String>) {
    let body = json!({"token": token}).to_string();
    let (status, headers, answer) = http_request(
        gateway.address,
        "POST",
        "/ui/api/login",
        &[("Content-Type", "application/json"), ("Host", host)],
        body.as_bytes(),
    );
    let code = serde_json::from_str::<Value>(&answer).unwrap_or_default()["error"]["code"].clone();
    let cookie = headers
        .iter()
        .find(|(name, _)| name == "set-cookie")
        .and_then(|(_, value)| value.split(';').next())
        .map(str::to_owned);
    (status, code, cookie)
}

#[test]
fn credentials_in_the_redis_and_collector_urls_are_masked_in_the_dump_and_the_console() {
    // Nothing listens at either address: the gateway serves without Redis or a collector.
    let workspace = Workspace::new(&format!(
        "{}[listen]\ntokens = [{{ token = {}, operator = true }}]\n\
         [cluster]\nredis_url = \"redis://gateway:redis-hunter2@127.0.0.1:1/0\"\n\
         [telemetry]\notlp_endpoint = \"http://collector:otlp-hunter2@127.0.0.1:1/?api_key=hunter2-query\"\n",
        example_server("kv", "kv"),
        toml_str(ADMIN),
    ));
    let output = workspace.cli(&["config", "dump"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let gateway = workspace.serve_http(&[]);
    let (status, _, cookie) = console_login(&gateway, ADMIN, &gateway.address.to_string());
    assert_eq!(status, 200);
    let cookie = cookie.expect("the login sets a cookie");
    let (status, _, body) = http_request(
        gateway.address,
        "GET",
        "/ui/api/config",
        &[("Cookie", cookie.as_str())],
        b"",
    );
    assert_eq!(status, 200, "{body}");
    let console: Value = serde_json::from_str(&body).unwrap();
    let dumps = [
        (
            "config dump",
            String::from_utf8_lossy(&output.stdout).into_owned(),
        ),
        (
            "/ui/api/config",
            console["toml"].as_str().unwrap().to_owned(),
        ),
    ];
    for (shown_by, dump) in dumps {
        assert!(
            !dump.contains("hunter2"),
            "{shown_by} prints a secret: {dump}"
        );
        assert!(
            dump.contains("redis://***@127.0.0.1:1/0"),
            "{shown_by} keeps the Redis host: {dump}"
        );
        assert!(
            dump.contains("http://***@127.0.0.1:1/?***"),
            "{shown_by} keeps the collector's host: {dump}"
        );
    }
}

/// Arguments with secrets under the names a user expects masked, at every depth.
fn secret_arguments() -> Value {
    json!({
        "text": "visible text",
        "api_key": "hunter2-api-key",
        "password": "hunter2-password",
        "nested": {"auth": {"access_token": "hunter2-access-token", "Authorization": "Bearer hunter2-bearer"}},
        "list": [{"client_secret": "hunter2-client-secret"}],
    })
}

#[test]
fn secrets_in_arguments_stay_out_of_the_session_log_and_the_log() {
    let workspace = Workspace::new("");
    let config = format!(
        "{}{}",
        misbehaving_server("echo", "well", &workspace.path("echo-events.jsonl"), &[]),
        std::fs::read_to_string(workspace.config()).unwrap()
    );
    std::fs::write(workspace.config(), config).unwrap();
    let mut gateway = workspace.serve_http(&[]);
    let run = python_client(
        &gateway.client_args("http", "/mcp"),
        &json!([call("mcp__echo__echo", secret_arguments())]),
    );
    assert_eq!(
        result_text(action_result(&run, 0)),
        "visible text",
        "{run:#}"
    );
    gateway.signal_and_wait(libc::SIGTERM, Duration::from_secs(30));

    let events = workspace.session_events();
    let logged = events
        .iter()
        .find(|e| e["type"] == "tool/call")
        .unwrap_or_else(|| panic!("the call is in the session log: {events:#?}"));
    assert_eq!(logged["arguments"]["text"], "visible text", "{logged:#}");
    assert_eq!(logged["arguments"]["api_key"], "***", "{logged:#}");
    assert_eq!(
        logged["arguments"]["nested"]["auth"]["access_token"], "***",
        "{logged:#}"
    );
    let all = serde_json::to_string(&events).unwrap();
    assert!(
        !all.contains("hunter2"),
        "the session log holds a secret: {all}"
    );
    let tail = workspace.cli(&["log", "tail"]);
    let tail = String::from_utf8_lossy(&tail.stdout);
    assert!(tail.contains("mcp__echo__echo"), "{tail}");
    assert!(
        !tail.contains("hunter2"),
        "`log tail` shows a secret: {tail}"
    );
    let log = gateway.log_text();
    assert!(
        !log.contains("hunter2"),
        "the gateway log holds a secret: {log}"
    );
}

#[test]
fn secrets_in_upstream_urls_stay_out_of_the_log_and_health() {
    // Nothing listens on the discard port, so both upstreams fail and say why — without the
    // key in their URL.
    let workspace = Workspace::new(
        "[servers.remote]\nurl = \"http://127.0.0.1:9/mcp?api_key=hunter2-http\"\n\
         [servers.legacy]\nurl = \"http://127.0.0.1:9/sse?api_key=hunter2-sse\"\ntransport = \"sse\"\n",
    );
    let gateway = workspace.serve_http(&[]);
    assert!(
        eventually(Duration::from_secs(20), || {
            let health = health(&gateway);
            ["remote", "legacy"]
                .iter()
                .all(|s| health["upstreams"][s]["last_error"].is_string())
        }),
        "{}",
        gateway.log_text()
    );
    let health = health(&gateway).to_string();
    assert!(
        !health.contains("hunter2"),
        "/healthz shows a secret: {health}"
    );
    let log = gateway.log_text();
    assert!(
        log.contains("127.0.0.1:9"),
        "the log says which upstream failed: {log}"
    );
    assert!(
        !log.contains("hunter2"),
        "the gateway log holds a secret: {log}"
    );
}

/// A loopback listener that records whether anything connected.
struct Tripwire(TcpListener);

impl Tripwire {
    fn new() -> Tripwire {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        Tripwire(listener)
    }

    fn port(&self) -> u16 {
        self.0.local_addr().unwrap().port()
    }

    fn touched(&self) -> bool {
        self.0.accept().is_ok()
    }
}

#[test]
fn run_code_programs_reach_no_file_network_or_environment() {
    let tripwire = Tripwire::new();
    let port = tripwire.port();
    let workspace = Workspace::new(&format!(
        "[gateway]\nmode = \"both\"\n{}",
        example_server("kv", "kv")
    ));
    let secret_file = workspace.path("secret.txt");
    std::fs::write(&secret_file, "hunter2-file-content").unwrap();
    let file = secret_file.to_string_lossy();
    let attempt = |body: &str| {
        run_code(&format!(
            "try {{ {body} }} catch (e) {{ return 'blocked: ' + e; }}"
        ))
    };
    let mut args = python_stdio_args(&workspace, &[]);
    args.extend([
        "--env".into(),
        "MCP_GATEWAY_TEST_SECRET=hunter2-environment".into(),
    ]);
    let run = python_client(
        &args,
        &json!([
            run_code(
                "return [typeof fetch, typeof XMLHttpRequest, typeof WebSocket, typeof EventSource, \
                 typeof Deno, typeof require, typeof process, typeof Bun, typeof module, \
                 typeof Worker, typeof importScripts].join(',');"
            ),
            attempt(&format!(
                "return await (await fetch('http://127.0.0.1:{port}/')).text();"
            )),
            attempt(&format!(
                "return JSON.stringify(await import('http://127.0.0.1:{port}/m.js'));"
            )),
            attempt(&format!(
                "return JSON.stringify(await import('file://{file}'));"
            )),
            attempt(&format!("return JSON.stringify(await import({file:?}));")),
            // The stripper refuses `import()` in the source; the runtime must refuse it too.
            attempt(&format!(
                "return JSON.stringify(await eval(\"import('file://{file}')\"));"
            )),
            attempt(&format!(
                "return require('fs').readFileSync({file:?}, 'utf8');"
            )),
            attempt(&format!("return Deno.readTextFileSync({file:?});")),
            attempt("return process.env.MCP_GATEWAY_TEST_SECRET;"),
            attempt("return Deno.env.get('MCP_GATEWAY_TEST_SECRET');"),
            run_code("return Object.getOwnPropertyNames(globalThis).join(',');"),
            call("mcp__kv__list", json!({})),
        ]),
    );
    let value = |index: usize| -> String {
        let result = action_result(&run, index);
        match &result["structuredContent"]["result"] {
            Value::String(text) => text.clone(),
            _ => result_text(result),
        }
    };
    assert_eq!(
        value(0),
        ["undefined"; 11].join(","),
        "no network, module, process or runtime globals: {run:#}"
    );
    for index in 1..=9 {
        let result = action_result(&run, index);
        let outcome = value(index);
        assert!(
            outcome.starts_with("blocked: ") || error_code(result) == Some("CODE_RUN_FAILED"),
            "attempt {index} failed: {outcome}"
        );
    }
    let globals = value(10);
    for name in [
        "fetch",
        "Deno",
        "process",
        "require",
        "Bun",
        "XMLHttpRequest",
        "WebSocket",
        "__bootstrap",
    ] {
        assert!(
            !globals.split(',').any(|global| global == name),
            "{name} is reachable: {globals}"
        );
    }
    assert_eq!(
        error_code(action_result(&run, 11)),
        None,
        "still serving: {run:#}"
    );
    let everything = run.to_string();
    assert!(
        !everything.contains("hunter2-file-content"),
        "a file was read: {everything}"
    );
    assert!(
        !everything.contains("hunter2-environment"),
        "the environment was read: {everything}"
    );
    assert!(!tripwire.touched(), "a program opened a connection");
}

/// Each session log in `workspace`, as its events.
fn session_logs(workspace: &Workspace) -> Vec<Vec<Value>> {
    fn walk(dir: &Path, logs: &mut Vec<Vec<Value>>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, logs);
            } else if path.extension().is_some_and(|e| e == "zst") {
                let mut text = String::new();
                zstd::Decoder::new(std::fs::File::open(&path).unwrap())
                    .unwrap()
                    .read_to_string(&mut text)
                    .unwrap();
                logs.push(
                    text.lines()
                        .map(|l| serde_json::from_str(l).unwrap())
                        .collect(),
                );
            }
        }
    }
    let mut logs = Vec::new();
    walk(&workspace.path("sessions"), &mut logs);
    logs
}

#[test]
fn one_session_cannot_reach_another_sessions_calls() {
    let workspace = Workspace::new("");
    let slow_log = workspace.slow_event_log();
    let config = format!(
        "[gateway]\nmode = \"both\"\n{}env = {{ SLOW_EVENT_LOG = {} }}\n{}{}",
        example_server("slow", "slow"),
        toml_str(slow_log.to_string_lossy()),
        event_log_grant(&slow_log),
        std::fs::read_to_string(workspace.config()).unwrap()
    );
    std::fs::write(workspace.config(), config).unwrap();
    let gateway = workspace.serve_http(&[]);
    let http = || gateway.client_args("http", "/mcp");

    // Two sessions at once: A's call reports progress and leaves a global behind in its
    // program; B, meanwhile, looks for both.
    let a = std::thread::spawn({
        let args = http();
        move || {
            python_client(
                &args,
                &json!([
                    run_code("globalThis.leak = 'from-A'; return typeof globalThis.leak;"),
                    {"action": "call_tool", "name": "mcp__slow__wait",
                     "arguments": {"ms": 1500, "label": "call-of-A"}, "progress": true},
                ]),
            )
        }
    });
    let b = python_client(
        &http(),
        &json!([
            call("mcp__slow__wait", json!({"ms": 1500, "label": "call-of-B"})),
            run_code("return typeof globalThis.leak;"),
        ]),
    );
    let a = a.join().unwrap();
    assert_eq!(
        action_result(&a, 0)["structuredContent"]["result"],
        "string"
    );
    assert!(
        !a["results"][1]["progress"].as_array().unwrap().is_empty(),
        "A got its progress: {a:#}"
    );
    assert_eq!(
        action_result(&b, 1)["structuredContent"]["result"],
        "undefined",
        "{b:#}"
    );
    let progress_to_b = b["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .count();
    assert_eq!(progress_to_b, 0, "B got none of A's progress: {b:#}");

    // Each session's log holds its own calls only.
    let logs = session_logs(&workspace);
    let holding = |label: &str| {
        logs.iter()
            .filter(|events| serde_json::to_string(events).unwrap().contains(label))
            .count()
    };
    assert_eq!(
        (holding("call-of-A"), holding("call-of-B")),
        (1, 1),
        "{logs:#?}"
    );

    // B cancels request ids it never used, A's among them: A's call is untouched.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let connect = || async {
            ().serve(StreamableHttpClientTransport::from_uri(gateway.url("/mcp")))
                .await
                .unwrap()
        };
        let (a, b) = (connect().await, connect().await);
        let mut params = CallToolRequestParams::new("mcp__slow__wait");
        params.arguments = json!({"ms": 1500, "label": "cancel-target"})
            .as_object()
            .cloned();
        let peer = a.peer().clone();
        let call = tokio::spawn(async move { peer.call_tool(params).await });
        // Once slow has started A's call, B cancels (the call runs on the runtime's
        // workers while this thread waits).
        workspace.slow_call_started("cancel-target");
        for id in 0..32 {
            b.peer()
                .notify_cancelled(CancelledNotificationParam::new(
                    Some(NumberOrString::Number(id)),
                    Some("not yours".into()),
                ))
                .await
                .unwrap();
        }
        let result = serde_json::to_value(call.await.unwrap().unwrap()).unwrap();
        assert_eq!(error_code(&result), None, "A's call completed: {result:#}");
        a.cancel().await.unwrap();
        b.cancel().await.unwrap();
    });
    let slow_events = std::fs::read_to_string(&slow_log).unwrap();
    assert!(
        !slow_events
            .lines()
            .any(|l| l.contains("cancel-target") && l.contains("\"cancelled\"")),
        "slow saw no cancellation of A's call: {slow_events}"
    );
}

#[test]
fn console_logins_stop_being_checked_after_ten_wrong_tokens() {
    let workspace = Workspace::new(&format!(
        "{}[listen]\ntokens = [{}]\n",
        example_server("kv", "kv"),
        toml_str(ADMIN)
    ));
    let gateway = workspace.serve_http(&[]);
    let host = gateway.address.to_string();
    for attempt in 0..10 {
        let guess = format!("guess-number-{attempt:04}-of-many");
        let (status, code, _) = console_login(&gateway, &guess, &host);
        assert_eq!(
            (status, code),
            (401, json!("UI_WRONG_TOKEN")),
            "attempt {attempt}"
        );
    }
    // Even the right token now waits for the minute to end.
    let (status, code, _) = console_login(&gateway, ADMIN, &host);
    assert_eq!((status, code), (429, json!("UI_TOO_MANY_LOGINS")));
    // MCP clients are not concerned.
    let run = python_client(
        &client_args(&gateway, "http", "/mcp", ADMIN),
        &json!([{"action": "list_tools"}]),
    );
    action_result(&run, 0);
}

/// A request to the console's API on `gateway` with `headers`: status and error code.
fn console_api(
    gateway: &Gateway,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Value) {
    let mut all = vec![("Content-Type", "application/json")];
    all.extend_from_slice(headers);
    let (status, _, answer) = http_request(gateway.address, method, path, &all, body.as_bytes());
    let code = serde_json::from_str::<Value>(&answer).unwrap_or_default()["error"]["code"].clone();
    (status, code)
}

#[test]
fn only_an_operators_token_opens_the_console_and_its_api() {
    // ADMIN and READER are callers (READER bound to a profile); OPERATOR is marked so.
    let workspace = Workspace::new(&format!(
        "{}[listen]\ntokens = [{}, {{ token = {}, profile = \"reader\" }}, \
         {{ token = {}, operator = true }}]\n[profiles.reader]\nallow = [\"mcp__kv__get\"]\n",
        example_server("kv", "kv"),
        toml_str(ADMIN),
        toml_str(READER),
        toml_str(OPERATOR),
    ));
    let gateway = workspace.serve_http(&[]);
    let host = gateway.address.to_string();

    // A caller's token is refused at the login, with no cookie.
    for caller in [ADMIN, READER] {
        let (status, code, cookie) = console_login(&gateway, caller, &host);
        assert_eq!((status, code), (403, json!("UI_NOT_OPERATOR")), "{caller}");
        assert_eq!(cookie, None, "{caller} got a login cookie");
    }
    // Nor does the API take a caller's bearer token, or a cookie it made up: neither the
    // list of everyone's sign-ins nor a revocation.
    let bearer = format!("Bearer {ADMIN}");
    let made_up = format!("mcp_gateway_console={}", "0".repeat(64));
    for headers in [
        vec![("Authorization", bearer.as_str())],
        vec![("Cookie", made_up.as_str()), ("X-CSRF-Token", "0")],
    ] {
        let (status, code) = console_api(&gateway, "GET", "/ui/api/sign-ins", &headers, "");
        assert_eq!((status, code), (401, json!("UI_LOGIN_REQUIRED")));
        let revoke = json!({"identity": "token:0"}).to_string();
        let (status, code) = console_api(
            &gateway,
            "POST",
            "/ui/api/sign-ins/kv/revoke",
            &headers,
            &revoke,
        );
        assert_eq!((status, code), (401, json!("UI_LOGIN_REQUIRED")));
    }
    // MCP is the callers' all the same.
    let run = python_client(
        &client_args(&gateway, "http", "/mcp", ADMIN),
        &json!([{"action": "list_tools"}]),
    );
    action_result(&run, 0);

    // The operator's token logs in; the API answers its login, reads and revokes.
    let (status, _, cookie) = console_login(&gateway, OPERATOR, &host);
    assert_eq!(status, 200);
    let cookie = cookie.expect("a login cookie");
    let (status, headers, answer) = http_request(
        gateway.address,
        "GET",
        "/ui/api/me",
        &[("Cookie", cookie.as_str())],
        b"",
    );
    assert_eq!(status, 200, "{answer} {headers:?}");
    let csrf = serde_json::from_str::<Value>(&answer).unwrap()["csrf"]
        .as_str()
        .unwrap()
        .to_owned();
    let with_cookie = [("Cookie", cookie.as_str()), ("X-CSRF-Token", csrf.as_str())];
    let (status, code) = console_api(&gateway, "GET", "/ui/api/sign-ins", &with_cookie, "");
    assert_eq!((status, code), (200, Value::Null));
    // kv signs nobody in: the revocation reaches the handler, which says so.
    let revoke = json!({"identity": "token:0"}).to_string();
    let (status, code) = console_api(
        &gateway,
        "POST",
        "/ui/api/sign-ins/kv/revoke",
        &with_cookie,
        &revoke,
    );
    assert_eq!((status, code), (400, json!("UI_BAD_REQUEST")));
}

#[test]
fn behind_a_proxy_loopback_proves_nothing_and_every_request_needs_a_token() {
    let workspace = Workspace::new(&format!(
        "{}[listen]\nbehind_proxy = true\ntokens = [{{ token = {}, operator = true }}]\n\
         allowed_hosts = [\"mcp.example.com\"]\nui = true\n",
        example_server("kv", "kv"),
        toml_str(ADMIN)
    ));
    let gateway = workspace.serve_http(&[]);
    let bearer = format!("Bearer {ADMIN}");
    let healthz = |host: &str| {
        http_request(
            gateway.address,
            "GET",
            "/healthz",
            &[("Host", host), ("Authorization", bearer.as_str())],
            b"",
        )
        .0
    };
    // What a proxy on this machine passes on from anyone: loopback names.
    for loopback in ["localhost", "127.0.0.1", &gateway.address.to_string()] {
        assert_eq!(healthz(loopback), 403, "{loopback}");
    }
    assert_eq!(healthz("mcp.example.com"), 200);
    // The console asks for a token, and takes only the right one.
    let (status, _, answer) = http_request(
        gateway.address,
        "GET",
        "/ui/api/login",
        &[("Host", "mcp.example.com")],
        b"",
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        serde_json::from_str::<Value>(&answer).unwrap()["token_required"],
        true
    );
    assert_eq!(
        console_login(&gateway, "", "mcp.example.com").0,
        401,
        "no token, no console"
    );
    assert_eq!(console_login(&gateway, ADMIN, "mcp.example.com").0, 200);
}

#[test]
fn behind_a_proxy_without_tokens_the_gateway_does_not_start() {
    let workspace = Workspace::new(&format!(
        "{}[listen]\nbehind_proxy = true\nallowed_hosts = [\"mcp.example.com\"]\n",
        example_server("kv", "kv"),
    ));
    for command in [
        &["config", "check"][..],
        &["serve", "--listen", "127.0.0.1:0"],
    ] {
        let output = workspace.cli(command);
        assert!(!output.status.success(), "{command:?} succeeded");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("behind_proxy = true needs tokens"),
            "{command:?}: {stderr}"
        );
    }
}

/// `config check` of `text` with the deploy examples' secrets in the environment.
fn check_deploy_config(text: &str, token: &str) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, text).unwrap();
    std::process::Command::new(gateway_bin())
        .args(["config", "check", "--config"])
        .arg(&file)
        .env("GATEWAY_TOKEN", token)
        .env("REDIS_URL", "redis://127.0.0.1:6379/0")
        .output()
        .unwrap()
}

/// The `config.toml: |` block of the Kubernetes ConfigMap, unindented.
fn kubernetes_config() -> String {
    let yaml = std::fs::read_to_string(repo().join("deploy/kubernetes/gateway.yaml")).unwrap();
    let block = yaml
        .split_once("  config.toml: |\n")
        .expect("the ConfigMap holds config.toml")
        .1;
    block
        .lines()
        .take_while(|line| line.is_empty() || line.starts_with("    "))
        .map(|line| line.strip_prefix("    ").unwrap_or(line))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_deploy_examples_run_behind_a_proxy_with_tokens() {
    let systemd = std::fs::read_to_string(repo().join("deploy/systemd/config.toml")).unwrap();
    for (example, text) in [("systemd", systemd), ("kubernetes", kubernetes_config())] {
        assert!(text.contains("behind_proxy = true"), "{example}: {text}");
        assert!(
            text.contains("tokens = [\"${GATEWAY_TOKEN}\"]"),
            "{example}: {text}"
        );
        let good = check_deploy_config(&text, "a3f9c1d27e8b4f6a0c5d9e2b7a1f4c8d");
        assert!(
            good.status.success(),
            "{example}: {}",
            String::from_utf8_lossy(&good.stderr)
        );
        let short = check_deploy_config(&text, "short");
        assert!(!short.status.success(), "{example} takes a short token");
    }
}

/// A stream resumes with `Last-Event-ID` for the session that owns it only: another
/// session, even of the same credentials, that names one of its event ids is refused, and
/// the owner gets its missed events.
#[test]
fn a_stream_resumes_only_for_its_own_session() {
    use mcp_gateway_tests::streamable::{SseResponse, open_session};
    let workspace = Workspace::new(&example_server("slow", "slow"));
    let gateway = workspace.serve_http(&[]);
    let (mine, theirs) = (
        open_session(gateway.address, None),
        open_session(gateway.address, None),
    );
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "mcp__slow__wait", "arguments": {"ms": 300},
        "_meta": {"progressToken": "p7"}}});
    let mut stream = SseResponse::post(gateway.address, &mine, &call.to_string());
    let seen = std::iter::from_fn(|| stream.next_event())
        .find(|event| event.id.is_some())
        .expect("an event with an id");
    let last = seen.id.unwrap();
    let resume = |session: &str| {
        http_request(
            gateway.address,
            "GET",
            "/mcp",
            &[
                ("Accept", "text/event-stream"),
                ("MCP-Protocol-Version", "2025-11-25"),
                ("Mcp-Session-Id", session),
                ("Last-Event-ID", &last),
            ],
            b"",
        )
    };
    let (status, _, body) = resume(&theirs);
    assert_eq!(status, 400, "another session resumed the stream: {body}");
    // The call has answered (its events are all stored) before the owner resumes.
    std::iter::from_fn(|| stream.next_event())
        .find(|event| event.data.contains(r#""id":7"#))
        .expect("the call's answer on its stream");
    let (status, _, body) = resume(&mine);
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(r#""id":7"#),
        "the owner's missed answer: {body}"
    );
}
