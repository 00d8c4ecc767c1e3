//! Issue 19: what a newcomer meets at start-up. The gateway serves at once and upstreams
//! join as they come up, so one that hangs at `initialize` never delays the others (over
//! HTTP and over stdio); one-shot commands say which servers did not start; and a reload
//! that changes only a tool's `concurrency_safe` override takes effect.
//!
//! A call that arrives before the upstreams have joined (right after `initialize`, no
//! `--wait-for-upstreams`) waits for their first start-up attempt instead of failing
//! against a half-built catalog: `run_code` (modes `code` and `both`), `search_tools` and a
//! direct call all see the late server's tools, and a tool of a server that failed or is
//! still starting fails with UPSTREAM_UNAVAILABLE naming the server and its state.
//!
//! A server that cannot start is retried for as long as the gateway runs; its failure is
//! logged once, not at every retry, while `/healthz` counts the retries and keeps the
//! latest error.
//!
//! The hung upstream is `tests/servers/misbehave.py mute-on-init`: it never answers
//! `initialize`, so its first connection attempt lasts the whole 60 s start timeout, after
//! which the gateway kills it and starts it again. The good tool must be listed and
//! callable while that first attempt still hangs: the hung upstream was not started again
//! (and `/healthz` still says `starting`), and [`WELL_BEFORE_THE_TIMEOUT`] passed at most,
//! a bound generous enough for a loaded machine that only a gateway waiting for the hung
//! upstream can miss.

use std::time::{Duration, Instant};

use mcp_gateway_tests::*;
use serde_json::{Value, json};

/// Less than the 60 s an upstream may take to answer `initialize`, and far more than a
/// gateway that does not wait for it needs, Python client start included, on a loaded
/// machine.
const WELL_BEFORE_THE_TIMEOUT: Duration = Duration::from_secs(40);

fn call(name: &str, arguments: Value) -> Value {
    json!({"action": "call_tool", "name": name, "arguments": arguments})
}

/// `kv` beside `hung`, an upstream that never answers `initialize`.
fn kv_beside_a_hung_upstream() -> Workspace {
    with_a_hung_upstream(Workspace::new(""), &example_server("kv", "kv"))
}

/// `workspace` with the servers of `servers` and `hung`, an upstream that never answers
/// `initialize`, added to its configuration.
fn with_a_hung_upstream(workspace: Workspace, servers: &str) -> Workspace {
    let config = format!(
        "{servers}{}{}",
        misbehaving_server(
            "hung",
            "mute-on-init",
            &workspace.path("hung-events.jsonl"),
            &[]
        ),
        std::fs::read_to_string(workspace.config()).unwrap(),
    );
    std::fs::write(workspace.config(), config).unwrap();
    workspace
}

/// Waits for `mcp__kv__get` to be listed, then stores and reads a key through it.
fn list_and_use_kv() -> Value {
    json!([
        {"action": "wait_tool", "name": "mcp__kv__get", "timeout_ms": WELL_BEFORE_THE_TIMEOUT.as_millis() as u64},
        call("mcp__kv__set", json!({"key": "k", "value": "v"})),
        call("mcp__kv__get", json!({"key": "k"})),
    ])
}

/// How many times the hung upstream was started (misbehave.py logs each start).
fn hung_starts(workspace: &Workspace) -> usize {
    std::fs::read_to_string(workspace.path("hung-events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains(r#""event": "start""#))
        .count()
}

fn assert_kv_served(workspace: &Workspace, run: &Value, started: Instant) {
    assert!(
        hung_starts(workspace) <= 1,
        "kv was served during the hung upstream's first attempt, before any restart"
    );
    let listed = tool_names(action_result(run, 0));
    assert!(
        listed.iter().all(|name| !name.starts_with("mcp__hung__")),
        "{run:#}"
    );
    assert_eq!(error_code(action_result(run, 1)), None, "{run:#}");
    assert_eq!(
        action_result(run, 2)["structuredContent"]["value"],
        "v",
        "{run:#}"
    );
    assert!(
        started.elapsed() < WELL_BEFORE_THE_TIMEOUT,
        "kv was served only after {:?}",
        started.elapsed()
    );
}

#[test]
fn a_hung_upstream_does_not_delay_the_others_over_http() {
    let workspace = kv_beside_a_hung_upstream();
    let started = Instant::now();
    let gateway = workspace.serve_http_at_once(&[]);
    let run = python_client(&gateway.client_args("http", "/mcp"), &list_and_use_kv());
    assert_kv_served(&workspace, &run, started);
    // /healthz shows the late upstream still starting while the others serve, and the
    // log's one line per upstream says only kv is ready.
    let health = health(&gateway);
    assert_eq!(health["upstreams"]["kv"]["state"], "ready", "{health:#}");
    assert_eq!(
        health["upstreams"]["hung"]["state"], "starting",
        "{health:#}"
    );
    let log = gateway.log_text();
    let ready_line = |server: &str| {
        log.lines().any(|line| {
            line.contains("upstream ready") && line.contains(&format!("server={server}"))
        })
    };
    assert!(ready_line("kv"), "{log}");
    assert!(!ready_line("hung"), "{log}");
}

#[test]
fn a_hung_upstream_does_not_delay_the_others_over_stdio() {
    let workspace = kv_beside_a_hung_upstream();
    let started = Instant::now();
    let run = python_client(&stdio_at_once(&workspace), &list_and_use_kv());
    assert_kv_served(&workspace, &run, started);
}

#[test]
fn tools_names_the_servers_that_did_not_start_and_fails() {
    let workspace = Workspace::new(&format!(
        "{}[servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n",
        example_server("kv", "kv")
    ));
    let output = workspace.cli(&["tools"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("mcp__kv__get"),
        "the others are listed: {stdout}"
    );
    let complaint = stderr
        .lines()
        .find(|line| line.starts_with("error:"))
        .unwrap_or_else(|| panic!("no error line: {stderr}"));
    assert!(complaint.contains("broken"), "{complaint}");
    assert!(complaint.contains("/nonexistent/mcp-server"), "{complaint}");
    assert!(!complaint.contains("kv"), "{complaint}");
}

/// When the call labelled `label` started and ended on the `slow` server, in ms.
fn span(events_file: &std::path::Path, label: &str) -> (i64, i64) {
    let events: Vec<Value> = std::fs::read_to_string(events_file)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let at = |event: &str| {
        events
            .iter()
            .find(|e| e["event"] == event && e["label"] == label)
            .unwrap_or_else(|| panic!("no {event} for {label}: {events:?}"))["at_ms"]
            .as_i64()
            .unwrap()
    };
    (at("start"), at("end"))
}

#[test]
fn a_reload_that_changes_only_concurrency_safe_takes_effect() {
    let workspace = Workspace::new("");
    let events = workspace.slow_event_log();
    let config = |safe: bool| {
        format!(
            "[gateway]\nmode = \"both\"\n{}env = {{ SLOW_EVENT_LOG = {} }}\n{}\
             [servers.slow.tools.sleep]\nconcurrency_safe = {safe}\n[log]\nsessions_dir = false\n",
            example_server("slow", "slow"),
            toml_str(events.to_string_lossy()),
            event_log_grant(&events),
        )
    };
    std::fs::write(workspace.config(), config(true)).unwrap();
    let mut gateway = workspace.serve_http(&[]);
    let two_sleeps = |prefix: &str| {
        let program = format!(
            "await Promise.all([1, 2].map((i) => tools.slow.sleep({{ ms: 400, label: \"{prefix}\" + i }})));\nreturn \"done\";"
        );
        let run = python_client(
            &gateway.client_args("http", "/mcp"),
            &json!([call("run_code", json!({"code": program}))]),
        );
        assert_eq!(
            action_result(&run, 0)["structuredContent"]["result"],
            "done",
            "{run:#}"
        );
        let (first, second) = (
            span(&events, &format!("{prefix}1")),
            span(&events, &format!("{prefix}2")),
        );
        // Whether the two calls ran at the same time.
        first.0 < second.1 && second.0 < first.1
    };
    assert!(
        two_sleeps("safe"),
        "overridden as concurrency safe: overlap"
    );

    std::fs::write(workspace.config(), config(false)).unwrap();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(gateway.pid(), libc::SIGHUP) };
    assert!(
        eventually(Duration::from_secs(30), || gateway
            .log_text()
            .contains("configuration reloaded")
            && health(&gateway)["upstreams"]["slow"]["state"] == "ready"),
        "{}",
        gateway.log_text()
    );
    assert!(
        !two_sleeps("exclusive"),
        "no longer concurrency safe: one at a time"
    );
    assert!(
        gateway
            .signal_and_wait(libc::SIGTERM, Duration::from_secs(20))
            .is_some()
    );
}

/// How long the late `kv` takes to start: far longer than a client needs to start the
/// gateway over stdio and send its first call, so that call arrives before `kv` is up.
const KV_START_DELAY_S: u32 = 3;

/// `kv` started after a delay, beside a server that cannot start, with `gateway` as the
/// `[gateway]` section's settings.
fn late_kv_beside_a_broken_server(gateway: &str) -> Workspace {
    Workspace::new(&format!(
        "[gateway]\n{gateway}\n\
         [servers.kv]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n\
         [servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n",
        toml_str(format!(
            "sleep {KV_START_DELAY_S} && exec {}",
            bin("kv").to_string_lossy()
        )),
    ))
}

/// client.py arguments that start the gateway over stdio as a user would: serving at
/// once, upstreams joining as they come up.
fn stdio_at_once(workspace: &Workspace) -> Vec<String> {
    vec![
        "--transport".into(),
        "stdio".into(),
        "--command".into(),
        gateway_bin().to_string_lossy().into_owned(),
        "--args".into(),
        json!(["serve", "--stdio", "--config", workspace.config()]).to_string(),
        "--inherit-env".into(),
    ]
}

#[test]
fn run_code_right_after_initialize_sees_the_servers_that_start_late() {
    let program = r#"
        await tools.kv.set({ key: "a", value: "1" });
        let broken = null;
        try { await tools.broken.anything({}); } catch (e) { broken = { name: e.name, code: e.code, message: e.message }; }
        return { value: (await tools.kv.get({ key: "a" })).value, broken };
    "#;
    for mode in ["code", "both"] {
        let workspace = late_kv_beside_a_broken_server(&format!("mode = \"{mode}\""));
        let run = python_client(
            &stdio_at_once(&workspace),
            &json!([call("run_code", json!({"code": program}))]),
        );
        let result = &action_result(&run, 0)["structuredContent"]["result"];
        assert_eq!(result["value"], "1", "mode {mode}: {run:#}");
        let broken = &result["broken"];
        assert_eq!(broken["name"], "ToolCallError", "mode {mode}: {run:#}");
        assert_eq!(
            broken["code"], "UPSTREAM_UNAVAILABLE",
            "mode {mode}: {run:#}"
        );
        let message = broken["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("`broken`") && message.contains("failed"),
            "mode {mode}: the error names the server and its state: {message}"
        );
    }
}

#[test]
fn search_tools_right_after_initialize_finds_the_tools_of_a_server_that_starts_late() {
    let workspace = late_kv_beside_a_broken_server("catalog = \"search\"");
    let run = python_client(
        &stdio_at_once(&workspace),
        &json!([call(
            "search_tools",
            json!({"query": "store a value under a key"})
        )]),
    );
    let found = action_result(&run, 0)["structuredContent"].to_string();
    assert!(found.contains("mcp__kv__set"), "{run:#}");
}

#[test]
fn a_direct_call_right_after_initialize_waits_for_its_server() {
    let workspace = late_kv_beside_a_broken_server("");
    let hung = misbehaving_server(
        "hung",
        "mute-on-init",
        &workspace.path("hung-events.jsonl"),
        &[],
    );
    let config = std::fs::read_to_string(workspace.config()).unwrap();
    std::fs::write(
        workspace.config(),
        format!("{hung}timeout_ms = 1000\n{config}"),
    )
    .unwrap();
    let run = python_client(
        &stdio_at_once(&workspace),
        &json!([
            call("mcp__kv__set", json!({"key": "a", "value": "1"})),
            call("mcp__hung__anything", json!({})),
        ]),
    );
    let set = action_result(&run, 0);
    assert_eq!(error_code(set), None, "{run:#}");
    assert_eq!(set["structuredContent"]["value"], "1", "{run:#}");
    // A server still in its first attempt after the tool's timeout: named, with its state.
    let hung = action_result(&run, 1);
    assert_eq!(error_code(hung), Some("UPSTREAM_UNAVAILABLE"), "{run:#}");
    let text = result_text(hung);
    assert!(
        text.contains("`hung`") && text.contains("starting"),
        "{text}"
    );
}

/// A client that lists tools once, right after `initialize` (the official Python SDK does,
/// and so does any client that ignores `list_changed`), sees the tools of the upstreams
/// that come up within `[gateway] first_list_wait_ms`, and is not held by one that hangs.
#[test]
fn the_first_list_over_stdio_waits_for_upstreams_still_starting_but_not_for_a_hung_one() {
    // Room for a loaded machine: `kv` is up about KV_START_DELAY_S after the gateway.
    let workspace = with_a_hung_upstream(
        late_kv_beside_a_broken_server("first_list_wait_ms = 10000"),
        &example_server("slow", "slow"),
    );
    let started = Instant::now();
    let run = python_client(
        &stdio_at_once(&workspace),
        &json!([{"action": "list_tools"}]),
    );
    let listed = tool_names(action_result(&run, 0));
    for expected in ["mcp__kv__get", "mcp__slow__sleep"] {
        assert!(
            listed.iter().any(|name| name == expected),
            "the first list lacks {expected}: {run:#}"
        );
    }
    assert!(
        listed.iter().all(|name| !name.starts_with("mcp__hung__")),
        "{run:#}"
    );
    assert!(
        started.elapsed() < WELL_BEFORE_THE_TIMEOUT,
        "the first list waited for the hung upstream: {:?}",
        started.elapsed()
    );
}

/// A client asks only for what `initialize` announced (prompts, resources, completions),
/// and cannot be told later of a capability it missed: a client that initializes while
/// the only server with prompts is still starting is told of prompts all the same, and its
/// first list of them waits for that server as a first list of tools does.
#[test]
fn initialize_over_stdio_announces_what_upstreams_still_starting_offer() {
    let everything = npm_bin("mcp-server-everything");
    let workspace = Workspace::new(&format!(
        "[gateway]\nfirst_list_wait_ms = 10000\n\
         [servers.everything]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n\
         [servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n",
        toml_str(format!(
            "sleep {KV_START_DELAY_S} && exec {}",
            everything.to_string_lossy()
        )),
    ));
    let run = python_client(
        &stdio_at_once(&workspace),
        &json!([{"action": "list_prompts"}]),
    );
    let announced = &run["server"]["capabilities"];
    for capability in ["prompts", "resources", "completions"] {
        assert!(
            announced.get(capability).is_some(),
            "initialize did not announce {capability}: {announced:#}"
        );
    }
    let prompts = action_result(&run, 0)["prompts"].as_array().unwrap();
    assert!(
        prompts.iter().any(|prompt| prompt["name"]
            .as_str()
            .unwrap()
            .starts_with("mcp__everything__")),
        "{run:#}"
    );
}

#[test]
fn a_server_that_cannot_start_is_logged_once_not_at_every_retry() {
    // Nothing listens there: every attempt is refused at once, and retried after 250 ms,
    // 500 ms, 1 s...
    let nobody = free_address();
    let workspace = Workspace::new(&format!(
        "{}[servers.gone]\nurl = \"http://{nobody}/mcp\"\n",
        example_server("kv", "kv")
    ));
    let gateway = workspace.serve_http(&[]);
    let gone = || health(&gateway)["upstreams"]["gone"].clone();
    assert!(
        eventually(Duration::from_secs(30), || gone()["restarts"]
            .as_u64()
            .is_some_and(|restarts| restarts >= 4)),
        "retried: {}",
        gone()
    );
    assert_eq!(gone()["state"], "failed", "{}", gone());
    assert!(
        gone()["last_error"]
            .as_str()
            .is_some_and(|error| error.contains("Connection refused")),
        "the latest error says why: {}",
        gone()
    );
    let log = gateway.log_text();
    let failures: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("upstream failed to start") && line.contains("gone"))
        .collect();
    // Five attempts so far. Under `protocol = "auto"` a failed opening alternates between
    // two ways (with and without `server/discover`), but a server that cannot be reached
    // has not refused either: one failure, said once.
    assert_eq!(failures.len(), 1, "logged once, not at every retry:\n{log}");
    assert!(
        failures[0].contains(&format!("cannot reach http://{nobody}/mcp: "))
            && failures[0].contains("Connection refused"),
        "the line names where and why: {}",
        failures[0]
    );
}
