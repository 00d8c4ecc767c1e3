//! Issue 2: a client sees and calls the tools of several upstreams as one server —
//! the official Python SDK and an rmcp client, over stdio and streamable HTTP, against our
//! kv example and npm server-everything.

use mcp_gateway_tests::*;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

fn kv_and_everything() -> Workspace {
    Workspace::new(&format!(
        "{}{}",
        example_server("kv", "kv"),
        npm_server("everything", "mcp-server-everything", &["stdio"]),
    ))
}

fn script() -> Value {
    json!([
        {"action": "list_tools"},
        {"action": "call_tool", "name": "mcp__everything__echo", "arguments": {"message": "hi"}},
        {"action": "call_tool", "name": "mcp__everything__get-sum", "arguments": {"a": 2, "b": 40}},
        {"action": "call_tool", "name": "mcp__everything__get-structured-content", "arguments": {"location": "Chicago"}},
        {"action": "call_tool", "name": "mcp__kv__set", "arguments": {"key": "k", "value": "v"}},
        {"action": "call_tool", "name": "mcp__kv__get", "arguments": {"key": "k"}},
    ])
}

fn check_federated_run(run: &Value) {
    let tools = action_result(run, 0)["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for expected in [
        "mcp__kv__get",
        "mcp__kv__set",
        "mcp__everything__echo",
        "mcp__everything__get-sum",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let kv_get = tools.iter().find(|t| t["name"] == "mcp__kv__get").unwrap();
    assert_eq!(
        kv_get["annotations"]["readOnlyHint"], true,
        "annotations carried over"
    );
    assert!(
        kv_get["outputSchema"].is_object(),
        "outputSchema carried over"
    );

    assert!(result_text(action_result(run, 1)).contains("hi"));
    assert!(result_text(action_result(run, 2)).contains("42"));
    let structured = &action_result(run, 3)["structuredContent"];
    assert!(
        structured.is_object(),
        "structuredContent preserved: {run:#}"
    );
    assert_eq!(action_result(run, 5)["structuredContent"]["value"], "v");
}

#[test]
fn python_client_over_stdio() {
    let workspace = kv_and_everything();
    let run = python_client(&python_stdio_args(&workspace, &[]), &script());
    check_federated_run(&run);
}

#[test]
fn python_client_over_streamable_http() {
    let workspace = kv_and_everything();
    let gateway = workspace.serve_http(&[]);
    let args = gateway.client_args("http", "/mcp");
    let run = python_client(&args, &script());
    check_federated_run(&run);
}

async fn rmcp_calls<S: rmcp::service::Service<rmcp::RoleClient>>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, S>,
) {
    let tools = client.peer().list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "mcp__everything__get-sum"));
    assert!(tools.iter().any(|t| t.name == "mcp__kv__list"));
    let mut params = CallToolRequestParams::new("mcp__everything__get-sum");
    params.arguments = json!({"a": 1, "b": 2}).as_object().cloned();
    let result = client.peer().call_tool(params).await.unwrap();
    let text = serde_json::to_value(&result).unwrap();
    assert_eq!(result_text(&text), "The sum of 1 and 2 is 3.", "{text}");
}

#[tokio::test]
async fn rmcp_client_over_stdio_and_http() {
    let workspace = kv_and_everything();
    let (command, args) = workspace.stdio_command(&[]);
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args).env("RUST_LOG", "warn");
    let transport = rmcp::transport::TokioChildProcess::new(cmd).unwrap();
    let client = ().serve(transport).await.unwrap();
    rmcp_calls(&client).await;
    client.cancel().await.unwrap();

    let gateway = workspace.serve_http(&[]);
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(gateway.url("/mcp"));
    let client = ().serve(transport).await.unwrap();
    rmcp_calls(&client).await;
    client.cancel().await.unwrap();
}

#[test]
fn an_upstream_error_stays_the_upstreams() {
    let root = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(&npm_server(
        "fs",
        "mcp-server-filesystem",
        &[&root.path().to_string_lossy()],
    ));
    let run = python_client(
        &python_stdio_args(&workspace, &[]),
        &json!([{"action": "call_tool", "name": "mcp__fs__read_text_file", "arguments": {"path": "/etc/hostname"}}]),
    );
    let result = action_result(&run, 0);
    assert_eq!(result["isError"], true, "{run:#}");
    assert_eq!(
        error_code(result),
        None,
        "an upstream isError is not a gateway failure: {run:#}"
    );
    assert!(
        result_text(result).to_lowercase().contains("denied")
            || result_text(result).contains("outside"),
        "{run:#}"
    );
}

#[test]
fn unknown_tools_are_tool_not_found() {
    let workspace = Workspace::new(&example_server("kv", "kv"));
    let run = python_client(
        &python_stdio_args(&workspace, &[]),
        &json!([{"action": "call_tool", "name": "mcp__kv__nope", "arguments": {}}]),
    );
    let result = action_result(&run, 0);
    assert_eq!(result["isError"], true);
    assert_eq!(error_code(result), Some("TOOL_NOT_FOUND"), "{run:#}");
    assert!(
        result_text(result).starts_with("Error [TOOL_NOT_FOUND]: "),
        "{run:#}"
    );
}

/// Each upstream's `instructions` reach the client inside the gateway's, under the
/// server's name, at both revisions; a profile that hides a server hides what it says,
/// and in code mode `run_code`'s description carries them beside the SDK.
#[test]
fn each_servers_instructions_reach_the_client_under_its_name() {
    let workspace = Workspace::new(&format!(
        "[profiles.kv]\nallow = [\"mcp__kv__*\"]\n[profiles.code]\nmode = \"code\"\n{}{}",
        example_server("kv", "kv"),
        example_server("slow", "slow"),
    ));
    let gateway = workspace.serve_http(&[]);
    let kv = "## kv\nAn in-memory key-value store";
    let slow = "## slow\nTools that take a given time";
    for mode in ["legacy", "auto"] {
        let run = |path: &str| {
            let mut args = gateway.client_args("http", path);
            args.extend(["--mode", mode].map(str::to_owned));
            python_client(&args, &json!([{"action": "list_tools"}]))
        };
        let everything = run("/mcp");
        let said = everything["server"]["instructions"].as_str().unwrap_or("");
        assert!(
            said.contains(kv) && said.contains(slow),
            "{mode}: {everything:#}"
        );
        let only_kv = run("/mcp/kv");
        let said = only_kv["server"]["instructions"].as_str().unwrap_or("");
        assert!(
            said.contains(kv) && !said.contains("## slow"),
            "{mode}: {only_kv:#}"
        );
        let code = run("/mcp/code");
        let run_code = &action_result(&code, 0)["tools"][0];
        assert_eq!(run_code["name"], "run_code", "{code:#}");
        let description = run_code["description"].as_str().unwrap();
        assert!(
            description.contains(kv) && description.contains(slow),
            "{description}"
        );
    }
}
