//! A server of both protocol revisions behind the gateway with the default configuration
//! (`protocol = "auto"`), as servers built on today's SDKs are: tests/servers/ts_sdk.mjs,
//! written on the official TypeScript SDK and served over streamable HTTP or over stdio,
//! answers `server/discover` (so the gateway speaks 2026-07-28 to it), yet its tools
//! still ask their client by request (over HTTP on the call's stream), and it refuses
//! `resources/subscribe` as a removed stateful RPC. What it does must reach a client of
//! either revision as it would directly: its questions as requests to a client of
//! 2025-11-25 and in an `InputRequiredResult` to one of 2026-07-28, and a 2025 client's
//! resource subscription as a `subscriptions/listen` of that resource.

use mcp_gateway_tests::*;
use serde_json::{Value, json};

/// Asserts the suite's server scenarios of 2025-11-25 in which the server asks its
/// client, or is subscribed to, all pass at each of `urls`.
fn assert_the_suites_asking_and_subscribing_scenarios_pass(urls: &[String]) {
    for scenario in [
        "tools-call-sampling",
        "tools-call-elicitation",
        "elicitation-sep1034-defaults",
        "elicitation-sep1330-enums",
        "resources-subscribe",
        "resources-unsubscribe",
    ] {
        for url in urls {
            let output_dir = tempfile::tempdir().unwrap();
            let selection = ["--scenario", scenario, "--spec-version", "2025-11-25"];
            let output = conformance_server(url, &selection, output_dir.path());
            let runs = suite_checks(output_dir.path());
            assert!(
                !runs.is_empty(),
                "{scenario} at {url} wrote no checks:\n{}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            for (_, checks) in runs {
                let failed: Vec<&Value> = checks
                    .iter()
                    .filter(|check| {
                        !["SUCCESS", "INFO", "SKIPPED"]
                            .contains(&check["status"].as_str().unwrap_or_default())
                    })
                    .collect();
                assert!(failed.is_empty(), "{scenario} at {url}: {failed:#?}");
            }
        }
    }
}

/// The suite's server scenarios of 2025-11-25 in which the server asks its client, or is
/// subscribed to, all pass through the gateway as they pass directly.
#[test]
fn the_suites_asking_and_subscribing_scenarios_pass_through_the_gateway() {
    let upstream = ListeningServer::ts_sdk();
    let workspace =
        Workspace::new(&upstream.server_config("ts", "prefix = \"\"\nrewrite_uris = false\n"));
    let gateway = workspace.serve_http(&[]);
    assert_the_suites_asking_and_subscribing_scenarios_pass(&[
        format!("http://{}/mcp", upstream.address),
        gateway.url("/mcp"),
    ]);
}

/// They pass through the gateway in front of the same server over stdio too (the suite
/// reaches servers only over HTTP: there is no direct run to compare with).
#[test]
fn the_suites_asking_and_subscribing_scenarios_pass_through_the_gateway_to_stdio() {
    let workspace = Workspace::new(&ts_sdk_stdio_server(
        "ts",
        "prefix = \"\"\nrewrite_uris = false\n",
    ));
    let gateway = workspace.serve_http(&[]);
    assert_the_suites_asking_and_subscribing_scenarios_pass(&[gateway.url("/mcp")]);
}

/// Asserts `gateway` found `server` speaks 2026-07-28 (it answered `server/discover`) and
/// speaks that to it.
fn assert_spoken_to_at_2026_07_28(gateway: &Gateway, server: &str) {
    let protocol = || health(gateway)["upstreams"][server]["protocol"].clone();
    assert!(
        eventually(PATIENCE, || !protocol().is_null()),
        "{server} never came up:\n{}",
        gateway.log_text()
    );
    assert_eq!(protocol(), "2026-07-28", "{}", gateway.log_text());
}

/// Asserts a client of either revision, through a gateway serving `config` (which speaks
/// 2026-07-28 to `server`), sees the tools of `server`, is asked what they ask
/// (`test_sampling`, `test_elicitation`), and gets the answers' results.
fn assert_questions_reach_clients_of_both_revisions(config: &str, server: &str) {
    let workspace = Workspace::new(config);
    let gateway = workspace.serve_http(&[]);
    assert_spoken_to_at_2026_07_28(&gateway, server);
    for (mode, revision) in [("legacy", "2025-11-25"), ("auto", "2026-07-28")] {
        let mut args = gateway.client_args("http", "/mcp");
        args.extend(
            [
                "--mode",
                mode,
                "--sample",
                "MCP is a protocol",
                "--elicit",
                "accept",
                "--elicit-content",
                r#"{"response":"yes"}"#,
            ]
            .map(String::from),
        );
        let run = python_client(
            &args,
            &json!([
                {"action": "list_tools"},
                {"action": "call_tool", "name": format!("mcp__{server}__test_sampling"),
                 "arguments": {"prompt": "What is MCP?"}},
                {"action": "call_tool", "name": format!("mcp__{server}__test_elicitation"),
                 "arguments": {"message": "Say yes"}},
            ]),
        );
        assert_eq!(run["ok"], true, "{mode}: {run:#}");
        assert_eq!(run["server"]["protocol_version"], revision, "{run:#}");
        let listed = tool_names(action_result(&run, 0));
        for tool in ["test_sampling", "test_elicitation"] {
            let tool = format!("mcp__{server}__{tool}");
            assert!(listed.contains(&tool), "{mode}: {tool} not in {listed:?}");
        }
        let texts: Vec<String> = (1..3)
            .map(|i| result_text(action_result(&run, i)))
            .collect();
        assert_eq!(
            texts,
            [
                "LLM response: MCP is a protocol",
                r#"Elicitation completed: action=accept, content={"response":"yes"}"#,
            ],
            "{mode}: {run:#}"
        );
    }
}

/// Over streamable HTTP, where each question comes on its call's stream.
#[test]
fn a_dual_revision_servers_questions_reach_clients_of_both_revisions() {
    let upstream = ListeningServer::ts_sdk();
    assert_questions_reach_clients_of_both_revisions(&upstream.server_config("ts", ""), "ts");
}

/// The same over stdio: tests/servers/asks_by_request.py answers `server/discover` and
/// asks by request mid-call, where nothing on the wire says which call a request is for.
/// A client of either revision is asked, as when it calls the server directly.
#[test]
fn a_dual_revision_stdio_servers_questions_reach_clients_of_both_revisions() {
    assert_questions_reach_clients_of_both_revisions(&asks_by_request_config(), "asks");
}

/// The same with tests/servers/ts_sdk.mjs over stdio, the SDK's own stdio transport
/// under it.
#[test]
fn a_dual_revision_ts_sdk_stdio_servers_questions_reach_clients_of_both_revisions() {
    assert_questions_reach_clients_of_both_revisions(&ts_sdk_stdio_server("ts", ""), "ts");
}

/// Asserts a client of 2025-11-25, through a gateway serving `config` (server `ts`, spoken
/// to at 2026-07-28), subscribes to `test://watched-resource` and hears of its update.
fn assert_a_2025_clients_subscription_hears_the_server(config: &str) {
    let workspace = Workspace::new(config);
    let gateway = workspace.serve_http(&[]);
    assert_spoken_to_at_2026_07_28(&gateway, "ts");
    let args = gateway.legacy_client_args();
    let run = python_client(
        &args,
        &json!([
            {"action": "subscribe", "uri": "test://watched-resource"},
            {"action": "call_tool", "name": "mcp__ts__touch_watched"},
            {"action": "wait_notification", "method": "notifications/resources/updated"},
            {"action": "unsubscribe", "uri": "test://watched-resource"},
            {"action": "wait_call", "name": "mcp__ts__touch_watched",
             "text": "touched: 0 told", "timeout_ms": 10000},
        ]),
    );
    assert_eq!(run["ok"], true, "{run:#}");
    assert_eq!(run["server"]["protocol_version"], "2025-11-25", "{run:#}");
    let updated = notifications_of(&run, "notifications/resources/updated");
    assert_eq!(
        updated.first().map(|n| &n["params"]["uri"]),
        Some(&json!("test://watched-resource")),
        "{run:#}"
    );
}

/// A client of 2025-11-25 subscribes to a resource of the server spoken to at
/// 2026-07-28 over streamable HTTP, and hears of its update.
#[test]
fn a_2025_clients_subscription_hears_a_server_of_2026_07_28() {
    let upstream = ListeningServer::ts_sdk();
    assert_a_2025_clients_subscription_hears_the_server(
        &upstream.server_config("ts", "rewrite_uris = false\n"),
    );
}

/// The same over stdio, where the `subscriptions/listen` bridging the subscription is a
/// request on the server's pipe that stays open.
#[test]
fn a_2025_clients_subscription_hears_a_stdio_server_of_2026_07_28() {
    assert_a_2025_clients_subscription_hears_the_server(&ts_sdk_stdio_server(
        "ts",
        "rewrite_uris = false\n",
    ));
}

/// Each resource subscription to a server spoken to at 2026-07-28 holds a stream open to
/// it: one server's are bounded, and the subscription past the bound is refused, saying so.
#[test]
fn subscriptions_to_a_server_of_2026_07_28_are_bounded() {
    let upstream = ListeningServer::ts_sdk();
    let workspace = Workspace::new(&upstream.server_config("ts", "rewrite_uris = false\n"));
    let gateway = workspace.serve_http(&[]);
    let args = gateway.legacy_client_args();
    let mut script: Vec<Value> = (0..256)
        .map(|i| json!({"action": "subscribe", "uri": format!("test://template/{i}/data")}))
        .collect();
    script.push(
        json!({"action": "subscribe", "uri": "test://template/256/data",
                       "expect_error": true}),
    );
    // One unsubscribed makes room again.
    script.push(json!({"action": "unsubscribe", "uri": "test://template/0/data"}));
    script.push(json!({"action": "subscribe", "uri": "test://template/256/data"}));
    let run = python_client(&args, &Value::Array(script));
    assert_eq!(run["ok"], true, "{run:#}");
    let refused = run["results"][256]["error"].to_string();
    assert!(refused.contains("RESOURCE_LISTEN_LIMIT"), "{refused}");
    assert!(refused.contains("at most 256 resources"), "{refused}");
}

/// Asserts a client of 2026-07-28, through a gateway serving `config` (server `ts`), hears
/// on its `subscriptions/listen` stream of the updates to `uri` (the gateway's URI of
/// `test://watched-resource`) it asked for, while `unowned`, which no server owns, is left
/// out of the acknowledgement; and that once the stream closed, the server holds the
/// subscription no more (`touch_watched` says how many it told).
fn assert_a_2026_listen_hears_the_servers_resource(config: &str, uri: &str, unowned: &str) {
    let workspace = Workspace::new(config);
    let gateway = workspace.serve_http(&[]);
    let mut args = gateway.client_args("http", "/mcp");
    args.extend(["--mode".into(), "auto".into()]);
    let touch = json!({"action": "call_tool", "name": "mcp__ts__touch_watched"});
    let run = python_client(
        &args,
        &json!([
            {"action": "listen", "resource_subscriptions": [uri, unowned],
             "then": [touch], "timeout_ms": 10000},
            {"action": "wait_call", "name": "mcp__ts__touch_watched",
             "text": "touched: 0 told", "timeout_ms": 10000},
        ]),
    );
    assert_eq!(run["ok"], true, "{run:#}");
    assert_eq!(run["server"]["protocol_version"], "2026-07-28", "{run:#}");
    let listened = action_result(&run, 0);
    assert_eq!(
        listened["honored"]["resourceSubscriptions"],
        json!([uri]),
        "{run:#}"
    );
    assert_eq!(listened["updated"], json!([uri]), "{run:#}");
    assert_eq!(
        result_text(&listened["then"][0]["result"]),
        "touched: 1 told",
        "{run:#}"
    );
}

/// A client of 2026-07-28 listens to a resource of a server spoken to at 2026-07-28 (its
/// URI rewritten): the gateway's own listen of it brings the update.
#[test]
fn a_2026_listen_hears_a_resource_of_a_server_of_2026_07_28() {
    let upstream = ListeningServer::ts_sdk();
    assert_a_2026_listen_hears_the_servers_resource(
        &upstream.server_config("ts", ""),
        "mcp-gateway://ts/test%3A%2F%2Fwatched-resource",
        "test://watched-resource",
    );
}

/// A client of 2026-07-28 listens to a resource of a server spoken to at 2025-11-25: the
/// gateway subscribes to it with `resources/subscribe`, and unsubscribes once the stream
/// closed.
#[test]
fn a_2026_listen_hears_a_resource_of_a_server_of_2025_11_25() {
    let upstream = ListeningServer::ts_sdk();
    assert_a_2026_listen_hears_the_servers_resource(
        &upstream.server_config("ts", "protocol = \"2025-11-25\"\n"),
        "mcp-gateway://ts/test%3A%2F%2Fwatched-resource",
        "mcp-gateway://nobody/test%3A%2F%2Fwatched-resource",
    );
}

/// What a client sees when a tool of `server` (through a gateway serving `config`, spoken
/// to at 2026-07-28) asks the client's model, which answers after `model_ms`: the run of
/// calling `tool` with `after_ms`, waiting `wait_ms`, and then (`late_answers`) calling
/// `test_late_answers`, which lists the answers the server got to questions it no longer
/// waited for.
fn asking_run(
    config: &str,
    server: &str,
    tool: &str,
    [after_ms, model_ms, wait_ms]: [u64; 3],
    late_answers: bool,
) -> Value {
    let workspace = Workspace::new(config);
    let gateway = workspace.serve_http(&[]);
    let mut args = gateway.client_args("http", "/mcp");
    args.extend(["--sample".into(), "too late".into()]);
    args.extend(["--sample-delay-ms".into(), model_ms.to_string()]);
    let mut script = vec![
        json!({"action": "call_tool", "name": format!("mcp__{server}__{tool}"),
               "arguments": {"prompt": "What is MCP?", "after_ms": after_ms}}),
        json!({"action": "sleep", "ms": wait_ms}),
    ];
    if late_answers {
        script.push(
            json!({"action": "call_tool", "name": format!("mcp__{server}__test_late_answers")}),
        );
    }
    python_client(&args, &Value::Array(script))
}

/// Asserts that `run` (see [`asking_run`]) went as the tool decided (its text starts with
/// `answer`), its client was told each question it was asked is withdrawn (its sampling
/// request is cancelled), and no answer went back to the server for one.
fn assert_withdrawn_and_unanswered(run: &Value, answer: &str) {
    assert_eq!(run["ok"], true, "{run:#}");
    assert!(
        result_text(action_result(run, 0)).starts_with(answer),
        "{run:#}"
    );
    let samplings = run["samplings"].as_array().unwrap();
    assert!(
        samplings.iter().all(|asked| asked["cancelled"] == true),
        "{run:#}"
    );
    assert_eq!(result_text(action_result(run, 2)), "[]", "{run:#}");
}

/// Asserts that when a tool of `server` asks the client's model and then withdraws the
/// question, the client is told, the call ends as the tool decides, and no answer goes
/// back to the server for the withdrawn question.
fn assert_a_withdrawn_question_is_withdrawn_at_the_client(config: &str, server: &str) {
    // The client's model takes longer than the tool waits; the wait outlasts both.
    let timing = [300, 1000, 1500];
    let run = asking_run(config, server, "test_withdrawn_sampling", timing, true);
    assert_withdrawn_and_unanswered(&run, "withdrawn");
    assert_eq!(run["samplings"][0]["cancelled"], true, "{run:#}");
}

/// Over streamable HTTP, where the withdrawal comes on the call's stream.
#[test]
fn a_question_a_server_of_2026_07_28_withdraws_is_withdrawn_at_the_client() {
    let upstream = ListeningServer::ts_sdk();
    assert_a_withdrawn_question_is_withdrawn_at_the_client(&upstream.server_config("ts", ""), "ts");
}

/// The same over stdio, with tests/servers/ts_sdk.mjs, whose SDK withdraws a question
/// that timed out.
#[test]
fn a_question_a_ts_sdk_stdio_server_withdraws_is_withdrawn_at_the_client() {
    assert_a_withdrawn_question_is_withdrawn_at_the_client(&ts_sdk_stdio_server("ts", ""), "ts");
}

/// The same over stdio.
#[test]
fn a_question_a_stdio_server_of_2026_07_28_withdraws_is_withdrawn_at_the_client() {
    assert_a_withdrawn_question_is_withdrawn_at_the_client(&asks_by_request_config(), "asks");
}

/// A stdio server of 2026-07-28 whose tools ask by request (tests/servers/asks_by_request.py),
/// as the server `asks`.
fn asks_by_request_config() -> String {
    format!(
        "[servers.asks]\ncommand = {}\nargs = [{}]\n",
        toml_str(system_python().to_string_lossy()),
        toml_str(
            repo()
                .join("tests/servers/asks_by_request.py")
                .to_string_lossy()
        ),
    )
}

/// Asserts that when a tool of `server` asks the client's model and then returns without
/// waiting for the answer or withdrawing the question, the client is told the question is
/// withdrawn, and no answer goes back to the server.
fn assert_a_question_its_call_outlives_is_withdrawn_at_the_client(config: &str, server: &str) {
    let timing = [300, 1000, 1500];
    let run = asking_run(config, server, "test_abandoned_sampling", timing, true);
    assert_withdrawn_and_unanswered(&run, "abandoned");
    assert_eq!(run["samplings"][0]["cancelled"], true, "{run:#}");
}

/// Over streamable HTTP: the call's stream ends with its answer, the question still open.
#[test]
fn a_question_still_open_when_its_call_ends_is_withdrawn_at_the_client() {
    let upstream = ListeningServer::ts_sdk();
    assert_a_question_its_call_outlives_is_withdrawn_at_the_client(
        &upstream.server_config("ts", ""),
        "ts",
    );
}

/// Over stdio, where it is withdrawn once no call is in flight on the connection.
#[test]
fn a_question_still_open_when_a_stdio_call_ends_is_withdrawn_at_the_client() {
    assert_a_question_its_call_outlives_is_withdrawn_at_the_client(
        &asks_by_request_config(),
        "asks",
    );
}

/// Asserts that when the server `server` goes away while its tool asks the client's model,
/// the client is told the question is withdrawn, and its call fails.
fn assert_a_question_open_when_the_server_goes_is_withdrawn_at_the_client(
    config: &str,
    server: &str,
) {
    let timing = [300, 1000, 1500];
    let run = asking_run(config, server, "test_exit_while_asking", timing, false);
    let call = &run["results"][0];
    let failed = call["ok"] == false || call["result"]["isError"] == true;
    assert!(failed, "the call outlived its server: {run:#}");
    assert_eq!(run["samplings"][0]["cancelled"], true, "{run:#}");
}

/// Over streamable HTTP.
#[test]
fn a_question_open_when_its_server_goes_is_withdrawn_at_the_client() {
    let upstream = ListeningServer::ts_sdk();
    assert_a_question_open_when_the_server_goes_is_withdrawn_at_the_client(
        &upstream.server_config("ts", ""),
        "ts",
    );
}

/// Over stdio, where the connection closes with the child's output.
#[test]
fn a_question_open_when_its_stdio_server_exits_is_withdrawn_at_the_client() {
    assert_a_question_open_when_the_server_goes_is_withdrawn_at_the_client(
        &asks_by_request_config(),
        "asks",
    );
}

/// Asserts that when a tool of `server` asks the client's model and returns at once, its
/// answer right behind the question, nothing goes back to the server for the question
/// (neither an answer nor a refusal), and the client is told the question is withdrawn.
fn assert_a_question_its_call_ends_right_behind_gets_no_answer(config: &str, server: &str) {
    // The wait outlasts the time a request naming a call waits for that call to be
    // entered (two seconds), and the client's answer after it.
    let timing = [0, 300, 3000];
    let run = asking_run(config, server, "test_abandoned_sampling", timing, true);
    assert_withdrawn_and_unanswered(&run, "abandoned");
}

/// Over streamable HTTP, where the question is relayed from a task of its own, which may
/// run after the call's answer was read.
#[test]
fn a_question_its_call_ends_right_behind_gets_no_answer() {
    let upstream = ListeningServer::ts_sdk();
    assert_a_question_its_call_ends_right_behind_gets_no_answer(
        &upstream.server_config("ts", ""),
        "ts",
    );
}

/// Over stdio.
#[test]
fn a_question_a_stdio_call_ends_right_behind_gets_no_answer() {
    assert_a_question_its_call_ends_right_behind_gets_no_answer(&asks_by_request_config(), "asks");
}
