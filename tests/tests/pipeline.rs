//! Issue 4: every error code produced by a real call, the gate (deny, ask through
//! elicitation, the fallback), the timeout policy with the upstream's own record of the
//! cancellation, reminders, the result cap, profiles, metrics, the session log and retry.

use std::time::Duration;

use mcp_gateway_tests::*;
use serde_json::{Value, json};

fn call(name: &str, arguments: Value) -> Value {
    json!({"action": "call_tool", "name": name, "arguments": arguments})
}

fn slow_log(workspace: &Workspace) -> Vec<Value> {
    std::fs::read_to_string(workspace.slow_event_log())
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// kv, slow (with its event log and a 400 ms budget on `sleep`), dynamic, and rules.
fn workspace(extra: &str) -> Workspace {
    let mut config = String::new();
    config.push_str(&example_server("kv", "kv"));
    config.push_str(&example_server("dyn", "dynamic"));
    config.push_str(extra);
    let workspace = Workspace::new(&config);
    let slow = format!(
        "{}env = {{ SLOW_EVENT_LOG = {} }}\n{}[servers.slow.tools.sleep]\ntimeout_ms = 400\n",
        example_server("slow", "slow"),
        toml_str(workspace.slow_event_log().to_string_lossy()),
        event_log_grant(&workspace.slow_event_log()),
    );
    let text = std::fs::read_to_string(workspace.config()).unwrap();
    std::fs::write(workspace.config(), format!("{slow}{text}")).unwrap();
    workspace
}

const RULES: &str = r#"
[[policy]]
tool = "mcp__kv__delete"
decision = "deny"
reason = "no deleting in tests"

[[policy]]
tool = "mcp__kv__set"
decision = "ask"
reason = "writes need a person"
"#;

#[test]
fn every_error_code_from_a_real_call() {
    let workspace = workspace(RULES);
    let run = python_client(
        &python_stdio_args(&workspace, &[]),
        &json!([
            call("mcp__kv__get", json!({"key": 42})),
            call("mcp__kv__nope", json!({})),
            call("mcp__kv__delete", json!({"key": "k"})),
            call("mcp__slow__sleep", json!({"ms": 5000, "label": "timeout"})),
            call("mcp__dyn__reject", json!({})),
            call("mcp__dyn__bad_output", json!({})),
            {"action": "call_tool", "name": "mcp__slow__wait", "arguments": {"ms": 5000, "label": "abort"}, "cancel_after_ms": 300},
            {"action": "wait_file", "path": workspace.slow_event_log(),
             "line_with": [r#""event":"cancelled""#, r#""label":"abort""#]},
            call("mcp__slow__crash", json!({})),
        ]),
    );
    let codes: Vec<Option<&str>> = [0, 1, 2, 3, 4, 5, 8]
        .iter()
        .map(|&i| error_code(action_result(&run, i)))
        .collect();
    assert_eq!(
        codes,
        [
            Some("INVALID_ARGS"),
            Some("TOOL_NOT_FOUND"),
            Some("DENIED"),
            Some("TOOL_TIMEOUT"),
            Some("UPSTREAM_ERROR"),
            Some("OUTPUT_INVALID"),
            Some("UPSTREAM_UNAVAILABLE"),
        ],
        "{run:#}"
    );
    let invalid = result_text(action_result(&run, 0));
    assert!(
        invalid.contains("/key"),
        "INVALID_ARGS names the path: {invalid}"
    );
    assert!(result_text(action_result(&run, 2)).contains("no deleting in tests"));
    assert!(result_text(action_result(&run, 3)).contains("400ms"));
    // A client cancellation is answered by the SDK itself; the upstream saw it.
    assert_eq!(run["results"][6]["cancelled"], true, "{run:#}");
    let events = slow_log(&workspace);
    let cancelled: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "cancelled")
        .filter_map(|e| e["label"].as_str())
        .collect();
    assert!(
        cancelled.contains(&"timeout"),
        "the timeout cancelled the upstream request: {events:?}"
    );
    assert!(
        cancelled.contains(&"abort"),
        "the client's cancel reached the upstream: {events:?}"
    );
    let aborted: Vec<Value> = workspace
        .session_events()
        .into_iter()
        .filter(|e| e["type"] == "tool/result" && e["tool"] == "mcp__slow__wait")
        .collect();
    assert_eq!(aborted[0]["error"]["code"], "ABORTED", "{aborted:?}");
    let ended: Vec<&Value> = events.iter().filter(|e| e["event"] == "end").collect();
    assert!(
        ended.is_empty(),
        "no cancelled call ran to its end: {events:?}"
    );
}

#[test]
fn ask_accept_decline_and_fallback() {
    let workspace = workspace(RULES);
    let set = call("mcp__kv__set", json!({"key": "k", "value": "v"}));
    let mut args = python_stdio_args(&workspace, &[]);
    args.extend(["--elicit".into(), "accept".into()]);
    let run = python_client(
        &args,
        &json!([set, call("mcp__kv__get", json!({"key": "k"}))]),
    );
    assert_eq!(error_code(action_result(&run, 0)), None, "{run:#}");
    assert_eq!(action_result(&run, 1)["structuredContent"]["value"], "v");
    let question = run["elicitations"][0]["params"]["message"]
        .as_str()
        .unwrap();
    assert!(
        question.contains("mcp__kv__set") && question.contains("writes need a person"),
        "{question}"
    );

    let mut args = python_stdio_args(&workspace, &[]);
    args.extend(["--elicit".into(), "decline".into()]);
    let run = python_client(&args, &json!([set]));
    assert_eq!(
        error_code(action_result(&run, 0)),
        Some("DENIED"),
        "{run:#}"
    );
    assert_eq!(run["elicitations"].as_array().unwrap().len(), 1);

    let run = python_client(&python_stdio_args(&workspace, &[]), &json!([set]));
    let result = action_result(&run, 0);
    assert_eq!(error_code(result), Some("DENIED"), "{run:#}");
    assert!(result_text(result).contains("cannot be asked"), "{run:#}");
}

#[test]
fn cancelled_while_asking_is_aborted_before_dispatch() {
    let workspace = workspace(RULES);
    let mut args = python_stdio_args(&workspace, &[]);
    args.extend([
        "--elicit".into(),
        "accept".into(),
        "--elicit-delay-ms".into(),
        "1500".into(),
    ]);
    let run = python_client(
        &args,
        &json!([
            {"action": "call_tool", "name": "mcp__kv__set", "arguments": {"key": "a", "value": "b"}, "cancel_after_ms": 300},
            {"action": "wait_elicitations"},
            call("mcp__kv__get", json!({"key": "a"})),
        ]),
    );
    assert_eq!(run["results"][0]["cancelled"], true, "{run:#}");
    assert_eq!(
        action_result(&run, 2)["structuredContent"]["value"],
        Value::Null,
        "the cancelled write never reached kv: {run:#}"
    );
    let results: Vec<Value> = workspace
        .session_events()
        .into_iter()
        .filter(|e| e["type"] == "tool/result" && e["tool"] == "mcp__kv__set")
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(
        results[0]["error"]["code"], "ABORTED_BEFORE_DISPATCH",
        "{results:?}"
    );
}

#[test]
fn reminders_at_three_five_and_eight_with_the_preview_cut() {
    let workspace = workspace("[reminder]\narguments_preview_chars = 20\n");
    let long = "x".repeat(100);
    let script: Vec<Value> = (0..8)
        .map(|_| call("mcp__kv__get", json!({"key": long})))
        .collect();
    let run = python_client(&python_stdio_args(&workspace, &[]), &Value::Array(script));
    for i in 0..8 {
        let result = action_result(&run, i);
        let reminders: Vec<&Value> = result["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| {
                c["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("Reminder:"))
            })
            .collect();
        let count = i + 1;
        if [3, 5, 8].contains(&count) {
            assert_eq!(reminders.len(), 1, "call {count}: {result:#}");
            let text = reminders[0]["text"].as_str().unwrap();
            assert_eq!(
                result["_meta"]["mcp-gateway/contexts"][0]["source"]["plugin"],
                "repeat-tool-reminder"
            );
            assert!(
                result["structuredContent"].is_object(),
                "the tool's own output stays"
            );
            if count == 3 {
                assert!(
                    !text.contains("xxxx"),
                    "the first reminder is short: {text}"
                );
            } else {
                assert!(text.contains(&format!("{count} consecutive")), "{text}");
                assert!(text.contains("more chars]"), "arguments are cut: {text}");
                assert!(!text.contains(&"x".repeat(30)), "cut to 20 chars: {text}");
            }
        } else {
            assert!(reminders.is_empty(), "call {count}: {result:#}");
        }
    }
}

#[test]
fn results_over_the_cap_are_cut_with_a_marker() {
    let workspace = workspace("[gateway]\nmax_result_bytes = 64\n");
    let run = python_client(
        &python_stdio_args(&workspace, &[]),
        &json!([call("mcp__dyn__hello", json!({"name": "y".repeat(200)}))]),
    );
    let text = result_text(action_result(&run, 0));
    assert!(text.contains("result cut to 64 of"), "{text}");
}

#[test]
fn profiles_over_http_paths_hide_tools_at_list_and_call_time() {
    let workspace = workspace("[profiles.reader]\nallow = [\"mcp__kv__get\", \"mcp__kv__list\"]\n");
    let gateway = workspace.serve_http(&[]);
    let args = gateway.client_args("http", "/mcp/reader");
    let run = python_client(
        &args,
        &json!([
            {"action": "list_tools"},
            call("mcp__kv__set", json!({"key": "k", "value": "v"})),
            call("mcp__kv__list", json!({})),
        ]),
    );
    let names = tool_names(action_result(&run, 0));
    assert_eq!(names, ["mcp__kv__get", "mcp__kv__list"], "{run:#}");
    assert_eq!(error_code(action_result(&run, 1)), Some("TOOL_NOT_FOUND"));
    assert_eq!(error_code(action_result(&run, 2)), None);

    let (_, _, metrics) = http_get(gateway.address, "/metrics");
    assert!(
        metrics.contains(
            "mcp_gateway_tool_errors_total{tool=\"mcp__kv__set\",code=\"TOOL_NOT_FOUND\"} 1"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("mcp_gateway_tool_calls_total{tool=\"mcp__kv__list\"} 1"),
        "{metrics}"
    );
}

#[test]
fn schemas_are_compiled_once_per_tool_not_per_call_or_session() {
    let workspace = workspace("");
    let gateway = workspace.serve_http(&[]);
    let args = gateway.client_args("http", "/mcp");
    let compilations = || metric(&gateway, "mcp_gateway_schema_compilations_total");
    let get = || call("mcp__kv__get", json!({"key": "k"}));
    python_client(&args, &json!([get()]));
    let after_first = compilations();
    assert!(
        after_first >= 1,
        "the first call validated without a schema"
    );
    python_client(&args, &json!([get(), get(), get(), get(), get()]));
    assert_eq!(
        compilations(),
        after_first,
        "later calls compiled schemas again"
    );
}

#[test]
fn the_session_log_records_every_call_and_result() {
    let workspace = workspace(RULES);
    python_client(
        &python_stdio_args(&workspace, &[]),
        &json!([
            call("mcp__kv__list", json!({"prefix": ""})),
            call("mcp__kv__delete", json!({"key": "k"})),
        ]),
    );
    let events = workspace.session_events();
    let summary: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["type"].as_str().unwrap().starts_with("tool/"))
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_owned(),
                e["tool"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("tool/call".into(), "mcp__kv__list".into()),
            ("tool/result".into(), "mcp__kv__list".into()),
            ("tool/call".into(), "mcp__kv__delete".into()),
            ("tool/result".into(), "mcp__kv__delete".into()),
        ],
        "{events:#?}"
    );
    assert!(events.iter().all(|e| e["ts"].is_string()));
    assert_eq!(events[1]["isError"], false);
    assert_eq!(events[3]["error"]["code"], "DENIED");
    assert_eq!(events[0]["arguments"]["prefix"], "");
}

#[test]
fn a_read_only_call_is_retried_after_its_upstream_restarts() {
    // After a crash the kv wrapper waits for the test to release it, so the call below
    // certainly lands while kv is down; the test releases it once the call is being
    // retried. Eight attempts with doubling backoff from 200 ms give kv 25 s to come back.
    let marker = tempfile::tempdir().unwrap();
    let script = format!(
        "if [ -f started ]; then while [ ! -f release ]; do sleep 0.05; done; fi; touch started; exec {}",
        bin("kv").display()
    );
    let workspace = Workspace::new(&format!(
        "[servers.kv]\ncommand = \"sh\"\nargs = [\"-c\", {}]\ncwd = {}\nsandbox = {{ write = [{}] }}\n\
         [retry]\nmax_attempts = 8\nbackoff_ms = 200\n",
        toml_str(script),
        toml_str(marker.path().to_string_lossy()),
        toml_str(marker.path().to_string_lossy()),
    ));
    let gateway = workspace.serve_http(&[]);
    let kv_pid = health(&gateway)["upstreams"]["kv"]["pid"].as_i64().unwrap() as i32;
    // SAFETY: kv is the gateway's child; killing it is the point of the test.
    unsafe { libc::kill(kv_pid, libc::SIGKILL) };
    assert!(
        eventually(
            Duration::from_secs(30),
            || health(&gateway)["upstreams"]["kv"]["state"] == "restarting"
        ),
        "{}",
        gateway.log_text()
    );
    let args = gateway.client_args("http", "/mcp");
    let client = std::thread::spawn(move || {
        python_client(&args, &json!([call("mcp__kv__get", json!({"key": "k"}))]))
    });
    let retrying = eventually(Duration::from_secs(60), || {
        gateway
            .log_text()
            .contains("retrying after UPSTREAM_UNAVAILABLE")
    });
    std::fs::write(marker.path().join("release"), "").unwrap();
    let run = client.join().unwrap();
    assert!(retrying, "the call was not retried: {}", gateway.log_text());
    let result = action_result(&run, 0);
    assert_eq!(
        error_code(result),
        None,
        "retried until kv was back: {run:#}\n{}",
        gateway.log_text()
    );
}
