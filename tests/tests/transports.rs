//! Issue 3: legacy SSE both ways, upstream streamable HTTP, a secure listener,
//! supervision, list_changed, progress and hot reload — all with real processes.

use std::process::Command;
use std::time::{Duration, Instant};

use mcp_gateway_tests::streamable::{SseResponse, header, open_session, post, sse_events};
use mcp_gateway_tests::*;
use serde_json::{Value, json};

fn call(name: &str, arguments: Value) -> Value {
    json!({"action": "call_tool", "name": name, "arguments": arguments})
}

#[test]
fn python_client_over_legacy_sse() {
    let workspace = Workspace::new(&example_server("kv", "kv"));
    let gateway = workspace.serve_http(&[]);
    let args = gateway.client_args("sse", "/sse");
    let run = python_client(
        &args,
        &json!([{"action": "list_tools"}, call("mcp__kv__list", json!({}))]),
    );
    assert!(
        action_result(&run, 0)["tools"].as_array().unwrap().len() >= 4,
        "{run:#}"
    );
    assert_eq!(error_code(action_result(&run, 1)), None, "{run:#}");
    let (status, _, body) = http_request(
        gateway.address,
        "POST",
        "/message?sessionId=nope",
        &[("Content-Type", "application/json")],
        b"{}",
    );
    assert_eq!(status, 404, "{body}");
}

/// An upstream over streamable HTTP restarted where it was: it has forgotten the
/// gateway's session (404), and the next call is answered in a new one.
#[test]
fn a_call_after_an_http_upstream_restarted_is_answered_in_a_new_session() {
    let echo = ListeningServer::rmcp_echo();
    let address = echo.address;
    let workspace = Workspace::new(&echo.server_config("echo", ""));
    let gateway = workspace.serve_http(&[]);
    let session = open_session(gateway.address, None);
    let echo_call = |id: u64, text: &str| {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "mcp__echo__echo", "arguments": {"text": text}}});
        let (status, _, body) = post(gateway.address, Some(&session), None, &call.to_string());
        assert_eq!(status, 200, "{body}");
        body
    };
    assert!(echo_call(1, "before").contains(r#""text":"before""#));
    drop(echo);
    let _echo = ListeningServer::rmcp_echo_at(address);
    let body = echo_call(2, "after");
    assert!(
        body.contains(r#""text":"after""#),
        "{body}\n{}",
        gateway.log_text()
    );
    assert!(echo_call(3, "and again").contains(r#""text":"and again""#));
}

/// An upstream over streamable HTTP that goes away: the call that finds it gone fails with
/// UPSTREAM_UNAVAILABLE, `/healthz` stops calling it ready and says why, the other
/// upstreams serve on, and once it is back where it was its calls are answered again.
#[test]
fn an_http_upstream_that_goes_away_is_not_ready_until_it_is_back() {
    let echo = ListeningServer::rmcp_echo();
    let address = echo.address;
    let workspace = Workspace::new(&format!(
        "{}{}",
        echo.server_config("echo", ""),
        example_server("kv", "kv")
    ));
    let gateway = workspace.serve_http(&[]);
    let session = open_session(gateway.address, None);
    let call = |id: u64, name: &str, arguments: Value| {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}});
        let (status, _, body) = post(gateway.address, Some(&session), None, &call.to_string());
        assert_eq!(status, 200, "{body}");
        body
    };
    let echo_health = || health(&gateway)["upstreams"]["echo"].clone();
    assert!(call(1, "mcp__echo__echo", json!({"text": "before"})).contains(r#""text":"before""#));

    drop(echo);
    let body = call(2, "mcp__echo__echo", json!({"text": "while gone"}));
    assert!(body.contains("UPSTREAM_UNAVAILABLE"), "{body}");
    assert!(
        eventually(PATIENCE, || {
            let echo = echo_health();
            echo["state"] != "ready"
                && echo["last_error"]
                    .as_str()
                    .is_some_and(|error| error.contains("Connection refused"))
        }),
        "not ready, and why: {}\n{}",
        echo_health(),
        gateway.log_text()
    );
    let body = call(3, "mcp__kv__list", json!({}));
    assert!(body.contains(r#""isError":false"#), "kv serves on: {body}");

    let _echo = ListeningServer::rmcp_echo_at(address);
    assert!(
        eventually(PATIENCE, || echo_health()["state"] == "ready"),
        "ready again: {}",
        echo_health()
    );
    assert!(call(4, "mcp__echo__echo", json!({"text": "back"})).contains(r#""text":"back""#));
}

/// The same through rmcp's client, which serves everything but tool calls: a prompt asked
/// of a server that went away.
#[test]
fn a_prompt_asked_of_a_gone_http_upstream_marks_it_not_ready() {
    let everything = ListeningServer::everything("streamableHttp");
    let address = everything.address;
    let workspace = Workspace::new(&everything.server_config("ev", ""));
    let gateway = workspace.serve_http(&[]);
    let session = open_session(gateway.address, None);
    let prompt = |id: u64| {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "prompts/get",
            "params": {"name": "mcp__ev__simple-prompt"}});
        post(gateway.address, Some(&session), None, &request.to_string()).2
    };
    let ev_health = || health(&gateway)["upstreams"]["ev"].clone();
    assert!(prompt(1).contains("simple prompt"), "{}", prompt(1));

    drop(everything);
    let body = prompt(2);
    assert!(body.contains("upstream `ev` is unavailable"), "{body}");
    assert!(
        eventually(PATIENCE, || ev_health()["state"] != "ready"),
        "not ready: {}\n{}",
        ev_health(),
        gateway.log_text()
    );

    let _everything = ListeningServer::everything_at("streamableHttp", address);
    assert!(
        eventually(PATIENCE, || ev_health()["state"] == "ready"),
        "ready again: {}",
        ev_health()
    );
    assert!(prompt(3).contains("simple prompt"), "{}", prompt(3));
}

#[test]
fn upstreams_over_streamable_http_and_sse() {
    let http = ListeningServer::everything("streamableHttp");
    let sse = ListeningServer::everything("sse");
    let rmcp = ListeningServer::rmcp_echo();
    let workspace = Workspace::new(&format!(
        "[servers.ehttp]\nurl = \"http://{}/mcp\"\n[servers.esse]\nurl = \"http://{}/sse\"\ntransport = \"sse\"\n{}",
        http.address,
        sse.address,
        rmcp.server_config("rmcp", "")
    ));
    let run = python_client(
        &python_stdio_args(&workspace, &[]),
        &json!([
            {"action": "list_tools"},
            call("mcp__ehttp__echo", json!({"message": "over http"})),
            call("mcp__esse__echo", json!({"message": "over sse"})),
            call("mcp__rmcp__echo", json!({"text": "over rmcp's server"})),
            call("mcp__rmcp__echo", json!({"text": "and again"})),
        ]),
    );
    assert_eq!(
        result_text(action_result(&run, 3)),
        "over rmcp's server",
        "{run:#}"
    );
    assert_eq!(result_text(action_result(&run, 4)), "and again", "{run:#}");
    let names = tool_names(action_result(&run, 0));
    assert!(
        names.iter().any(|n| n == "mcp__ehttp__get-sum")
            && names.iter().any(|n| n == "mcp__esse__get-sum"),
        "{names:?}"
    );
    assert!(
        result_text(action_result(&run, 1)).contains("over http"),
        "{run:#}"
    );
    assert!(
        result_text(action_result(&run, 2)).contains("over sse"),
        "{run:#}"
    );
}

#[test]
fn the_listener_checks_tokens_hosts_origins_and_sizes() {
    let workspace = Workspace::new(&format!(
        "{}[listen]\ntokens = [\"s3cret-token-for-tests\"]\nmax_body_bytes = 1024\n",
        example_server("kv", "kv")
    ));
    let gateway = workspace.serve_http(&[]);
    let auth = ("Authorization", "Bearer s3cret-token-for-tests");
    assert_eq!(http_get(gateway.address, "/healthz").0, 401, "no token");
    assert_eq!(
        http_request(
            gateway.address,
            "GET",
            "/healthz",
            &[("Authorization", "Bearer wrong")],
            b""
        )
        .0,
        401,
        "wrong token"
    );
    assert_eq!(
        http_request(gateway.address, "GET", "/healthz", &[auth], b"").0,
        200
    );
    assert_eq!(
        http_request(
            gateway.address,
            "GET",
            "/healthz",
            &[auth, ("Origin", "http://evil.example")],
            b""
        )
        .0,
        403,
        "foreign Origin"
    );
    assert_eq!(
        http_request(
            gateway.address,
            "GET",
            "/healthz",
            &[auth, ("Host", "evil.example")],
            b""
        )
        .0,
        403,
        "foreign Host (DNS rebinding)"
    );
    let big = vec![b'x'; 4096];
    assert_eq!(
        http_request(
            gateway.address,
            "POST",
            "/mcp",
            &[auth, ("Content-Type", "application/json")],
            &big
        )
        .0,
        413,
        "oversized body"
    );
    let mut args = gateway.client_args("http", "/mcp");
    args.extend([
        "--header".into(),
        "Authorization=Bearer s3cret-token-for-tests".into(),
    ]);
    let run = python_client(&args, &json!([call("mcp__kv__list", json!({}))]));
    assert_eq!(error_code(action_result(&run, 0)), None, "{run:#}");
}

#[test]
fn a_public_bind_without_tokens_is_refused() {
    let workspace = Workspace::new(&example_server("kv", "kv"));
    let output = Command::new(gateway_bin())
        .args(["serve", "--listen", "0.0.0.0:0", "--config"])
        .arg(workspace.config())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("token"), "says why: {stderr}");
    // Refused before anything starts: no upstream, no run_code worker, nothing else said.
    assert_eq!(stderr.trim().lines().count(), 1, "only why: {stderr}");
}

/// A sleep far longer than any machine needs to notice a dead child: a call answered
/// well before it ends was failed by the kill, not by the sleep.
const LONG_SLEEP: Duration = Duration::from_secs(300);

#[test]
fn a_killed_upstream_fails_the_call_at_once_and_comes_back() {
    let workspace = Workspace::new("");
    let events = workspace.slow_event_log();
    std::fs::write(
        workspace.config(),
        format!(
            "{}env = {{ SLOW_EVENT_LOG = {} }}\n{}{}",
            example_server("slow", "slow"),
            toml_str(events.to_string_lossy()),
            event_log_grant(&events),
            std::fs::read_to_string(workspace.config()).unwrap()
        ),
    )
    .unwrap();
    let gateway = workspace.serve_http(&[]);
    let pid = health(&gateway)["upstreams"]["slow"]["pid"]
        .as_i64()
        .unwrap() as i32;
    let args = gateway.client_args("http", "/mcp");
    let client = {
        let args = args.clone();
        std::thread::spawn(move || {
            python_client(
                &args,
                &json!([call(
                    "mcp__slow__sleep",
                    json!({"ms": LONG_SLEEP.as_millis() as u64})
                )]),
            )
        })
    };
    // Kill it once the call is running in it.
    assert!(eventually(Duration::from_secs(60), || {
        std::fs::read_to_string(&events).is_ok_and(|log| log.contains("\"start\""))
    }));
    let killed_at = Instant::now();
    // SAFETY: slow is the gateway's child; killing it is the point of the test.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let run = client.join().unwrap();
    let answered = killed_at.elapsed();
    assert_eq!(
        error_code(action_result(&run, 0)),
        Some("UPSTREAM_UNAVAILABLE"),
        "{run:#}"
    );
    assert!(
        answered < LONG_SLEEP / 5,
        "the call waited for its sleep: answered {answered:?} after the kill"
    );
    eprintln!("answered {answered:?} after the kill");
    assert!(
        eventually(Duration::from_secs(60), || {
            let health = health(&gateway);
            health["upstreams"]["slow"]["state"] == "ready"
                && health["upstreams"]["slow"]["restarts"].as_u64() >= Some(1)
        }),
        "slow restarted: {}",
        gateway.log_text()
    );
    let run = python_client(&args, &json!([call("mcp__slow__pid", json!({}))]));
    let new_pid = action_result(&run, 0)["structuredContent"]["pid"]
        .as_i64()
        .unwrap();
    assert_ne!(new_pid as i32, pid);
    assert!(
        eventually(Duration::from_secs(30), || !alive(pid)),
        "the killed child was reaped"
    );
}

/// Over stdio, every call is answered once, however many are in flight; a call the client
/// cancels gets no answer (the client expects none), and a call still running when the
/// client closes its input is answered before the gateway exits.
#[test]
fn a_stdio_client_gets_one_answer_per_call_and_none_for_a_cancelled_one() {
    let config = example_server("kv", "kv") + &example_server("slow", "slow");
    let workspace = Workspace::new(&config);
    let mut gateway = workspace.raw_stdio();
    gateway.initialize();
    let call = |id: u64, name: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": name, "arguments": arguments}})
    };
    gateway.send(&call(2, "mcp__slow__wait", json!({"ms": 5000})));
    for id in 10..42 {
        gateway.send(&call(id, "mcp__kv__get", json!({"key": "k"})));
    }
    gateway.send(&call(3, "mcp__slow__wait", json!({"ms": 300})));
    gateway.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                         "params": {"requestId": 2, "reason": "changed my mind"}}),
    );
    let answers: Vec<Value> = gateway
        .close()
        .into_iter()
        .filter(|message| message.get("method").is_none())
        .collect();
    let mut ids: Vec<u64> = answers.iter().filter_map(|a| a["id"].as_u64()).collect();
    ids.sort_unstable();
    let expected: Vec<u64> = std::iter::once(3).chain(10..42).collect();
    assert_eq!(ids, expected, "{answers:#?}");
    let slow = answers.iter().find(|a| a["id"] == 3).unwrap();
    assert_eq!(slow["result"]["isError"], false, "{slow}");
}

/// Over streamable HTTP, a call the client cancels is cancelled at the upstream and its
/// `POST` ends without an answer; ending the session cancels the calls it has in flight.
/// The session keeps working beside the cancelled call.
#[test]
fn an_http_call_cancelled_by_its_client_or_its_session_end_is_cancelled_upstream() {
    let workspace = Workspace::new("");
    let events = workspace.path("misbehave-events.jsonl");
    let config = example_server("kv", "kv") + &misbehaving_server("bad", "silent", &events, &[]);
    std::fs::write(workspace.config(), config).unwrap();
    let gateway = workspace.serve_http(&[]);
    let address = gateway.address;
    let session = open_session(address, None);
    let upstream_methods = || -> Vec<String> {
        misbehave_events(&events)
            .iter()
            .filter_map(|event| event["method"].as_str().map(str::to_owned))
            .collect()
    };
    let count = |method: &str| upstream_methods().iter().filter(|m| *m == method).count();
    let call_silent = |id: u64| {
        let session = session.clone();
        std::thread::spawn(move || {
            let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                              "params": {"name": "mcp__bad__echo", "arguments": {"text": "?"}}});
            post(address, Some(&session), None, &call.to_string())
        })
    };

    let cancelled = call_silent(7);
    assert!(
        eventually(Duration::from_secs(10), || count("tools/call") == 1),
        "the call reached the upstream: {:?}",
        upstream_methods()
    );
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 7, "reason": "changed my mind"}});
    let (status, _, body) = post(address, Some(&session), None, &cancel.to_string());
    assert_eq!(status, 202, "{body}");
    let (status, headers, body) = cancelled.join().unwrap();
    assert_eq!(status, 200, "{body}");
    let answered = if header(&headers, "content-type") == Some("application/json") {
        vec![body.clone()]
    } else {
        sse_events(&body)
            .into_iter()
            .map(|event| event.data)
            .collect()
    };
    assert!(
        !answered.iter().any(|data| data.contains(r#""id":7"#)),
        "a cancelled call got an answer: {body}"
    );
    assert!(
        eventually(Duration::from_secs(10), || count("notifications/cancelled")
            == 1),
        "the upstream was told: {:?}",
        upstream_methods()
    );

    let get = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                     "params": {"name": "mcp__kv__get", "arguments": {"key": "k"}}});
    let (status, _, body) = post(address, Some(&session), None, &get.to_string());
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""isError":false"#), "{body}");

    let in_flight = call_silent(9);
    assert!(
        eventually(Duration::from_secs(10), || count("tools/call") == 2),
        "the second call reached the upstream: {:?}",
        upstream_methods()
    );
    let (status, _, body) = http_request(
        address,
        "DELETE",
        "/mcp",
        &[("Mcp-Session-Id", session.as_str())],
        b"",
    );
    assert!(status == 200 || status == 204, "{status} {body}");
    let (status, _, body) = in_flight.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        eventually(Duration::from_secs(10), || count("notifications/cancelled")
            == 2),
        "the upstream was told the session ended: {:?}",
        upstream_methods()
    );
}

#[test]
fn a_sessions_call_whose_client_hung_up_still_runs_to_its_end() {
    use std::io::Write;
    let workspace = Workspace::new(&slow_server_with_events(""));
    let gateway = workspace.serve_http(&[]);
    let session = open_session(gateway.address, None);
    let slow_events = |event: &str| -> usize {
        let events = workspace.slow_events("hung-up");
        events.iter().filter(|e| e["event"] == event).count()
    };
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                      "params": {"name": "mcp__slow__wait",
                                 "arguments": {"ms": 600, "label": "hung-up"}}})
    .to_string();
    let mut client = std::net::TcpStream::connect(gateway.address).unwrap();
    write!(
        client,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n\
         Mcp-Session-Id: {session}\r\nContent-Length: {}\r\n\r\n{call}",
        gateway.address,
        call.len()
    )
    .unwrap();
    workspace.slow_call_started("hung-up");
    // The client goes away before the answer.
    drop(client);
    assert!(
        eventually(Duration::from_secs(10), || slow_events("end") == 1),
        "the call ran to its end upstream: {:?}",
        workspace.slow_events("hung-up")
    );
    assert_eq!(slow_events("cancelled"), 0, "the call was not cancelled");
    let finished = || {
        workspace
            .session_events()
            .into_iter()
            .find(|e| e["type"] == "tool/result" && e["tool"] == "mcp__slow__wait")
    };
    assert!(
        eventually(Duration::from_secs(10), || finished().is_some()),
        "the session log has the call's result"
    );
    let result = finished().unwrap();
    assert_eq!(result["isError"], false, "{result}");
    // The session serves the next call as usual.
    let get = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                     "params": {"name": "mcp__slow__wait", "arguments": {"ms": 1}}});
    let (status, _, body) = post(gateway.address, Some(&session), None, &get.to_string());
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""id":6"#), "{body}");
}

#[test]
fn list_changed_reaches_the_client() {
    let workspace = Workspace::new(&example_server("dyn", "dynamic"));
    let run = python_client(
        &python_stdio_args(&workspace, &[]),
        &json!([
            call("mcp__dyn__add_tool", json!({"name": "fresh"})),
            {"action": "wait_notification", "method": "notifications/tools/list_changed"},
            {"action": "list_tools"},
            call("mcp__dyn__fresh", json!({"x": 1})),
        ]),
    );
    let names = tool_names(action_result(&run, 2));
    assert!(names.iter().any(|n| n == "mcp__dyn__fresh"), "{run:#}");
    assert_eq!(action_result(&run, 3)["structuredContent"]["tool"], "fresh");
}

#[test]
fn progress_reaches_the_caller() {
    let workspace = Workspace::new(&example_server("slow", "slow"));
    let run = python_client(
        &python_stdio_args(&workspace, &[]),
        &json!([{"action": "call_tool", "name": "mcp__slow__wait", "arguments": {"ms": 600}, "progress": true}]),
    );
    let progress = run["results"][0]["progress"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        progress.len() >= 2,
        "progress notifications arrived: {run:#}"
    );
    assert_eq!(progress.last().unwrap()["total"], 600.0);
}

/// Over streamable HTTP, a call silent for longer than 15 s is answered on an event stream
/// that carries keep-alive comments until the answer (so intermediaries see no longer
/// silence), while the session's other calls are answered beside it.
#[test]
fn a_long_silent_call_keeps_its_stream_alive_until_the_answer() {
    let workspace = Workspace::new(&format!(
        "{}{}",
        example_server("kv", "kv"),
        slow_server_with_events("")
    ));
    let gateway = workspace.serve_http(&[]);
    let address = gateway.address;
    let session = open_session(address, None);
    let long = {
        let session = session.clone();
        std::thread::spawn(move || {
            let wait = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "mcp__slow__wait", "arguments": {"ms": 16_500, "label": "long"}}});
            post(address, Some(&session), None, &wait.to_string())
        })
    };
    workspace.slow_call_started("long");
    let get = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "mcp__kv__get", "arguments": {"key": "k"}}});
    let (status, headers, body) = post(address, Some(&session), None, &get.to_string());
    assert_eq!(status, 200, "{body}");
    assert_eq!(header(&headers, "content-type"), Some("application/json"));
    assert!(body.contains(r#""id":3"#), "{body}");
    assert!(
        !workspace
            .slow_events("long")
            .iter()
            .any(|event| event["event"] == "end"),
        "the other call was answered only after the long one"
    );

    let (status, headers, body) = long.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        header(&headers, "content-type").is_some_and(|t| t.starts_with("text/event-stream")),
        "{headers:?}"
    );
    let comment = body
        .find("\n:")
        .or_else(|| body.starts_with(':').then_some(0));
    let answer = body.find(r#""id":2"#);
    assert!(
        comment.is_some() && answer.is_some() && comment < answer,
        "a keep-alive comment, then the answer: {body}"
    );
    let messages: Vec<Value> = sse_events(&body)
        .iter()
        .filter_map(|event| serde_json::from_str(&event.data).ok())
        .collect();
    assert_eq!(messages.len(), 1, "{body}");
    assert_eq!(messages[0]["result"]["isError"], false, "{body}");
}

/// Over streamable HTTP, what the gateway asks a client during a call rides that call's
/// stream: an upstream's sampling request (with a progress token the client reports
/// under) and the gate's `ask`. The client answers each in a POST of its own, and the
/// call's answer follows on the same stream; the client never opened its `GET` stream.
#[test]
fn requests_during_an_http_call_ride_its_stream_and_their_answers_come_back() {
    let workspace = Workspace::new(&format!(
        "{}{}\n[[policy]]\ntool = \"mcp__kv__set\"\ndecision = \"ask\"\nreason = \"writes need a person\"\n",
        example_server("kv", "kv"),
        slow_server_with_events("")
    ));
    let gateway = workspace.serve_http(&[]);
    let address = gateway.address;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {"sampling": {}, "elicitation": {}},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let (status, headers, body) = post(address, None, None, &initialize.to_string());
    assert_eq!(status, 200, "{body}");
    let session = header(&headers, "mcp-session-id").unwrap().to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _) = post(address, Some(&session), None, &initialized.to_string());
    assert_eq!(status, 202);
    let message = |stream: &mut SseResponse| -> Value {
        let event = stream.next_event().expect("an event on the call's stream");
        serde_json::from_str(&event.data).unwrap()
    };
    let answer = |id: &Value, result: Value| {
        let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
        let (status, _, body) = post(address, Some(&session), None, &answer.to_string());
        assert_eq!(status, 202, "{body}");
    };

    let ask = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "mcp__slow__ask", "arguments": {"prompt": "p"}}});
    let mut stream = SseResponse::post(address, &session, &ask.to_string());
    let sampling = message(&mut stream);
    assert_eq!(sampling["method"], "sampling/createMessage", "{sampling}");
    let token = &sampling["params"]["_meta"]["progressToken"];
    assert!(!token.is_null(), "{sampling}");
    let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                          "params": {"progressToken": token, "progress": 0.5}});
    let (status, _, _) = post(address, Some(&session), None, &progress.to_string());
    assert_eq!(status, 202);
    workspace.wait_for_slow_event("progress", "ask");
    answer(
        &sampling["id"],
        json!({"role": "assistant", "model": "m",
               "content": {"type": "text", "text": "SAMPLED-ON-THE-CALL-STREAM"}}),
    );
    let result = message(&mut stream);
    assert_eq!(result["id"], 2, "{result}");
    let asked = &result["result"]["structuredContent"];
    assert_eq!(asked["answer"], "SAMPLED-ON-THE-CALL-STREAM", "{result}");
    assert_eq!(asked["progress"], json!([0.5]), "{result}");

    let set = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "mcp__kv__set", "arguments": {"key": "k", "value": "v"}}});
    let mut stream = SseResponse::post(address, &session, &set.to_string());
    let question = message(&mut stream);
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let asked = question["params"]["message"].as_str().unwrap();
    assert!(asked.contains("writes need a person"), "{question}");
    answer(&question["id"], json!({"action": "decline"}));
    let result = message(&mut stream);
    assert_eq!(result["id"], 3, "{result}");
    assert_eq!(error_code(&result["result"]), Some("DENIED"), "{result}");
    assert!(
        result_text(&result["result"]).contains("not approved"),
        "{result}"
    );
}

/// Over streamable HTTP, a call whose only message back is its answer gets it as plain
/// JSON; a call that reports progress first gets an event stream: the progress, then the
/// answer.
#[test]
fn a_quick_answer_comes_as_plain_json_and_progress_as_a_stream() {
    let workspace = Workspace::new(&format!(
        "{}{}",
        example_server("kv", "kv"),
        example_server("slow", "slow")
    ));
    let gateway = workspace.serve_http(&[]);
    let session = open_session(gateway.address, None);

    let get = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "mcp__kv__get", "arguments": {"key": "k"}}});
    let (status, headers, body) = post(gateway.address, Some(&session), None, &get.to_string());
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        header(&headers, "content-type"),
        Some("application/json"),
        "{headers:?}"
    );
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["id"], 2, "{body}");
    assert_eq!(answer["result"]["isError"], false, "{body}");

    let wait = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "mcp__slow__wait", "arguments": {"ms": 300},
        "_meta": {"progressToken": "p3"}}});
    let (status, headers, body) = post(gateway.address, Some(&session), None, &wait.to_string());
    assert_eq!(status, 200, "{body}");
    assert!(
        header(&headers, "content-type").is_some_and(|t| t.starts_with("text/event-stream")),
        "{headers:?}"
    );
    let messages: Vec<Value> = sse_events(&body)
        .iter()
        .filter_map(|event| serde_json::from_str(&event.data).ok())
        .collect();
    assert_eq!(
        messages.first().map(|m| &m["method"]),
        Some(&json!("notifications/progress")),
        "{body}"
    );
    assert_eq!(messages.last().map(|m| &m["id"]), Some(&json!(3)), "{body}");
}

#[test]
fn hot_reload_adds_and_removes_servers_and_keeps_the_old_config_when_invalid() {
    let workspace = Workspace::new(&example_server("kv", "kv"));
    let mut gateway = workspace.serve_http(&[]);
    // One client session stays open across the reload and is told about it.
    let args = gateway.client_args("http", "/mcp");
    let session = std::thread::spawn(move || {
        python_client(
            &args,
            &json!([
                {"action": "list_tools"},
                // Tells the test that the list above was taken: the reload may come.
                call("mcp__kv__get", json!({"key": "listed"})),
                {"action": "wait_notification", "method": "notifications/tools/list_changed", "timeout_ms": 20000},
                // The added server joins as it comes up, maybe after a first list_changed.
                {"action": "wait_tool", "name": "mcp__slow__pid", "timeout_ms": 20000},
                call("mcp__slow__pid", json!({})),
            ]),
        )
    });
    // Reload once the session has listed the tools: its next call has reached the gateway.
    assert!(
        eventually(PATIENCE, || http_get(gateway.address, "/metrics")
            .2
            .contains("mcp_gateway_tool_calls_total{tool=\"mcp__kv__get\"} 1")),
        "the client never called mcp__kv__get after listing: {}",
        gateway.log_text()
    );
    let original = std::fs::read_to_string(workspace.config()).unwrap();
    let with_slow = format!(
        "{}{}",
        example_server("slow", "slow"),
        original.replace(&example_server("kv", "kv"), "")
    );
    std::fs::write(workspace.config(), &with_slow).unwrap();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(gateway.pid(), libc::SIGHUP) };
    let run = session.join().unwrap();
    let names = |i: usize| tool_names(action_result(&run, i));
    assert!(
        names(0).iter().all(|t| t.starts_with("mcp__kv__")),
        "{run:#}"
    );
    assert!(
        names(3).iter().all(|t| t.starts_with("mcp__slow__")),
        "{run:#}"
    );
    assert_eq!(error_code(action_result(&run, 4)), None, "{run:#}");

    std::fs::write(workspace.config(), "[servers.broken]\nnope = 1\n").unwrap();
    // SAFETY: as above.
    unsafe { libc::kill(gateway.pid(), libc::SIGHUP) };
    assert!(
        eventually(Duration::from_secs(10), || gateway
            .log_text()
            .contains("configuration not reloaded")),
        "{}",
        gateway.log_text()
    );
    let run = python_client(
        &gateway.client_args("http", "/mcp"),
        &json!([call("mcp__slow__pid", json!({}))]),
    );
    assert_eq!(
        error_code(action_result(&run, 0)),
        None,
        "the old configuration keeps serving: {run:#}"
    );
    assert!(
        gateway
            .signal_and_wait(libc::SIGTERM, Duration::from_secs(20))
            .is_some()
    );
}

/// A client that opens streamable HTTP sessions and leaves without ending them does not
/// leave them behind: each ends once unused for `[cluster] session_ttl_secs`, while a
/// session its client keeps using lives on.
#[test]
fn a_session_its_client_abandoned_ends_after_the_session_ttl() {
    let workspace = Workspace::new(&format!(
        "{}[cluster]\nsession_ttl_secs = 2\n",
        example_server("kv", "kv")
    ));
    let gateway = workspace.serve_http(&[]);
    let abandoned = open_session(gateway.address, None);
    let kept = open_session(gateway.address, None);
    // The console's list of open sessions (with no tokens configured, an empty login).
    let (status, headers, body) = http_request(
        gateway.address,
        "POST",
        "/ui/api/login",
        &[("Content-Type", "application/json")],
        br#"{"token": ""}"#,
    );
    assert_eq!(status, 200, "{body}");
    let cookie = header(&headers, "set-cookie")
        .and_then(|cookie| cookie.split(';').next())
        .expect("a login cookie")
        .to_owned();
    let listed = |id: &str| {
        let (status, _, body) = http_request(
            gateway.address,
            "GET",
            "/ui/api/sessions",
            &[("Cookie", &cookie)],
            b"",
        );
        assert_eq!(status, 200, "{body}");
        let sessions: Value = serde_json::from_str(&body).unwrap();
        sessions["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|session| session["id"] == id)
    };
    assert!(listed(&abandoned) && listed(&kept));
    let deadline = Instant::now() + Duration::from_secs(30);
    while listed(&abandoned) {
        assert!(
            Instant::now() < deadline,
            "the abandoned session is still open"
        );
        // The kept session is used all along (a ping, well within its ttl).
        let ping = r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#;
        let (status, _, body) = post(gateway.address, Some(&kept), None, ping);
        assert_eq!(status, 200, "{body}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(listed(&kept), "the session in use was ended too");
    let (status, _, body) = post(
        gateway.address,
        Some(&abandoned),
        None,
        r#"{"jsonrpc":"2.0","id":10,"method":"ping"}"#,
    );
    assert_eq!(status, 404, "{body}");
}
