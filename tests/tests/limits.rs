//! Issue 43: nothing one client sends can exhaust the gateway. Each finding of the
//! security review, driven over HTTP against the built binary: calls parked for input
//! are capped and expire by a timer, legacy SSE batches and requests in flight are
//! bounded, streams are capped per identity, stateless streams are not recorded, a
//! forged `Last-Event-ID` writes nothing, the limiter's records carry no false owner, and
//! a profile removed by a reload is a 404 rather than a dropped connection, stored events
//! stay within their byte bound (a resume of a dropped one is told so). Then the
//! 20,000-parked-call probe, repeated, and three hostile clients at once beside an
//! ordinary one.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{RwLock, RwLockReadGuard};
use std::time::Duration;

use mcp_gateway_tests::cluster;
use mcp_gateway_tests::streamable::{self, header, open_session, sse_events};
use mcp_gateway_tests::*;
use serde_json::{Value, json};

/// How long a test waits for anything that should happen within a second or two.
const PATIENCE: Duration = Duration::from_secs(30);

/// The probe takes both cores for a minute: it runs alone (write), the other tests side by
/// side (read).
static ALONE: RwLock<()> = RwLock::new(());

/// Lets the other tests of this file run beside this one.
fn beside_others() -> RwLockReadGuard<'static, ()> {
    ALONE
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

const TOKEN_A: &str = "token-of-client-a-0123456789";
const TOKEN_B: &str = "token-of-client-b-0123456789";

/// A tool that asks its client for input mid-call: its name and arguments.
type Asking = (&'static str, &'static str);

/// `tests/servers/asks.py` (over stdio), whose `greet` asks for a name.
const GREET: Asking = ("mcp__asks__greet", "{}");

/// The conformance example (over streamable HTTP, and faster), whose `test_elicitation`
/// asks.
const CONFORMANCE: Asking = (
    "mcp__conf__test_elicitation",
    r#"{"message": "your name?"}"#,
);

/// A gateway in front of asks.py, with `limits` under `[listen.limits]` and `more` after.
fn asking_gateway(limits: &str, more: &str) -> (Workspace, Gateway) {
    let workspace = Workspace::new(&format!(
        "[servers.asks]\ncommand = {}\nargs = [{}]\n[listen.limits]\n{limits}\n{more}",
        toml_str(python().to_string_lossy()),
        toml_str(repo().join("tests/servers/asks.py").to_string_lossy()),
    ));
    let gateway = workspace.serve_http(&[]);
    (workspace, gateway)
}

/// The `_meta` of a stateless request (2026-07-28) of a client that can elicit.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    })
}

/// A gateway in front of the conformance example, with `limits` under `[listen.limits]`
/// and `more` after: calls of several sessions of one client ask side by side there, as a
/// stdio upstream's would take turns.
fn conformance_gateway(limits: &str, more: &str) -> (ListeningServer, Workspace, Gateway) {
    let upstream = ListeningServer::conformance();
    let workspace = Workspace::new(&format!(
        "{}[listen.limits]\n{limits}\n{more}",
        upstream.server_config("conf", "")
    ));
    let gateway = workspace.serve_http(&[]);
    (upstream, workspace, gateway)
}

/// A stateless `tools/call` of asks.py's `greet`, with `extra` params.
fn elicit_call(id: u64, extra: Value) -> String {
    call_of(GREET, id, extra)
}

/// A stateless `tools/call` of `tool`, with `extra` params.
fn call_of((name, arguments): Asking, id: u64, extra: Value) -> String {
    let arguments: Value = serde_json::from_str(arguments).unwrap();
    let mut params = json!({"name": name, "arguments": arguments, "_meta": meta()});
    if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
        params.extend(extra.clone());
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
}

/// POSTs a stateless request to `path`, with `token` when given; status and JSON body.
fn stateless(
    address: SocketAddr,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (u16, Value, String) {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let routing = streamable::routing_headers(body);
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
    ];
    headers.extend(routing.iter().map(|(name, value)| (*name, value.as_str())));
    if let Some(bearer) = &bearer {
        headers.push(("Authorization", bearer));
    }
    let (status, _, text) = http_request(address, "POST", path, &headers, body.as_bytes());
    let answer = serde_json::from_str(&text).unwrap_or(Value::Null);
    (status, answer, text)
}

/// The `requestState` of a call parked for input, asserting that it was.
fn parked_state(answer: &Value, text: &str) -> String {
    assert_eq!(answer["result"]["resultType"], "input_required", "{text}");
    answer["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("no requestState: {text}"))
        .to_owned()
}

/// The stable code of a limit's JSON-RPC error.
fn limit_code(answer: &Value) -> Option<&str> {
    answer["error"]["data"]["code"].as_str()
}

/// Waits until the gateway's log contains `text`.
fn logged(gateway: &Gateway, text: &str) {
    assert!(
        eventually(PATIENCE, || gateway.log_text().contains(text)),
        "never logged `{text}`: {}",
        gateway.log_text()
    );
}

#[test]
fn parked_calls_are_capped_per_session_and_identity() {
    let _beside = beside_others();
    let (_upstream, _workspace, gateway) = conformance_gateway(
        "max_parked_per_session = 2\nmax_parked_per_identity = 3",
        &format!(
            "[listen]\ntokens = [{}]\n[profiles.other]\nallow = [\"*\"]\n",
            toml_str(TOKEN_A)
        ),
    );
    // Two parked in the session of (A, default profile); the third is refused.
    for id in 1..=2 {
        let (status, answer, text) = stateless(
            gateway.address,
            "/mcp",
            Some(TOKEN_A),
            &call_of(CONFORMANCE, id, json!({})),
        );
        assert_eq!(status, 200, "{text}");
        parked_state(&answer, &text);
    }
    let (status, answer, text) = stateless(
        gateway.address,
        "/mcp",
        Some(TOKEN_A),
        &call_of(CONFORMANCE, 3, json!({})),
    );
    assert_eq!(status, 429, "{text}");
    assert_eq!(limit_code(&answer), Some("PARKED_SESSION_LIMIT"), "{text}");
    // Another session of the same identity (another profile) has room for one more, as
    // the identity's limit is three.
    let (status, answer, text) = stateless(
        gateway.address,
        "/mcp/other",
        Some(TOKEN_A),
        &call_of(CONFORMANCE, 4, json!({})),
    );
    assert_eq!(status, 200, "{text}");
    parked_state(&answer, &text);
    let (status, answer, text) = stateless(
        gateway.address,
        "/mcp/other",
        Some(TOKEN_A),
        &call_of(CONFORMANCE, 5, json!({})),
    );
    assert_eq!(status, 429, "{text}");
    assert_eq!(limit_code(&answer), Some("PARKED_IDENTITY_LIMIT"), "{text}");
}

#[test]
fn a_parked_call_nobody_takes_up_is_cancelled_by_a_timer() {
    let _beside = beside_others();
    let (_workspace, gateway) = asking_gateway("parked_ttl_secs = 1", "");
    let (status, answer, text) =
        stateless(gateway.address, "/mcp", None, &elicit_call(1, json!({})));
    assert_eq!(status, 200, "{text}");
    let state = parked_state(&answer, &text);
    // Nothing else is parked or sent: only a timer can cancel it.
    logged(&gateway, "a call parked for input was cancelled");
    let answers = json!({"requestState": state, "inputResponses": {}});
    let (status, answer, text) = stateless(gateway.address, "/mcp", None, &elicit_call(2, answers));
    assert_eq!(status, 429, "{text}");
    assert_eq!(limit_code(&answer), Some("INPUT_EXPIRED"), "{text}");
    assert!(text.contains("parked_ttl_secs"), "{text}");
}

#[test]
fn a_question_unanswered_past_its_deadline_cancels_its_call_however_often_the_client_returns() {
    let _beside = beside_others();
    // The client comes back long before parked_ttl_secs each round, but never answers.
    let (_workspace, gateway) =
        asking_gateway("parked_ttl_secs = 600\ninput_deadline_secs = 2", "");
    let (status, answer, text) =
        stateless(gateway.address, "/mcp", None, &elicit_call(1, json!({})));
    assert_eq!(status, 200, "{text}");
    let mut state = parked_state(&answer, &text);
    let give_up = std::time::Instant::now() + PATIENCE;
    let mut rounds = 0;
    let expired = loop {
        assert!(
            std::time::Instant::now() < give_up,
            "still parked after {rounds} rounds: the deadline restarts with each round"
        );
        let answers = json!({"requestState": state, "inputResponses": {}});
        let (status, answer, text) = stateless(
            gateway.address,
            "/mcp",
            None,
            &elicit_call(2 + rounds, answers),
        );
        if status == 429 {
            break (answer, text);
        }
        assert_eq!(status, 200, "{text}");
        state = parked_state(&answer, &text);
        rounds += 1;
        // Pacing, not synchronisation: a round every 200 ms rather than a busy loop.
        std::thread::sleep(Duration::from_millis(200));
    };
    let (answer, text) = expired;
    assert!(
        rounds >= 2,
        "the client came back {rounds} times only: {text}"
    );
    assert_eq!(limit_code(&answer), Some("INPUT_EXPIRED"), "{text}");
    assert!(text.contains("input_deadline_secs"), "{text}");
    logged(&gateway, "a call parked for input was cancelled");
}

#[test]
fn a_session_holding_parked_calls_leaves_the_stateless_table_past_its_bound() {
    let _beside = beside_others();
    let (_workspace, gateway) = asking_gateway(
        "stateless_sessions = 1",
        &format!(
            "[listen]\ntokens = [{}, {}]\n",
            toml_str(TOKEN_A),
            toml_str(TOKEN_B)
        ),
    );
    let (_, answer, text) = stateless(
        gateway.address,
        "/mcp",
        Some(TOKEN_A),
        &elicit_call(1, json!({})),
    );
    let state = parked_state(&answer, &text);
    // B's first request needs a session of its own: A's, serving no request, is ended.
    let (_, answer, text) = stateless(
        gateway.address,
        "/mcp",
        Some(TOKEN_B),
        &elicit_call(2, json!({})),
    );
    parked_state(&answer, &text);
    let answers = json!({"requestState": state, "inputResponses": {}});
    let (status, answer, text) = stateless(
        gateway.address,
        "/mcp",
        Some(TOKEN_A),
        &elicit_call(3, answers),
    );
    assert_eq!(status, 400, "{text}");
    assert_eq!(answer["error"]["code"], -32602, "{text}");
}

/// Opens `GET /sse` (with `token`); the stream and its `/message` path, or the whole
/// refusal (the connection closes after it).
fn open_sse(address: SocketAddr, token: Option<&str>) -> Result<(TcpStream, String), String> {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "GET /sse HTTP/1.1\r\nHost: {address}\r\n{auth}Accept: text/event-stream\r\n\
         Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    if !status.contains(" 200 ") {
        let mut rest = String::new();
        let _ = reader.read_to_string(&mut rest);
        return Err(format!("{status}{rest}"));
    }
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "the SSE stream ended"
        );
        if let Some(path) = line.trim().strip_prefix("data:")
            && path.contains("sessionId=")
        {
            return Ok((stream, path.trim().to_owned()));
        }
    }
}

fn post_message(address: SocketAddr, path: &str, token: Option<&str>, body: &str) -> (u16, String) {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(bearer) = &bearer {
        headers.push(("Authorization", bearer));
    }
    let (status, _, text) = http_request(address, "POST", path, &headers, body.as_bytes());
    (status, text)
}

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {},
        "clientInfo": {"name": "limits", "version": "1"}}})
}

#[test]
fn legacy_sse_batches_and_requests_in_flight_are_bounded() {
    let _beside = beside_others();
    let workspace = Workspace::new(&format!(
        "{}[listen.limits]\nmax_batch = 4\nmax_in_flight_per_session = 2\n",
        example_server("kv", "kv")
    ));
    let gateway = workspace.serve_http(&[]);
    let (mut stream, path) = open_sse(gateway.address, None).unwrap();
    let (status, text) = post_message(gateway.address, &path, None, &initialize(0).to_string());
    assert_eq!(status, 202, "{text}");
    let set = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "mcp__kv__set", "arguments": {"key": format!("k{id}"), "value": "v"}}})
    };
    let batch: Vec<Value> = (1..=5).map(set).collect();
    let (status, text) = post_message(gateway.address, &path, None, &json!(batch).to_string());
    assert_eq!(status, 413, "{text}");
    assert!(text.starts_with("SSE_BATCH_TOO_LONG"), "{text}");
    let batch: Vec<Value> = (11..=13).map(set).collect();
    let (status, text) = post_message(gateway.address, &path, None, &json!(batch).to_string());
    assert_eq!(status, 429, "{text}");
    assert!(text.starts_with("SSE_IN_FLIGHT_LIMIT"), "{text}");
    // What fits runs; nothing of the refused POSTs did (their answers would have come
    // first).
    let batch: Vec<Value> = (21..=22).map(set).collect();
    let (status, text) = post_message(gateway.address, &path, None, &json!(batch).to_string());
    assert_eq!(status, 202, "{text}");
    let seen = read_until(&mut stream, &["\"id\":21", "\"id\":22"]);
    for refused in [1, 2, 11, 12, 13] {
        assert!(
            !seen.contains(&format!("\"id\":{refused},")),
            "request {refused} ran: {seen}"
        );
    }
}

/// Reads `stream` until everything in `needles` was seen; what was read.
fn read_until(stream: &mut TcpStream, needles: &[&str]) -> String {
    let mut seen = String::new();
    let mut buffer = [0u8; 4096];
    while !needles.iter().all(|needle| seen.contains(needle)) {
        let n = stream.read(&mut buffer).unwrap();
        assert!(n > 0, "the stream ended: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buffer[..n]));
    }
    seen
}

#[test]
fn open_streams_are_capped_per_identity() {
    let _beside = beside_others();
    let workspace = Workspace::new(&format!(
        "{}[listen]\ntokens = [{}, {}]\n[listen.limits]\nmax_streams_per_identity = 2\n",
        example_server("kv", "kv"),
        toml_str(TOKEN_A),
        toml_str(TOKEN_B)
    ));
    let gateway = workspace.serve_http(&[]);
    let first = open_sse(gateway.address, Some(TOKEN_A)).unwrap();
    let session = {
        let (status, headers, body) =
            streamable::post(gateway.address, None, Some(TOKEN_A), streamable::INITIALIZE);
        assert_eq!(status, 200, "{body}");
        header(&headers, "mcp-session-id").unwrap().to_owned()
    };
    let (status, _get) = raw_get_mcp(gateway.address, &session, TOKEN_A);
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let refused = open_sse(gateway.address, Some(TOKEN_A)).unwrap_err();
    assert!(
        refused.contains(" 429 ") && refused.contains("STREAM_LIMIT"),
        "{refused}"
    );
    // Another identity has its own.
    let _other = open_sse(gateway.address, Some(TOKEN_B)).unwrap();
    // A stream closed gives its place back.
    drop(first);
    assert!(
        eventually(PATIENCE, || open_sse(gateway.address, Some(TOKEN_A))
            .is_ok()),
        "no place came back"
    );
}

/// `GET /mcp` of `session`: the response head, and the connection held open.
fn raw_get_mcp(address: SocketAddr, session: &str, token: &str) -> (String, TcpStream) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(
        stream,
        "GET /mcp HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\
         Accept: text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\nMcp-Session-Id: {session}\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    (status, stream)
}

#[test]
fn the_streams_of_stateless_requests_are_not_recorded() {
    let _beside = beside_others();
    let (_workspace, gateway) = asking_gateway("", "");
    let body = elicit_call(1, json!({}));
    let routing = streamable::routing_headers(&body);
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
    ];
    headers.extend(routing.iter().map(|(name, value)| (*name, value.as_str())));
    let (status, _, text) =
        http_request(gateway.address, "POST", "/mcp", &headers, body.as_bytes());
    assert_eq!(status, 200, "{text}");
    let events = sse_events(&text);
    assert!(
        events
            .iter()
            .any(|event| event.data.contains("input_required")),
        "{text}"
    );
    assert!(
        events.iter().all(|event| event.id.is_none()),
        "events of a stream nobody can resume carry ids: {text}"
    );
}

#[test]
fn a_forged_last_event_id_writes_nothing() {
    let _beside = beside_others();
    let workspace = Workspace::new(&example_server("kv", "kv"));
    let gateway = workspace.serve_http(&[]);
    let session = open_session(gateway.address, None);
    let resume = |last: &str| {
        http_request(
            gateway.address,
            "GET",
            "/mcp",
            &[
                ("Accept", "text/event-stream"),
                ("MCP-Protocol-Version", "2025-06-18"),
                ("Mcp-Session-Id", &session),
                ("Last-Event-ID", last),
            ],
            b"",
        )
    };
    // A replica that never was, a stream the client names, a request id 7 (`37` in hex).
    let forged = format!("gone-replica:{session}:chosen/5#37");
    let (status, _, body) = resume(&forged);
    assert_eq!(status, 200, "{body}");
    let events = sse_events(&body);
    assert_eq!(events.len(), 1, "{body}");
    assert!(
        events[0].data.contains("stopped before answering"),
        "{body}"
    );
    // Nothing was stored under the name the client chose.
    let (status, _, body) = resume(&format!("gone-replica:{session}:chosen/0"));
    assert_eq!(status, 200, "{body}");
    assert!(sse_events(&body).is_empty(), "an event was written: {body}");
}

#[test]
fn stored_events_are_bounded_in_bytes_and_a_resume_of_a_dropped_one_says_so() {
    let _beside = beside_others();
    // In this process's memory, and in a real Redis.
    stored_events_are_bounded_in(None);
    stored_events_are_bounded_in(Some(&cluster::Redis::start()));
}

fn stored_events_are_bounded_in(redis: Option<&cluster::Redis>) {
    let redis_url = redis.map_or(String::new(), |redis| {
        format!("redis_url = {}\n", toml_str(redis.url()))
    });
    // Room for about four answers of 1.5 KB, across every stream.
    let workspace = Workspace::new(&format!(
        "{}[cluster]\nmax_event_bytes = 8000\n{redis_url}",
        example_server("kv", "kv")
    ));
    let gateway = workspace.serve_http(&[]);
    let session = open_session(gateway.address, None);
    let value = "v".repeat(1500);
    let set = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": "mcp__kv__set", "arguments": {"key": "k", "value": value}}});
    let (status, _, body) =
        streamable::post(gateway.address, Some(&session), None, &set.to_string());
    assert_eq!(status, 200, "{body}");
    // Each answer on an event stream of its own, stored for resumption.
    let streamed = |id: u64, headers: &[(&str, &str)], method: &str, body: &str| {
        let mut all = vec![
            ("Accept", "text/event-stream"),
            ("MCP-Protocol-Version", "2025-06-18"),
            ("Mcp-Session-Id", session.as_str()),
        ];
        all.extend_from_slice(headers);
        let (status, _, text) =
            http_request(gateway.address, method, "/mcp", &all, body.as_bytes());
        (status, text, id)
    };
    let mut answers = Vec::new();
    for id in 2..10 {
        let get = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": "mcp__kv__get", "arguments": {"key": "k"}}});
        let (status, text, _) = streamed(
            id,
            &[("Content-Type", "application/json")],
            "POST",
            &get.to_string(),
        );
        assert_eq!(status, 200, "{text}");
        let events = sse_events(&text);
        let answer = events
            .iter()
            .find(|event| event.data.contains(&value))
            .unwrap_or_else(|| panic!("no answer with the value: {text}"));
        answers.push(answer.id.clone().expect("a stored answer has an id"));
    }
    // Resuming a stream from before its answer: `<stream>/<n>#<request>` → `<stream>/0#…`.
    let resume_from_start = |answer: &str| {
        let (stored, request) = answer.split_once('#').unwrap();
        let (stream, _) = stored.rsplit_once('/').unwrap();
        let last = format!("{stream}/0#{request}");
        let (status, text, _) = streamed(0, &[("Last-Event-ID", &last)], "GET", "");
        (status, text)
    };
    // The newest answer is replayed whole.
    let (status, text) = resume_from_start(answers.last().unwrap());
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(&value), "the newest answer is kept: {text}");
    // The oldest was dropped for the newer ones, and its resume says so.
    let (status, text) = resume_from_start(&answers[0]);
    assert_eq!(status, 410, "{text}");
    assert!(text.starts_with("EVENTS_DROPPED"), "{text}");
}

#[test]
fn the_rate_limiter_makes_no_session_record_for_sessions_of_other_transports() {
    let _beside = beside_others();
    let workspace = Workspace::new(&format!(
        "{}[listen]\ntokens = [{}]\n[guards]\nmax_calls_per_minute = 100\n",
        example_server("kv", "kv"),
        toml_str(TOKEN_A)
    ));
    let gateway = workspace.serve_http(&[]);
    let (mut stream, path) = open_sse(gateway.address, Some(TOKEN_A)).unwrap();
    let sse_session = path.rsplit('=').next().unwrap().to_owned();
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "mcp__kv__set", "arguments": {"key": "k", "value": "v"}}});
    for message in [initialize(0), call] {
        let (status, text) =
            post_message(gateway.address, &path, Some(TOKEN_A), &message.to_string());
        assert_eq!(status, 202, "{text}");
    }
    // The call went through the limiter once its answer is on the stream.
    read_until(&mut stream, &["\"id\":1"]);
    // The SSE session's id names no streamable HTTP session, for its own client too.
    let (status, _, body) = streamable::post(
        gateway.address,
        Some(&sse_session),
        Some(TOKEN_A),
        streamable::INITIALIZED,
    );
    assert_eq!(status, 404, "{body}");
}

/// The keys of `redis` that match `pattern`.
fn redis_keys(redis: &cluster::Redis, pattern: &str) -> Vec<String> {
    let output = std::process::Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &redis.address.port().to_string()])
        .args(["--scan", "--pattern", pattern])
        .output()
        .expect("redis-cli is missing: run scripts/install-cluster-deps");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn in_redis_the_limiter_and_the_reminder_make_no_session_record_for_other_transports() {
    let _beside = beside_others();
    let redis = cluster::Redis::start();
    let workspace = Workspace::new(&format!(
        "{}[cluster]\nredis_url = {}\n[guards]\nmax_calls_per_minute = 100\n\
         [reminder]\nenabled = true\n",
        example_server("kv", "kv"),
        toml_str(redis.url())
    ));
    let gateway = workspace.serve_http(&[]);
    let call = |id: u64, meta: Option<Value>| {
        let mut params = json!({"name": "mcp__kv__set", "arguments": {"key": "k", "value": "v"}});
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
    };
    // A legacy SSE session's call.
    let (mut stream, path) = open_sse(gateway.address, None).unwrap();
    for message in [initialize(0), call(1, None)] {
        let (status, text) = post_message(gateway.address, &path, None, &message.to_string());
        assert_eq!(status, 202, "{text}");
    }
    read_until(&mut stream, &["\"id\":1"]);
    // A stateless request's (2026-07-28).
    let (status, answer, text) = stateless(
        gateway.address,
        "/mcp",
        None,
        &call(2, Some(meta())).to_string(),
    );
    // With a shared store it streams from its first byte: the answer is an event.
    assert_eq!(status, 200, "{text}");
    let answered = sse_events(&text).iter().any(|event| {
        serde_json::from_str::<Value>(&event.data)
            .is_ok_and(|answer| answer["id"] == 2 && answer["result"]["isError"] == false)
    });
    assert!(answered, "{answer} {text}");
    // A stdio session's.
    let mut stdio = workspace.raw_stdio();
    stdio.initialize();
    stdio.send(&call(3, None));
    assert_eq!(stdio.read()["id"], 3);
    // Each session's limiter window and reminder chain are in Redis; no session record.
    let windows = redis_keys(&redis, "mcp-gateway:window:*");
    let chains = redis_keys(&redis, "mcp-gateway:chain:*");
    assert_eq!(
        (windows.len(), chains.len()),
        (3, 3),
        "{windows:?} {chains:?}"
    );
    let records = redis_keys(&redis, "mcp-gateway:session:*");
    assert!(
        records.is_empty(),
        "session records without an owner: {records:?}"
    );
}

#[test]
fn a_stateless_request_for_a_profile_a_reload_removed_is_refused_not_dropped() {
    let _beside = beside_others();
    let workspace = Workspace::new(&format!(
        "{}[profiles.gone]\nallow = [\"*\"]\n",
        example_server("kv", "kv")
    ));
    let gateway = workspace.serve_http(&[]);
    let config = std::fs::read_to_string(workspace.config()).unwrap();
    std::fs::write(
        workspace.config(),
        config.replace("[profiles.gone]\nallow = [\"*\"]\n", ""),
    )
    .unwrap();
    // SAFETY: kill only sends a signal to our own child.
    unsafe { libc::kill(gateway.pid(), libc::SIGHUP) };
    logged(&gateway, "configuration reloaded");
    let list =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}});
    let (status, answer, text) = stateless(gateway.address, "/mcp/gone", None, &list.to_string());
    assert_eq!(status, 404, "{text}");
    assert_eq!(answer["id"], 1, "{text}");
    assert!(text.contains("unknown profile"), "{text}");
}

/// Must show 2: three hostile clients at once beside an ordinary one. A parking flood
/// (stateless calls that ask for input, never answered), a legacy SSE batch flood
/// (batches past `max_batch`, and full ones that pile up unread) and a slow reader (more
/// SSE streams than its identity may hold, each with 8 answers of 64 KiB it never reads).
/// The ordinary client's calls all complete with the right answers, every hostile request
/// gets an answer or a documented refusal, and the gateway stays under 200 MiB resident.
#[test]
fn hostile_clients_at_once_leave_an_ordinary_client_served_in_bounded_memory() {
    const ORDINARY_CALLS: u64 = 300;
    const PARKING_CALLS: u64 = 2_000;
    const BATCH_ROUNDS: u64 = 40;
    const STREAMS: usize = 80;
    let _alone = ALONE
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (_upstream, _workspace, gateway) = conformance_gateway("", &example_server("kv", "kv"));
    let address = gateway.address;
    let tool_call = |id: u64, name: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": name, "arguments": arguments}})
    };
    let big = "b".repeat(64 * 1024);
    let ordinary = open_session(address, None);
    let set_big = tool_call(1, "mcp__kv__set", json!({"key": "big", "value": big}));
    let (status, _, body) = streamable::post(address, Some(&ordinary), None, &set_big.to_string());
    assert_eq!(status, 200, "{body}");
    let peak = RssPeak::watch(gateway.pid());

    let parking = std::thread::spawn(move || {
        let mut connection = KeepAlive::connect(address);
        let (mut parked, mut refused) = (0, 0);
        for n in 0..PARKING_CALLS {
            let (status, body) = connection.post(&call_of(CONFORMANCE, n, json!({})));
            match status {
                200 if body.contains("input_required") => parked += 1,
                429 if body.contains("PARKED_") => refused += 1,
                _ => panic!("parking flood: {status}: {body}"),
            }
        }
        (parked, refused)
    });
    let batches = std::thread::spawn(move || {
        let (_stream, path) = open_sse(address, None).expect("the batch flooder's stream");
        let (status, text) = post_message(address, &path, None, &initialize(0).to_string());
        assert_eq!(status, 202, "{text}");
        let (mut too_long, mut busy, mut taken) = (0, 0, 0);
        for round in 0..BATCH_ROUNDS {
            let batch = |length: u64| {
                let calls: Vec<Value> = (0..length)
                    .map(|i| tool_call(1 + round * 1000 + i, "mcp__kv__get", json!({"key": "big"})))
                    .collect();
                json!(calls).to_string()
            };
            let (status, text) = post_message(address, &path, None, &batch(65));
            assert!(
                status == 413 && text.starts_with("SSE_BATCH_TOO_LONG"),
                "{status}: {text}"
            );
            too_long += 1;
            // A full batch, whose answers nobody reads.
            match post_message(address, &path, None, &batch(64)) {
                (202, _) => taken += 1,
                (429, text)
                    if text.starts_with("SSE_IN_FLIGHT_LIMIT")
                        || text.starts_with("SSE_IDENTITY_IN_FLIGHT_LIMIT") =>
                {
                    busy += 1
                }
                (status, text) => panic!("batch flood: {status}: {text}"),
            }
        }
        (too_long, busy, taken)
    });
    let reader = std::thread::spawn(move || {
        let (mut held, mut refused) = (Vec::new(), 0);
        for _ in 0..STREAMS {
            match open_sse(address, None) {
                Ok((stream, path)) => {
                    // Past the identity's requests in flight (the batch flood's and this
                    // reader's unread answers), its requests are refused; the stream is
                    // held all the same.
                    let within = |(status, text): (u16, String)| {
                        let refused =
                            status == 429 && text.starts_with("SSE_IDENTITY_IN_FLIGHT_LIMIT");
                        assert!(status == 202 || refused, "{status}: {text}");
                        status == 202
                    };
                    let calls: Vec<Value> = (1..=8)
                        .map(|id| tool_call(id, "mcp__kv__get", json!({"key": "big"})))
                        .collect();
                    if within(post_message(
                        address,
                        &path,
                        None,
                        &initialize(0).to_string(),
                    )) {
                        within(post_message(
                            address,
                            &path,
                            None,
                            &json!(calls).to_string(),
                        ));
                    }
                    held.push(stream);
                }
                Err(refused_with) => {
                    assert!(refused_with.contains("STREAM_LIMIT"), "{refused_with}");
                    refused += 1;
                }
            }
        }
        (held, refused)
    });
    // The ordinary client, meanwhile.
    let started = std::time::Instant::now();
    for n in 0..ORDINARY_CALLS {
        let key = format!("k{n}");
        let set = tool_call(
            2 * n + 10,
            "mcp__kv__set",
            json!({"key": key, "value": n.to_string()}),
        );
        let get = tool_call(2 * n + 11, "mcp__kv__get", json!({"key": key}));
        for (call, expected) in [(set, None), (get, Some(n.to_string()))] {
            let (status, _, body) =
                streamable::post(address, Some(&ordinary), None, &call.to_string());
            assert_eq!(status, 200, "ordinary call {n}: {body}");
            // Plain JSON, or an event stream when the answer took long.
            let answer = serde_json::from_str::<Value>(&body)
                .ok()
                .or_else(|| {
                    sse_events(&body)
                        .iter()
                        .filter_map(|event| serde_json::from_str::<Value>(&event.data).ok())
                        .find(|message| message["id"] == call["id"])
                })
                .unwrap_or_else(|| panic!("ordinary call {n}: no answer in {body}"));
            assert_eq!(answer["id"], call["id"], "{body}");
            assert_eq!(answer["result"]["isError"], false, "{body}");
            if let Some(value) = expected {
                assert_eq!(
                    answer["result"]["structuredContent"]["value"], value,
                    "{body}"
                );
            }
        }
    }
    let ordinary_took = started.elapsed();
    let (parked, refused_parking) = parking.join().unwrap();
    let (too_long, busy, taken) = batches.join().unwrap();
    let (held, refused_streams) = reader.join().unwrap();
    let peak = peak.stop();
    eprintln!(
        "parking: {parked} parked, {refused_parking} refused; batches: {too_long} too long, \
         {taken} taken, {busy} refused in flight; streams: {} held, {refused_streams} refused; \
         peak resident {peak} MiB; the ordinary client's {} calls took {ordinary_took:?}",
        held.len(),
        2 * ORDINARY_CALLS
    );
    assert_eq!(parked, 32, "the session's cap");
    assert_eq!(too_long, BATCH_ROUNDS);
    assert!(refused_streams > 0, "no stream was refused");
    assert!(peak < 200, "resident memory reached {peak} MiB");
}

/// A client holding one keep-alive connection.
struct KeepAlive {
    reader: BufReader<TcpStream>,
    address: SocketAddr,
}

impl KeepAlive {
    fn connect(address: SocketAddr) -> KeepAlive {
        let stream = TcpStream::connect(address).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        KeepAlive {
            reader: BufReader::new(stream),
            address,
        }
    }

    /// POSTs a stateless request to `/mcp`; status and body (answers are plain JSON).
    fn post(&mut self, body: &str) -> (u16, String) {
        let routing: String = streamable::routing_headers(body)
            .iter()
            .map(|(name, value)| format!("{name}: {value}\r\n"))
            .collect();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
             {routing}Content-Length: {}\r\n\r\n{body}",
            self.address,
            body.len()
        );
        self.reader.get_mut().write_all(request.as_bytes()).unwrap();
        let mut status = String::new();
        self.reader.read_line(&mut status).unwrap();
        let status = status
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let (mut length, mut chunked) = (0, false);
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).unwrap();
            if line.trim().is_empty() {
                break;
            }
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap();
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.contains("chunked");
            }
        }
        if !chunked {
            let mut body = vec![0; length];
            self.reader.read_exact(&mut body).unwrap();
            return (status, String::from_utf8_lossy(&body).into_owned());
        }
        let mut body = Vec::new();
        loop {
            let mut size = String::new();
            self.reader.read_line(&mut size).unwrap();
            let size = usize::from_str_radix(size.trim(), 16).unwrap();
            let mut chunk = vec![0; size + 2];
            self.reader.read_exact(&mut chunk).unwrap();
            if size == 0 {
                return (status, String::from_utf8_lossy(&body).into_owned());
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
}

/// Issue 43's probe: 20,000 calls that ask for input over keep-alive connections. Past
/// the cap they are refused, and the gateway's resident memory grows by under 50 MB.
#[test]
fn twenty_thousand_parked_calls_are_refused_past_the_cap_in_bounded_memory() {
    const CALLS: u64 = 20_000;
    const CLIENTS: u64 = 16;
    let _alone = ALONE
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (_upstream, _workspace, gateway) = conformance_gateway("", "");
    // A first call warms up the path (the upstream's connection, the session).
    let call = |id| call_of(CONFORMANCE, id, json!({}));
    let (_, answer, text) = stateless(gateway.address, "/mcp", None, &call(0));
    parked_state(&answer, &text);
    let before = rss_mib(gateway.pid());
    let peak = RssPeak::watch(gateway.pid());
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let address = gateway.address;
            std::thread::spawn(move || {
                let mut connection = KeepAlive::connect(address);
                let (mut parked, mut refused) = (0, 0);
                for n in 0..CALLS / CLIENTS {
                    let (status, body) = connection.post(&call(1 + client * CALLS + n));
                    match status {
                        200 if body.contains("input_required") => parked += 1,
                        429 if body.contains("PARKED_") => refused += 1,
                        _ => panic!("{status}: {body}"),
                    }
                }
                (parked, refused)
            })
        })
        .collect();
    let (parked, refused) = clients
        .into_iter()
        .map(|client| client.join().unwrap())
        .fold((0, 0), |(p, r), (cp, cr)| (p + cp, r + cr));
    let peak = peak.stop();
    eprintln!("parked {parked}, refused {refused}; resident {before} MiB, peak {peak} MiB");
    // The default cap per session is 32, one of them the warm-up call.
    assert_eq!(parked, 31, "refused {refused}");
    assert_eq!(refused, CALLS - 31);
    assert!(
        peak < before + 50,
        "resident memory grew from {before} MiB to {peak} MiB"
    );
}

/// The requests in flight of every legacy SSE session of one identity are bounded
/// together: a client cannot multiply its per-session allowance by opening sessions.
#[test]
fn legacy_sse_requests_in_flight_are_bounded_per_identity() {
    let _beside = beside_others();
    let workspace = Workspace::new(&format!(
        "{}[listen.limits]\nmax_in_flight_per_session = 8\nmax_in_flight_per_identity = 3\n",
        example_server("slow", "slow")
    ));
    let gateway = workspace.serve_http(&[]);
    let sleep = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "mcp__slow__sleep", "arguments": {"ms": 600_000}}})
    };
    let (_first, first) = open_sse(gateway.address, None).unwrap();
    let (_second, second) = open_sse(gateway.address, None).unwrap();
    for path in [&first, &second] {
        let (status, text) = post_message(gateway.address, path, None, &initialize(0).to_string());
        assert_eq!(status, 202, "{text}");
    }
    let batch =
        |ids: std::ops::RangeInclusive<u64>| json!(ids.map(sleep).collect::<Vec<_>>()).to_string();
    // Two sleeps in the first session, within both limits.
    let (status, text) = post_message(gateway.address, &first, None, &batch(1..=2));
    assert_eq!(status, 202, "{text}");
    // Two more in the second would make four for the identity: refused whole.
    let (status, text) = post_message(gateway.address, &second, None, &batch(11..=12));
    assert_eq!(status, 429, "{text}");
    assert!(text.starts_with("SSE_IDENTITY_IN_FLIGHT_LIMIT"), "{text}");
    // One more fits.
    let (status, text) = post_message(gateway.address, &second, None, &batch(21..=21));
    assert_eq!(status, 202, "{text}");
}
