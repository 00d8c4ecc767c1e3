//! Both protocol revisions on each side of the gateway, and the bridge between them, with
//! the official Python SDK on both ends.
//!
//! The upstream is `tests/servers/asks.py`, whose tools elicit, sample and list roots: at
//! 2025-11-25 it sends those requests mid-call; at 2026-07-28 it answers
//! `InputRequiredResult` and resumes on the client's retry. The gateway speaks to it at
//! either revision (`protocol` in its `[servers]` entry), and the client speaks to the
//! gateway at either (`--mode legacy`: `initialize`; `--mode auto`: `server/discover`, then
//! stateless requests). Every one of the four pairs must get every answer, and the progress
//! a server reports after its question was answered, over stdio, streamable HTTP and
//! legacy SSE: a client of 2026-07-28 in front of a server of 2025-11-25 is asked in an
//! `InputRequiredResult` for what the server requested; a client of 2025-11-25 in front of
//! a server of 2026-07-28 gets the server's questions as requests of their own.

use mcp_gateway_tests::streamable;
use mcp_gateway_tests::*;
use serde_json::{Value, json};

/// The gateway's configuration with `asks.py` spoken to at `protocol`.
fn config(protocol: &str) -> String {
    format!(
        "[servers.asks]\ncommand = {}\nargs = [{}]\nprotocol = {}\n",
        toml_str(python().to_string_lossy()),
        toml_str(repo().join("tests/servers/asks.py").to_string_lossy()),
        toml_str(protocol),
    )
}

/// What the client answers when asked, and what each tool then returns.
const CLIENT_ANSWERS: [&str; 6] = [
    "--elicit",
    "accept",
    "--elicit-content",
    r#"{"name":"Ada"}"#,
    "--sample",
    "MCP is a protocol",
];

fn script() -> Value {
    json!([
        {"action": "call_tool", "name": "mcp__asks__greet"},
        {"action": "call_tool", "name": "mcp__asks__summarize"},
        {"action": "call_tool", "name": "mcp__asks__count_roots"},
        {"action": "call_tool", "name": "mcp__asks__greet_with_progress", "progress": true},
    ])
}

/// Runs the three tools from a client in `mode` over `transport_args`, and checks every
/// answer and the revision the client spoke.
fn every_question_is_answered(mut args: Vec<String>, mode: &str, revision: &str) {
    args.extend(["--mode".into(), mode.into()]);
    args.extend(CLIENT_ANSWERS.iter().map(|arg| arg.to_string()));
    args.extend(["--roots".into(), r#"[{"uri":"file:///srv/a"}]"#.into()]);
    let run = python_client(&args, &script());
    assert_eq!(run["ok"], true, "{run:#}");
    assert_eq!(run["server"]["protocol_version"], revision, "{run:#}");
    let texts: Vec<String> = (0..4)
        .map(|i| result_text(action_result(&run, i)))
        .collect();
    assert_eq!(
        texts,
        [
            "Hello, Ada!",
            "MCP is a protocol",
            "1 roots: file:///srv/a",
            "Hello, Ada!"
        ],
        "{run:#}"
    );
    // The server's name for itself on its results (2026-07-28) does not reach the
    // gateway's clients, who talk to the gateway.
    for i in 0..4 {
        let result = action_result(&run, i);
        assert_ne!(
            result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "asks",
            "{run:#}"
        );
    }
    // Progress the server reports after the client answered its question reaches the
    // client, whose answer (for a client of 2026-07-28) came in a request of its own.
    let progress: Vec<&Value> = run["results"][3]["progress"]
        .as_array()
        .map(|updates| updates.iter().map(|update| &update["progress"]).collect())
        .unwrap_or_default();
    assert_eq!(progress, [&json!(0.5), &json!(1.0)], "{run:#}");
}

/// Every pair of revisions over stdio.
#[test]
fn every_pair_of_revisions_bridges_over_stdio() {
    for upstream in ["2025-11-25", "2026-07-28"] {
        let workspace = Workspace::new(&config(upstream));
        for (mode, revision) in [("legacy", "2025-11-25"), ("auto", "2026-07-28")] {
            let args = python_stdio_args(&workspace, &[]);
            every_question_is_answered(args, mode, revision);
        }
    }
}

/// Every pair of revisions over streamable HTTP; the client of 2026-07-28 sends no
/// session id, and its questions come back in results of requests of their own.
#[test]
fn every_pair_of_revisions_bridges_over_streamable_http() {
    for upstream in ["2025-11-25", "2026-07-28"] {
        let workspace = Workspace::new(&config(upstream));
        let gateway = workspace.serve_http(&[]);
        for (mode, revision) in [("legacy", "2025-11-25"), ("auto", "2026-07-28")] {
            let args = gateway.client_args("http", "/mcp");
            every_question_is_answered(args, mode, revision);
        }
    }
}

/// Every pair of revisions over legacy SSE: the client of 2026-07-28 posts requests that
/// carry their own context to the endpoint its event stream announced.
#[test]
fn every_pair_of_revisions_bridges_over_legacy_sse() {
    for upstream in ["2025-11-25", "2026-07-28"] {
        let workspace = Workspace::new(&config(upstream));
        let gateway = workspace.serve_http(&[]);
        for (mode, revision) in [("legacy", "2025-11-25"), ("auto", "2026-07-28")] {
            let args = gateway.client_args("sse", "/sse");
            every_question_is_answered(args, mode, revision);
        }
    }
}

/// A request of 2026-07-28 carries its own context: without it, or with an unknown
/// version, it is refused with the status and code the revision gives; the methods of
/// the session lifecycle are gone; `server/discover` says what the gateway speaks.
#[test]
fn a_stateless_request_is_checked_as_its_revision_requires() {
    let workspace = Workspace::new(&example_server("kv", "kv"));
    let gateway = workspace.serve_http(&[]);
    let post = |body: Value, version: &str| {
        let body = body.to_string();
        let routing = streamable::routing_headers(&body);
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", version),
        ];
        headers.extend(routing.iter().map(|(name, value)| (*name, value.as_str())));
        let (status, _, text) =
            http_request(gateway.address, "POST", "/mcp", &headers, body.as_bytes());
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        (status, answer, text)
    };
    let meta = |version: &str| {
        json!({"io.modelcontextprotocol/protocolVersion": version,
               "io.modelcontextprotocol/clientCapabilities": {}})
    };
    let (status, answer, text) = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
               "params": {"_meta": meta("2026-07-28")}}),
        "2026-07-28",
    );
    assert_eq!(status, 200, "{text}");
    let versions = &answer["result"]["supportedVersions"];
    assert!(
        versions.as_array().unwrap().contains(&json!("2026-07-28"))
            && versions.as_array().unwrap().contains(&json!("2025-11-25")),
        "{text}"
    );

    let (status, answer, text) = post(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "mcp__kv__set", "arguments": {"key": "k", "value": "v"},
                          "_meta": meta("2026-07-28")}}),
        "2026-07-28",
    );
    assert_eq!(status, 200, "{text}");
    assert_eq!(
        answer["result"]["structuredContent"]["value"], "v",
        "{text}"
    );
    assert_eq!(answer["result"]["resultType"], "complete", "{text}");

    let (status, answer, text) = post(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}),
        "2026-07-28",
    );
    assert_eq!(
        (status, answer["error"]["code"].clone()),
        (400, json!(-32602)),
        "{text}"
    );

    let (status, answer, text) = post(
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list",
               "params": {"_meta": meta("2099-01-01")}}),
        "2099-01-01",
    );
    assert_eq!(
        (status, answer["error"]["code"].clone()),
        (400, json!(-32022)),
        "{text}"
    );

    let (status, answer, text) = post(
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list",
               "params": {"_meta": meta("2026-07-28")}}),
        "2025-11-25",
    );
    assert_eq!(
        (status, answer["error"]["code"].clone()),
        (400, json!(-32020)),
        "{text}"
    );

    let (status, answer, text) = post(
        json!({"jsonrpc": "2.0", "id": 6, "method": "ping",
               "params": {"_meta": meta("2026-07-28")}}),
        "2026-07-28",
    );
    assert_eq!(
        (status, answer["error"]["code"].clone()),
        (404, json!(-32601)),
        "{text}"
    );
    assert_eq!(answer["id"], 6, "{text}");
}

/// What a client sees changes, and it is told: a client of 2025-11-25 by
/// `notifications/tools/list_changed` on its session, a client of 2026-07-28 on the
/// `subscriptions/listen` stream it opened. Here the change is the tools a search found,
/// which join the searching session's list.
#[test]
fn list_changed_reaches_clients_of_both_revisions() {
    let config = format!(
        "[gateway]\ncatalog = \"search\"\n{}",
        example_server("kv", "kv")
    );
    let workspace = Workspace::new(&config);
    let gateway = workspace.serve_http(&[]);
    let search = json!({"action": "call_tool", "name": "search_tools",
                        "arguments": {"query": "read the value stored under a key"}});

    let legacy = gateway.legacy_client_args();
    let run = python_client(
        &legacy,
        &json!([search, {"action": "wait_notification",
                         "method": "notifications/tools/list_changed"}]),
    );
    assert_eq!(run["ok"], true, "{run:#}");

    let mut modern = gateway.client_args("http", "/mcp");
    modern.extend(["--mode".into(), "auto".into()]);
    let run = python_client(
        &modern,
        &json!([{"action": "listen", "tools_list_changed": true, "then": [search],
                 "timeout_ms": 10000}]),
    );
    let listened = action_result(&run, 0);
    assert_eq!(listened["honored"]["toolsListChanged"], true, "{run:#}");
    assert_eq!(listened["events"], json!(["ToolsListChanged"]), "{run:#}");
}

/// A client of 2025-11-25 sets its log level once, with `logging/setLevel`; a server of
/// 2026-07-28 has no such method and logs only at the level each request names. The
/// gateway names the session's level in the calls it makes for that client, so the
/// server's log message reaches it, as from a server of 2025-11-25.
#[test]
fn a_sessions_log_level_reaches_servers_of_both_revisions() {
    for upstream in ["2025-11-25", "2026-07-28"] {
        let workspace = Workspace::new(&config(upstream));
        let mut args = python_stdio_args(&workspace, &[]);
        args.extend(["--mode".into(), "legacy".into()]);
        args.extend(CLIENT_ANSWERS.iter().map(|arg| arg.to_string()));
        let run = python_client(
            &args,
            &json!([{"action": "set_logging_level", "level": "info"},
                    {"action": "call_tool", "name": "mcp__asks__greet_with_progress"}]),
        );
        assert_eq!(
            result_text(action_result(&run, 1)),
            "Hello, Ada!",
            "{run:#}"
        );
        let logged = run["notifications"]
            .as_array()
            .is_some_and(|notifications| {
                notifications.iter().any(|n| {
                    n["method"] == "notifications/message" && n["params"]["data"] == "greeting Ada"
                })
            });
        assert!(
            logged,
            "no log message from a server of {upstream}: {run:#}"
        );
    }
}

/// A 2026-07-28 request over streamable HTTP: its routing headers say what its body
/// says, or nothing of it runs; and a retry takes up only the call of its own request.
#[test]
fn routing_headers_and_retries_must_repeat_the_request() {
    let workspace = Workspace::new(&config("2025-11-25"));
    let gateway = workspace.serve_http(&[]);
    let post = |body: &Value, routing: &[(&str, &str)]| {
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
        ];
        headers.extend_from_slice(routing);
        let (status, _, text) = http_request(
            gateway.address,
            "POST",
            "/mcp",
            &headers,
            body.to_string().as_bytes(),
        );
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        (status, answer, text)
    };
    let call = |id: u64, tool: &str, extra: Value| {
        let mut params = json!({"name": tool, "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        }});
        if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
            params.extend(extra.clone());
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
    };
    let greet = "mcp__asks__greet";
    let refused = |(status, answer, text): (u16, Value, String)| {
        assert_eq!(
            (status, answer["error"]["code"].clone()),
            (400, json!(-32020)),
            "{text}"
        );
    };
    // A filter that lets `tools/list` through would be bypassed by a call that says it is one.
    refused(post(
        &call(1, greet, json!({})),
        &[("Mcp-Method", "tools/list"), ("Mcp-Name", greet)],
    ));
    refused(post(&call(2, greet, json!({})), &[("Mcp-Name", greet)]));
    refused(post(
        &call(3, greet, json!({})),
        &[
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "mcp__asks__summarize"),
        ],
    ));
    refused(post(
        &call(4, greet, json!({})),
        &[("Mcp-Method", "tools/call")],
    ));

    let name = format!("  {greet} ");
    let routed = [("mcp-method", "tools/call"), ("MCP-NAME", name.as_str())];
    let (status, answer, text) = post(&call(5, greet, json!({})), &routed);
    assert_eq!(status, 200, "{text}");
    assert_eq!(answer["result"]["resultType"], "input_required", "{text}");
    let state = answer["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    let question = answer["result"]["inputRequests"]
        .as_object()
        .and_then(|questions| questions.keys().next().cloned())
        .unwrap_or_else(|| panic!("a question: {text}"));
    let answers = json!({
        "requestState": state,
        "inputResponses": {question: {"action": "accept", "content": {"name": "Ada"}}},
    });

    // The state of greet's call, sent with another tool: refused, and greet's call waits on.
    let summarize = "mcp__asks__summarize";
    let (status, answer, text) = post(
        &call(6, summarize, answers.clone()),
        &[("Mcp-Method", "tools/call"), ("Mcp-Name", summarize)],
    );
    assert_eq!(
        (status, answer["error"]["code"].clone()),
        (400, json!(-32602)),
        "{text}"
    );
    assert!(text.contains("another request"), "{text}");
    let (status, answer, text) = post(&call(7, greet, answers), &routed);
    assert_eq!(status, 200, "{text}");
    assert_eq!(
        answer["result"]["content"][0]["text"], "Hello, Ada!",
        "{text}"
    );
}

/// No `protocol` key: the gateway asks each server with `server/discover` first and gives
/// `initialize` to a server that does not know it, so servers of both revisions, over stdio
/// and streamable HTTP, work side by side with nothing configured: `asks.py` (Python SDK)
/// and rmcp's `echo` are spoken to at 2026-07-28; npm server-memory (TypeScript SDK 1.x),
/// our `kv`, npm server-everything and `misbehave.py` at 2025-11-25. A client of either
/// revision calls a tool of each, directly and from `run_code`; `misbehave.py`'s list,
/// fresh for a minute (`ttlMs`), is read once however often clients list.
#[test]
fn servers_of_both_revisions_need_no_protocol_key() {
    let everything = ListeningServer::everything("streamableHttp");
    let echo = ListeningServer::rmcp_echo();
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let workspace = Workspace::new(&format!(
        "[gateway]\nmode = \"both\"\n{}{}{}{}{}{}",
        config("auto").replace("protocol = \"auto\"\n", ""),
        npm_server("memory", "mcp-server-memory", &[]),
        example_server("kv", "kv"),
        everything.server_config("everything", ""),
        echo.server_config("echo", ""),
        misbehaving_server("m", "well", &events, &[("MISBEHAVE_LIST_TTL_MS", "60000")]),
    ));
    assert!(
        !std::fs::read_to_string(workspace.config())
            .unwrap()
            .contains("protocol"),
        "the configuration names no protocol"
    );
    let gateway = workspace.serve_http(&[]);
    let servers = ["asks", "memory", "kv", "everything", "echo", "m"];
    let protocols = || {
        let health = health(&gateway);
        servers.map(|server| health["upstreams"][server]["protocol"].clone())
    };
    assert!(
        eventually(PATIENCE, || protocols().iter().all(|p| !p.is_null())),
        "{:?}\n{}",
        protocols(),
        gateway.log_text()
    );
    assert_eq!(
        protocols(),
        [
            "2026-07-28",
            "2025-11-25",
            "2025-11-25",
            "2025-11-25",
            "2026-07-28",
            "2025-11-25"
        ]
        .map(|p| json!(p))
    );
    for (mode, revision) in [("legacy", "2025-11-25"), ("auto", "2026-07-28")] {
        every_question_is_answered(gateway.client_args("http", "/mcp"), mode, revision);
        let mut args = gateway.client_args("http", "/mcp");
        args.extend(["--mode".into(), mode.into()]);
        let code = format!("return (await tools.kv.get({{ key: {mode:?} }})).value;");
        let run = python_client(
            &args,
            &json!([
                {"action": "call_tool", "name": "mcp__memory__read_graph"},
                {"action": "call_tool", "name": "mcp__kv__set", "arguments": {"key": mode, "value": revision}},
                {"action": "call_tool", "name": "mcp__everything__echo", "arguments": {"message": mode}},
                {"action": "call_tool", "name": "mcp__echo__echo", "arguments": {"text": revision}},
                {"action": "call_tool", "name": "run_code", "arguments": {"code": code}},
                {"action": "list_tools"},
            ]),
        );
        assert_eq!(run["ok"], true, "{run:#}");
        assert!(
            result_text(action_result(&run, 0)).contains("entities"),
            "{run:#}"
        );
        assert_eq!(error_code(action_result(&run, 1)), None, "{run:#}");
        assert!(
            result_text(action_result(&run, 2)).contains(mode),
            "{run:#}"
        );
        assert!(
            result_text(action_result(&run, 3)).contains(revision),
            "{run:#}"
        );
        assert!(
            result_text(action_result(&run, 4)).contains(revision),
            "{run:#}"
        );
        let listed = tool_names(action_result(&run, 5));
        for tool in [
            "run_code",
            "mcp__asks__greet",
            "mcp__kv__get",
            "mcp__echo__echo",
            "mcp__m__echo",
        ] {
            assert!(listed.contains(&tool.to_owned()), "{tool}: {listed:?}");
        }
    }
    let listings = misbehave_events(&events)
        .iter()
        .filter(|event| event["method"] == "tools/list")
        .count();
    assert_eq!(listings, 1, "read again within its ttlMs");
}

/// An upstream that says how long its tool list stays fresh (`ttlMs`) is listed once within
/// that time, and again once it ran out, so the gateway's clients see the newer list.
#[test]
fn an_upstream_list_is_read_again_once_its_ttl_ms_ran_out_and_not_before() {
    const TTL_MS: u64 = 1500;
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let workspace = Workspace::new(&misbehaving_server(
        "m",
        "well",
        &events,
        &[("MISBEHAVE_LIST_TTL_MS", &TTL_MS.to_string())],
    ))
    .with_env("RUST_LOG", "info,mcp_gateway::upstream=debug");
    let gateway = workspace.serve_http(&[]);
    // The upstream's third reading (`listing_3`) reaches the gateway's clients.
    let tools = || {
        let listed = streamable::stateless_request(
            gateway.address,
            None,
            &json!({}),
            "tools/list",
            json!({}),
        );
        listed["result"]["tools"]
            .as_array()
            .map(|tools| {
                let name = |tool: &Value| tool["name"].as_str().unwrap_or_default().to_owned();
                tools.iter().map(name).collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    assert!(
        eventually(PATIENCE, || tools()
            .iter()
            .any(|name| name == "mcp__m__listing_3")),
        "{:?}\n{}\nthe server's events: {:?}",
        tools(),
        gateway.log_text(),
        misbehave_events(&events)
    );
    let listed: Vec<u64> = misbehave_events(&events)
        .iter()
        .filter(|event| event["method"] == "tools/list")
        .filter_map(|event| event["at_ms"].as_u64())
        .collect();
    assert!(listed.len() >= 3, "{listed:?}");
    for pair in listed.windows(2) {
        assert!(
            pair[1] - pair[0] >= TTL_MS,
            "listed again within its ttlMs: {listed:?}"
        );
    }
}
