//! Issue 18: many replicas, one gateway. Three replicas share state in a real Redis and
//! sit behind a real HAProxy balancing round robin with no stickiness; one session of
//! the official Python SDK client goes through it as if it were one gateway.

use std::time::Duration;

use mcp_gateway_tests::cluster::{Haproxy, Redis, ready, replicas};
use mcp_gateway_tests::streamable;
use mcp_gateway_tests::streamable::{
    INITIALIZE, SseResponse, TaskClient, open_session, post, sse_events,
};
use mcp_gateway_tests::*;
use serde_json::{Value, json};

const LIST_TOOLS: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

/// The replicas' configuration: kv over stdio (one child per replica), the shared
/// Redis, and `extra`.
fn config(redis: &Redis, extra: &str) -> String {
    format!(
        "{}[cluster]\nredis_url = {}\n[log]\nsessions_dir = false\n{extra}",
        example_server("kv", "kv"),
        toml_str(redis.url())
    )
}

/// `count` kv `set` calls, each with its own key and value.
fn sets(count: usize) -> Vec<Value> {
    (0..count)
        .map(|i| {
            json!({"action": "call_tool", "name": "mcp__kv__set",
                   "arguments": {"key": format!("k{i}"), "value": format!("v{i}")}})
        })
        .collect()
}

/// Calls of `tool` one replica counted (`mcp_gateway_tool_calls_total`).
fn calls_served(gateway: &Gateway, tool: &str) -> u64 {
    let (_, _, metrics) = http_get(gateway.address, "/metrics");
    let series = format!("mcp_gateway_tool_calls_total{{tool=\"{tool}\"}} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&series))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn one_session_through_three_replicas_gets_every_call_answered_once() {
    let redis = Redis::start();
    let replicas = replicas(&config(&redis, ""), 3);
    let backends: Vec<_> = replicas.iter().map(|(_, g)| g.address).collect();
    let haproxy = Haproxy::start(replicas[0].0.dir.path(), &backends);
    let run = python_client(
        &haproxy.client_args("/mcp"),
        &json!([
            {"action": "list_tools"},
            {"action": "parallel", "concurrency": 16, "actions": sets(1000)},
        ]),
    );
    assert_eq!(run["ok"], true, "{run:#}");
    let entries = run["results"][1]["result"].as_array().unwrap();
    assert_eq!(entries.len(), 1000);
    for (i, entry) in entries.iter().enumerate() {
        assert_eq!(
            entry["result"]["structuredContent"],
            json!({"key": format!("k{i}"), "value": format!("v{i}")}),
            "call {i}: {entry:#}"
        );
    }
    let served: Vec<u64> = replicas
        .iter()
        .map(|(_, g)| calls_served(g, "mcp__kv__set"))
        .collect();
    assert_eq!(
        served.iter().sum::<u64>(),
        1000,
        "each call once: {served:?}"
    );
    assert!(
        served.iter().all(|&n| n > 0),
        "round robin spread the session's calls: {served:?}"
    );
}

/// A client of protocol 2026-07-28 has no session: its requests go to whichever replica
/// the balancer picks, each answered there, and nothing of it is kept in Redis.
#[test]
fn stateless_requests_are_served_by_any_replica_with_no_session_in_redis() {
    let redis = Redis::start();
    let replicas = replicas(&config(&redis, ""), 3);
    let backends: Vec<_> = replicas.iter().map(|(_, g)| g.address).collect();
    let haproxy = Haproxy::start(replicas[0].0.dir.path(), &backends);
    let mut args = haproxy.client_args("/mcp");
    args.extend(["--mode".into(), "auto".into()]);
    let run = python_client(
        &args,
        &json!([
            {"action": "list_tools"},
            {"action": "parallel", "concurrency": 8, "actions": sets(300)},
        ]),
    );
    assert_eq!(run["ok"], true, "{run:#}");
    assert_eq!(run["server"]["protocol_version"], "2026-07-28", "{run:#}");
    let entries = run["results"][1]["result"].as_array().unwrap();
    for (i, entry) in entries.iter().enumerate() {
        assert_eq!(
            entry["result"]["structuredContent"],
            json!({"key": format!("k{i}"), "value": format!("v{i}")}),
        );
    }
    let served: Vec<u64> = replicas
        .iter()
        .map(|(_, g)| calls_served(g, "mcp__kv__set"))
        .collect();
    assert_eq!(served.iter().sum::<u64>(), 300, "{served:?}");
    assert!(
        served.iter().all(|&n| n > 0),
        "a replica served none: {served:?}"
    );
    let keys = std::process::Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &redis.address.port().to_string()])
        .args(["--scan", "--pattern", "*session*"])
        .output()
        .unwrap();
    let keys = String::from_utf8_lossy(&keys.stdout);
    assert!(keys.trim().is_empty(), "session records in Redis: {keys}");
}

#[test]
fn a_rate_limit_holds_across_replicas() {
    let redis = Redis::start();
    let replicas = replicas(&config(&redis, "[guards]\nmax_calls_per_minute = 100\n"), 3);
    let backends: Vec<_> = replicas.iter().map(|(_, g)| g.address).collect();
    let haproxy = Haproxy::start(replicas[0].0.dir.path(), &backends);
    let run = python_client(
        &haproxy.client_args("/mcp"),
        &json!([{"action": "parallel", "concurrency": 16, "tolerate_failures": true,
                 "actions": sets(200)}]),
    );
    let entries = run["results"][0]["result"].as_array().unwrap();
    let denied = entries
        .iter()
        .filter(|e| error_code(&e["result"]) == Some("DENIED"))
        .count();
    let admitted = entries
        .iter()
        .filter(|e| e["ok"] == true && e["result"]["isError"] != true)
        .count();
    assert!(
        (99..=101).contains(&admitted),
        "admitted {admitted}: {run:#}"
    );
    assert_eq!(admitted + denied, 200, "{run:#}");
}

#[test]
fn a_session_belongs_to_its_token_on_every_replica() {
    let redis = Redis::start();
    let replicas = replicas(
        &config(
            &redis,
            "[listen]\ntokens = [\"token-of-alice-0123456789\", \"token-of-bob-0123456789\"]\n",
        ),
        3,
    );
    let alice = Some("token-of-alice-0123456789");
    let bob = Some("token-of-bob-0123456789");
    let session = open_session(replicas[0].1.address, alice);
    for (_, gateway) in &replicas {
        let (status, _, body) = post(gateway.address, Some(&session), bob, LIST_TOOLS);
        assert_eq!(status, 403, "{}: {body}", gateway.address);
        let (status, _, body) = post(gateway.address, Some(&session), alice, LIST_TOOLS);
        assert_eq!(status, 200, "{}: {body}", gateway.address);
        assert!(body.contains("mcp__kv__get"), "{body}");
    }
}

#[test]
fn a_notification_from_one_replica_reaches_the_stream_another_replica_holds() {
    let redis = Redis::start();
    let replicas = replicas(&config(&redis, "[gateway]\ncatalog = \"search\"\n"), 2);
    let (first, second) = (replicas[0].1.address, replicas[1].1.address);
    let session = open_session(first, None);
    // The client's standalone stream is on the second replica.
    let mut stream = SseResponse::get(second, &session);
    // A search on the first adds the tools it found to the session's list there, which
    // only the first knows: its `list_changed` must cross over.
    let search = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "search_tools", "arguments": {"query": "read the value stored under a key"}}});
    let (status, _, body) = post(first, Some(&session), None, &search.to_string());
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("mcp__kv__get"), "{body}");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let notified = std::iter::from_fn(|| stream.next_event())
        .take_while(|_| std::time::Instant::now() < deadline)
        .find(|event| event.data.contains("notifications/tools/list_changed"));
    assert!(
        notified.is_some(),
        "no list_changed on the other replica's stream: {}\n---\n{}",
        replicas[0].1.log_text(),
        replicas[1].1.log_text()
    );
}

#[test]
fn a_log_level_set_on_one_replica_holds_on_another() {
    let redis = Redis::start();
    let conformance = ListeningServer::conformance();
    let replicas = replicas(
        &config(
            &redis,
            &format!(
                "[servers.conf]\nurl = \"http://{}/mcp\"\n",
                conformance.address
            ),
        ),
        2,
    );
    let (first, second) = (replicas[0].1.address, replicas[1].1.address);
    let set_level = |address, session: &str, level: &str| {
        let request = json!({"jsonrpc": "2.0", "id": 5, "method": "logging/setLevel",
                             "params": {"level": level}});
        let (status, _, body) = post(address, Some(session), None, &request.to_string());
        assert_eq!(status, 200, "{body}");
    };
    // The call's log messages come on its own answer's stream; whether any did.
    let logged_call = |address, session: &str| {
        let request = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {
            "name": "mcp__conf__test_tool_with_logging", "arguments": {}}});
        let (status, _, body) = post(address, Some(session), None, &request.to_string());
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("executed successfully"), "{body}");
        body.contains("notifications/message")
    };
    // `error` set on the first replica; the second takes the session over.
    let quiet = open_session(first, None);
    set_level(first, &quiet, "error");
    // Another session on the second replica wants everything, so its upstream logs.
    let chatty = open_session(second, None);
    set_level(second, &chatty, "debug");
    assert!(logged_call(second, &chatty), "the upstream logs at info");
    assert!(
        !logged_call(second, &quiet),
        "info messages reached a session at `error`"
    );
}

#[test]
fn a_session_ended_on_one_replica_is_gone_on_every_replica() {
    let redis = Redis::start();
    let replicas = replicas(&config(&redis, ""), 2);
    let session = open_session(replicas[0].1.address, None);
    let (status, _, body) = post(replicas[1].1.address, Some(&session), None, LIST_TOOLS);
    assert_eq!(status, 200, "restored on the second replica: {body}");
    let (status, _, _) = http_request(
        replicas[1].1.address,
        "DELETE",
        "/mcp",
        &[
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", "2025-06-18"),
        ],
        b"",
    );
    // 204, which every SDK takes for a session ended (the Python SDK logs a 202 as a
    // failed termination).
    assert_eq!(status, 204, "DELETE");
    // Another replica may serve the session from its copy of the record until the end is
    // announced (pub/sub) or the copy is a second old.
    for (_, gateway) in &replicas {
        let ended = || post(gateway.address, Some(&session), None, LIST_TOOLS).0 == 404;
        assert!(
            eventually(Duration::from_secs(5), ended),
            "{}: the session still answers",
            gateway.address
        );
    }
}

#[test]
fn without_redis_replicas_answer_503_and_recover_when_it_returns() {
    let mut redis = Redis::start();
    let replicas = replicas(&config(&redis, ""), 2);
    redis.stop();
    for (_, gateway) in &replicas {
        assert!(
            eventually(Duration::from_secs(10), || !ready(gateway)),
            "/readyz still ready without Redis"
        );
        let (status, _, body) = post(gateway.address, None, None, INITIALIZE);
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("Redis"), "a clear message: {body}");
        assert_eq!(health(gateway)["shared_state"], "unavailable");
    }
    redis.resume();
    for (_workspace, mut gateway) in replicas {
        assert!(
            eventually(Duration::from_secs(20), || ready(&gateway)),
            "/readyz never came back"
        );
        let session = open_session(gateway.address, None);
        let (status, _, body) = post(gateway.address, Some(&session), None, LIST_TOOLS);
        assert_eq!(status, 200, "{body}");
        assert!(
            gateway.child.try_wait().unwrap().is_none(),
            "the replica kept running"
        );
    }
}

/// On a gateway alone, a quick answer comes as plain JSON; with replicas it does not: a
/// call's stream starts with an event id at once, before the answer, so a client whose
/// replica dies mid-call can resume the stream on another replica.
#[test]
fn with_replicas_every_call_streams_from_its_first_byte() {
    let redis = Redis::start();
    let slow = example_server("slow", "slow");
    let replicas = replicas(&config(&redis, &slow), 1);
    let address = replicas[0].1.address;
    let session = open_session(address, None);
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "mcp__slow__sleep", "arguments": {"ms": 200}}});
    let (status, headers, body) = http_request(
        address,
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2025-06-18"),
            ("Mcp-Session-Id", &session),
        ],
        call.to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        headers
            .iter()
            .any(|(name, value)| name == "content-type" && value.starts_with("text/event-stream")),
        "{headers:?}\n{body}"
    );
    let events = sse_events(&body);
    let answer = events
        .iter()
        .position(|event| event.data.contains(r#""id":3"#))
        .unwrap_or_else(|| panic!("no answer: {body}"));
    assert!(
        events[..answer].iter().any(|event| event.id.is_some()),
        "no event id to resume from before the answer: {body}"
    );
}

#[test]
fn a_replica_killed_mid_run_fails_only_its_calls_and_its_stream_resumes_elsewhere() {
    let redis = Redis::start();
    let slow = example_server("slow", "slow");
    let mut replicas = replicas(&config(&redis, &slow), 3);
    let backends: Vec<_> = replicas.iter().map(|(_, g)| g.address).collect();
    let dir = tempfile::tempdir().unwrap();
    let haproxy = Haproxy::start(dir.path(), &backends);

    // A call streaming progress on the first replica: read its first event, let a few
    // more be sent (and stored), then kill the replica.
    let session = open_session(backends[0], None);
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "mcp__slow__sleep", "arguments": {"ms": 600_000},
        "_meta": {"progressToken": "p7"}}});
    let mut stream = SseResponse::post(backends[0], &session, &call.to_string());
    let seen = std::iter::from_fn(|| stream.next_event())
        .find(|event| event.id.is_some())
        .expect("an event with an id");

    // Meanwhile one client session through HAProxy makes 1,000 calls. The client's
    // deadline only bounds a hang (a lost call that is never answered), not a pace.
    let mut args = haproxy.client_args("/mcp");
    args.extend(["--timeout".into(), "300".into()]);
    let client = std::thread::spawn(move || {
        python_client(
            &args,
            &json!([{"action": "parallel", "concurrency": 16, "tolerate_failures": true,
                     "actions": sets(1000)}]),
        )
    });
    assert!(
        eventually(Duration::from_secs(120), || {
            replicas
                .iter()
                .map(|(_, g)| calls_served(g, "mcp__kv__set"))
                .sum::<u64>()
                >= 300
        }),
        "the client made no progress"
    );
    replicas[0]
        .1
        .signal_and_wait(libc::SIGKILL, Duration::from_secs(10));

    // The missed progress events are replayed by another replica from Redis.
    let resume = || {
        let (status, _, body) = http_request(
            backends[1],
            "GET",
            "/mcp",
            &[
                ("Accept", "text/event-stream"),
                ("MCP-Protocol-Version", "2025-06-18"),
                ("Mcp-Session-Id", &session),
                ("Last-Event-ID", seen.id.as_deref().unwrap()),
            ],
            b"",
        );
        assert_eq!(status, 200, "{body}");
        let replayed: Vec<Value> = sse_events(&body)
            .into_iter()
            .filter_map(|event| serde_json::from_str(&event.data).ok())
            .collect();
        (replayed, body)
    };
    let (replayed, body) = resume();
    assert!(
        replayed.iter().any(
            |m| m["method"] == "notifications/progress" && m["params"]["progressToken"] == "p7"
        ),
        "missed progress replayed: {body}"
    );
    // Once the killed replica's lease lapses, the resumed stream ends with an error for
    // the call it can no longer answer, so the client stops waiting for it.
    let mut last = body;
    assert!(
        eventually(Duration::from_secs(20), || {
            let (replayed, body) = resume();
            last = body;
            replayed
                .iter()
                .any(|m| m["id"] == 7 && m["error"]["message"].is_string())
        }),
        "the lost call is never answered: {last}"
    );

    // The session went on: every call answered once, only those in flight on the killed
    // replica failed, and they failed as transport errors the client may retry.
    let run = client.join().unwrap();
    let entries = run["results"][0]["result"]
        .as_array()
        .unwrap_or_else(|| panic!("the session did not go on: {run:#}"));
    assert_eq!(entries.len(), 1000, "{run:#}");
    let failed: Vec<_> = entries.iter().filter(|e| e["ok"] != true).collect();
    assert!(
        failed.len() <= 32,
        "{} calls failed: {failed:#?}",
        failed.len()
    );
    for failure in &failed {
        assert!(
            failure["result"].is_null(),
            "a failure is a transport error, not a tool result: {failure:#}"
        );
    }
    for (i, entry) in entries.iter().enumerate().filter(|(_, e)| e["ok"] == true) {
        assert_eq!(
            entry["result"]["structuredContent"],
            json!({"key": format!("k{i}"), "value": format!("v{i}")}),
        );
    }
}

/// A client of 2026-07-28 that declares the tasks extension, on replica `at`.
fn task_client(at: &Gateway) -> TaskClient {
    TaskClient::new(at.address, None)
}

#[test]
fn a_task_created_on_one_replica_is_polled_to_its_result_on_another() {
    let redis = Redis::start();
    let slow = example_server("slow", "slow");
    let replicas = replicas(&config(&redis, &slow), 2);
    let (first, second) = (task_client(&replicas[0].1), task_client(&replicas[1].1));
    // Longer than `[tasks] answer_within_ms`: the call to a 2025-11-25 server becomes a
    // task of the gateway's, on the first replica.
    let created = first.request(
        "tools/call",
        json!({"name": "mcp__slow__sleep", "arguments": {"ms": 2000, "label": "t"}}),
    );
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().expect("a task id");
    let working = second.request("tasks/get", json!({"taskId": id}));
    assert_eq!(working["result"]["status"], "working", "{working}");
    let done = second.poll(id, "completed");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["isError"], false, "{done}");
}

#[test]
fn a_replica_killed_while_its_task_runs_leaves_the_task_failed_with_why() {
    let redis = Redis::start();
    let slow = example_server("slow", "slow");
    let mut replicas = replicas(&config(&redis, &slow), 2);
    let created = task_client(&replicas[0].1).request(
        "tools/call",
        json!({"name": "mcp__slow__sleep", "arguments": {"ms": 600_000, "label": "t"}}),
    );
    let id = created["result"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    replicas[0]
        .1
        .signal_and_wait(libc::SIGKILL, Duration::from_secs(10));
    // Once the killed replica's lease lapses, the task reads as failed, and says why.
    let failed = task_client(&replicas[1].1).poll(&id, "failed");
    assert_eq!(failed["status"], "failed", "{failed}");
    let why = failed["error"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("stopped before it finished"), "{failed}");
    assert!(failed.get("result").is_none(), "{failed}");
}

#[test]
fn a_task_is_answered_and_cancelled_through_a_replica_that_does_not_run_it() {
    let redis = Redis::start();
    let upstream = ListeningServer::conformance();
    let servers = format!(
        "{}{}",
        upstream.server_config("conformance", "protocol = \"2025-11-25\"\n"),
        slow_server_with_events("")
    );
    let replicas = replicas(&config(&redis, &servers), 2);
    let (first, second) = (task_client(&replicas[0].1), task_client(&replicas[1].1));

    // The first replica runs the call, which asks its client; the second answers for it.
    let created = first.request(
        "tools/call",
        json!({"name": "mcp__conformance__confirm_delete", "arguments": {"filename": "x"}}),
    );
    let id = created["result"]["taskId"].as_str().expect("a task id");
    let asking = second.poll(id, "input_required");
    let key = asking["inputRequests"]
        .as_object()
        .and_then(|questions| questions.keys().next().cloned())
        .unwrap_or_else(|| panic!("no question: {asking}"));
    let answers = json!({key: {"action": "accept", "content": {"confirm": true}}});
    let ack = second.request(
        "tasks/update",
        json!({"taskId": id, "inputResponses": answers}),
    );
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let done = second.poll(id, "completed");
    assert_eq!(
        done["result"]["content"][0]["text"], "Deleted `x`",
        "{done}"
    );

    // Cancelled through the second replica, the call stops at the first one's server.
    let created = first.request(
        "tools/call",
        json!({"name": "mcp__slow__sleep", "arguments": {"ms": 600_000, "label": "stopped"}}),
    );
    let id = created["result"]["taskId"].as_str().expect("a task id");
    let ack = second.request("tasks/cancel", json!({"taskId": id}));
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    assert_eq!(second.poll(id, "cancelled")["status"], "cancelled");
    let workspace = &replicas[0].0;
    assert!(
        eventually(Duration::from_secs(20), || {
            workspace
                .slow_events("stopped")
                .iter()
                .any(|event| event["event"] == "cancelled")
        }),
        "the call never stopped: {:?}",
        workspace.slow_events("stopped")
    );
}

const TOKEN_A: &str = "token-of-client-a-0123456789";
const TOKEN_B: &str = "token-of-client-b-0123456789";

/// The tools asking their client mid-call: `slow`'s `ask` (a server of 2025-11-25 that
/// sends `sampling/createMessage` mid-call), and the conformance example's multi
/// round-trip tools, spoken to at 2026-07-28 (they answer `InputRequiredResult`).
fn asking_servers(conformance: &ListeningServer) -> String {
    format!(
        "{}{}",
        example_server("slow", "slow"),
        conformance.server_config("conf", "protocol = \"2026-07-28\"\n")
    )
}

/// A client of 2026-07-28 that can be asked for elicitation and sampling (and declares no
/// tasks, so its calls stay calls), with `token` as its bearer.
struct Asked {
    token: Option<&'static str>,
}

impl Asked {
    /// The answer of `at` to `tools/call` of `tool` with `params` (`arguments`,
    /// `requestState`, `inputResponses`).
    fn call(&self, at: &Gateway, tool: &str, mut params: Value) -> Value {
        params["name"] = json!(tool);
        let capabilities = json!({"elicitation": {}, "sampling": {}});
        streamable::stateless_request(at.address, self.token, &capabilities, "tools/call", params)
    }
}

/// The `requestState` of `answer` and the key of its one question, asserting that the call
/// was parked for input.
fn parked(answer: &Value) -> (String, String) {
    assert_eq!(answer["result"]["resultType"], "input_required", "{answer}");
    let state = answer["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("no requestState: {answer}"));
    let questions = answer["result"]["inputRequests"].as_object();
    let key = questions
        .and_then(|questions| questions.keys().next())
        .unwrap_or_else(|| panic!("no question: {answer}"));
    (state.to_owned(), key.clone())
}

/// The answer of a client's model to a sampling question.
fn sampled(text: &str) -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": text}, "model": "test"})
}

/// A form the person filled in with `content`.
fn accepted(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

#[test]
fn a_call_parked_on_one_replica_is_resumed_through_another() {
    let redis = Redis::start();
    let conformance = ListeningServer::conformance();
    let replicas = replicas(&config(&redis, &asking_servers(&conformance)), 2);
    let (first, second) = (&replicas[0].1, &replicas[1].1);
    let client = Asked { token: None };
    let asked = client.call(
        first,
        "mcp__slow__ask",
        json!({"arguments": {"prompt": "The capital of France?"}}),
    );
    let (state, key) = parked(&asked);
    let done = client.call(
        second,
        "mcp__slow__ask",
        json!({"arguments": {"prompt": "The capital of France?"}, "requestState": state,
               "inputResponses": {key: sampled("Paris")}}),
    );
    assert_eq!(
        done["result"]["structuredContent"]["answer"], "Paris",
        "{done}"
    );
    // The call ran, start to end, on the replica that parked it.
    assert_eq!(calls_served(first, "mcp__slow__ask"), 1);
    assert_eq!(calls_served(second, "mcp__slow__ask"), 0);
}

#[test]
fn a_multi_round_call_goes_on_whichever_replica_each_round_reaches() {
    let redis = Redis::start();
    let conformance = ListeningServer::conformance();
    let replicas = replicas(&config(&redis, &asking_servers(&conformance)), 3);
    let client = Asked { token: None };
    let tool = "mcp__conf__test_input_required_result_multi_round";
    let first = client.call(&replicas[0].1, tool, json!({"arguments": {}}));
    let (state, key) = parked(&first);
    // Through the second replica: the first takes the answer and asks the next question,
    // under a new state.
    let second = client.call(
        &replicas[1].1,
        tool,
        json!({"arguments": {}, "requestState": state,
               "inputResponses": {key: accepted(json!({"name": "Ada"}))}}),
    );
    let (next, key) = parked(&second);
    assert_ne!(next, state, "{second}");
    let asked = &second["result"]["inputRequests"][&key]["params"]["message"];
    assert!(
        asked.as_str().unwrap_or_default().contains("color"),
        "{second}"
    );
    // Through the third, and back to the first, which holds it.
    let third = client.call(
        &replicas[2].1,
        tool,
        json!({"arguments": {}, "requestState": next,
               "inputResponses": {key: accepted(json!({"color": "teal"}))}}),
    );
    assert_eq!(
        third["result"]["content"][0]["text"], "Multi-round complete for Ada who likes teal",
        "{third}"
    );
    let served: Vec<u64> = replicas
        .iter()
        .map(|(_, g)| calls_served(g, tool))
        .collect();
    assert_eq!(served, [1, 0, 0], "one call, run by the first replica");
}

/// A tool of a server of 2025-11-25 that requires a task and asks its client first
/// (`tests/servers/task_support.py`'s `test_tool_with_task`): its question is a round of
/// the request through one replica, and the retry with the answer, through another, is
/// answered with the handle of a task of the gateway's, which any replica reports done.
#[test]
fn a_required_tasks_first_round_answered_through_another_replica_becomes_the_task() {
    let redis = Redis::start();
    let server = format!(
        "[servers.tasks]\ncommand = {}\nargs = [{}]\n",
        toml_str(system_python().to_string_lossy()),
        toml_str(
            repo()
                .join("tests/servers/task_support.py")
                .to_string_lossy()
        ),
    );
    let replicas = replicas(&config(&redis, &server), 2);
    let (first, second) = (&replicas[0].1, &replicas[1].1);
    let capabilities = json!({"elicitation": {},
                              "extensions": {"io.modelcontextprotocol/tasks": {}}});
    let request = |at: &Gateway, method: &str, params: Value| {
        streamable::stateless_request(at.address, None, &capabilities, method, params)
    };
    let tool = "mcp__tasks__test_tool_with_task";
    let asked = request(first, "tools/call", json!({"name": tool, "arguments": {}}));
    let (state, key) = parked(&asked);
    assert!(asked["result"].get("taskId").is_none(), "{asked}");
    let created = request(
        second,
        "tools/call",
        json!({"name": tool, "arguments": {}, "requestState": state,
               "inputResponses": {key: accepted(json!({"name": "Ada"}))}}),
    );
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    assert!(created["result"].get("requestState").is_none(), "{created}");
    let id = created["result"]["taskId"].as_str().expect("a task id");
    let done = eventually(Duration::from_secs(20), || {
        let got = request(second, "tasks/get", json!({"taskId": id}));
        got["result"]["status"] == "completed"
            && got["result"]["result"]["content"][0]["text"] == "Hello, Ada!"
    });
    assert!(
        done,
        "{}",
        request(second, "tasks/get", json!({"taskId": id}))
    );
    // The call ran on the replica that parked it.
    assert_eq!(calls_served(first, tool), 1);
    assert_eq!(calls_served(second, tool), 0);
}

#[test]
fn a_retry_through_another_replica_is_refused_for_another_tool_or_identity() {
    let redis = Redis::start();
    let conformance = ListeningServer::conformance();
    let tokens = format!(
        "[listen]\ntokens = [{}, {}]\n{}",
        toml_str(TOKEN_A),
        toml_str(TOKEN_B),
        asking_servers(&conformance)
    );
    let replicas = replicas(&config(&redis, &tokens), 2);
    let (first, second) = (&replicas[0].1, &replicas[1].1);
    let (alice, bob) = (
        Asked {
            token: Some(TOKEN_A),
        },
        Asked {
            token: Some(TOKEN_B),
        },
    );
    let greet = "mcp__conf__test_input_required_result_elicitation";
    let (state, key) = parked(&alice.call(first, greet, json!({"arguments": {}})));
    let retry = json!({"arguments": {}, "requestState": state,
                       "inputResponses": {key: accepted(json!({"name": "Ada"}))}});

    let other_tool = alice.call(
        second,
        "mcp__conf__test_input_required_result_multi_round",
        retry.clone(),
    );
    assert_eq!(other_tool["error"]["code"], -32602, "{other_tool}");
    assert!(
        other_tool["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("another request"),
        "{other_tool}"
    );
    let other_identity = bob.call(second, greet, retry.clone());
    assert_eq!(other_identity["error"]["code"], -32602, "{other_identity}");
    assert!(
        other_identity["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("names no request"),
        "{other_identity}"
    );
    // Neither took the call: its own retry still completes it.
    let done = alice.call(second, greet, retry);
    assert_eq!(
        done["result"]["content"][0]["text"], "Hello, Ada!",
        "{done}"
    );
}

#[test]
fn a_retry_naming_a_killed_replica_is_refused_promptly_and_says_why() {
    let redis = Redis::start();
    let conformance = ListeningServer::conformance();
    let mut replicas = replicas(&config(&redis, &asking_servers(&conformance)), 2);
    let client = Asked { token: None };
    let ask = json!({"arguments": {"prompt": "Anyone there?"}});
    let (state, key) = parked(&client.call(&replicas[0].1, "mcp__slow__ask", ask.clone()));
    replicas[0]
        .1
        .signal_and_wait(libc::SIGKILL, Duration::from_secs(10));
    let mut retry = ask;
    retry["requestState"] = json!(state);
    retry["inputResponses"] = json!({key: sampled("yes")});
    let (answered, answer) = std::sync::mpsc::channel();
    let second = replicas[1].1.address;
    std::thread::spawn(move || {
        let capabilities = json!({"elicitation": {}, "sampling": {}});
        retry["name"] = json!("mcp__slow__ask");
        let _ = answered.send(streamable::stateless_request(
            second,
            None,
            &capabilities,
            "tools/call",
            retry,
        ));
    });
    // The killed replica's lease lapses within seconds: the retry waits no longer.
    let refused = answer
        .recv_timeout(Duration::from_secs(20))
        .expect("the retry hangs");
    assert_eq!(
        refused["error"]["data"]["code"], "PARKED_REPLICA_GONE",
        "{refused}"
    );
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("without requestState"), "{refused}");
}

#[test]
fn a_call_expired_on_its_replica_is_told_so_through_another() {
    let redis = Redis::start();
    let conformance = ListeningServer::conformance();
    let servers = format!(
        "[listen.limits]\nparked_ttl_secs = 1\n{}",
        asking_servers(&conformance)
    );
    let replicas = replicas(&config(&redis, &servers), 2);
    let (first, second) = (&replicas[0].1, &replicas[1].1);
    let client = Asked { token: None };
    let greet = "mcp__conf__test_input_required_result_elicitation";
    let (state, key) = parked(&client.call(first, greet, json!({"arguments": {}})));
    // The first replica's timer cancels the call it holds.
    assert!(
        eventually(Duration::from_secs(20), || first
            .log_text()
            .contains("a call parked for input was cancelled")),
        "{}",
        first.log_text()
    );
    let late = client.call(
        second,
        greet,
        json!({"arguments": {}, "requestState": state,
               "inputResponses": {key: accepted(json!({"name": "Ada"}))}}),
    );
    assert_eq!(late["error"]["data"]["code"], "INPUT_EXPIRED", "{late}");
    assert!(
        late["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("parked_ttl_secs"),
        "{late}"
    );
}
