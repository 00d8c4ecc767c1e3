//! Issue 21: restarts and reloads that lose nothing.
//!
//! SIGTERM in the middle of a slow call, over stdio, streamable HTTP and legacy SSE: the
//! client gets the real result, new sessions and new calls are refused clearly while the
//! gateway drains, and the process then exits 0; a call that outlives the grace period
//! gets a clean ABORTED result instead of a dropped stream. A reload (edit the config +
//! SIGHUP) that changes or removes the server of a call in flight: the call returns its
//! real result. A run_code program waiting on a slow tool across SIGTERM finishes.
//!
//! The slow example server writes when each call starts to its event log, so every
//! signal is sent while a call is known to be running upstream.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use mcp_gateway_tests::*;
use serde_json::{Value, json};

/// The slow server (its event log in the workspace) and `settings`.
fn workspace(settings: &str) -> Workspace {
    Workspace::new(&format!("{}{settings}", slow_server_with_events("")))
}

/// `[gateway] shutdown_grace_ms = grace_ms`.
fn grace(grace_ms: u64) -> String {
    format!("[gateway]\nshutdown_grace_ms = {grace_ms}\n")
}

fn sleep_call(ms: u64, label: &str) -> Value {
    json!({"action": "call_tool", "name": "mcp__slow__sleep", "arguments": {"ms": ms, "label": label}})
}

/// Asserts that `result` is slow's real answer to a `ms`-millisecond sleep.
fn assert_slept(result: &Value, ms: u64) {
    assert_ne!(result["isError"], true, "{result:#}");
    assert_eq!(result["structuredContent"]["ms"], ms, "{result:#}");
}

/// Asserts that `result` is the clean error of a call cut by the end of the grace period.
fn assert_cut(result: &Value) {
    assert_eq!(result["isError"], true, "{result:#}");
    assert_eq!(error_code(result), Some("ABORTED"), "{result:#}");
    assert!(result_text(result).contains("grace period"), "{result:#}");
}

/// Sends `signal` to `pid`.
fn kill(pid: i32, signal: i32) {
    // SAFETY: kill only sends a signal, to a process this test started.
    unsafe { libc::kill(pid, signal) };
}

/// Waits until the gateway whose log is `log` has begun its drain.
fn draining(log: &std::path::Path) {
    assert!(
        eventually(PATIENCE, || std::fs::read_to_string(log)
            .unwrap_or_default()
            .contains("shutting down")),
        "no drain began: {}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

// ---- stdio: the test is the client, speaking JSON-RPC lines, so it owns the process ----

/// The gateway over stdio, driven line by line.
struct StdioGateway {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
    log: std::path::PathBuf,
}

impl StdioGateway {
    /// Starts `mcp-gateway serve --stdio` and initializes a session.
    fn start(workspace: &Workspace) -> StdioGateway {
        let (command, args) = workspace.stdio_command(&[]);
        let log = workspace.path("gateway.log");
        let mut child = Command::new(command)
            .args(args)
            .env("RUST_LOG", "info,rmcp=warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(message) = serde_json::from_str(&line)
                    && sender.send(message).is_err()
                {
                    break;
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        let mut gateway = StdioGateway {
            child,
            stdin,
            lines,
            log,
        };
        gateway.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "drain-test", "version": "1"},
            }}),
        );
        gateway.answer(0);
        gateway.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        gateway
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends `tools/call` of `mcp__slow__sleep` as request `id`.
    fn call_sleep(&mut self, id: u64, ms: u64, label: &str) {
        self.send(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "mcp__slow__sleep", "arguments": {"ms": ms, "label": label},
            }}),
        );
    }

    /// The result of request `id` (other messages are skipped).
    fn answer(&mut self, id: u64) -> Value {
        loop {
            let message = self
                .lines
                .recv_timeout(PATIENCE)
                .unwrap_or_else(|e| panic!("no answer to request {id} ({e}): {}", self.log()));
            if message["id"] == id {
                return message["result"].clone();
            }
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for the process to exit by itself and returns whether it exited 0.
    fn exits_successfully(&mut self) -> bool {
        let status = wait_exit(&mut self.child, PATIENCE)
            .unwrap_or_else(|| panic!("the gateway did not exit: {}", self.log()));
        status.success()
    }
}

impl Drop for StdioGateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn stdio_sigterm_delivers_the_call_in_flight_refuses_new_ones_and_exits_0() {
    let workspace = workspace(&grace(20_000));
    let mut gateway = StdioGateway::start(&workspace);
    gateway.call_sleep(1, 2000, "inflight");
    workspace.slow_call_started("inflight");
    kill(gateway.child.id() as i32, libc::SIGTERM);
    draining(&gateway.log);

    gateway.call_sleep(2, 10, "late");
    let refused = gateway.answer(2);
    assert_eq!(
        error_code(&refused),
        Some("UPSTREAM_UNAVAILABLE"),
        "{refused:#}"
    );
    assert!(result_text(&refused).contains("stopping"), "{refused:#}");

    assert_slept(&gateway.answer(1), 2000);
    assert!(gateway.exits_successfully(), "{}", gateway.log());
    assert!(
        workspace.slow_events("late").is_empty(),
        "a refused call ran"
    );
}

#[test]
fn stdio_a_call_past_the_grace_period_gets_a_clean_error() {
    let workspace = workspace(&grace(1000));
    let mut gateway = StdioGateway::start(&workspace);
    gateway.call_sleep(1, 60_000, "long");
    workspace.slow_call_started("long");
    kill(gateway.child.id() as i32, libc::SIGTERM);
    assert_cut(&gateway.answer(1));
    assert!(gateway.exits_successfully(), "{}", gateway.log());
}

// ---- streamable HTTP and legacy SSE, with the official Python SDK client ----

/// client.py's arguments for `transport` (`http` or `sse`).
fn client_args(gateway: &Gateway, transport: &str) -> Vec<String> {
    let path = if transport == "http" { "/mcp" } else { "/sse" };
    gateway.client_args(transport, path)
}

/// SIGTERM while a 4 s call runs over `transport`: readiness flips, `check_while_draining`
/// sees new sessions refused, the call's result arrives, and the gateway exits 0.
///
/// The client lists the tools first, as clients do: the Python SDK checks a result against
/// the tool's outputSchema and would otherwise ask for the list after the result, when
/// the gateway is already gone.
fn sigterm_mid_call(transport: &str, check_while_draining: impl FnOnce(&Gateway)) {
    let workspace = workspace(&grace(20_000));
    let mut gateway = workspace.serve_http(&[]);
    let client = spawn_python_client(
        &client_args(&gateway, transport),
        &json!([{"action": "list_tools"}, sleep_call(4000, "inflight")]),
    );
    workspace.slow_call_started("inflight");
    kill(gateway.pid(), libc::SIGTERM);
    draining(&gateway.log);

    let (status, headers, body) = http_get(gateway.address, "/readyz");
    assert_eq!(status, 503, "{body}");
    assert!(headers.iter().any(|(name, _)| name == "retry-after"));
    assert_eq!(health(&gateway)["status"], "draining");
    check_while_draining(&gateway);

    let run = python_client_output(client);
    assert_slept(action_result(&run, 1), 4000);
    let status = wait_exit(&mut gateway.child, PATIENCE);
    assert!(
        status.is_some_and(|s| s.success()),
        "{status:?}: {}",
        gateway.log_text()
    );
}

#[test]
fn streamable_http_sigterm_delivers_the_call_in_flight_and_exits_0() {
    sigterm_mid_call("http", |gateway| {
        let (status, headers, body) = http_request(
            gateway.address,
            "POST",
            "/mcp",
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
            ],
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        );
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("stopping"), "{body}");
        assert!(
            headers
                .iter()
                .any(|(name, value)| name == "retry-after" && !value.is_empty()),
            "{headers:?}"
        );
    });
}

/// Issue 43, finding 8: the official Python SDK client, mid-call at SIGTERM, as a program
/// would use it (no tool list first: the SDK then lists the tools after the result, to
/// check it against the tool's output schema, and ends its session) sees its result and
/// no error, over either transport, and the gateway exits 0 once the client let go.
#[test]
fn a_client_mid_call_at_sigterm_finishes_without_an_error() {
    for transport in ["http", "sse"] {
        let workspace = workspace(&grace(20_000));
        let mut gateway = workspace.serve_http(&[]);
        let client = spawn_python_client(
            &client_args(&gateway, transport),
            &json!([sleep_call(2000, "inflight")]),
        );
        workspace.slow_call_started("inflight");
        kill(gateway.pid(), libc::SIGTERM);
        let run = python_client_output(client);
        assert_eq!(
            run["ok"],
            true,
            "{transport}: {run:#}\n{}",
            gateway.log_text()
        );
        assert_slept(action_result(&run, 0), 2000);
        assert_eq!(run["transport_errors"], json!([]), "{transport}: {run:#}");
        let status = wait_exit(&mut gateway.child, PATIENCE);
        assert!(
            status.is_some_and(|s| s.success()),
            "{transport}: {status:?}: {}",
            gateway.log_text()
        );
    }
}

/// Issue 43, finding 8: a client that keeps its session past the linger (its program
/// still runs) has its stream ended, and its reconnect is told plainly that the session
/// is over (404) instead of finding the port closed; then the gateway exits 0.
#[test]
fn a_stream_reconnecting_after_the_linger_is_told_its_session_is_over() {
    use std::io::Read;
    let workspace = workspace(&grace(20_000));
    let mut gateway = workspace.serve_http(&[]);
    let session = mcp_gateway_tests::streamable::open_session(gateway.address, None);
    let get = |session: &str| {
        let mut stream = std::net::TcpStream::connect(gateway.address).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        write!(
            stream,
            "GET /mcp HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\
             MCP-Protocol-Version: 2025-06-18\r\nMcp-Session-Id: {session}\r\n\r\n",
            gateway.address
        )
        .unwrap();
        stream
    };
    // Reads what comes until the response ends (the last chunk of a chunked body, or
    // the end of a body of known length).
    let read_response = |stream: &mut std::net::TcpStream| {
        let mut text = Vec::new();
        let mut buffer = [0; 4096];
        loop {
            let read = stream.read(&mut buffer).unwrap_or(0);
            text.extend_from_slice(&buffer[..read]);
            let so_far = String::from_utf8_lossy(&text);
            let whole = so_far.ends_with("\r\n0\r\n\r\n")
                || so_far.split_once("\r\n\r\n").is_some_and(|(head, body)| {
                    head.lines()
                        .find_map(|line| {
                            line.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|n| n.trim().parse::<usize>().unwrap_or(0))
                        })
                        .is_some_and(|length| body.len() >= length)
                });
            if read == 0 || whole {
                return so_far.into_owned();
            }
        }
    };
    let mut stream = get(&session);
    let mut head = [0; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200", "the session's stream opens");
    kill(gateway.pid(), libc::SIGTERM);
    // Nothing is in flight: the drain is over at once, and after the linger the gateway
    // ends the session it still holds, which ends its stream.
    let ended = read_response(&mut stream);
    assert!(
        ended.ends_with("\r\n0\r\n\r\n"),
        "the stream did not end: {ended}"
    );
    let answer = read_response(&mut get(&session));
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert!(answer.contains("session is over"), "{answer}");
    let status = wait_exit(&mut gateway.child, PATIENCE);
    assert!(
        status.is_some_and(|s| s.success()),
        "{status:?}: {}",
        gateway.log_text()
    );
}

#[test]
fn legacy_sse_sigterm_delivers_the_call_in_flight_and_exits_0() {
    sigterm_mid_call("sse", |gateway| {
        let (status, headers, body) = http_get(gateway.address, "/sse");
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("stopping"), "{body}");
        assert!(headers.iter().any(|(name, _)| name == "retry-after"));
    });
}

#[test]
fn new_sessions_are_refused_while_draining_and_a_second_sigterm_stops_at_once() {
    let workspace = workspace(&grace(60_000));
    let mut gateway = workspace.serve_http(&[]);
    let client = spawn_python_client(
        &client_args(&gateway, "http"),
        &json!([sleep_call(60_000, "long")]),
    );
    workspace.slow_call_started("long");
    kill(gateway.pid(), libc::SIGTERM);
    draining(&gateway.log);
    for transport in ["http", "sse"] {
        let refused = python_client(
            &client_args(&gateway, transport),
            &json!([{"action": "list_tools"}]),
        );
        assert_eq!(
            refused["ok"], false,
            "{transport}: a session opened: {refused:#}"
        );
        assert!(
            refused["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("cannot connect")),
            "{transport}: {refused:#}"
        );
        assert!(refused["server"].is_null(), "{refused:#}");
    }
    kill(gateway.pid(), libc::SIGTERM);
    // Well before the grace period (60 s) or the call (60 s) would end.
    let status = wait_exit(&mut gateway.child, Duration::from_secs(15));
    assert!(
        status.is_some_and(|s| s.success()),
        "still draining: {}",
        gateway.log_text()
    );
    // The call in flight never finished: its client lost the connection, or got the
    // error of the upstream stopped under it when the answer made it out first.
    let run = python_client_output(client);
    let failed = run["ok"] == false || action_result(&run, 0)["isError"] == true;
    assert!(failed, "{run:#}");
}

fn grace_cut(transport: &str) {
    let workspace = workspace(&grace(1000));
    let mut gateway = workspace.serve_http(&[]);
    let client = spawn_python_client(
        &client_args(&gateway, transport),
        &json!([sleep_call(60_000, "long")]),
    );
    workspace.slow_call_started("long");
    kill(gateway.pid(), libc::SIGTERM);
    let run = python_client_output(client);
    assert_cut(action_result(&run, 0));
    let status = wait_exit(&mut gateway.child, PATIENCE);
    assert!(
        status.is_some_and(|s| s.success()),
        "{}",
        gateway.log_text()
    );
}

#[test]
fn streamable_http_a_call_past_the_grace_period_gets_a_clean_error() {
    grace_cut("http");
}

#[test]
fn legacy_sse_a_call_past_the_grace_period_gets_a_clean_error() {
    grace_cut("sse");
}

#[test]
fn a_run_code_program_waiting_on_a_slow_tool_finishes_across_sigterm() {
    let workspace = workspace(&format!("{}mode = \"both\"\n", grace(20_000)));
    let mut gateway = workspace.serve_http(&[]);
    let program = r#"
        await tools.slow.sleep({ ms: 1500, label: "first" });
        await tools.slow.sleep({ ms: 500, label: "second" });
        return "done";
    "#;
    let client = spawn_python_client(
        &client_args(&gateway, "http"),
        &json!([
            {"action": "list_tools"},
            {"action": "call_tool", "name": "run_code", "arguments": {"code": program}},
        ]),
    );
    workspace.slow_call_started("first");
    kill(gateway.pid(), libc::SIGTERM);
    let run = python_client_output(client);
    assert_eq!(run["ok"], true, "{run:#}\n{}", gateway.log_text());
    let result = action_result(&run, 1);
    assert_eq!(result["structuredContent"]["result"], "done", "{run:#}");
    assert!(
        workspace
            .slow_events("second")
            .iter()
            .any(|event| event["event"] == "end"),
        "the run's second call, made during the drain, did not run"
    );
    let status = wait_exit(&mut gateway.child, PATIENCE);
    assert!(
        status.is_some_and(|s| s.success()),
        "{}",
        gateway.log_text()
    );
}

// ---- reloads ----

/// A gateway with slow and kv; a client calls slow for 2.5 s while `edit` rewrites the
/// configuration and SIGHUP reloads it. Returns the client's run and slow's old pid.
fn reload_mid_call(edit: impl FnOnce(&str) -> String, script: Value) -> (Value, i32, Gateway) {
    let workspace = workspace(&example_server("kv", "kv"));
    let gateway = workspace.serve_http(&[]);
    let client = spawn_python_client(&client_args(&gateway, "http"), &script);
    let old = workspace.slow_call_started("inflight");
    let config = std::fs::read_to_string(workspace.config()).unwrap();
    std::fs::write(workspace.config(), edit(&config)).unwrap();
    kill(gateway.pid(), libc::SIGHUP);
    let run = python_client_output(client);
    assert!(
        gateway.log_text().contains("configuration reloaded"),
        "{}",
        gateway.log_text()
    );
    (run, old, gateway)
}

#[test]
fn a_reload_that_changes_the_server_of_a_call_in_flight_loses_nothing() {
    let (run, old, gateway) = reload_mid_call(
        |config| {
            config.replace(
                &slow_server_with_events(""),
                &slow_server_with_events(", SLOW_GENERATION = \"2\""),
            )
        },
        json!([
            sleep_call(2500, "inflight"),
            {"action": "call_tool", "name": "mcp__slow__pid", "arguments": {}},
        ]),
    );
    assert_slept(action_result(&run, 0), 2500);
    let new = action_result(&run, 1)["structuredContent"]["pid"]
        .as_i64()
        .unwrap() as i32;
    assert_ne!(new, old, "the changed server was not restarted: {run:#}");
    assert!(
        eventually(PATIENCE, || !alive(old)),
        "the old instance still runs with nothing in flight: {}",
        gateway.log_text()
    );
}

#[test]
fn a_reload_that_removes_the_server_of_a_call_in_flight_loses_nothing() {
    let (run, old, gateway) = reload_mid_call(
        |config| config.replace(&slow_server_with_events(""), ""),
        json!([sleep_call(2500, "inflight"), {"action": "list_tools"}]),
    );
    assert_slept(action_result(&run, 0), 2500);
    let names = tool_names(action_result(&run, 1));
    assert!(
        !names.is_empty() && names.iter().all(|n| n.starts_with("mcp__kv__")),
        "{names:?}"
    );
    assert!(
        run["notifications"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["method"] == "notifications/tools/list_changed"),
        "no list_changed: {run:#}"
    );
    assert!(
        eventually(PATIENCE, || !alive(old)),
        "the removed server still runs: {}",
        gateway.log_text()
    );
}
