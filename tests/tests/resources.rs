//! Issue 9: prompts, resources, templates, subscriptions and completions re-exported
//! like tools, with npm server-everything and server-memory (and server-filesystem, which
//! has no prompts) federated, driven by the official Python SDK client; and a session that
//! ends without unsubscribing leaves no subscription upstream (`tests/servers/verbatim.py`
//! writes down each subscribe and unsubscribe it gets); and a subscription outlives its
//! server's restart (tests/servers/ts_sdk.mjs over stdio and streamable HTTP, spoken to
//! in a session or at 2026-07-28).

use mcp_gateway_tests::streamable::{open_session, post};
use mcp_gateway_tests::*;
use serde_json::{Value, json};

fn workspace(extra: &str) -> Workspace {
    let root = std::env::temp_dir();
    Workspace::new(&format!(
        "{}{}{}{extra}",
        npm_server("everything", "mcp-server-everything", &["stdio"]),
        npm_server("memory", "mcp-server-memory", &[]),
        npm_server("fs", "mcp-server-filesystem", &[&root.to_string_lossy()]),
    ))
}

fn names<'a>(result: &'a Value, list: &str, key: &str) -> Vec<&'a str> {
    result[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {result:#}"))
        .iter()
        .map(|item| item[key].as_str().unwrap())
        .collect()
}

#[test]
fn prompts_resources_and_completions_through_the_gateway() {
    let workspace = workspace("");
    let run = python_client(
        &python_stdio_args(&workspace, &[]),
        &json!([
            {"action": "list_prompts"},
            {"action": "list_resources"},
            {"action": "list_resource_templates"},
        ]),
    );
    let prompts = names(action_result(&run, 0), "prompts", "name");
    assert!(
        prompts.iter().all(|p| p.starts_with("mcp__everything__")),
        "{prompts:?}"
    );
    assert!(prompts.len() >= 3, "{prompts:?}");
    let resources = names(action_result(&run, 1), "resources", "uri");
    assert!(!resources.is_empty());
    assert!(
        resources.iter().all(|u| u.starts_with("mcp-gateway://")),
        "{resources:?}"
    );
    assert!(
        resources
            .iter()
            .any(|u| u.starts_with("mcp-gateway://everything/")),
        "{resources:?}"
    );
    let templates = names(action_result(&run, 2), "resourceTemplates", "uriTemplate");
    assert!(
        templates.iter().any(|t| t.contains('{')),
        "variables intact: {templates:?}"
    );

    let simple = prompts
        .iter()
        .find(|p| p.contains("simple"))
        .unwrap_or(&prompts[0])
        .to_string();
    let first_uri = resources
        .iter()
        .find(|u| u.starts_with("mcp-gateway://everything/"))
        .unwrap()
        .to_string();
    let args_prompt = prompts
        .iter()
        .find(|p| p.contains("args") || p.contains("argument"))
        .map(|p| p.to_string());
    let mut script = vec![
        json!({"action": "get_prompt", "name": simple}),
        json!({"action": "read_resource", "uri": first_uri}),
        json!({"action": "call_tool", "name": "mcp__everything__get-resource-links", "arguments": {"count": 2}}),
    ];
    if let Some(prompt) = &args_prompt {
        script.push(json!({"action": "complete", "ref": {"type": "ref/prompt", "name": prompt}, "argument": {"name": "city", "value": "B"}}));
    }
    let run = python_client(&python_stdio_args(&workspace, &[]), &Value::Array(script));
    assert!(
        action_result(&run, 0)["messages"]
            .as_array()
            .is_some_and(|m| !m.is_empty()),
        "{run:#}"
    );
    let contents = &action_result(&run, 1)["contents"][0];
    assert_eq!(contents["uri"], first_uri, "{run:#}");
    let links: Vec<String> = action_result(&run, 2)["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["type"] == "resource_link")
        .map(|c| c["uri"].as_str().unwrap().to_owned())
        .collect();
    assert!(!links.is_empty(), "{run:#}");
    assert!(
        links
            .iter()
            .all(|l| l.starts_with("mcp-gateway://everything/")),
        "{links:?}"
    );
    let run2 = python_client(
        &python_stdio_args(&workspace, &[]),
        &json!([{"action": "read_resource", "uri": links[0]}]),
    );
    assert!(
        action_result(&run2, 0)["contents"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "a tool's resource link is readable: {run2:#}"
    );
    if args_prompt.is_some() {
        assert!(
            action_result(&run, 3)["completion"]["values"].is_array(),
            "{run:#}"
        );
    }
}

#[test]
fn a_subscription_receives_updates() {
    let workspace = workspace("");
    let run = python_client(
        &python_stdio_args(&workspace, &[]),
        &json!([{"action": "list_resources"}]),
    );
    let uri = names(action_result(&run, 0), "resources", "uri")
        .into_iter()
        .find(|u| u.starts_with("mcp-gateway://everything/"))
        .unwrap()
        .to_owned();
    let run = python_client(
        &python_stdio_args(&workspace, &[]),
        &json!([
            {"action": "call_tool", "name": "mcp__everything__toggle-subscriber-updates", "arguments": {}},
            {"action": "subscribe", "uri": uri},
            {"action": "wait_notification", "method": "notifications/resources/updated", "timeout_ms": 15000},
        ]),
    );
    let updated = notifications_of(&run, "notifications/resources/updated");
    assert!(!updated.is_empty(), "{run:#}");
    assert_eq!(
        updated[0]["params"]["uri"], uri,
        "the update names the gateway URI"
    );
}

#[test]
fn a_profile_hides_a_servers_prompts_and_resources() {
    let workspace = workspace("[profiles.no-everything]\ndeny = [\"mcp__everything__*\"]\n");
    let run = python_client(
        &python_stdio_args(&workspace, &["--profile", "no-everything"]),
        &json!([
            {"action": "list_prompts"},
            {"action": "list_resources"},
            {"action": "read_resource", "uri": "mcp-gateway://everything/demo%3A%2F%2Fresource%2Fstatic%2Fdocument%2Farchitecture.md", "expect_error": true},
            {"action": "list_tools"},
        ]),
    );
    assert!(
        names(action_result(&run, 0), "prompts", "name").is_empty(),
        "{run:#}"
    );
    let resources = names(action_result(&run, 1), "resources", "uri");
    assert!(
        !resources
            .iter()
            .any(|u| u.starts_with("mcp-gateway://everything/")),
        "{run:#}"
    );
    assert!(
        resources
            .iter()
            .any(|u| u.starts_with("mcp-gateway://memory/")),
        "{run:#}"
    );
    assert_eq!(
        run["results"][2]["ok"], true,
        "reading a hidden resource fails: {run:#}"
    );
    let tools = names(action_result(&run, 3), "tools", "name");
    assert!(
        tools.iter().any(|t| t.starts_with("mcp__memory__")),
        "{tools:?}"
    );
    assert!(
        !tools.iter().any(|t| t.starts_with("mcp__everything__")),
        "{tools:?}"
    );
}

#[test]
fn a_session_that_ends_without_unsubscribing_leaves_no_subscription_upstream() {
    let folder = tempfile::tempdir().unwrap();
    let log = folder.path().join("heard");
    let config = format!(
        "[servers.verbatim]\ncommand = {}\nargs = [{}]\nrewrite_uris = false\n\
         env = {{ VERBATIM_LOG = {} }}\nsandbox = {{ write = [{}] }}\n",
        toml_str(system_python().to_string_lossy()),
        toml_str(repo().join("tests/servers/verbatim.py").to_string_lossy()),
        toml_str(log.to_string_lossy()),
        toml_str(folder.path().to_string_lossy()),
    );
    let workspace = Workspace::new(&config);
    let gateway = workspace.serve_http(&[]);
    let uri = "file:///verbatim/readme.md";
    let subscribe = |session: &str| {
        let request = json!({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe",
                             "params": {"uri": uri}});
        post(gateway.address, Some(session), None, &request.to_string())
    };
    let upstream_heard = || std::fs::read_to_string(&log).unwrap_or_default();
    let first = open_session(gateway.address, None);
    let subscribed = eventually(PATIENCE, || {
        subscribe(&first);
        upstream_heard().contains("resources/subscribe")
    });
    assert!(subscribed, "the subscription never reached the server");
    let second = open_session(gateway.address, None);
    subscribe(&second);

    let end = |session: &str| {
        let headers = [("Mcp-Session-Id", session)];
        let (status, _, body) = http_request(gateway.address, "DELETE", "/mcp", &headers, b"");
        assert!(status < 300, "{status} {body}");
    };
    end(&first);
    // The second session still holds the subscription: the server keeps it.
    end(&second);
    let unsubscribed = eventually(PATIENCE, || {
        upstream_heard().contains(&format!("resources/unsubscribe {uri}"))
    });
    assert!(unsubscribed, "the server heard: {}", upstream_heard());
    let heard = upstream_heard();
    assert_eq!(
        heard.matches("resources/unsubscribe").count(),
        1,
        "one unsubscribe, once no session held it: {heard}"
    );
}

/// The client.py script of the restart tests: subscribe to the watched resource of
/// tests/servers/ts_sdk.mjs (as `ts`) and hear of its update; have the server exit (the
/// call fails with it); then `back` (a step that waits until it is started again, where
/// the gateway does not start it itself), and once it answers, hear of an update again.
fn restart_script(back: Option<Value>) -> Value {
    let mut script = vec![
        json!({"action": "subscribe", "uri": "test://watched-resource"}),
        touch_watched(),
        updated_times(1),
        json!({"action": "parallel", "tolerate_failures": true, "actions": [
            {"action": "call_tool", "name": "mcp__ts__test_exit_while_asking",
             "arguments": {"prompt": "bye", "after_ms": 0}},
        ]}),
    ];
    script.extend(back);
    script.extend([
        json!({"action": "wait_call", "name": "mcp__ts__touch_watched", "text": "touched",
               "timeout_ms": 30000}),
        json!({"action": "sleep", "ms": 1000}),
        touch_watched(),
        updated_times(2),
    ]);
    Value::Array(script)
}

/// The client.py step that has tests/servers/ts_sdk.mjs (as `ts`) update its watched
/// resource.
fn touch_watched() -> Value {
    json!({"action": "call_tool", "name": "mcp__ts__touch_watched"})
}

/// The client.py step that waits until `count` resource updates have come in all.
fn updated_times(count: u64) -> Value {
    json!({"action": "wait_notification", "method": "notifications/resources/updated",
           "count": count, "timeout_ms": 10000})
}

/// Asserts that a client of 2025-11-25, subscribed through a gateway serving
/// tests/servers/ts_sdk.mjs over stdio as `ts` (with `extra` lines, which choose the
/// revision the gateway speaks to it), still hears of the resource's updates once the
/// server has exited and the gateway has started it again: the client never saw it go,
/// and holds its subscription.
fn assert_a_subscription_outlives_its_servers_restart(extra: &str) {
    let workspace = Workspace::new(&ts_sdk_stdio_server(
        "ts",
        &format!("rewrite_uris = false\n{extra}"),
    ));
    let gateway = workspace.serve_http(&[]);
    let args = gateway.legacy_client_args();
    let run = python_client(&args, &restart_script(None));
    assert_eq!(run["ok"], true, "{run:#}\n{}", gateway.log_text());
    assert_eq!(run["server"]["protocol_version"], "2025-11-25", "{run:#}");
    assert!(
        health(&gateway)["upstreams"]["ts"]["restarts"].as_u64() >= Some(1),
        "the server was started again: {}",
        health(&gateway)
    );
    let updated = notifications_of(&run, "notifications/resources/updated");
    assert!(
        updated
            .iter()
            .all(|n| n["params"]["uri"] == "test://watched-resource"),
        "{run:#}"
    );
}

/// A server spoken to in a session holds `resources/subscribe` in it: its new session
/// after a restart is subscribed again.
#[test]
fn a_subscription_outlives_the_restart_of_a_server_spoken_to_in_a_session() {
    assert_a_subscription_outlives_its_servers_restart("protocol = \"2025-11-25\"\n");
}

/// A server spoken to at 2026-07-28 holds a `subscriptions/listen` stream per resource:
/// the new connection after a restart opens it again.
#[test]
fn a_subscription_outlives_the_restart_of_a_server_of_2026_07_28() {
    assert_a_subscription_outlives_its_servers_restart("");
}

/// Asserts that a client of 2025-11-25, subscribed through a gateway to
/// tests/servers/ts_sdk.mjs over streamable HTTP as `ts` (with `extra` lines, which choose
/// the revision the gateway speaks to it), still hears of the resource's updates once the
/// server has exited and been started again where it was, with no call in between: the
/// gateway learns of it only from the server itself (a session it forgot, a stream that
/// ended).
fn assert_a_subscription_outlives_its_http_servers_restart(extra: &str) {
    let mut upstream = ListeningServer::ts_sdk();
    let address = upstream.address;
    let workspace =
        Workspace::new(&upstream.server_config("ts", &format!("rewrite_uris = false\n{extra}")));
    let gateway = workspace.serve_http(&[]);
    let args = gateway.legacy_client_args();
    let folder = tempfile::tempdir().unwrap();
    let restarted = folder.path().join("restarted");
    let client = spawn_python_client(
        &args,
        &restart_script(Some(json!({"action": "wait_file",
            "path": restarted.to_string_lossy(), "line_with": ["restarted"],
            "timeout_ms": 30000}))),
    );
    assert!(
        eventually(PATIENCE, || upstream.has_exited()),
        "the server did not exit"
    );
    let _upstream = ListeningServer::ts_sdk_at(address);
    std::fs::write(&restarted, "restarted\n").unwrap();
    let run = python_client_output(client);
    assert_eq!(run["ok"], true, "{run:#}\n{}", gateway.log_text());
    assert_eq!(run["server"]["protocol_version"], "2025-11-25", "{run:#}");
}

/// Over streamable HTTP, a server spoken to in a session that forgot it: the gateway
/// opens a new session, subscribed again.
#[test]
fn a_subscription_outlives_the_restart_of_an_http_server_spoken_to_in_a_session() {
    assert_a_subscription_outlives_its_http_servers_restart("protocol = \"2025-11-25\"\n");
}

/// Over streamable HTTP, a server spoken to at 2026-07-28, whose `subscriptions/listen`
/// stream ended with it: the gateway opens it again.
#[test]
fn a_subscription_outlives_the_restart_of_an_http_server_of_2026_07_28() {
    assert_a_subscription_outlives_its_http_servers_restart("");
}
