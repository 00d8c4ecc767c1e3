//! Issue 8, fuzzing at the process level: the built `mcp-gateway` binary fed hostile input
//! by property tests.
//!
//! - stdio: random JSON-RPC frames (random JSON, valid-looking messages with wrong types,
//!   huge ids, deep nesting, garbage bytes, very long lines) interleaved with real calls;
//!   every real call is answered and the gateway keeps running.
//! - HTTP: random methods, paths, headers and bodies to `/mcp`, `/message?sessionId=` and
//!   friends; every request gets an HTTP answer that is not a 5xx, and the gateway still
//!   serves a real client afterwards.
//! - configuration: mutated TOML (the repository's config.toml and the README's reference)
//!   and client JSON files; `config check` and `config dump` exit 0 or 1 with a message,
//!   never panic and never die of a signal.
//! - arguments: deep and huge arguments to `mcp__kv__get`, over stdio and through
//!   `mcp-gateway call`: INVALID_ARGS or a result, never a crash.
//!
//! Every property spawns processes, so the default case counts are small (16–32);
//! `PROPTEST_CASES=N` runs N cases of each. Inputs that failed are kept at the end as
//! plain regression tests.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use mcp_gateway_tests::*;
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};

/// How long a real request may take to be answered, however hostile the traffic before it.
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// `PROPTEST_CASES` when set, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

fn run_property<S: Strategy>(
    default_cases: u32,
    strategy: S,
    mut test: impl FnMut(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let config = Config {
        cases: cases(default_cases),
        // Every case spawns processes: shrink, but not forever.
        max_shrink_iters: 256,
        // Failures are kept as the regression tests at the end of this file.
        failure_persistence: None,
        ..Config::default()
    };
    let test = std::cell::RefCell::new(&mut test);
    if let Err(failure) = TestRunner::new(config).run(&strategy, |value| (test.borrow_mut())(value))
    {
        panic!("{failure}");
    }
}

fn fail(message: impl Into<String>) -> TestCaseError {
    TestCaseError::fail(message.into())
}

// ---------------------------------------------------------------------------------------
// Hostile JSON and frames
// ---------------------------------------------------------------------------------------

fn scalar() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "\\PC{0,16}".prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ]
    .boxed()
}

/// Any JSON value, small.
fn garbage() -> BoxedStrategy<Value> {
    scalar()
        .prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..4).prop_map(Value::Array),
                btree_map("\\PC{0,8}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
            ]
        })
        .boxed()
}

/// `depth` nested arrays (or objects) around `leaf`.
fn nested(depth: usize, objects: bool, leaf: Value) -> Value {
    let mut value = leaf;
    for _ in 0..depth {
        value = if objects {
            json!({ "a": value })
        } else {
            json!([value])
        };
    }
    value
}

/// Request ids a client should never send: huge, negative, fractional, long, structured.
fn id() -> BoxedStrategy<Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        select(vec![
            json!(u64::MAX),
            json!(i64::MIN),
            json!(1e308),
            json!(-0.5),
            json!(null),
            json!(true),
            json!([]),
            json!({}),
            json!(""),
        ]),
        (0usize..200_000).prop_map(|n| Value::from("i".repeat(n))),
        garbage(),
    ]
    .boxed()
}

const METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
    "sampling/createMessage",
    "",
    "tools/call/",
    "TOOLS/CALL",
];

const TOOL_NAMES: &[&str] = &[
    "mcp__kv__get",
    "mcp__kv__set",
    "mcp__kv__list",
    "mcp__kv__delete",
    "run_code",
    "mcp__kv__",
    "mcp__nope__get",
    "",
];

/// Arguments for a tool: garbage, wrong types, deep nesting, huge strings.
fn arguments() -> BoxedStrategy<Value> {
    prop_oneof![
        3 => garbage(),
        2 => garbage().prop_map(|key| json!({ "key": key })),
        2 => (1usize..120, any::<bool>()).prop_map(|(depth, objects)| {
            json!({ "key": nested(depth, objects, json!("k")) })
        }),
        1 => (0usize..1_000_000).prop_map(|n| json!({ "key": "k".repeat(n) })),
        1 => (0usize..20_000).prop_map(|n| {
            json!({ "key": "k", "value": "v", "extra": vec![0; n] })
        }),
        1 => Just(json!({ "code": "return 1 + 1;" })),
        1 => "\\PC{0,64}".prop_map(|code| json!({ "code": code })),
    ]
    .boxed()
}

/// A message that looks like JSON-RPC, with any part of the wrong type.
fn json_rpc_like() -> BoxedStrategy<Value> {
    let params = prop_oneof![
        2 => garbage(),
        3 => (
            prop_oneof![3 => select(TOOL_NAMES).prop_map(Value::from), 1 => garbage()],
            arguments(),
            proptest::option::of(garbage()),
        )
            .prop_map(|(name, arguments, meta)| {
                let mut params = json!({ "name": name, "arguments": arguments });
                if let Some(meta) = meta {
                    params["_meta"] = meta;
                }
                params
            }),
    ];
    (
        prop_oneof![6 => Just(json!("2.0")), 1 => garbage()],
        proptest::option::of(id()),
        prop_oneof![6 => select(METHODS).prop_map(Value::from), 1 => garbage()],
        proptest::option::of(params),
        proptest::option::of((garbage(), garbage())),
    )
        .prop_map(|(version, id, method, params, extra)| {
            let mut message = Map::new();
            message.insert("jsonrpc".into(), version);
            if let Some(id) = id {
                message.insert("id".into(), id);
            }
            message.insert("method".into(), method);
            if let Some(params) = params {
                message.insert("params".into(), params);
            }
            // Sometimes a response, or a message that is both.
            if let Some((result, error)) = extra {
                message.insert("result".into(), result);
                message.insert("error".into(), error);
            }
            Value::Object(message)
        })
        .boxed()
}

/// One line's worth of hostile bytes (it may itself contain newlines).
fn frame() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        6 => json_rpc_like().prop_map(|m| m.to_string().into_bytes()),
        2 => garbage().prop_map(|v| v.to_string().into_bytes()),
        2 => vec(any::<u8>(), 0..256),
        1 => (select(vec![("[", "]"), ("{\"a\":", "}"), ("[{\"a\":", "}]")]), 1usize..200_000, any::<bool>())
            .prop_map(|((open, close), depth, balanced)| {
                let mut text = open.repeat(depth);
                if balanced {
                    text.push_str(&close.repeat(depth));
                }
                text.into_bytes()
            }),
        1 => (1usize..4_000_000).prop_map(|n| {
            let mut line = b"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"params\":{\"p\":\"".to_vec();
            line.extend(std::iter::repeat_n(b'x', n));
            line.extend(b"\"}}");
            line
        }),
        1 => vec(json_rpc_like(), 0..4).prop_map(|batch| Value::Array(batch).to_string().into_bytes()),
        1 => (json_rpc_like(), any::<prop::sample::Index>()).prop_map(|(m, cut)| {
            let text = m.to_string().into_bytes();
            let at = cut.index(text.len() + 1);
            text[..at].to_vec()
        }),
        1 => select(vec![
            &b"1e999999"[..],
            b"-",
            b"NaN",
            b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}",
            b"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"ping\"}\r",
            b"\"\\ud800\"",
            b"\x00",
            b"",
        ])
        .prop_map(<[u8]>::to_vec),
    ]
    .boxed()
}

// ---------------------------------------------------------------------------------------
// A gateway over stdio, driven line by line
// ---------------------------------------------------------------------------------------

/// `mcp-gateway serve --stdio` with a reader thread turning its stdout into lines.
struct StdioGateway {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Vec<u8>>,
    next_id: u64,
}

impl StdioGateway {
    fn start(workspace: &Workspace) -> StdioGateway {
        let (command, args) = workspace.stdio_command(&[]);
        let mut child = Command::new(command)
            .args(args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(
                std::fs::File::create(workspace.path("gateway.log")).unwrap(),
            ))
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            loop {
                let mut line = Vec::new();
                match stdout.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let mut gateway = StdioGateway {
            child,
            stdin,
            lines,
            next_id: 0,
        };
        let answer = gateway
            .request(
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "fuzz", "version": "0"}}),
            )
            .unwrap_or_else(|e| panic!("initialize: {e}"));
        assert!(answer.get("result").is_some(), "{answer}");
        gateway.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        gateway
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Writes one line. A gateway that stopped reading shows up as a missing answer.
    fn send(&mut self, bytes: &[u8]) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = stdin.write_all(bytes).and_then(|()| stdin.write_all(b"\n"));
            let _ = stdin.flush();
        }
    }

    /// Sends a request with a fresh id that no hostile frame uses, and waits for its answer.
    fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = Value::from(format!("fuzz-real-{}", self.next_id));
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(message.to_string().as_bytes());
        self.answer(&id)
    }

    /// The answer to `id`, skipping everything else the gateway writes.
    fn answer(&self, id: &Value) -> Result<Value, String> {
        let deadline = Instant::now() + ANSWER_WITHIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let Ok(message) = serde_json::from_slice::<Value>(&line) else {
                        return Err(format!(
                            "the gateway wrote a line that is not JSON: {:?}",
                            String::from_utf8_lossy(&line[..line.len().min(200)])
                        ));
                    };
                    if &message["id"] == id {
                        return Ok(message);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!("no answer to {id} within {ANSWER_WITHIN:?}"));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!("the gateway closed stdout before answering {id}"));
                }
            }
        }
    }

    /// A call of `mcp__kv__<tool>` that must succeed.
    fn kv(&mut self, tool: &str, arguments: Value) -> Result<Value, String> {
        let name = format!("mcp__kv__{tool}");
        let answer = self.request("tools/call", json!({"name": name, "arguments": arguments}))?;
        let result = answer
            .get("result")
            .ok_or_else(|| format!("{name} failed: {answer}"))?;
        if result["isError"] == true {
            return Err(format!("{name} failed: {answer}"));
        }
        Ok(result.clone())
    }

    /// Closes stdin: the gateway must exit cleanly and take its children with it.
    fn close(mut self) -> Result<(), String> {
        let children = descendants(self.pid());
        self.stdin = None;
        let status = wait_exit(&mut self.child, Duration::from_secs(30))
            .ok_or("the gateway did not exit after stdin closed")?;
        if status.code().is_none() {
            return Err(format!("the gateway died of a signal: {status:?}"));
        }
        if !eventually(Duration::from_secs(10), || {
            children.iter().all(|&p| !alive(p))
        }) {
            return Err(format!("children left behind: {children:?}"));
        }
        Ok(())
    }
}

impl Drop for StdioGateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kv_workspace(extra: &str) -> Workspace {
    Workspace::new(&format!(
        "[gateway]\nmode = \"both\"\n{extra}\n{}",
        example_server("kv", "kv")
    ))
}

/// The gateway's last words, for failure messages.
fn log_tail(workspace: &Workspace) -> String {
    let log = std::fs::read_to_string(workspace.path("gateway.log")).unwrap_or_default();
    let start = log.len().saturating_sub(2000);
    let start = (start..log.len())
        .find(|&i| log.is_char_boundary(i))
        .unwrap_or(log.len());
    log[start..].to_owned()
}

/// A set and a get with a key no hostile frame uses: the gateway still does real work.
fn real_round_trip(gateway: &mut StdioGateway, n: usize) -> Result<(), String> {
    let key = format!("fuzz-key-{n}");
    let value = format!("fuzz-value-{n}");
    gateway.kv("set", json!({"key": key, "value": value}))?;
    let got = gateway.kv("get", json!({"key": key}))?;
    if got["structuredContent"]["value"] != json!(value) {
        return Err(format!("get returned {got} after set {value}"));
    }
    Ok(())
}

#[test]
fn hostile_frames_on_stdio_never_stop_the_gateway() {
    let steps = vec(vec(frame(), 0..5), 1..4);
    run_property(16, steps, |steps| {
        let workspace = kv_workspace("");
        let mut gateway = StdioGateway::start(&workspace);
        for (n, frames) in steps.iter().enumerate() {
            for frame in frames {
                gateway.send(frame);
            }
            real_round_trip(&mut gateway, n)
                .map_err(|e| fail(format!("{e}\ngateway log: {}", log_tail(&workspace))))?;
        }
        let tools = gateway.request("tools/list", json!({})).map_err(fail)?;
        prop_assert!(
            tools["result"]["tools"]
                .as_array()
                .is_some_and(|t| t.len() >= 4),
            "{}",
            tools
        );
        let rss = rss_mib(gateway.pid());
        prop_assert!(rss < 1024, "the gateway holds {} MiB after the case", rss);
        gateway.close().map_err(fail)
    });
}

// ---------------------------------------------------------------------------------------
// Deep and huge arguments
// ---------------------------------------------------------------------------------------

/// Arguments to `mcp__kv__get`: deep (up to serde_json's 128-level parse limit and past
/// it), wide and huge; the kv tool wants `{key: string}`.
fn deep_or_huge_arguments() -> BoxedStrategy<Value> {
    prop_oneof![
        (1usize..140, any::<bool>()).prop_map(|(depth, objects)| nested(
            depth,
            objects,
            json!("k")
        )),
        (1usize..140, any::<bool>())
            .prop_map(|(depth, objects)| json!({ "key": nested(depth, objects, json!("k")) })),
        (0usize..3_000_000).prop_map(|n| json!({ "key": "k".repeat(n) })),
        (0usize..200_000).prop_map(|n| json!({ "key": vec!["k"; n] })),
        (0usize..50_000).prop_map(|n| {
            let wide: Map<String, Value> = (0..n).map(|i| (format!("k{i}"), json!(i))).collect();
            Value::Object(wide)
        }),
        garbage(),
    ]
    .boxed()
}

/// Whether `value` nests deeper than `limit` (arrays and objects).
fn deeper_than(value: &Value, limit: usize) -> bool {
    let mut stack = vec![(value, 0)];
    while let Some((value, depth)) = stack.pop() {
        if depth > limit {
            return true;
        }
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|v| (v, depth + 1))),
            _ => {}
        }
    }
    false
}

/// What a call with `arguments` must give: a result, INVALID_ARGS when they break the
/// schema or nest deeper than 64, or a JSON-RPC error when they are not an object.
fn check_kv_get_answer(arguments: &Value, answer: &Value) -> Result<(), TestCaseError> {
    if !arguments.is_object() {
        prop_assert!(
            answer.get("error").is_some() || error_code(&answer["result"]) == Some("INVALID_ARGS"),
            "non-object arguments: {}",
            answer
        );
        return Ok(());
    }
    let result = answer
        .get("result")
        .ok_or_else(|| fail(format!("no result: {answer}")))?;
    // The schema is `{key: string}`, required, other properties allowed.
    let valid = arguments["key"].is_string();
    if valid {
        prop_assert!(result["isError"] != true, "a valid call failed: {}", result);
        prop_assert_eq!(&result["structuredContent"]["key"], &arguments["key"]);
    } else {
        prop_assert_eq!(error_code(result), Some("INVALID_ARGS"), "{}", result);
        if deeper_than(arguments, 64) {
            prop_assert!(result_text(result).contains("nested deeper"), "{}", result);
        }
    }
    Ok(())
}

#[test]
fn deep_and_huge_arguments_over_stdio_are_refused_or_served() {
    run_property(16, vec(deep_or_huge_arguments(), 1..6), |calls| {
        let workspace = kv_workspace("");
        let mut gateway = StdioGateway::start(&workspace);
        for arguments in &calls {
            let call = json!({"name": "mcp__kv__get", "arguments": arguments});
            // The frame adds two levels; past serde_json's 128 the line is unreadable and,
            // like any line that is not JSON, goes unanswered: only liveness is checked.
            if deeper_than(arguments, 120) {
                let frame =
                    json!({"jsonrpc": "2.0", "id": "deep", "method": "tools/call", "params": call});
                gateway.send(frame.to_string().as_bytes());
                continue;
            }
            let answer = gateway
                .request("tools/call", call)
                .map_err(|e| fail(format!("{e}\ngateway log: {}", log_tail(&workspace))))?;
            check_kv_get_answer(arguments, &answer)?;
        }
        real_round_trip(&mut gateway, 0).map_err(fail)?;
        gateway.close().map_err(fail)
    });
}

#[test]
fn deep_arguments_through_the_call_command_are_refused_or_served() {
    let arguments = prop_oneof![
        (1usize..140, any::<bool>())
            .prop_map(|(depth, objects)| json!({ "key": nested(depth, objects, json!("k")) })),
        // Command lines are capped at 128 KiB per argument.
        (0usize..100_000).prop_map(|n| json!({ "key": "k".repeat(n) })),
        garbage(),
    ];
    let workspace = kv_workspace("");
    run_property(16, arguments, |arguments| {
        let output = Command::new(gateway_bin())
            .args([
                "call",
                "mcp__kv__get",
                "--args",
                &arguments.to_string(),
                "--config",
            ])
            .arg(workspace.config())
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        prop_assert!(!stderr.contains("panicked"), "{}", stderr);
        let code = output.status.code();
        prop_assert!(
            code.is_some(),
            "killed by a signal: {:?} {}",
            output.status,
            stderr
        );
        if deeper_than(&arguments, 124) && !deeper_than(&arguments, 130) {
            return Ok(()); // at serde_json's limit, give or take a level: either may happen
        }
        if !arguments.is_object() || deeper_than(&arguments, 130) {
            // Refused before the call: not JSON for serde_json, or not an object.
            prop_assert_eq!(code, Some(1), "{}", stderr);
            prop_assert!(stderr.contains("--args"), "{}", stderr);
            return Ok(());
        }
        let result: Value = serde_json::from_slice(&output.stdout)
            .map_err(|e| fail(format!("stdout is not JSON ({e}); stderr: {stderr}")))?;
        prop_assert_eq!(code, Some(if result["isError"] == true { 2 } else { 0 }));
        check_kv_get_answer(&arguments, &json!({ "result": result }))
    });
}

// ---------------------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------------------

/// How one raw exchange ended.
#[derive(Debug, PartialEq)]
enum HttpOutcome {
    /// A status line came back.
    Status(u16),
    /// The server closed the connection without a status line.
    Closed,
    /// Nothing within the deadline.
    Hung,
}

/// Sends `head` and `body` on a fresh connection and reads until the end of the response
/// head (the body of a stream need not end).
fn exchange(address: SocketAddr, head: &[u8], body: &[u8]) -> HttpOutcome {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(ANSWER_WITHIN)).unwrap();
    stream.set_write_timeout(Some(ANSWER_WITHIN)).unwrap();
    // The server may answer (413, 400) before reading the whole body.
    let _ = stream.write_all(head).and_then(|()| stream.write_all(body));
    let mut raw = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                raw.extend_from_slice(&chunk[..n]);
                if raw.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return HttpOutcome::Hung;
            }
            Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&raw);
    match text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
    {
        Some(status) => HttpOutcome::Status(status),
        None => HttpOutcome::Closed,
    }
}

/// A live session of each HTTP transport, so hostile requests can name real session ids.
struct Sessions {
    streamable: String,
    sse: String,
    /// The open `GET /sse` stream, drained by a thread so the server never blocks on it.
    _sse_stream: TcpStream,
}

impl Sessions {
    fn open(address: SocketAddr) -> Sessions {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "fuzz", "version": "0"}}});
        let (status, headers, body) = http_request(
            address,
            "POST",
            "/mcp",
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
            ],
            init.to_string().as_bytes(),
        );
        assert_eq!(status, 200, "{body}");
        let streamable = headers
            .iter()
            .find(|(k, _)| k == "mcp-session-id")
            .map(|(_, v)| v.clone())
            .expect("an Mcp-Session-Id");
        let (status, _, body) = http_request(
            address,
            "POST",
            "/mcp",
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("Mcp-Session-Id", &streamable),
            ],
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        assert_eq!(status, 202, "{body}");

        let mut stream = TcpStream::connect(address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        write!(
            stream,
            "GET /sse HTTP/1.1\r\nHost: {address}\r\nAccept: text/event-stream\r\n\r\n"
        )
        .unwrap();
        let mut seen = String::new();
        let mut chunk = [0u8; 1024];
        let sse = loop {
            let n = stream.read(&mut chunk).expect("the SSE endpoint event");
            assert!(n > 0, "the SSE stream closed: {seen}");
            seen.push_str(&String::from_utf8_lossy(&chunk[..n]));
            if let Some(at) = seen.find("sessionId=") {
                let id: String = seen[at + "sessionId=".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                if !id.is_empty() && seen[at..].contains('\n') {
                    break id;
                }
            }
        };
        let mut drain = stream.try_clone().unwrap();
        drain.set_read_timeout(None).unwrap();
        std::thread::spawn(move || while matches!(drain.read(&mut chunk), Ok(n) if n > 0) {});
        Sessions {
            streamable,
            sse,
            _sse_stream: stream,
        }
    }
}

/// Where a hostile request goes; session ids are filled in from [`Sessions`].
#[derive(Debug, Clone)]
enum Target {
    Mcp,
    McpProfile(String),
    MessageReal,
    MessageRandom(String),
    MessageNoId,
    Other(&'static str),
    Random(String),
}

impl Target {
    fn path(&self, sessions: &Sessions) -> String {
        let escape = |s: &str| -> String {
            s.bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() {
                        (b as char).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect()
        };
        match self {
            Target::Mcp => "/mcp".into(),
            Target::McpProfile(p) => format!("/mcp/{}", escape(p)),
            Target::MessageReal => format!("/message?sessionId={}", sessions.sse),
            Target::MessageRandom(id) => format!("/message?sessionId={}", escape(id)),
            Target::MessageNoId => "/message".into(),
            Target::Other(path) => (*path).into(),
            Target::Random(path) => format!("/{}", escape(path)),
        }
    }
}

fn target() -> BoxedStrategy<Target> {
    prop_oneof![
        4 => Just(Target::Mcp),
        1 => "\\PC{0,12}".prop_map(Target::McpProfile),
        4 => Just(Target::MessageReal),
        1 => "\\PC{0,40}".prop_map(Target::MessageRandom),
        1 => Just(Target::MessageNoId),
        1 => select(vec!["/healthz", "/metrics", "/", "/mcp/", "/message?", "/message?sessionId",
                         "/sse/x/y", "/mcp?x=1", "/%", "/../mcp", "//mcp"])
            .prop_map(Target::Other),
        1 => "\\PC{0,20}".prop_map(Target::Random),
    ]
    .boxed()
}

/// A header value: from a pool of meaningful ones, or random printable text (no CR or LF,
/// which would be our own framing error).
fn header_value(pool: &'static [&'static str]) -> BoxedStrategy<String> {
    prop_oneof![
        3 => select(pool).prop_map(str::to_owned),
        1 => "[ -~\u{80}-\u{ff}]{0,64}",
        1 => (0usize..20_000).prop_map(|n| "v".repeat(n)),
    ]
    .boxed()
}

/// Headers, by name; `{session}` in a value is replaced by the live streamable session id.
fn headers() -> BoxedStrategy<Vec<(String, String)>> {
    let named = prop_oneof![
        header_value(&[
            "application/json",
            "text/plain",
            "application/json; charset=utf-8",
            "multipart/form-data; boundary=x",
            ""
        ])
        .prop_map(|v| ("Content-Type".to_owned(), v)),
        header_value(&[
            "application/json, text/event-stream",
            "text/event-stream",
            "*/*",
            ""
        ])
        .prop_map(|v| ("Accept".to_owned(), v)),
        header_value(&["{session}", "nope", ""]).prop_map(|v| ("Mcp-Session-Id".to_owned(), v)),
        header_value(&["2025-06-18", "2024-11-05", "1999-01-01", ""])
            .prop_map(|v| ("Mcp-Protocol-Version".to_owned(), v)),
        header_value(&[
            "http://127.0.0.1",
            "http://localhost:3000",
            "http://evil.example",
            "null"
        ])
        .prop_map(|v| ("Origin".to_owned(), v)),
        header_value(&["Bearer x", "Basic eDp5", "Bearer"])
            .prop_map(|v| ("Authorization".to_owned(), v)),
        header_value(&["0", "1", "x"]).prop_map(|v| ("Last-Event-ID".to_owned(), v)),
        header_value(&["gzip", "br", "identity"]).prop_map(|v| ("Content-Encoding".to_owned(), v)),
        ("[A-Za-z][A-Za-z0-9-]{0,20}", header_value(&["x"])),
    ];
    prop_oneof![
        // Mostly a well-formed MCP POST with one or two headers changed.
        3 => vec(named.clone(), 0..3).prop_map(|mut changed| {
            let mut headers = vec![
                ("Content-Type".to_owned(), "application/json".to_owned()),
                ("Accept".to_owned(), "application/json, text/event-stream".to_owned()),
                ("Mcp-Session-Id".to_owned(), "{session}".to_owned()),
            ];
            for (name, value) in changed.drain(..) {
                headers.retain(|(n, _)| *n != name);
                headers.push((name, value));
            }
            headers
        }),
        1 => vec(named, 0..6),
    ]
    .boxed()
}

fn body() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        6 => frame(),
        // Past the default body limit (4 MiB): 413.
        1 => (4_194_300usize..4_200_000).prop_map(|n| vec![b' '; n]),
    ]
    .boxed()
}

#[derive(Debug, Clone)]
enum Hostile {
    Request {
        method: &'static str,
        target: Target,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// Bytes that are not HTTP at all.
    Raw(Vec<u8>),
}

fn hostile_request() -> BoxedStrategy<Hostile> {
    prop_oneof![
        8 => (
            prop_oneof![6 => Just("POST"), 1 => select(vec!["GET", "DELETE", "PUT", "OPTIONS", "PATCH", "HEAD"])],
            target(),
            headers(),
            body(),
        )
            .prop_map(|(method, target, headers, body)| Hostile::Request { method, target, headers, body }),
        1 => vec(any::<u8>(), 0..512).prop_map(Hostile::Raw),
    ]
    .boxed()
}

/// Sends one hostile request; `Err` when the gateway failed it.
fn send_hostile(address: SocketAddr, sessions: &Sessions, request: &Hostile) -> Result<(), String> {
    match request {
        Hostile::Raw(bytes) => match exchange(address, bytes, b"") {
            HttpOutcome::Hung => Err("no answer to raw bytes".into()),
            HttpOutcome::Status(status) if status >= 500 => Err(format!("raw bytes got {status}")),
            _ => Ok(()),
        },
        Hostile::Request {
            method,
            target,
            headers,
            body,
        } => {
            let path = target.path(sessions);
            // A GET that opens a stream answers with its head and then keeps going: fine.
            let mut head =
                format!("{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n")
                    .into_bytes();
            for (name, value) in headers {
                let value = value.replace("{session}", &sessions.streamable);
                head.extend(format!("{name}: ").into_bytes());
                // Header values are bytes on the wire: send Latin-1 as single bytes.
                head.extend(value.chars().map(|c| c as u32 as u8));
                head.extend(b"\r\n");
            }
            head.extend(format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes());
            match exchange(address, &head, body) {
                HttpOutcome::Status(status) if status < 500 => Ok(()),
                other => Err(format!("{method} {path}: {other:?}")),
            }
        }
    }
}

#[test]
fn hostile_http_requests_get_an_answer_and_the_gateway_keeps_serving() {
    let workspace = kv_workspace("");
    let gateway = workspace.serve_http(&[]);
    let sessions = Sessions::open(gateway.address);
    let mut gateway = gateway;
    run_property(32, vec(hostile_request(), 1..6), |requests| {
        for request in &requests {
            send_hostile(gateway.address, &sessions, request)
                .map_err(|e| fail(format!("{e}\ngateway log: {}", gateway.log_text())))?;
        }
        prop_assert!(
            matches!(gateway.child.try_wait(), Ok(None)),
            "the gateway exited: {}",
            gateway.log_text()
        );
        let (status, _, body) = http_get(gateway.address, "/healthz");
        prop_assert_eq!(status, 200, "{}", body);
        Ok(())
    });
    // A real client still gets real work done.
    let args = vec![
        "--transport".into(),
        "http".into(),
        "--url".into(),
        gateway.url("/mcp"),
    ];
    let run = python_client(
        &args,
        &json!([
            {"action": "call_tool", "name": "mcp__kv__set", "arguments": {"key": "after", "value": "fuzz"}},
            {"action": "call_tool", "name": "mcp__kv__get", "arguments": {"key": "after"}},
        ]),
    );
    assert_eq!(
        action_result(&run, 1)["structuredContent"]["value"],
        "fuzz",
        "{run:#}"
    );
    let rss = rss_mib(gateway.pid());
    assert!(rss < 1024, "the gateway holds {rss} MiB after the run");
}

// ---------------------------------------------------------------------------------------
// Configuration files
// ---------------------------------------------------------------------------------------

/// The configuration reference in README.md (its first TOML block).
fn readme_reference() -> String {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let start = readme
        .find("## Configuration reference")
        .expect("the reference section");
    let block = &readme[start..];
    let open = block.find("```toml\n").expect("a TOML block") + "```toml\n".len();
    let close = block[open..].find("```").expect("the end of the block");
    block[open..open + close].to_owned()
}

/// Seeds for the mutations: real configurations (TOML, and client JSON files).
fn config_seeds() -> Vec<(String, &'static str)> {
    let mut seeds = vec![
        (
            std::fs::read_to_string(repo().join("config.toml")).unwrap(),
            "toml",
        ),
        (readme_reference(), "toml"),
        (example_server("kv", "kv"), "toml"),
    ];
    for entry in std::fs::read_dir(repo().join("examples/clients"))
        .unwrap()
        .flatten()
    {
        if entry.path().extension().is_some_and(|e| e == "json") {
            seeds.push((std::fs::read_to_string(entry.path()).unwrap(), "json"));
        }
    }
    seeds
}

/// Pieces that make a configuration hostile.
const CONFIG_SNIPPETS: &[&str] = &[
    "[servers.x]\n",
    "[servers.\"a.b\"]\n",
    "[servers.'']\n",
    "[[policy]]\n",
    "[profiles.p]\n",
    "[gateway]\n",
    "[listen]\n",
    "[log]\n",
    "[code]\n",
    "[[servers]]\n",
    " = ",
    "=",
    "\"",
    "'''",
    "\"\"\"",
    "[",
    "]",
    "{",
    "}",
    ",",
    "\n",
    "\r\n",
    "#",
    "\\",
    "\\u0000",
    "${",
    "${GATEWAY_TOKEN}",
    "${UNSET_FUZZ_VARIABLE}",
    "${}",
    "$${X}",
    "99999999999999999999",
    "-1",
    "0",
    "1e309",
    "inf",
    "nan",
    "-0",
    "0x7fffffffffffffff",
    "1979-05-27T07:32:00Z",
    "true",
    "timeout_ms = -5\n",
    "timeout_ms = 0\n",
    "max_body_bytes = 0\n",
    "max_argument_depth = 0\n",
    "max_result_bytes = 18446744073709551615\n",
    "thresholds = []\n",
    "thresholds = [0, 0]\n",
    "thresholds = [8, 5, 3]\n",
    "mode = \"code\"\n",
    "mode = \"\"\n",
    "address = \"0.0.0.0:1\"\n",
    "address = \"[::1]:0\"\n",
    "address = \"nope\"\n",
    "tokens = []\n",
    "tokens = [{ token = \"\", profile = \"nope\" }]\n",
    "sessions_dir = false\n",
    "sessions_dir = \"\"\n",
    "command = \"\"\n",
    "url = \"http://[::1\"\n",
    "url = \"file:///etc/passwd\"\n",
    "transport = \"carrier-pigeon\"\n",
    "decision = \"maybe\"\n",
    "tool = \"[\"\n",
    "tool = \"**/{a,\"\n",
    "allow = [\"{\"]\n",
    "enabled = \"yes\"\n",
    "é",
    "🦀",
    "\u{feff}",
    "\u{0}",
    "\"mcpServers\": {}",
    "\"servers\": {\"x\": {\"command\": 5}}",
    "null",
];

#[derive(Debug, Clone)]
enum Edit {
    Insert(usize, &'static str),
    InsertChar(usize, char),
    Delete(usize, usize),
    Duplicate(usize, usize, usize),
    Truncate(usize),
}

fn edit() -> BoxedStrategy<Edit> {
    prop_oneof![
        4 => (any::<usize>(), select(CONFIG_SNIPPETS)).prop_map(|(at, s)| Edit::Insert(at, s)),
        2 => (any::<usize>(), any::<char>()).prop_map(|(at, c)| Edit::InsertChar(at, c)),
        2 => (any::<usize>(), 1usize..32).prop_map(|(at, n)| Edit::Delete(at, n)),
        1 => (any::<usize>(), 1usize..200, any::<usize>()).prop_map(|(f, n, t)| Edit::Duplicate(f, n, t)),
        1 => any::<usize>().prop_map(Edit::Truncate),
    ]
    .boxed()
}

/// The char boundary at or before `at % (len + 1)`.
fn boundary(s: &str, at: usize) -> usize {
    let mut at = at % (s.len() + 1);
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut s = text.to_owned();
    for edit in edits {
        match *edit {
            Edit::Insert(at, snippet) => s.insert_str(boundary(&s, at), snippet),
            Edit::InsertChar(at, c) => s.insert(boundary(&s, at), c),
            Edit::Delete(at, n) => {
                let from = boundary(&s, at);
                let to = boundary(&s, from + n.min(s.len() - from)).max(from);
                s.replace_range(from..to, "");
            }
            Edit::Duplicate(from, n, to) => {
                let from = boundary(&s, from);
                let end = boundary(&s, from + n.min(s.len() - from)).max(from);
                let piece = s[from..end].to_owned();
                s.insert_str(boundary(&s, to), &piece);
            }
            Edit::Truncate(at) => {
                let at = boundary(&s, at);
                s.truncate(at);
            }
        }
    }
    s
}

/// Runs `mcp-gateway ARGS` with output to files (no pipe can fill) and a deadline.
fn run_cli(
    dir: &std::path::Path,
    args: &[&str],
) -> Result<(std::process::ExitStatus, String, String), String> {
    let stdout = dir.join("stdout");
    let stderr = dir.join("stderr");
    let mut child = Command::new(gateway_bin())
        .args(args)
        .env("RUST_LOG", "warn")
        .env("GATEWAY_TOKEN", "fuzz-token")
        .env("CI_TOKEN", "fuzz-ci")
        .env("TOKEN", "fuzz")
        .env("K", "k")
        .env_remove("UNSET_FUZZ_VARIABLE")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let Some(status) = wait_exit(&mut child, Duration::from_secs(30)) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("`mcp-gateway {}` hung", args.join(" ")));
    };
    let read = |p: &std::path::Path| {
        String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned()
    };
    Ok((status, read(&stdout), read(&stderr)))
}

/// `config check` and `config dump` on `text`: exit 0 or 1, a message on 1, no panic.
fn check_config_text(text: &str, extension: &str) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(format!("config.{extension}"));
    std::fs::write(&file, text).unwrap();
    let file = file.to_string_lossy().into_owned();
    for action in ["check", "dump"] {
        let (status, stdout, stderr) =
            run_cli(dir.path(), &["config", action, "--config", &file]).map_err(fail)?;
        prop_assert!(
            !stderr.contains("panicked"),
            "config {} panicked: {}",
            action,
            stderr
        );
        prop_assert!(
            matches!(status.code(), Some(0 | 1)),
            "config {} ended with {:?}: {}",
            action,
            status,
            stderr
        );
        if status.code() == Some(1) {
            prop_assert!(
                stderr.contains("error"),
                "config {} failed without a message",
                action
            );
        } else if action == "dump" {
            prop_assert!(
                !stdout.contains("fuzz-token"),
                "a secret in the dump: {}",
                stdout
            );
        }
    }
    Ok(())
}

#[test]
fn mutated_configurations_are_checked_without_panicking() {
    let seeds = config_seeds();
    let strategy = (select(seeds), vec(edit(), 0..8));
    run_property(32, strategy, |((seed, extension), edits)| {
        check_config_text(&apply(&seed, &edits), extension)
    });
}

#[test]
fn the_configuration_seeds_are_valid() {
    // The reference in README.md and the repository's config.toml pass as written, so the
    // mutations start from valid files.
    for (seed, extension) in config_seeds() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(format!("config.{extension}"));
        std::fs::write(&file, &seed).unwrap();
        let (status, _, stderr) = run_cli(
            dir.path(),
            &["config", "check", "--config", &file.to_string_lossy()],
        )
        .unwrap();
        assert!(status.success(), "{seed}\n{stderr}");
    }
}

// ---------------------------------------------------------------------------------------
// Regressions: inputs that failed, kept as plain tests
// ---------------------------------------------------------------------------------------

/// A run_code program of 5,000 nested parentheses (10 KB) overflows the stack of the tokio
/// worker that strips it (oxc's parser recurses without a limit): the whole gateway aborts
/// (SIGABRT) and every session and upstream goes with it. Fails until stripping bounds the
/// nesting (or runs where an overflow cannot take the gateway down).
#[test]
fn regression_deeply_nested_run_code_program_does_not_kill_the_gateway() {
    let workspace = kv_workspace("");
    let mut gateway = StdioGateway::start(&workspace);
    let code = format!("return {}1{};", "(".repeat(5000), ")".repeat(5000));
    let answer = gateway.request(
        "tools/call",
        json!({"name": "run_code", "arguments": {"code": code}}),
    );
    let died = wait_exit(&mut gateway.child, Duration::from_secs(2));
    assert!(
        died.is_none(),
        "the gateway died ({died:?}) instead of answering ({answer:?}):\n{}",
        log_tail(&workspace)
    );
    let answer = answer.unwrap();
    assert_eq!(
        error_code(&answer["result"]),
        Some("CODE_RUN_FAILED"),
        "{answer}"
    );
    real_round_trip(&mut gateway, 0).unwrap();
    gateway.close().unwrap();
}

/// An upstream answer longer than rmcp's 16 MiB line limit is dropped by the gateway's
/// reader with only a log line: the call is never answered (it hangs forever without a
/// `timeout_ms`; here, with one, it ends as a misleading TOOL_TIMEOUT). kv echoes the key
/// twice, so a 9 MB key makes an 18 MB answer. Fails until an oversized upstream answer
/// becomes an error (UPSTREAM_ERROR) or a cut result.
#[test]
fn regression_an_oversized_upstream_answer_is_not_silently_dropped() {
    let workspace = Workspace::new(&format!(
        "{}timeout_ms = 20000\n",
        example_server("kv", "kv")
    ));
    let mut gateway = StdioGateway::start(&workspace);
    let key = "k".repeat(9_000_000);
    let answer = gateway
        .request(
            "tools/call",
            json!({"name": "mcp__kv__get", "arguments": {"key": key}}),
        )
        .unwrap();
    let code = error_code(&answer["result"]);
    assert_ne!(
        code,
        Some("TOOL_TIMEOUT"),
        "the answer was dropped: {}",
        log_tail(&workspace)
    );
    real_round_trip(&mut gateway, 0).unwrap();
    gateway.close().unwrap();
}
